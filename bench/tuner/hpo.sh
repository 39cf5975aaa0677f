#!/usr/bin/env bash
# Niuma's tuner side by side with Optuna (TPE and random search) on every tabular benchmark in
# the data folder, under the same protocol: optuna_reference.py runs Optuna's samplers, and
# `niuma tune --table` runs Niuma's (space from the columns, proposals snapped to the grid, simple
# regret of the incumbent, median over repetitions). Both without and with --noisy. Results go
# to one JSON file per (table, tuner, noise) in OUT (kept between runs: delete a file to redo
# it), then bench/tuner/hpo_table.py prints the comparison as the Markdown in docs/BENCHMARKS.md.
#
# usage: bench/tuner/hpo.sh [DATA_DIR] [OUT]
#   DATA_DIR defaults to ../shared/data/hpo (or ../../shared/data/hpo) next to the repository,
#   OUT to /tmp/niuma-hpo.
#   REPS (default 20) and BUDGET (default 100) may be set in the environment.
# Optuna comes from Debian's python3-optuna (installed with apt-get when missing); it runs under
# /usr/bin/python3. The whole run takes about an hour on two idle cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
default=../shared/data/hpo
[ -d "$default" ] || default=../../shared/data/hpo # a worktree one level further down
data=$(cd "${1:-$default}" && pwd)
out=${2:-/tmp/niuma-hpo}
reps=${REPS:-20}
budget=${BUDGET:-100}
mkdir -p "$out"
if ! /usr/bin/python3 -c "import optuna" 2>/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  echo "hpo: installing python3-optuna (Debian's Optuna) with apt-get"
  $sudo apt-get update -q && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-optuna
fi
echo "hpo: building bin/niuma"
make -s build >/dev/null
echo "hpo: Optuna $(/usr/bin/python3 -c 'import optuna; print(optuna.__version__)'), $(bin/niuma version); $reps repetitions of $budget trials; results in $out"
for noisy in "" "--noisy"; do
  for f in "$data"/*.csv.gz; do
    name=$(basename "$f" .csv.gz)
    for sampler in tpe random; do
      dst="$out/$name.optuna-$sampler${noisy:+.noisy}.json"
      [ -s "$dst" ] && continue
      echo "hpo: $name: Optuna $sampler $noisy"
      (cd "$data" && /usr/bin/python3 optuna_reference.py "$(basename "$f")" --sampler $sampler --budget "$budget" --reps "$reps" $noisy --json) > "$dst.tmp"
      mv "$dst.tmp" "$dst"
    done
    for sampler in bayes random; do
      dst="$out/$name.niuma-$sampler${noisy:+.noisy}.json"
      [ -s "$dst" ] && continue
      echo "hpo: $name: Niuma $sampler $noisy"
      bin/niuma tune --table "$f" --sampler $sampler --budget "$budget" --reps "$reps" $noisy --json > "$dst.tmp" 2>/dev/null
      mv "$dst.tmp" "$dst"
    done
  done
done
/usr/bin/python3 bench/tuner/hpo_table.py "$out"
