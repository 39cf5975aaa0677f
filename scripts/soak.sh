#!/usr/bin/env bash
# soak.sh: kill the owning process (`niuma engine`) with SIGKILL at random
# moments while runs go on, restart it each time, and check with SQL at the
# end that nothing was lost and nothing ran twice.
#
# Usage: scripts/soak.sh [--runs N] [--kills K] [--min-steps A] [--max-steps B]
#                        [--executor local|docker] [--keep] [--niuma BIN]
#
# --executor docker runs the stages in containers of an image built here from
# the machine's static busybox (busybox-static), tagged niuma-soak:latest.
#
# Each run is one stage that prints a metric line every ~20 ms, A..B steps
# (default 200..2000), with retries 0 or 2. Runs are submitted in sweeps, some
# while the engine is being killed. The engine is killed in the first 200 ms
# after its start about a third of the time, within 2 s otherwise, and K times
# at least; then one last engine drives what is left to the end.
#
# The stage notes its pid and start time (and its end) in a side file of its
# run's folder; the checks read those files and the archive:
#   every run succeeded; each stage's process started exactly once per
#   counted attempt and never two at once, and no stage needed a second
#   attempt (none fails; only an owner's death could cost one); each run's steps are exactly
#   0..N-1 with no duplicate and no gap; PRAGMA integrity_check is ok; no
#   process (or container) of the soak is left; no run folder without a run.
#   Where `niuma doctor` says local attempts run in cgroups (as root, unless
#   NIUMA_CGROUPS=off), every local stage process started in its attempt's
#   cgroup (niuma/<token>) and no attempt's cgroup is left.
# It prints one line of counts and exits non-zero when any check fails.
set -euo pipefail

runs=30 kills=30 min_steps=200 max_steps=2000 exec_name=local keep=0 bin=""
while [ $# -gt 0 ]; do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--kills) kills=$2; shift 2 ;;
	--min-steps) min_steps=$2; shift 2 ;;
	--max-steps) max_steps=$2; shift 2 ;;
	--executor) exec_name=$2; shift 2 ;;
	--niuma) bin=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "soak.sh: unknown argument $1 (see the usage at the top of the script)" >&2; exit 2 ;;
	esac
done
case "$exec_name" in local | docker) ;; *) echo "soak.sh: --executor is local or docker" >&2; exit 2 ;; esac
command -v sqlite3 >/dev/null || { echo "soak.sh: needs the sqlite3 command (apt-get install sqlite3)" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/niuma-soak.XXXXXX)
export NIUMA_HOME=$work/home NIUMA_BACKGROUND_ENGINE=off
mkdir -p "$NIUMA_HOME"
if [ -z "$bin" ]; then
	bin=$work/niuma
	(cd "$repo" && go build -tags nowindow -o "$bin" .)
fi
engine_pid=""
cleanup() {
	[ -n "$engine_pid" ] && kill -9 "$engine_pid" 2>/dev/null || true
	if [ "$keep" = 0 ]; then rm -rf "$work"; else echo "soak: kept $work" >&2; fi
}
trap cleanup EXIT

# The stage: its pid and start time (/proc/PID/stat field 22) as it starts
# (with 1 when it is in a niuma/ cgroup, else 0) and as it ends, then one
# metric line per step.
image_lines=""
if [ "$exec_name" = docker ]; then
	image=niuma-soak:latest
	if ! docker image inspect "$image" >/dev/null 2>&1; then
		# Built here, from this machine's static busybox: no registry.
		bb=$(command -v busybox || true)
		if [ -z "$bb" ] || ! file -L "$bb" 2>/dev/null | grep -q "statically linked"; then
			echo "soak.sh: --executor docker builds its image from a static busybox (apt-get install busybox-static)" >&2
			exit 2
		fi
		ctx=$work/image
		mkdir -p "$ctx"
		cp "$bb" "$ctx/busybox"
		printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n' >"$ctx/Dockerfile"
		docker build -q -t "$image" "$ctx" >"$work/image.log" 2>&1 ||
			{ echo "soak.sh: could not build $image:" >&2; tail -5 "$work/image.log" >&2; exit 2; }
	fi
	image_lines="runtime: {kind: docker, image: $image}"
fi
# The templates' folder (their ${code}) is apart from the data directory:
# submit hashes the code folder, and must not read the archive's files.
tmpl=$work/templates
mkdir -p "$tmpl"
cat >"$tmpl/stage.sh" <<'EOF'
n=$1
read -r s < /proc/$$/stat; s=${s##*) }; set -- $s; st=${20}
cg=0; grep -q '/niuma/' /proc/$$/cgroup 2>/dev/null && cg=1
echo "start $$ $st $cg" >> "$NIUMA_RUN_DIR/train.pids"
i=0
while [ $i -lt $n ]; do echo "{\"step\": $i, \"loss\": $i}"; i=$((i+1)); sleep 0.02; done
echo "end $$ $st" >> "$NIUMA_RUN_DIR/train.pids"
EOF
for r in 0 2; do
	cat >"$tmpl/soak-r$r.yaml" <<EOF
name: soak-r$r
$image_lines
params:
  steps: {type: int, default: 200, min: 1, max: 100000}
  wave: {type: int, default: 0, min: 0, max: 1000000}
  idx: {type: int, default: 0, min: 0, max: 1000000}
stages:
  - name: train
    retries: $r
    command: [sh, "\${code}/stage.sh", "\${params.steps}"]
EOF
done

db=$NIUMA_HOME/niuma.db
sql() { sqlite3 -cmd ".timeout 10000" "$db" "$@"; }
unfinished() {
	[ -f "$db" ] || { echo 0; return; }
	sql "SELECT count(*) FROM runs WHERE state IN ('queued','running')" 2>/dev/null || echo 0
}
# rand A B: an integer in [A, B].
rand() { echo $(($1 + (RANDOM * 32768 + RANDOM) % ($2 - $1 + 1))); }

submitted=0 wave=0 killed=0 early=0 during_submit=0 submit_pid=""
# submit K runs as one sweep (K steps of idx, one step count drawn for the
# sweep), in the background, of one of the two templates.
submit() {
	local k=$1
	wave=$((wave + 1))
	"$bin" run "$tmpl/soak-r$((RANDOM % 2 * 2)).yaml" --executor "$exec_name" --set wave=$wave \
		--set steps="$(rand "$min_steps" "$max_steps")" --sweep idx=1..$k --allow-duplicate >>"$work/submit.log" 2>&1 &
	submit_pid=$!
	submitted=$((submitted + k))
}
start_engine() {
	"$bin" engine >>"$work/engine.log" 2>&1 &
	engine_pid=$!
}

started=$(date +%s)
conc=16
# Each cycle starts an engine and kills it. What happens in between is one
# of: a sweep submitted while no engine runs, then a kill as the engine
# starts that burst (30-200 ms); a sweep submitted while the engine runs,
# killed during the submit; a kill within 200 ms of the start; a kill
# within 2 s.
waitsubmit() {
	[ -n "$submit_pid" ] || return 0
	wait "$submit_pid" || { echo "soak: a submit failed:" >&2; tail -5 "$work/submit.log" >&2; exit 1; }
	submit_pid=""
}
while [ "$killed" -lt "$kills" ] || [ "$submitted" -lt "$runs" ]; do
	room=$((submitted < runs && $(unfinished) < conc))
	mode=$((RANDOM % 4))
	if [ "$room" = 1 ] && [ "$mode" -lt 2 ]; then
		batch=$((runs - submitted < 8 ? runs - submitted : 8))
		if [ "$mode" = 0 ]; then
			submit "$batch"
			waitsubmit
			start_engine
			sleep "0.$(printf '%03d' "$(rand 30 199)")"
			early=$((early + 1))
		else
			start_engine
			submit "$batch"
			sleep "0.0$(rand 1 9)"
			during_submit=$((during_submit + 1))
		fi
	elif [ "$mode" = 2 ]; then
		start_engine
		sleep "0.$(printf '%03d' "$(rand 0 199)")"
		early=$((early + 1))
	else
		start_engine
		sleep "$(rand 0 1).$(printf '%03d' "$(rand 0 999)")"
	fi
	kill -9 "$engine_pid" 2>/dev/null || true
	wait "$engine_pid" 2>/dev/null || true
	engine_pid=""
	killed=$((killed + 1))
	if [ -n "$submit_pid" ] && ! kill -0 "$submit_pid" 2>/dev/null; then
		waitsubmit
	fi
done
waitsubmit

# One last owner drives everything to its end.
"$bin" engine --until-idle >>"$work/engine.log" 2>&1 &
engine_pid=$!
deadline=$(($(date +%s) + max_steps / 50 * 3 + 300))
while kill -0 "$engine_pid" 2>/dev/null; do
	[ "$(date +%s)" -lt "$deadline" ] || { echo "soak: the last engine did not finish in time" >&2; exit 1; }
	sleep 1
done
wait "$engine_pid" || true
engine_pid=""

# ---- checks ----
fail=0
total=$(sql "SELECT count(*) FROM runs")
succeeded=$(sql "SELECT count(*) FROM runs WHERE state = 'succeeded'")
attempts=$(sql "SELECT count(*) FROM attempts WHERE state <> 'not started'")
retried=$(sql "SELECT count(*) FROM stages WHERE attempts > 1")
[ "$total" = "$runs" ] && [ "$succeeded" = "$total" ] || fail=1

# Processes per stage (the side files) against counted attempts, and no two
# of one stage alive together (each start is followed by its own end). No
# stage here ever fails, so a second process of a stage is a stage run
# twice, and a second attempt is one an owner's death cost it.
mismatch=0 twice=0 overlap=0 starts=0 in_cgroup=0
while IFS='|' read -r id dir counted; do
	f=$dir/train.pids
	n=$(grep -c '^start ' "$f" 2>/dev/null || true)
	starts=$((starts + ${n:-0}))
	c=$(grep -c '^start .* 1$' "$f" 2>/dev/null || true)
	in_cgroup=$((in_cgroup + ${c:-0}))
	[ "$n" = "$counted" ] || mismatch=$((mismatch + 1))
	[ "${n:-0}" -le 1 ] || twice=$((twice + 1))
	awk '$1 == "start" { if (open != "") bad = 1; open = $2 " " $3 }
	     $1 == "end" { if (open != $2 " " $3) bad = 1; open = "" }
	     END { exit bad }' "$f" 2>/dev/null || overlap=$((overlap + 1))
done < <(sql "SELECT r.id, r.dir, (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.state <> 'not started') FROM runs r")
[ "$mismatch" = 0 ] && [ "$twice" = 0 ] && [ "$overlap" = 0 ] && [ "$retried" = 0 ] || fail=1

# Metric steps of each run's last attempt: exactly 0..N-1.
read -r points bad_steps < <(sql -separator ' ' "
	WITH last AS (SELECT run_id, max(number) AS n FROM attempts GROUP BY run_id),
	     per AS (SELECT r.id, json_extract(r.params, '\$.steps') AS want,
	                    count(p.step) AS got, count(DISTINCT p.step) AS uniq, min(p.step) AS lo, max(p.step) AS hi
	               FROM runs r JOIN last l ON l.run_id = r.id
	               LEFT JOIN metric_points_flat p ON p.run_id = r.id AND p.stage = 'train' AND p.key = 'loss' AND p.attempt = l.n
	              GROUP BY r.id)
	SELECT coalesce(sum(got), 0), coalesce(sum(got <> want OR uniq <> want OR lo <> 0 OR hi <> want - 1), 0) FROM per")
[ "$bad_steps" = 0 ] || fail=1

integrity=$(sql "PRAGMA integrity_check" | head -1)
[ "$integrity" = ok ] || fail=1

stray=$(grep -lsF -- "NIUMA_RUN_DIR=$NIUMA_HOME/runs/" /proc/[0-9]*/environ 2>/dev/null | wc -l || true)
if [ "$exec_name" = docker ]; then
	stray=$((stray + $(docker ps -aq --filter "label=niuma.home=$NIUMA_HOME" | wc -l)))
fi
[ "$stray" = 0 ] || fail=1

# Cgroups: which way this machine finds a local attempt's processes (as
# the engines did: same binary, same environment); with cgroups, every
# local stage process was in its attempt's group, and no group is left.
processes=token cgroups_left=0
doctor=$("$bin" doctor --json 2>/dev/null || true)
if [[ "$doctor" == *'"cgroups": true'* ]]; then
	processes=cgroup
	if [ "$exec_name" = local ]; then
		[ "$in_cgroup" = "$starts" ] || fail=1
		while read -r tok; do
			[ -n "$tok" ] || continue
			for g in /sys/fs/cgroup/niuma/"$tok" /sys/fs/cgroup/*/niuma/"$tok"; do
				[ -d "$g" ] && cgroups_left=$((cgroups_left + 1))
			done
		done < <(sql "SELECT token FROM attempts")
		[ "$cgroups_left" = 0 ] || fail=1
	fi
fi

orphans=0
for d in "$NIUMA_HOME"/runs/*/; do
	[ -d "$d" ] || continue
	id=$(basename "$d")
	[ "$(sql "SELECT count(*) FROM runs WHERE id = '$id'")" = 1 ] || orphans=$((orphans + 1))
done
[ "$orphans" = 0 ] || fail=1

elapsed=$(($(date +%s) - started))
status=ok
[ "$fail" = 0 ] || status=FAILED
echo "soak $status: executor=$exec_name runs=$total succeeded=$succeeded kills=$killed (early=$early during_submit=$during_submit) attempts=$attempts processes=$starts retried=$retried attempts_without_process=$mismatch ran_twice=$twice overlapping=$overlap points=$points bad_step_runs=$bad_steps integrity=$integrity stray=$stray orphans=$orphans process_mode=$processes in_cgroup=$in_cgroup cgroups_left=$cgroups_left seconds=$elapsed"
if [ "$fail" != 0 ]; then
	keep=1
	sql "SELECT id, state, error FROM runs WHERE state <> 'succeeded' LIMIT 5" >&2
fi
exit "$fail"
