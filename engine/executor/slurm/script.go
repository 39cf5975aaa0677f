package slurm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"niuma/engine/executor"
)

// files are where an attempt's batch script and marks live: the stage
// directory, on the filesystem the nodes share, next to its logs.
type files struct {
	Script  string // attempt-N.sbatch, kept for inspection and resubmission by hand
	Started string // .attempt-N.started: "JOBID EPOCH NODE", written first thing on the node
	Exit    string // .attempt-N.exit: "CODE EPOCH", written by the shim when the command ends
	JobID   string // .attempt-N.job: the job id, written right after sbatch answers
}

func attemptFiles(job executor.Job) files {
	n := strconv.Itoa(job.Attempt)
	return files{
		Script:  filepath.Join(job.StageDir, "attempt-"+n+".sbatch"),
		Started: filepath.Join(job.StageDir, ".attempt-"+n+".started"),
		Exit:    filepath.Join(job.StageDir, ".attempt-"+n+".exit"),
		JobID:   filepath.Join(job.StageDir, ".attempt-"+n+".job"),
	}
}

// token is the attempt's identity in Slurm: the engine's Token, or, from an
// engine that gives none, run/stage/attempt (unique per data directory:
// run ids carry random bits).
func token(job executor.Job) string {
	if job.Token != "" {
		return job.Token
	}
	return fmt.Sprintf("%s.%s.%d", job.RunID, job.Stage, job.Attempt)
}

// jobName is the job's --job-name: "niuma-" and the token, in characters
// that survive squeue's and sacct's --name lists (no commas, no spaces).
func jobName(tok string) string {
	b := []byte("niuma-" + tok)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// comment is the job's --comment: who it belongs to, for people reading
// squeue, for Recover, which checks the token in it, and for Sweep, which
// cancels only jobs of its own data directory (home, see homeMark; none
// when the executor was given no data directory).
func comment(job executor.Job, tok, home string) string {
	c := fmt.Sprintf("niuma run=%s stage=%s attempt=%d token=%s", job.RunID, job.Stage, job.Attempt, tok)
	if home != "" {
		c += " home=" + home
	}
	return c
}

// homeMark names a Niuma data directory in a job's comment: 12 hex digits
// of its path's SHA-256 (a path may hold spaces, and need not be shown to
// everyone who reads the queue).
func homeMark(dir string) string {
	if dir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(sum[:6])
}

// commentField reads one key=value field of a Niuma comment.
func commentField(comment, key string) string {
	for _, f := range strings.Fields(comment) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// tokenOf reads the token back from a comment ("" when it is not Niuma's).
func tokenOf(comment string) string { return commentField(comment, "token") }

// submission is one sbatch call: its arguments (the script's path last)
// and the script.
type submission struct {
	Args   []string
	Script string
	Files  files
	Token  string
	Limits limits
}

// Queue is where jobs go when neither the template nor the job says.
type Queue struct {
	Partition string
	Account   string
	QOS       string
}

var (
	queueNameRe = regexp.MustCompile(`^[A-Za-z0-9_.,+-]+$`)
	envKeyRe    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// buildSubmission turns a job into sbatch arguments and a batch script.
// It is a pure function of the job and the settings, so what Niuma asks
// of Slurm can be read and tested without a cluster.
//
// The script records that it started, enters the run directory, exports
// the stage contract's environment and runs the stage's command under the
// same shim as local stages: in its own process group, with the exit
// status written to a file. SIGTERM to the batch shell (scancel --batch,
// or --signal=B:TERM@grace before the time limit) is passed to that group
// once, so the command gets "checkpoint and exit soon" exactly once.
func buildSubmission(job executor.Job, q Queue, signalGrace time.Duration, extra []string, home string) (submission, error) {
	if len(job.Argv) == 0 || job.Argv[0] == "" {
		return submission{}, fmt.Errorf("the stage has an empty command")
	}
	for _, p := range []struct{ name, v string }{{"run directory", job.RunDir}, {"stage directory", job.StageDir}, {"stdout log", job.StdoutPath}, {"stderr log", job.StderrPath}} {
		if !filepath.IsAbs(p.v) {
			return submission{}, fmt.Errorf("the %s %q is not an absolute path", p.name, p.v)
		}
	}
	c := job.Cluster
	if c.Partition == "" {
		c.Partition = q.Partition
	}
	if c.Account == "" {
		c.Account = q.Account
	}
	if c.QOS == "" {
		c.QOS = q.QOS
	}
	for _, v := range []struct{ what, v string }{{"partition", c.Partition}, {"account", c.Account}, {"QOS", c.QOS}} {
		if v.v != "" && !queueNameRe.MatchString(v.v) {
			return submission{}, fmt.Errorf("Slurm %s %q has characters Slurm does not allow in names", v.what, v.v)
		}
	}
	tok := token(job)
	f := attemptFiles(job)
	lim := limits{MemoryMiB: job.Container.MemoryMiB}
	args := []string{
		"--parsable",
		"--job-name=" + jobName(tok),
		"--comment=" + comment(job, tok, home),
		"--output=" + job.StdoutPath,
		"--error=" + job.StderrPath,
		"--open-mode=append",
		"--chdir=" + job.RunDir,
		// Niuma's retries decide whether an attempt runs again, never a
		// requeue behind its back (the same attempt would run twice).
		"--no-requeue",
		"--nodes=1",
		"--ntasks=1",
	}
	if job.Container.CPUs > 0 {
		args = append(args, "--cpus-per-task="+strconv.Itoa(int(math.Ceil(job.Container.CPUs))))
	}
	if job.Container.MemoryMiB > 0 {
		args = append(args, "--mem="+strconv.FormatInt(job.Container.MemoryMiB, 10)+"M")
	}
	gpus := job.GPUCount
	if gpus == 0 {
		gpus = len(job.GPUs)
	}
	if gpus > 0 {
		args = append(args, "--gres=gpu:"+strconv.Itoa(gpus))
	}
	if job.Timeout > 0 {
		limit := formatTimeLimit(job.Timeout)
		m, _ := strconv.Atoi(limit)
		lim.TimeLimit = time.Duration(m) * time.Minute
		args = append(args, "--time="+limit)
		// The checkpoint warning before the limit, as a cancel gives it.
		// Slurm may send it up to a minute early (the resolution of its
		// event loop), so it is asked for only where that still leaves
		// the stage time to run: at most half of what the minute leaves.
		if s := int(min(signalGrace, (lim.TimeLimit-time.Minute)/2) / time.Second); s > 0 {
			args = append(args, fmt.Sprintf("--signal=B:TERM@%d", min(s, 65535)))
		}
	}
	if c.Partition != "" {
		args = append(args, "--partition="+c.Partition)
	}
	if c.Account != "" {
		args = append(args, "--account="+c.Account)
	}
	if c.QOS != "" {
		args = append(args, "--qos="+c.QOS)
	}
	args = append(args, extra...)
	args = append(args, f.Script)

	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "# Niuma: run %s, stage %s, attempt %d (token %s).\n", oneLine(job.RunID), oneLine(job.Stage), job.Attempt, oneLine(tok))
	b.WriteString("# Submitted as: sbatch")
	for _, a := range args {
		b.WriteString(" " + oneLine(quote(a)))
	}
	b.WriteString("\n#\n# The stage's command runs under a shim that writes its exit status to\n")
	b.WriteString("# the exit file below, so Niuma learns how it ended even after Slurm has\n")
	b.WriteString("# forgotten the job (MinJobAge) on a cluster without accounting.\n")
	fmt.Fprintf(&b, "niuma_started=%s\nniuma_exit=%s\nniuma_token=%s\n", quote(f.Started), quote(f.Exit), quote(tok))
	b.WriteString(`printf '%s %s %s\n' "${SLURM_JOB_ID:-}" "$(date +%s)" "$(hostname -s 2>/dev/null || hostname)" >"$niuma_started.tmp" && mv -f "$niuma_started.tmp" "$niuma_started"` + "\n")
	fmt.Fprintf(&b, "niuma_run=%s\n", quote(job.RunDir))
	b.WriteString(`cd "$niuma_run" || { echo "niuma: node $(hostname) cannot enter the run directory $niuma_run: is it on a filesystem the nodes share?" >&2; exit 97; }` + "\n")
	keys := make([]string, 0, len(job.Env))
	for k := range job.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !envKeyRe.MatchString(k) {
			return submission{}, fmt.Errorf("environment variable name %q is not one a shell can set", k)
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, quote(job.Env[k]))
	}
	if gpus == 0 {
		// A stage that asks for no GPU sees none, as on the workstation.
		b.WriteString("export CUDA_VISIBLE_DEVICES=\n")
	}
	b.WriteString(batchBody)
	for _, a := range job.Argv {
		b.WriteString(" " + quote(a))
	}
	b.WriteString(batchTail)
	return submission{Args: args, Script: b.String(), Files: f, Token: tok, Limits: lim}, nil
}

// tokenEnv carries the attempt's token into the environment of the
// shim, the command and everything the command starts: the local
// executor's variable, so a stage sees one contract on both.
const tokenEnv = executor.TokenEnv

// batchBody and batchTail surround the command's argv. The shim is the
// local executor's: the command runs in the foreground of a shell that
// only traps the signals, so it lives on to record the status. The batch
// shell starts the shim in a process group of its own (set -m) and passes
// SIGTERM and SIGINT to that group; it then waits until the shim is gone
// (a trapped signal interrupts wait) and ends with the command's status,
// which is what Slurm records as the job's exit code.
//
// Nothing of the attempt outlives it, whatever the site's proctrack
// plugin. proctrack/cgroup holds every process of the job; linuxproc
// finds them by their parents, and pgid by their process group, so a
// process that left the tree (setsid, a double fork, a shim whose batch
// shell was killed) or the group escapes them. Every process of the
// attempt carries its token (tokenEnv: set for the shim alone, the batch
// shell does not carry it), and niuma_reap kills, with SIGKILL, every
// process that does, until a look through /proc finds none (bash
// builtins only: it forks nothing that would carry the token). It runs
// when the command has ended, before the batch shell exits, so leftovers
// are gone when Slurm sees the job end; and from a watcher for when the
// batch shell is killed (after Stop's grace, or by Slurm at a cancel, a
// time limit or an out-of-memory kill, KillWait after SIGTERM). The
// watcher leaves the job's process tree and group at once (its parent
// exits; set -m), so what kills the job does not kill it with the shell;
// it waits on a pipe only the batch shell holds (the shim does not
// inherit it) and reaps once the pipe closes, or once the shell is gone
// (a look every 5 s, should the pipe have been inherited after all). A
// process that clears its own environment and leaves the group is not
// found (a cgroup still finds it). The command gets SIGTERM once, as
// before: the reap sends only SIGKILL, and only once the command has
// ended or its batch shell has been killed.
const batchBody = `niuma_shim='exit_file=$1; shift
trap : TERM INT HUP
("$@")
code=$?
printf "%s %s\n" "$code" "$(date +%s)" >"$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"
exit "$code"'
niuma_reap() {
	local p v round found
	for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		found=
		for p in /proc/[0-9]*; do
			case ${p#/proc/} in "$$" | "$BASHPID") continue ;; esac
			while IFS= read -r -d '' v; do
				if [ "$v" = "` + tokenEnv + `=$niuma_token" ]; then
					kill -KILL "${p#/proc/}" && found=1
					break
				fi
			done 2>/dev/null <"$p/environ"
		done
		[ -n "$found" ] || return 0
	done
}
niuma_watch() {
	trap '' TERM INT HUP
	local r
	while :; do
		read -r -t 5 -u 3 _
		r=$?
		[ "$r" -eq 0 ] && continue
		[ "$r" -gt 128 ] && kill -0 "$$" 2>/dev/null && continue
		break
	done
	niuma_reap
}
exec {niuma_hold}> >(exec 3<&0; set -m; niuma_watch </dev/null >/dev/null 2>&1 &)
trap 'kill -TERM -- "-$niuma_child" 2>/dev/null' TERM
trap 'kill -INT -- "-$niuma_child" 2>/dev/null' INT
set -m
` + tokenEnv + `="$niuma_token" /bin/sh -c "$niuma_shim" niuma-stage "$niuma_exit"`

const batchTail = ` {niuma_hold}>&- &
niuma_child=$!
set +m
niuma_status=0
while kill -0 "$niuma_child" 2>/dev/null; do
	wait "$niuma_child"
	niuma_status=$?
done
kill -KILL -- "-$niuma_child" 2>/dev/null
niuma_reap
if read -r niuma_code _ <"$niuma_exit" 2>/dev/null; then
	exit "$niuma_code"
fi
exit "$niuma_status"
`

// quote makes s one word for the shell, taken literally.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// oneLine keeps a value on one comment line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
