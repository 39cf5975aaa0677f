#!/usr/bin/env bash
# Runs the acceptance study for real: `niuma tune digits-mlp --budget N --parallel auto --wait`
# in a fresh data directory, on this machine's CPU (the demo needs /usr/bin/python3 with
# torch and scikit-learn: apt-get install -y python3-torch python3-sklearn), then prints its
# figures: trials, pruned, the best objective against the template's values (trial 0), the
# epochs trained against 30 per trial without pruning, and the wall time.
# With --kill SECONDS it kills the driving niuma with SIGKILL that many seconds in, resumes
# the study with `niuma tune --resume STUDY --wait` and checks that it still finishes with
# its budget of trials, each its own run.
#
# usage: bench/tuner/study-digits.sh [--kill SECONDS] [BUDGET]   (default budget 16)
set -euo pipefail
cd "$(dirname "$0")/../.."
kill_after=""
if [ "${1:-}" = "--kill" ]; then kill_after=$2; shift 2; fi
budget=${1:-16}
[ -x bin/niuma ] || go build -tags nowindow -o bin/niuma .
home=$(mktemp -d /tmp/niuma-study.XXXXXX)
export NIUMA_HOME=$home NIUMA_BACKGROUND_ENGINE=off
cp bin/niuma "$home/niuma"
niuma=$home/niuma
log=$home/tune.log
start=$(date +%s)
if [ -z "$kill_after" ]; then
  "$niuma" tune digits-mlp --budget "$budget" --parallel auto --wait > "$log" 2>&1
else
  "$niuma" tune digits-mlp --budget "$budget" --parallel auto --wait > "$log" 2>&1 &
  pid=$!
  sleep "$kill_after"
  kill -9 "$pid"
  wait "$pid" || true
  echo "--- killed with SIGKILL after ${kill_after}s ---" >> "$log"
  study=$(awk 'NR==1 {print $2}' "$log" | tr -d :)
  "$niuma" tune --status "$study" --json > "$home/before.json"
  "$niuma" tune --resume "$study" --wait >> "$log" 2>&1
fi
wall=$(( $(date +%s) - start ))
cat "$log"
study=$(awk 'NR==1 {print $2}' "$log" | tr -d :)
"$niuma" tune --status "$study" --json > "$home/status.json"
for run in $(/usr/bin/python3 -c 'import json,sys; print(" ".join(t["run"] for t in json.load(open(sys.argv[1]))["trials"]))' "$home/status.json"); do
  "$niuma" show "$run" --json > "$home/show-$run.json"
done
/usr/bin/python3 - "$home" "$wall" "$kill_after" <<'PY'
import glob, json, sys
home, wall, killed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = json.load(open(home + "/status.json"))
trials = s["trials"]
epochs = 0
for t in trials:
    sh = json.load(open(home + "/show-" + t["run"] + ".json"))
    epochs += max([m["points"] for m in sh["metrics"] if m["stage"] == "train" and m["key"] == "val_acc"] or [0])
pruned = [t for t in trials if t["state"] == "pruned"]
best = trials[s["best"]]
defaults = trials[0]
runs = {t["run"] for t in trials}
print(f"study {s['id']}: {s['state']}, {len(trials)} trials of {s['budget']}, {s['runs']} runs, {len(runs)} distinct")
print(f"pruned: {len(pruned)} ({', '.join(str(t['number']) for t in pruned)})")
for t in pruned:
    print(f"  trial {t['number']}: {t['pruned']['evidence']}")
print(f"best: trial {best['number']} {s['objective']} {best['objective']:.4f}; the template's values (trial 0): {defaults['objective']:.4f} ({defaults['state']})")
print(f"epochs trained: {epochs} of {30 * len(trials)} without pruning ({epochs / (30 * len(trials)):.2f})")
print(f"wall time: {wall} s")
if killed:
    b = json.load(open(home + "/before.json"))
    kept = all(trials[i]["run"] == t["run"] for i, t in enumerate(b["trials"]) if t["run"])
    print(f"killed after {killed} s with {len(b['trials'])} trials stored; after --resume: {len(trials)} trials, {s['runs']} runs; trials kept their runs: {kept}")
    assert s["state"] == "finished" and len(trials) == s["budget"] == s["runs"] == len(runs) and kept, "the resumed study is not whole"
PY
