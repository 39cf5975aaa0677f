#!/usr/bin/env bash
# Screenshots of the window on a machine shared through the machine service
# (make screenshots runs it after scripts/screenshots.sh, as root):
#
#   teams.png          the Teams page: nlp borrows vision's idle GPU, what a
#                      reclaim would stop first, every user's stages
#   board-shared.png   the board once vision's run has taken its GPU back:
#                      who shares the machine, the other user's runs, the
#                      GPU processes by user
#
# Two simulated A100s; team vision is root (the window's user), team nlp
# the user niuma-lab-b (created when missing), one GPU each. Needs root,
# Xvfb, xdotool and ImageMagick (import).
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=${OUT:-docs/screenshots}
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] || { echo "screenshots-shared: needs root (it creates a second user)"; exit 1; }
for tool in Xvfb xdotool import setpriv useradd; do
	command -v "$tool" >/dev/null || { echo "screenshots-shared: $tool is missing"; exit 1; }
done
[ -x bin/niuma ] || go build -o bin/niuma .
NIUMA=$PWD/bin/niuma
chmod 755 "$NIUMA"

work=$(mktemp -d /tmp/niuma-shared-shots.XXXXXX)
chmod 755 "$work"
ub=niuma-lab-b
id "$ub" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$ub"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	pkill -9 -u "$ub" 2>/dev/null || true
	for _ in 1 2 3 4 5; do rm -rf "$work" 2>/dev/null && break; sleep 1; done
}
trap cleanup EXIT

export NIUMA_SIMULATE_GPUS=2xA100-80GB NIUMA_MACHINE_SOCKET=$work/run/niuma.sock NIUMA_BACKGROUND_ENGINE=off
cat >"$work/machine.yaml" <<EOF
teams:
  - {name: vision, users: [root], gpus: 1}
  - {name: nlp, users: [$ub], gpus: 1, borrow_limit: 1}
admins: [root]
grace: 10s
EOF
mkdir -p "$work/templates" "$work/home-$ub" "$work/home-root" "$work/xdg"
chown "$ub" "$work/home-$ub"
for name in bert-finetune resnet50; do
	cat >"$work/templates/$name.yaml" <<EOF
name: $name
params:
  seed: {type: int, default: 0, min: 0, max: 1000}
stages:
  - name: train
    gpus: 1
    gpu_memory: 30GiB
    command: [sh, -c, 'trap "exit 143" TERM; i=0; while :; do echo "{\"step\": \$i, \"loss\": \$(awk "BEGIN{print 2/(\$i+2)}"), \"total_steps\": 3600}"; i=\$((i+1)); sleep 1; done']
EOF
done
chmod -R a+rX "$work/templates"

"$NIUMA" serve --system --socket "$NIUMA_MACHINE_SOCKET" --config "$work/machine.yaml" --db "$work/machine.db" >"$work/service.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$NIUMA_MACHINE_SOCKET" ] && break; sleep 0.1; done
b() { # as niuma-lab-b
	setpriv --reuid="$ub" --regid="$(id -g "$ub")" --init-groups -- env HOME="$work/home-$ub" NIUMA_HOME="$work/home-$ub" "$NIUMA" "$@"
}
for s in 1 2; do b run "$work/templates/bert-finetune.yaml" --set seed=$s >/dev/null 2>&1; done
(exec setpriv --reuid="$ub" --regid="$(id -g "$ub")" --init-groups -- env HOME="$work/home-$ub" NIUMA_HOME="$work/home-$ub" "$NIUMA" engine) >"$work/engine-b.log" 2>&1 &
pids+=($!)
leases() { NIUMA_HOME=$work/home-root "$NIUMA" machine --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("leases") or []))'; }
for _ in $(seq 100); do [ "$(leases)" = 2 ] && break; sleep 0.2; done
[ "$(leases)" = 2 ] || { echo "screenshots-shared: nlp's two runs did not start"; cat "$work/service.log"; exit 1; }

disp=""
for n in $(seq 90 150); do
	if [ ! -e "/tmp/.X11-unix/X$n" ] && [ ! -e "/tmp/.X$n-lock" ]; then disp=$n; break; fi
done
[ -n "$disp" ] || { echo "screenshots-shared: no free X display"; exit 1; }
Xvfb ":$disp" -screen 0 1920x1080x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
pids+=($!)
export DISPLAY=:$disp
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X$disp" ] && break; sleep 0.1; done
HOME=$work/xdg NIUMA_HOME=$work/home-root "$NIUMA" >"$work/app.log" 2>&1 &
pids+=($!)
win=$(timeout 60 xdotool search --sync --name '^Niuma$' | head -1)
[ -n "$win" ] || { echo "screenshots-shared: the window did not open"; cat "$work/app.log"; exit 1; }
sleep 2
for _ in $(seq 20); do
	xdotool windowmove "$win" 0 0 windowsize "$win" 1440 860
	sleep 0.5
	xdotool getwindowgeometry "$win" | grep -q "Geometry: 1440x860" && break
done
sleep 1
click() { xdotool mousemove --window "$win" "$1" "$2" click 1; sleep "${3:-1}"; }
shot() {
	xdotool mousemove --window "$win" 5 850
	sleep 0.5
	import -window "$win" "$OUT/$1.png"
	echo "screenshots-shared: wrote $OUT/$1.png"
}
# The tabs on the left: Board, Runs, Archive, [Cluster], Teams, …
cluster=0
command -v sbatch >/dev/null && cluster=1
teams_y=$((300 + 85 * cluster))

click 44 "$teams_y" 3
shot teams

# vision (root) wants its GPU back: nlp's borrowed run is preempted.
NIUMA_HOME=$work/home-root "$NIUMA" run "$work/templates/resnet50.yaml" >/dev/null 2>&1
mine() { NIUMA_HOME=$work/home-root "$NIUMA" machine --json 2>/dev/null | python3 -c '
import json,sys
s=json.load(sys.stdin); print(sum(1 for l in s.get("leases") or [] if l["user"] == "root"))'; }
for _ in $(seq 150); do [ "$(mine)" = 1 ] && break; sleep 0.2; done
[ "$(mine)" = 1 ] || { echo "screenshots-shared: vision's run did not get its GPU back"; exit 1; }
sleep 4
click 44 40 3
shot board-shared
click 44 "$teams_y" 3
shot teams-reclaimed
echo "screenshots-shared: done; look at the PNGs"
