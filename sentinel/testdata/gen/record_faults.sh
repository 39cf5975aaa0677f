#!/bin/sh
# Records faults.py under the stage contract into ../real/fault-NAME.jsonl
# (metrics) and ../real/fault-NAME.telemetry.jsonl (utilisation, memory):
# healthy runs, a loader that sleeps, a leak. The recordings run 4 at a
# time (the utilisation they record is the compute's duty cycle, which
# other processes on the CPU do not change); one already recorded is kept.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../real"
rec() {
	name=$1 seed=$2 params=$3
	[ -s "$out/fault-$name.telemetry.jsonl" ] && return 0
	dir=$(mktemp -d)
	printf '%s\n' "$params" >"$dir/params.json"
	NIUMA_RUN_DIR=$dir NIUMA_SEED=$seed OMP_NUM_THREADS=1 /usr/bin/python3 "$here/faults.py" >"$out/fault-$name.jsonl"
	cp "$dir/telemetry.jsonl" "$out/fault-$name.telemetry.jsonl"
	rm -rf "$dir"
}
for s in 1 2 3 4; do
	rec healthy-s$s $s '{"mode":"healthy","steps":300}' &
	rec loader-sleep-s$s $s '{"mode":"loader_sleep","steps":300,"onset":100}' &
	rec leak-s$s $s '{"mode":"leak","steps":600,"onset":100}' &
	wait
done
