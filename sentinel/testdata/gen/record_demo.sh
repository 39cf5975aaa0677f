#!/bin/sh
# Records the digits-mlp demo's train stage under the stage contract into
# ../real/demo-*.jsonl (the metrics lines it prints on stdout). Run from
# anywhere: sh sentinel/testdata/gen/record_demo.sh
# Each case: NAME SEED PARAMS_JSON [INJECT_NAN_EPOCH]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmpl="$here/../../../assets/templates/digits-mlp"
out="$here/../real"
py=/usr/bin/python3
rec() {
	name=$1 seed=$2 params=$3 inject=${4:-0}
	dir=$(mktemp -d)
	printf '%s\n' "$params" >"$dir/params.json"
	NIUMA_RUN_DIR=$dir NIUMA_SEED=$seed NIUMA_STAGE=preprocess OMP_NUM_THREADS=1 \
		$py "$tmpl/preprocess.py" >/dev/null 2>&1
	NIUMA_RUN_DIR=$dir NIUMA_SEED=$seed NIUMA_STAGE=train NIUMA_ATTEMPT=1 OMP_NUM_THREADS=1 \
		NIUMA_DEMO_INJECT_NAN=$inject $py "$tmpl/train.py" >"$out/demo-$name.jsonl" 2>/dev/null || true
	rm -rf "$dir"
}
for s in 1 2 3 4 5; do
	rec healthy-adam-s$s $s '{"lr":0.01,"optimizer":"adam","epochs":60}'
	rec healthy-sgd-s$s $s '{"lr":0.05,"optimizer":"sgd","epochs":60}'
	rec diverge-sgd-lr1-s$s $s '{"lr":1.0,"optimizer":"sgd","epochs":60}'
done
# What a sentinel retry with lr: "*0.1" runs after the divergence above.
for s in 1 2 3; do
	rec retry-sgd-lr0.1-s$s $s '{"lr":0.1,"optimizer":"sgd","epochs":30}'
done
rec nan-e8-s1 1 '{"lr":0.01,"optimizer":"adam","epochs":30}' 8
rec nan-e15-s2 2 '{"lr":0.01,"optimizer":"adam","epochs":30}' 15
rec nan-e22-s3 3 '{"lr":0.01,"optimizer":"adam","epochs":30}' 22
rec nan-e5-s4 4 '{"lr":0.05,"optimizer":"sgd","epochs":30}' 5
