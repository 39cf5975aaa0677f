#!/bin/sh
# Records faults.py's hang, plateau and spike modes (and healthy runs to
# judge them against), with wall times in every metrics line, into
# ../real/fault-NAME.jsonl and ../real/fault-NAME.telemetry.jsonl, several
# at a time; one already recorded is kept. The hangs sleep for 200 s each.
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
	on=$((60 + 40 * s))
	rec hang-s$s $s '{"mode":"hang","steps":'$((on + 60))',"onset":'$on',"wall":true}' &
done
for s in 1 2 3 4; do
	on=$((60 + 40 * s))
	rec timed-healthy-s$s $((s + 10)) '{"mode":"healthy","steps":400,"wall":true}' &
	rec plateau-s$s $s '{"mode":"plateau","steps":'$((on + 250))',"onset":'$on',"wall":true}' &
	rec spike-s$s $s '{"mode":"spike","steps":300,"onset":'$((on + 20))',"width":'$s',"wall":true}' &
	wait
done
wait
