#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA driver: builds niuma (no
# window needed: -tags nowindow), compares `niuma gpus --json` with
# `nvidia-smi --query-gpu=...` field by field, times one 8-field sample
# through NVML against one nvidia-smi call, runs a CUDA stage when the
# installed torch has CUDA (and traces its GPU process to its run through
# the owner data `niuma gpus` shows), and prints a summary. On a machine
# without an NVIDIA driver it says so and exits 0.
#
#   scripts/gpu-check.sh        (needs the repo, Go and a C compiler)
set -uo pipefail
cd "$(dirname "$0")/.."
say() { printf 'gpu-check: %s\n' "$*"; }

if ! command -v nvidia-smi >/dev/null 2>&1 && [ ! -e /proc/driver/nvidia/version ]; then
	say "no NVIDIA driver on this machine (no nvidia-smi, no /proc/driver/nvidia): nothing to check"
	exit 0
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
	say "the NVIDIA kernel driver is loaded but nvidia-smi is missing: install the driver's utilities (e.g. nvidia-utils) and retry"
	exit 1
fi
if ! smi_list=$(nvidia-smi -L 2>&1); then
	say "nvidia-smi fails: $smi_list"
	exit 1
fi
command -v go >/dev/null 2>&1 || { say "Go 1.26 or newer is needed to build niuma (https://go.dev/dl)"; exit 1; }
command -v "${CC:-gcc}" >/dev/null 2>&1 || { say "a C compiler (gcc) is needed: NVML and SQLite are reached through cgo"; exit 1; }

work=$(mktemp -d /tmp/niuma-gpu-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
say "building niuma (-tags nowindow) and the checker in $work"
go build -tags nowindow -o "$work/niuma" . || { say "building niuma failed"; exit 1; }
go build -o "$work/gpucheck" ./scripts/gpucheck || { say "building the checker failed"; exit 1; }

fail=0
summary=()
say "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1); $(printf '%s\n' "$smi_list" | wc -l) GPU(s)"
printf '%s\n' "$smi_list"
if "$work/gpucheck" -niuma "$work/niuma" | tee "$work/compare.txt"; then
	summary+=("fields: niuma gpus --json agrees with nvidia-smi")
else
	summary+=("fields: MISMATCH (see the table above)")
	fail=1
fi
timing=$(grep '^one 8-field sample' "$work/compare.txt" || true)
[ -n "$timing" ] && summary+=("timing: ${timing#one 8-field sample of GPU 0, }")

# A CUDA stage, when torch can reach the GPU: its process must show up in
# `niuma gpus --json` with its run as owner, and its report must have a GPU
# section of real (not simulated) records.
py=${PYTHON:-/usr/bin/python3}
if [ -x "$py" ] && "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	export NIUMA_HOME="$work/home" NIUMA_BACKGROUND_ENGINE=off
	mkdir -p "$work/tmpl"
	cat >"$work/tmpl/cuda.py" <<'PY'
import json, time, torch
x = torch.randn(4096, 4096, device="cuda")
t0 = time.time()
step = 0
while time.time() - t0 < 75:
    for _ in range(50):
        x = torch.tanh(x @ x * 1e-3)
    torch.cuda.synchronize()
    step += 1
    print(json.dumps({"step": step, "loss": float(x.abs().mean())}), flush=True)
PY
	cat >"$work/tmpl/template.yaml" <<YAML
name: gpu-check-cuda
stages:
  - name: train
    gpus: 1
    gpu_memory: 2GiB
    command: [$py, "\${code}/cuda.py"]
YAML
	"$work/niuma" run "$work/tmpl/template.yaml" --wait >"$work/run.txt" 2>&1 &
	runner=$!
	run=""
	traced=""
	for _ in $(seq 1 60); do
		sleep 1
		[ -z "$run" ] && run=$(awk 'NR==1 && $1=="run" {sub(":", "", $2); print $2}' "$work/run.txt")
		if [ -n "$run" ] && "$work/niuma" gpus --json >"$work/gpus.json" 2>/dev/null && grep -q "\"run_id\": \"$run\"" "$work/gpus.json"; then
			traced=$(grep -B3 "\"run_id\": \"$run\"" "$work/gpus.json" | grep -o '"pid": [0-9]*' | head -1)
			break
		fi
	done
	wait "$runner"
	rc=$?
	cat "$work/run.txt"
	if [ -n "$traced" ]; then
		summary+=("CUDA stage: its process (${traced#\"pid\": }) traced to run $run/train through niuma gpus")
	else
		summary+=("CUDA stage: its GPU process was NOT traced to run ${run:-?} within 60 s")
		fail=1
	fi
	if [ "$rc" -ne 0 ]; then
		summary+=("CUDA stage: the run did not succeed (exit $rc)")
		fail=1
	elif "$work/niuma" report "$run" --format json -o "$work/report.json" >/dev/null 2>&1 &&
		grep -q '"simulated":false' "$work/report.json" && ! grep -q '"samples":0,' "$work/report.json"; then
		summary+=("CUDA stage: its report has a GPU section of real records")
	else
		summary+=("CUDA stage: its report lacks real GPU records")
		fail=1
	fi
else
	summary+=("CUDA stage: skipped: $py has no torch with CUDA")
fi

echo
say "summary"
for line in "${summary[@]}"; do printf '  %s\n' "$line"; done
exit $fail
