#!/usr/bin/env bash
# Records a real grid of the bundled digits-mlp demo with full learning curves, for the
# early-stopping benchmark (`niuma tune --curves`, see docs/BENCHMARKS.md): every combination of
# the values below, for 3 seeds, each an ordinary run through `niuma run --wait` on the host's
# CPU, one after another (a few seconds each, about half an hour in all). The train stage's
# per-epoch val_acc and val_loss are kept, one line per run.
#
# usage: bench/tuner/record-digits-grid.sh [OUT.csv]   (default tuner/tabular/testdata/digits-mlp-grid.csv)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-tuner/tabular/testdata/digits-mlp-grid.csv}
[ -x bin/niuma ] || make build
home=$(mktemp -d /tmp/niuma-digits-grid.XXXXXX)
export NIUMA_HOME=$home NIUMA_BACKGROUND_ENGINE=off
cp bin/niuma "$home/niuma" # a copy, so that rebuilding bin/niuma meanwhile does not disturb the recording
niuma=$home/niuma
echo "record-digits-grid: runs in $home; log in $home/record.log"
ids=$home/ids.txt
: > "$ids"
n=0
for seed in 1 2 3; do
  for lr in 3e-05 0.0001 0.0003 0.001 0.003 0.01 0.03 0.1; do
    for hidden in 16 64 256; do
      for optimizer in adam sgd; do
        for batch_size in 32 128; do
          n=$((n + 1))
          "$niuma" run digits-mlp --executor local --seed "$seed" --allow-duplicate \
            --set lr=$lr --set hidden=$hidden --set optimizer=$optimizer --set batch_size=$batch_size \
            --set epochs=30 --wait > "$home/run.out" 2>>"$home/record.log" || true
          cat "$home/run.out" >> "$home/record.log"
          line=$(grep -m1 '^run ' "$home/run.out" || true)
          id=$(echo "$line" | awk '{print $2}' | tr -d :)
          echo "$id $seed" >> "$ids"
          echo "record-digits-grid: $n/288 seed $seed lr=$lr hidden=$hidden $optimizer batch $batch_size: run $id"
        done
      done
    done
  done
done
# Export every run's curves through the report command (at most 100 runs per report).
: > "$home/curves.csv"
cut -d' ' -f1 "$ids" | grep . | xargs -n 90 sh -c '"$0" report "$@" --format csv -o '"$home"'/part.csv >/dev/null && cat '"$home"'/part.csv >> '"$home"'/curves.csv' "$niuma"
/usr/bin/python3 bench/tuner/grid_csv.py "$home/curves.csv" "$ids" > "$out"
echo "record-digits-grid: wrote $out ($(wc -l < "$out") lines)"
