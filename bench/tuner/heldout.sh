#!/usr/bin/env bash
# The held-out check of bench/tuner/hpo.sh: the same comparison (mean over seeds per trial) on
# sampler seeds 20..39, which no choice of Niuma's tuner was made on. Optuna's TPE runs through
# bench/tuner/optuna_seeds.py (the reference script's protocol with shifted seeds), Niuma's
# through `niuma tune --table --first-seed 20`. Results in OUT (default /tmp/niuma-hpo-heldout),
# then the table as in docs/BENCHMARKS.md.
#
# usage: bench/tuner/heldout.sh [DATA_DIR] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
default=../shared/data/hpo
[ -d "$default" ] || default=../../shared/data/hpo
data=$(cd "${1:-$default}" && pwd)
out=${2:-/tmp/niuma-hpo-heldout}
first=20 reps=20 budget=100
mkdir -p "$out"
make -s build >/dev/null
for f in "$data"/*.csv.gz; do
  name=$(basename "$f" .csv.gz)
  dst="$out/$name.optuna-tpe.json"
  if [ ! -s "$dst" ]; then
    echo "heldout: $name: Optuna tpe, seeds $first.."
    /usr/bin/python3 bench/tuner/optuna_seeds.py "$f" $first $reps $budget > "$dst.tmp" && mv "$dst.tmp" "$dst"
  fi
  for sampler in bayes random; do
    dst="$out/$name.niuma-$sampler.json"
    [ -s "$dst" ] && continue
    echo "heldout: $name: Niuma $sampler, seeds $first.."
    bin/niuma tune --table "$f" --sampler $sampler --first-seed $first --budget $budget --reps $reps --json > "$dst.tmp" 2>/dev/null
    mv "$dst.tmp" "$dst"
  done
done
/usr/bin/python3 bench/tuner/hpo_table.py "$out"
