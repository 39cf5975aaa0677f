#!/usr/bin/env bash
# Screenshots of the real window for docs/screenshots/ (`make screenshots`).
#
# Builds niuma, seeds a throw-away NIUMA_HOME with real runs of the bundled
# digits-mlp demo on the local executor (a good one, and one with lr=1.0
# and sgd that diverges and that the sentinel retries with lr=0.1), then
# opens the window under Xvfb with two simulated A100s, launches a sweep
# from the wizard and three long runs that the window's engine places on
# the simulated GPUs (two run, one waits), and takes:
#
#   board-1024.png, board-1920.png   the board: GPU cards with their
#                                    history, the process table, the queue
#   wizard-parameters.png            the wizard's parameter step, a sweep
#   wizard-resources.png             its Resources step: the GPU parameters,
#                                    and where the first run would go now
#   wizard-review.png                the Review: where each run would go
#   run-view-1024.png, -1920.png     the sentinel-retried run: both attempts
#   archive.png                      parameter columns, the sweep grouped
#   hyperparameters.png              objective against lr, parallel coords
#   settings.png                     Settings, Prometheus metrics served
#   cluster.png                      the Slurm cluster (where sbatch is)
#
# Needs: Xvfb, xdotool, ImageMagick (import), /usr/bin/python3 with torch
# and sklearn (make deps installs them). The clicks are at fixed points of
# 1024×700 and 1920×1080 windows: a change of layout may need them moved
# (look at the PNGs, as you should anyway).
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=${OUT:-docs/screenshots}
mkdir -p "$OUT"

for tool in Xvfb xdotool import; do
	command -v "$tool" >/dev/null || { echo "screenshots: $tool is missing (apt-get install xvfb xdotool imagemagick)"; exit 1; }
done
/usr/bin/python3 -c 'import torch, sklearn' 2>/dev/null ||
	{ echo "screenshots: the demo needs /usr/bin/python3 with torch and sklearn (make deps)"; exit 1; }

echo "screenshots: building bin/niuma"
go build -o bin/niuma .
NIUMA=$PWD/bin/niuma

work=$(mktemp -d /tmp/niuma-shots.XXXXXX)
pids=()
long=()
cleanup() {
	# The long runs may still be training under the window's engine.
	for id in "${long[@]}"; do NIUMA_HOME=$work/home "$NIUMA" cancel "$id" >/dev/null 2>&1 || true; done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# A background engine takes over what the window left; let it stop.
	for _ in $(seq 50); do NIUMA_HOME=$work/home "$NIUMA" ls 2>/dev/null | grep -q ' running \| queued ' || break; sleep 0.2; done
	# A niuma that is still stopping may create its lock file while the
	# folder is removed: try again once it has.
	for _ in 1 2 3 4 5; do rm -rf "$work" 2>/dev/null && break; sleep 1; done
}
trap cleanup EXIT

export NIUMA_HOME=$work/home NIUMA_SIMULATE_GPUS=2xA100-80GB
mkdir -p "$NIUMA_HOME" "$work/xdg"

echo "screenshots: seeding $NIUMA_HOME with runs of digits-mlp"
run() { "$NIUMA" run digits-mlp --executor local "$@" 2>&1 | tail -1; }
run --wait --set epochs=30 --set gpus=1
# lr=1.0 with sgd diverges: the sentinel flags it and retries with lr/10.
run --wait --set lr=1.0 --set optimizer=sgd --set gpus=1 || true

# A free X display.
disp=""
for n in $(seq 90 150); do
	if [ ! -e "/tmp/.X11-unix/X$n" ] && [ ! -e "/tmp/.X$n-lock" ]; then disp=$n; break; fi
done
[ -n "$disp" ] || { echo "screenshots: no free X display between :90 and :150"; exit 1; }
Xvfb ":$disp" -screen 0 1920x1080x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
pids+=($!)
export DISPLAY=:$disp
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X$disp" ] && break; sleep 0.1; done

echo "screenshots: opening the window on :$disp"
# A fresh HOME: Fyne's preferences (window size) start from the defaults.
HOME=$work/xdg "$NIUMA" >"$work/app.log" 2>&1 &
pids+=($!)
win=$(timeout 60 xdotool search --sync --name '^Niuma$' | head -1)
[ -n "$win" ] || { echo "screenshots: the window did not open"; cat "$work/app.log"; exit 1; }
sleep 2 # let it map and settle before it is moved

# size sets the window's size and waits until it has it: a window that is
# still mapping may put its own size back.
size() {
	for _ in $(seq 20); do
		xdotool windowmove "$win" 0 0 windowsize "$win" "$1" "$2"
		sleep 0.5
		xdotool getwindowgeometry "$win" | grep -q "Geometry: $1x$2" && { sleep 1; return; }
	done
	echo "screenshots: the window did not take the size $1x$2"; exit 1
}
click() { xdotool mousemove --window "$win" "$1" "$2" click 1; sleep "${3:-0.8}"; }
key() { xdotool key --window "$win" "$@"; sleep 0.8; }
type_text() { xdotool type --window "$win" --delay 30 "$1"; sleep 0.8; }
shot() {
	xdotool mousemove --window "$win" 5 690 # no hover box in the picture
	sleep 0.5
	import -window "$win" "$OUT/$1.png"
	echo "screenshots: wrote $OUT/$1.png"
}
# Navigation tabs on the left, from the top (the same at both sizes); the
# Cluster page is there when Slurm's tools are.
cluster=0
command -v sbatch >/dev/null && cluster=1
tab() {
	case $1 in
	Board) click 44 40 ;; Runs) click 44 130 ;; Archive) click 44 215 ;;
	Cluster) click 44 300 ;;
	Templates) click 44 $((300 + 85 * cluster)) ;; Settings) click 44 $((380 + 85 * cluster)) ;;
	esac
	sleep 1
}

size 1024 700
# A sweep over lr from the wizard: New run (Ctrl+N), Enter on the template,
# tick lr's sweep and type the values.
key ctrl+n
key Return
click 900 216          # lr: sweep (below the mode choice)
click 500 216          # its values
key ctrl+a
type_text "0.001, 0.003, 0.03, 0.3"
shot wizard-parameters
key Return             # resources
shot wizard-resources
key Return             # review
shot wizard-review
key Return             # launch
echo "screenshots: the sweep is running; waiting for it to finish"
for i in $(seq 300); do
	n=$("$NIUMA" ls 2>/dev/null | grep -c ' succeeded ' || true)
	[ "$n" -ge 6 ] && break
	[ "$i" = 300 ] && { echo "screenshots: the sweep did not finish (the wizard's clicks may have missed: look at wizard-parameters.png)"; exit 1; }
	sleep 1
done

# Three long runs on one GPU each: two are placed, one waits.
for lr in 0.01 0.003 0.001; do
	id=$("$NIUMA" run digits-mlp --executor local --set gpus=1 --set gpu_memory=24GiB --set epochs=500 --set hidden=1024 \
		--set batch_size=8 --set lr=$lr 2>&1 | grep -o '[0-9]\{8\}-[0-9]\{6\}-[0-9a-f]*' | head -1 || true)
	long+=("$id")
done
echo "screenshots: ${long[*]} are training in the background"
sleep 25 # preprocess, then training on the simulated GPUs
tab Board
shot board-1024
size 1920 1080
shot board-1920

# The run the sentinel retried: search the runs for the sgd one.
tab Runs
click 290 66           # the search box (1920 layout)
type_text "sgd"
click 300 110 2        # the one run found
shot run-view-1920
size 1024 700
shot run-view-1024

size 1920 1080
tab Archive
sleep 2
shot archive
click 1624 61 3        # Hyperparameters
shot hyperparameters
key Escape

# Templates: the demo's description and what the archive suggests next.
tab Templates
click 200 70 3          # digits-mlp, the first template
shot templates

# Settings: serve Prometheus metrics on a free port, then look.
size 1024 700
tab Settings
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
click 500 301            # the address field
type_text "127.0.0.1:$port"
key Return
served=""
for _ in $(seq 25); do # the window serves once it has drawn the click
	curl -sf "http://127.0.0.1:$port/metrics" | grep -q '^niuma_' && { served=1; break; }
	sleep 0.2
done
[ -n "$served" ] && echo "screenshots: the window serves metrics on :$port" ||
	echo "screenshots: no metrics on :$port (look at settings.png)"
shot settings
if [ "$cluster" = 1 ]; then
	tab Cluster
	sleep 3 # the first read of the cluster
	shot cluster
fi

echo "screenshots: done; look at every PNG in $OUT before committing them"
