#!/usr/bin/env bash
# Screenshots of the real window for docs/screenshots/ (`make screenshots`).
#
# Builds niuma, seeds a throw-away NIUMA_HOME with real runs of the bundled
# digits-mlp demo on the local executor (two good ones, one with lr=1.0 and
# sgd that the sentinel flags and retries, one still training), starts the
# window under Xvfb with two simulated A100s and drives it with xdotool to
# the board, the wizard's parameter step, a run view with a curve and an
# anomaly, and the archive's compare view.
#
# Needs: Xvfb, xdotool, ImageMagick (import), /usr/bin/python3 with torch
# and sklearn (make deps installs them). The clicks are at fixed points of
# a 1200×780 window: a change of layout may need them moved (look at the
# PNGs, as you should anyway).
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
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# The long run may still be training under a background engine.
	NIUMA_HOME=$work/home "$NIUMA" cancel "${long:-none}" >/dev/null 2>&1 || true
	sleep 1
	rm -rf "$work"
}
trap cleanup EXIT

export NIUMA_HOME=$work/home
mkdir -p "$NIUMA_HOME" "$work/xdg"

echo "screenshots: seeding $NIUMA_HOME with runs of digits-mlp"
run() { "$NIUMA" run digits-mlp --executor local "$@" 2>&1 | tail -1; }
run --wait --set epochs=30
run --wait --set epochs=30 --set hidden=128 --set lr=0.003
# lr=1.0 with sgd diverges: the sentinel flags it and retries with lr/10.
run --wait --set lr=1.0 --set optimizer=sgd || true
# A long one that is still training while the pictures are taken.
long=$("$NIUMA" run digits-mlp --executor local --set epochs=500 --set hidden=1024 --set batch_size=8 2>&1 | grep -o '[0-9]\{8\}-[0-9]\{6\}-[0-9a-f]*' | head -1 || true)
echo "screenshots: $long is training in the background"

# A free X display.
disp=""
for n in $(seq 90 150); do
	if [ ! -e "/tmp/.X11-unix/X$n" ] && [ ! -e "/tmp/.X$n-lock" ]; then disp=$n; break; fi
done
[ -n "$disp" ] || { echo "screenshots: no free X display between :90 and :150"; exit 1; }
Xvfb ":$disp" -screen 0 1200x780x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
pids+=($!)
export DISPLAY=:$disp
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X$disp" ] && break; sleep 0.1; done

echo "screenshots: opening the window on :$disp"
# A fresh HOME: Fyne's preferences (window size) start from the defaults.
HOME=$work/xdg NIUMA_SIMULATE_GPUS=2xA100-80GB "$NIUMA" >"$work/app.log" 2>&1 &
pids+=($!)
win=$(timeout 60 xdotool search --sync --name '^Niuma$' | head -1)
[ -n "$win" ] || { echo "screenshots: the window did not open"; cat "$work/app.log"; exit 1; }
xdotool windowmove "$win" 0 0 windowsize "$win" 1200 780

click() { xdotool mousemove --window "$win" "$1" "$2" click 1; sleep "${3:-0.8}"; }
key() { xdotool key --window "$win" "$@"; sleep 0.8; }
type_text() { xdotool type --window "$win" --delay 40 "$1"; sleep 0.8; }
shot() { import -window "$win" "$OUT/$1.png"; echo "screenshots: wrote $OUT/$1.png"; }

# Navigation tabs on the left, from the top.
tab() {
	case $1 in
	Board) click 44 50 ;; Runs) click 44 133 ;; Archive) click 44 216 ;;
	Templates) click 44 299 ;; Settings) click 44 382 ;;
	esac
	sleep 1
}

sleep 4 # the board's first samples and a few points of the long run
tab Board
shot board

# The wizard's parameter step: New run…, digits-mlp, Next.
key ctrl+n
sleep 1
click 300 195            # digits-mlp in the template list
click 1012 678 1.5       # Next
shot wizard-parameters
click 180 678            # Cancel

# A run view with a curve and an anomaly: search the runs for the sgd one.
tab Runs
click 290 67 # the search box
type_text "sgd"
click 300 120 2 # the one run found
shot run-view

# The archive: tick the three finished runs (under the running one), compare.
tab Archive
sleep 2
for y in 178 218 258; do click 103 "$y" 0.4; done # the three finished runs
shot archive
click 1042 62 3 # Compare
shot archive-compare

echo "screenshots: done; look at every PNG in $OUT before committing them"
