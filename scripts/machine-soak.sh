#!/usr/bin/env bash
# machine-soak.sh: two real Unix users share one machine through the machine
# service (`niuma serve --system`) on simulated GPUs, while the service and
# each user's engine are killed with SIGKILL at random moments.
#
# Usage: scripts/machine-soak.sh [--kills K] [--runs N] [--keep] [--niuma BIN]
#
# Needs root (it creates the users niuma-soak-a and niuma-soak-b with useradd
# when they do not exist, and runs each user's Niuma as that user with setpriv) and the
# sqlite3 and python3 commands. The machine has two simulated A100s
# (NIUMA_SIMULATE_GPUS=2xA100-80GB); team vision (niuma-soak-a) and team
# nlp (niuma-soak-b) own one GPU each and may borrow the other's.
#
# 1. Lending and reclaim: A submits a sweep of two one-GPU runs and gets
#    both GPUs (one borrowed from nlp); B then submits one: one of A's runs
#    is preempted (SIGTERM; it checkpoints) and B's starts on that GPU; A's
#    resumes from its checkpoint (NIUMA_RESUME) once a GPU is free.
# 2. B's `niuma cancel` of A's run is refused, naming A.
# 3. The soak: both users submit sweeps of short one-GPU runs at once while
#    the service, A's engine and B's engine are killed (K kills in all,
#    spread over the three) and restarted; then both engines drive what is
#    left to the end.
#
# Every stage logs its CUDA_VISIBLE_DEVICES with its start and end times.
# The checks: every run of both users succeeded; no GPU was ever held by
# two stages at once (none of these may share); no stage ran twice (each
# stage's process started once per counted attempt, never two at once, and
# finished once); the preempted run resumed from its checkpoint; the
# service holds no lease and no queue entry at the end. It prints one line
# of counts and exits non-zero when any check fails.
set -euo pipefail

kills=60 runs=12 keep=0 bin=""
while [ $# -gt 0 ]; do
	case "$1" in
	--kills) kills=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--niuma) bin=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "machine-soak.sh: unknown argument $1 (see the usage at the top of the script)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "machine-soak.sh: needs root (it creates two users and runs their Niuma)" >&2; exit 2; }
for c in sqlite3 python3 useradd runuser setpriv; do
	command -v "$c" >/dev/null || { echo "machine-soak.sh: needs the $c command" >&2; exit 2; }
done

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/niuma-machine.XXXXXX)
chmod 755 "$work"
ua=niuma-soak-a ub=niuma-soak-b
for u in $ua $ub; do
	id "$u" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$u"
done
if [ -z "$bin" ]; then
	bin=$work/niuma
	(cd "$repo" && go build -tags nowindow -o "$bin" .)
fi
chmod 755 "$bin"
export NIUMA_SIMULATE_GPUS=2xA100-80GB
sock=$work/run/niuma.sock
mkdir -p "$work/log" "$work/templates"
chmod 1777 "$work/log"

cat >"$work/machine.yaml" <<EOF
# Two teams own one GPU each; either may borrow the other's idle one.
teams:
  - {name: vision, users: [$ua], gpus: 1}
  - {name: nlp, users: [$ub], gpus: 1}
admins: [root]
half_life: 1h
grace: 20s
EOF

# The stage: a line with its start, GPUs and whether it resumes; one metric
# line per step; on SIGTERM its step is kept as a checkpoint and a line says
# it was preempted; at its end a line says it finished.
cat >"$work/templates/stage.sh" <<'EOF'
n=$1 log=$2
at() { date +%s.%N; }
i=0
if [ -n "${NIUMA_RESUME:-}" ] && [ -f "$NIUMA_RUN_DIR/ckpt" ]; then read -r i < "$NIUMA_RUN_DIR/ckpt"; fi
echo "start $(at) $NIUMA_RUN_ID $NIUMA_STAGE $NIUMA_ATTEMPT gpus=$CUDA_VISIBLE_DEVICES resume=${NIUMA_RESUME:+$i} $$" >> "$log"
trap 'echo "$i" > "$NIUMA_RUN_DIR/ckpt"; echo "end $(at) $NIUMA_RUN_ID $NIUMA_STAGE $NIUMA_ATTEMPT gpus=$CUDA_VISIBLE_DEVICES preempted $$" >> "$log"; exit 143' TERM
while [ "$i" -lt "$n" ]; do echo "{\"step\": $i, \"loss\": $i}"; i=$((i+1)); sleep 0.02; done
echo "end $(at) $NIUMA_RUN_ID $NIUMA_STAGE $NIUMA_ATTEMPT gpus=$CUDA_VISIBLE_DEVICES finished $$" >> "$log"
EOF
cat >"$work/templates/gpu.yaml" <<'EOF'
name: shared-gpu
params:
  steps: {type: int, default: 100, min: 1, max: 100000}
  log: {type: string, default: ""}
  idx: {type: int, default: 0, min: 0, max: 1000000}
  wave: {type: int, default: 0, min: 0, max: 1000000}
stages:
  - name: train
    gpus: 1
    command: [sh, "${code}/stage.sh", "${params.steps}", "${params.log}"]
EOF
chmod -R a+rX "$work/templates"

for u in $ua $ub; do
	mkdir -p "$work/home-$u"
	chown "$u" "$work/home-$u"
	: >"$work/log/$u.log"
	chown "$u" "$work/log/$u.log"
done

service_pid="" engine_a="" engine_b=""
cleanup() {
	for p in $service_pid $engine_a $engine_b; do kill -9 "$p" 2>/dev/null || true; done
	pkill -9 -u $ua 2>/dev/null || true
	pkill -9 -u $ub 2>/dev/null || true
	if [ "$keep" = 0 ]; then rm -rf "$work"; else echo "machine-soak: kept $work" >&2; fi
}
trap cleanup EXIT

as() { # as USER niuma-args...: the user's Niuma, with its own data directory
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups -- env HOME="$work/home-$u" USER="$u" \
		NIUMA_HOME="$work/home-$u" NIUMA_MACHINE_SOCKET="$sock" \
		NIUMA_SIMULATE_GPUS="$NIUMA_SIMULATE_GPUS" NIUMA_BACKGROUND_ENGINE=off "$bin" "$@"
}
as_exec() { # as, replacing the (background) subshell: $! is niuma's own PID,
	# so that kill -9 kills the engine itself (setpriv and env exec too;
	# runuser would fork and wait, and only it would be killed)
	local u=$1
	shift
	exec setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups -- env HOME="$work/home-$u" USER="$u" \
		NIUMA_HOME="$work/home-$u" NIUMA_MACHINE_SOCKET="$sock" \
		NIUMA_SIMULATE_GPUS="$NIUMA_SIMULATE_GPUS" NIUMA_BACKGROUND_ENGINE=off "$bin" "$@"
}
start_service() {
	"$bin" serve --system --socket "$sock" --config "$work/machine.yaml" --db "$work/machine.db" >>"$work/service.log" 2>&1 &
	service_pid=$!
}
start_engine() { # start_engine USER: sets engine_a or engine_b
	as_exec "$1" engine >>"$work/engine-$1.log" 2>&1 &
	if [ "$1" = $ua ]; then engine_a=$!; else engine_b=$!; fi
}
submit() { # submit USER K STEPS WAVE
	as "$1" run "$work/templates/gpu.yaml" --set steps="$3" --set log="$work/log/$1.log" \
		--set wave="$4" --sweep idx=1..$2 --allow-duplicate >>"$work/submit-$1.log" 2>&1
}
# As the user: a -shm file root created would keep the user's engine out.
db() { runuser -u "$1" -- sqlite3 -cmd ".timeout 10000" "$work/home-$1/niuma.db" "$2"; }
unfinished() { db "$1" "SELECT count(*) FROM runs WHERE state IN ('queued','running')" 2>/dev/null || echo 1; }
rand() { echo $(($1 + (RANDOM * 32768 + RANDOM) % ($2 - $1 + 1))); }
waitfor() { # waitfor SECONDS WHAT CMD...: poll CMD until it succeeds
	local limit=$1 what=$2
	shift 2
	local deadline=$(($(date +%s) + limit))
	until "$@"; do
		[ "$(date +%s)" -lt "$deadline" ] || { echo "machine-soak: timed out waiting for $what" >&2; exit 1; }
		sleep 0.1
	done
}
started=$(date +%s)
fail=0

start_service
waitfor 30 "the service's socket" test -S "$sock"
start_engine $ua
start_engine $ub

# ---- 1. lending and reclaim ----
submit $ua 2 400 1
running_a() { [ "$(grep -c '^start ' "$work/log/$ua.log")" -ge 2 ]; }
waitfor 60 "both of A's runs to start (one on nlp's idle GPU)" running_a
submit $ub 1 100 1
preempted() { grep -q ' preempted ' "$work/log/$ua.log"; }
waitfor 60 "A's borrowed run to be preempted for B's" preempted
b_started() { grep -q '^start ' "$work/log/$ub.log"; }
waitfor 60 "B's run to start" b_started

# ---- 2. B may not cancel A's run ----
a_run=$(awk '$1 == "start" { print $3; exit }' "$work/log/$ua.log")
refusal=$work/cancel.txt
if as $ub cancel "$a_run" >"$refusal" 2>&1; then
	echo "machine-soak: B's cancel of A's run $a_run was not refused" >&2
	fail=1
elif ! grep -q "$ua" "$refusal"; then
	echo "machine-soak: the refusal does not name the run's owner:" >&2
	cat "$refusal" >&2
	fail=1
fi
echo "machine-soak: B's cancel of A's run said: $(grep -m1 '^niuma:' "$refusal")"
idle() { [ "$(unfinished $ua)$(unfinished $ub)" = 00 ]; }
waitfor 120 "the first runs to end" idle

# ---- 3. the soak ----
killed=0 wave=1 sa=0 sb=0
while [ "$killed" -lt "$kills" ] || [ "$sa" -lt "$runs" ] || [ "$sb" -lt "$runs" ]; do
	wave=$((wave + 1))
	if [ "$sa" -lt "$runs" ]; then submit $ua 3 "$(rand 20 80)" "$wave" & sa=$((sa + 3)); fi
	if [ "$sb" -lt "$runs" ]; then submit $ub 3 "$(rand 20 80)" "$wave" & sb=$((sb + 3)); fi
	for _ in 1 2 3 4 5; do
		sleep "0.$(printf '%03d' "$(rand 50 600)")"
		case $((RANDOM % 3)) in
		0) kill -9 "$service_pid" 2>/dev/null || true; wait "$service_pid" 2>/dev/null || true
			sleep "0.$(rand 0 3)"; start_service ;;
		1) kill -9 "$engine_a" 2>/dev/null || true; wait "$engine_a" 2>/dev/null || true; start_engine $ua ;;
		2) kill -9 "$engine_b" 2>/dev/null || true; wait "$engine_b" 2>/dev/null || true; start_engine $ub ;;
		esac
		killed=$((killed + 1))
	done
	submits=$(jobs -p | grep -vxF -e "$service_pid" -e "$engine_a" -e "$engine_b" || true)
	[ -z "$submits" ] || wait $submits || { echo "machine-soak: a submit failed:" >&2; tail -3 "$work"/submit-*.log >&2; fail=1; }
done
# Both engines drive what is left to the end; the service stays.
for p in $engine_a $engine_b; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
as_exec $ua engine --until-idle >>"$work/engine-$ua.log" 2>&1 &
engine_a=$!
as_exec $ub engine --until-idle >>"$work/engine-$ub.log" 2>&1 &
engine_b=$!
deadline=$(($(date +%s) + 300))
while kill -0 "$engine_a" 2>/dev/null || kill -0 "$engine_b" 2>/dev/null; do
	[ "$(date +%s)" -lt "$deadline" ] || { echo "machine-soak: the last engines did not finish in time" >&2; fail=1; break; }
	sleep 0.5
done
engine_a="" engine_b=""

# ---- checks ----
total=0 succeeded=0 mismatch=0
for u in $ua $ub; do
	total=$((total + $(db $u "SELECT count(*) FROM runs")))
	succeeded=$((succeeded + $(db $u "SELECT count(*) FROM runs WHERE state = 'succeeded'")))
	# Each stage's logged process starts against its counted attempts.
	while IFS='|' read -r id counted; do
		n=$(grep -c "^start [^ ]* $id " "$work/log/$u.log" || true)
		[ "${n:-0}" = "$counted" ] || mismatch=$((mismatch + 1))
	done < <(db $u "SELECT r.id, (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.state <> 'not started') FROM runs r")
done
[ "$total" -gt 0 ] && [ "$succeeded" = "$total" ] || { fail=1; for u in $ua $ub; do db $u "SELECT id, state, error FROM runs WHERE state <> 'succeeded' LIMIT 5" >&2; done; }
[ "$mismatch" = 0 ] || fail=1

# The GPU log: no GPU held by two stages at once, no stage twice at once
# or finished twice, the preempted run resumed.
read -r intervals overlaps twice resumed < <(python3 - "$work/log/$ua.log" "$work/log/$ub.log" <<'EOF'
import sys, collections
open_, spans, finished, resumed = {}, [], collections.Counter(), 0
for path in sys.argv[1:]:
    for line in open(path):
        f = line.split()
        kind, t, run, stage, attempt, gpus = f[0], float(f[1]), f[2], f[3], f[4], f[5][len("gpus="):]
        key = (path, run, stage)
        if kind == "start":
            if f[6] != "resume=":
                resumed += 1
            open_.setdefault(key, []).append((t, gpus, attempt))
        else:
            s = open_.get(key) or []
            if not s:
                print("an end without a start:", line.strip(), file=sys.stderr)
                continue
            t0, g, a = s.pop(0)
            spans.append((t0, t, g, key, a))
            if f[6] == "finished":
                finished[key] += 1
overlaps = twice = 0
for key, s in open_.items():
    if s:
        print("a stage with no end:", key, s, file=sys.stderr)
        overlaps += 1
by_gpu = collections.defaultdict(list)
for t0, t1, g, key, a in spans:
    if g == "":
        print("a GPU stage ran with no GPU:", key, file=sys.stderr)
        overlaps += 1
    for d in g.split(","):
        by_gpu[d].append((t0, t1, key))
for d, s in by_gpu.items():
    s.sort()
    for (a0, a1, ka), (b0, b1, kb) in zip(s, s[1:]):
        if b0 < a1:
            print(f"GPU {d} held twice: {ka} until {a1:.3f}, {kb} from {b0:.3f}", file=sys.stderr)
            overlaps += 1
twice = sum(1 for k, n in finished.items() if n != 1)
print(len(spans), overlaps, twice, resumed)
EOF
)
[ "$overlaps" = 0 ] && [ "$twice" = 0 ] && [ "$resumed" -ge 1 ] || fail=1

# No lease or queue entry left at the service.
leftover=$(NIUMA_MACHINE_SOCKET="$sock" "$bin" machine --json 2>"$work/machine.err" | python3 -c '
import json, sys
s = json.load(sys.stdin)
get = lambda k: s.get(k) or s.get(k.lower()) or []
print(len(get("Leases")) + len(get("Queue")))' || echo "unreadable")
[ "$leftover" = 0 ] || { fail=1; cat "$work/machine.err" >&2; }

elapsed=$(($(date +%s) - started))
status=ok
[ "$fail" = 0 ] || status=FAILED
echo "machine-soak $status: users=2 runs=$total succeeded=$succeeded kills=$killed stage_spans=$intervals gpu_overlaps=$overlaps finished_not_once=$twice resumed=$resumed attempts_without_process=$mismatch leases_left=$leftover seconds=$elapsed"
[ "$fail" = 0 ] || keep=1
exit "$fail"
