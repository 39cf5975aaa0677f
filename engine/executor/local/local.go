package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"niuma/engine/executor"
	"niuma/engine/executor/cgroup"
	"niuma/engine/executor/logcap"
)

// shim runs the stage's command as a child and records its exit status in a
// file. The file is what lets a later Niuma process learn how an adopted
// attempt ended: only a parent can wait(2) for a process, and the parent may
// have crashed. The command arrives as positional parameters, so no part of
// it is ever parsed by the shell; exec makes the shell run the program on
// PATH even where it has a builtin of the same name (echo, printf, kill).
//
// First of all, the shim joins the attempt's cgroup, where there is one:
// it writes 0 to the group's cgroup.procs in each hierarchy (the $4 files
// after the first three arguments), which moves the writer, the shim's
// own subshell; the command and all it starts are then born inside. The
// wrapper around it and the log cappers stay outside, so that killing
// the group at the attempt's end leaves them to copy what is left.
//
// Before it runs the command, the shim claims the attempt: it creates the
// pid file (its pid, the attempt's token and its start time) with O_EXCL
// (set -C), so that of two shims of one attempt only one ever runs the
// command, and tells Start on fd 8 (after logcap's descriptors). A later owner finds the attempt by the
// pid file, or by the token in the environment of its processes
// (tokenEnv) while the pid file is not written yet. The exit file is
// written in place ("1<>": no truncation, no new block), over the blank
// line Start pre-allocated, so a full disk cannot lose an exit status.
//
// The shim and the command share a process group, and Stop signals the
// group, so the command gets Stop's SIGTERM straight from the kernel,
// exactly once, as a job in a terminal gets Ctrl-C. The shim only catches
// the signals so that it lives on to record the status. It must not forward
// them: the command would see SIGTERM twice, which many programs take as
// "force quit now". And it runs the command in the foreground, because a
// trapped signal interrupts wait(1) for a background child, after which
// some shells (bash, also as /bin/sh) have already reaped the child and
// report 143 or nothing instead of its status. SIGPIPE is ignored while it
// tells Start (which may have died), and restored for the command.
const shim = `exit_file=$1 pid_file=$2 token=$3 joins=$4; shift 4
while [ "$joins" -gt 0 ]; do
	echo 0 > "$1" || exit 96
	shift; joins=$((joins - 1))
done
trap : TERM INT HUP
start_time=0
if read -r stat < /proc/$$/stat 2>/dev/null; then
	stat=${stat##*) }
	start_field() { start_time=${20}; }
	start_field $stat
fi
set -C
printf '%s %s %s\n' "$$" "$token" "$start_time" > "$pid_file" || exit 97
set +C
trap '' PIPE
echo launched >&8 || :
exec 8>&-
trap - PIPE
(exec "$@")
code=$?
printf '%s\n' "$code" 1<> "$exit_file"
exit "$code"
`

// claimLost is the shim's status when another shim of the attempt holds
// its pid file.
const claimLost = 97

// joinFailed is the shim's status when it could not join the attempt's
// cgroup.
const joinFailed = 96

// tokenEnv carries the attempt's token into its processes' environment.
const tokenEnv = executor.TokenEnv

// exitFileBlank is what the exit file holds until the shim writes the
// status over it: room for any status, on a block already allocated.
var exitFileBlank = []byte("                               \n")

// Executor runs attempts as host processes.
type Executor struct {
	// Shell runs the shim; "/bin/sh" when empty.
	Shell string
	// LogCap is how many bytes of each of an attempt's streams its log
	// keeps (0: logcap.DefaultCap); see logcap.Attach.
	LogCap int64
	// Cgroups is the subtree each attempt gets a cgroup of its own in:
	// what finds, limits and kills its processes. nil: they are found by
	// the token in their environment, and no limit is enforced.
	Cgroups *cgroup.Tree
	// NoCgroup says why Cgroups is nil, for Mode.
	NoCgroup string
}

// New returns a local executor.
func New() *Executor { return &Executor{} }

// Name implements executor.Executor.
func (x *Executor) Name() string { return "local" }

// ref is what the engine persists to find the process again.
type ref struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // /proc/PID/stat field 22: guards against PID reuse
	ExitFile  string `json:"exit_file"`
	// Token is the attempt's token, which its processes carry in their
	// environment: while any of them lives, the attempt is not gone.
	Token string `json:"token,omitempty"`
	// Cgroup is the attempt's cgroup (cgroup.Group.Path), "" for none:
	// while any process is in it, the attempt is not gone.
	Cgroup string `json:"cgroup,omitempty"`
}

// Start implements executor.Executor.
func (x *Executor) Start(ctx context.Context, job executor.Job) (executor.Handle, error) {
	if len(job.Argv) == 0 || job.Argv[0] == "" {
		return nil, errors.New("the stage has an empty command")
	}
	if job.Token == "" {
		// Every attempt carries a token, so that what it leaves behind
		// is found when it ends (see reapLeftovers).
		job.Token = newToken()
	}
	env := environ(job)
	if err := findCommand(job.Argv[0], job.RunDir, env); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(job.StageDir, 0o755); err != nil {
		return nil, fmt.Errorf("create stage dir: %w", err)
	}
	stdout, err := os.OpenFile(job.StdoutPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open stdout log: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(job.StderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open stderr log: %w", err)
	}
	defer stderr.Close()

	exitFile, pidFile := exitFilePath(job), pidFilePath(job)
	if r, ok := readPidFile(pidFile); ok && job.Token != "" && r.Token == job.Token {
		// Launched already (by an owner that died before it learnt so):
		// follow that one, never a second.
		return x.Recover(ctx, job, "")
	}
	_ = os.Remove(pidFile)
	_ = os.Remove(stopFileOf(exitFile)) // a Stop's deadline is of a launch that ran
	if err := os.WriteFile(exitFile, exitFileBlank, 0o644); err != nil {
		return nil, fmt.Errorf("prepare the exit status file: %w", err)
	}
	shell := x.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	var group *cgroup.Group
	if x.Cgroups != nil {
		group, err = x.Cgroups.Create(job.Token, cgroup.Limits{MemoryBytes: job.Limits.MemoryMiB << 20, CPUMilli: job.Limits.CPUMilli})
		if err != nil {
			return nil, fmt.Errorf("make the attempt's cgroup: %w", err)
		}
	}
	claimed, tell, err := os.Pipe()
	if err != nil {
		removeGroup(group)
		return nil, fmt.Errorf("start %s: %w", job.Argv[0], err)
	}
	defer claimed.Close()
	var joins []string
	if group != nil {
		joins = group.JoinFiles()
	}
	args := append([]string{"-c", shim, "niuma-stage", exitFile, pidFile, job.Token, strconv.Itoa(len(joins))}, joins...)
	args = append(args, job.Argv...)
	// Not exec.CommandContext: the attempt must outlive ctx (and this
	// process); it ends through Stop.
	cmd := exec.Command(shell, args...)
	cmd.Dir = job.RunDir
	cmd.Env = env
	logs, err := logcap.Attach(cmd, x.LogCap, stdout, stderr)
	if err != nil {
		removeGroup(group)
		return nil, err
	}
	// After the cappers' descriptors (3 to 7): the shim tells Start on
	// fd 8 that it has claimed the attempt.
	cmd.ExtraFiles = append(cmd.ExtraFiles, tell)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	logs.Started()
	tell.Close()
	if err != nil {
		logs.Close()
		removeGroup(group)
		return nil, fmt.Errorf("start %s: %w", job.Argv[0], err)
	}
	st, _ := processStartTime(cmd.Process.Pid)
	h := &handle{
		ref:   ref{PID: cmd.Process.Pid, StartTime: st, ExitFile: exitFile, Token: job.Token},
		group: group,
		done:  make(chan struct{}),
	}
	if group != nil {
		h.ref.Cgroup = group.Path()
	}
	go func() {
		err := cmd.Wait()
		ex := exitFromWait(cmd.ProcessState, err, exitFile)
		if _, ended := readExitFile(exitFile); ended || group != nil && group.Empty() {
			// The command ended (the shim recorded how): what is left
			// in its cgroup, or carries its token, is what it left
			// behind. Without a status the wrapper was killed from
			// outside, and the command may live on; Stop reaps after
			// its SIGKILL.
			ex = h.settle(ex)
		}
		logs.Wait(logGrace)
		h.exit = ex
		close(h.done)
	}()
	go h.watchDisk(job.StageDir)
	// Returns once the shim has claimed the attempt (its pid file is
	// written), or has ended without.
	buf := make([]byte, 16)
	if n, _ := claimed.Read(buf); n > 0 {
		return h, nil
	}
	<-h.done
	if h.exit.Code == joinFailed && group != nil {
		return nil, fmt.Errorf("the attempt could not join its cgroup %s (see niuma doctor)", group.Path())
	}
	if h.exit.Code == claimLost {
		if r, ok := readPidFile(pidFile); ok && job.Token != "" && r.Token == job.Token && r.PID != h.ref.PID {
			return x.Recover(ctx, job, "")
		}
		return nil, fmt.Errorf("could not write the attempt's pid file %s (is the disk full?)", pidFile)
	}
	return h, nil // it ended before it told (killed): Wait says how
}

// Recover implements executor.Executor. With a ref it follows the process
// the ref names; with none, it finds the attempt by its token: the pid
// file its shim wrote, or a process that carries the token. A process
// alive is adopted; one that ended left its status in the exit file; with
// no pid file and no process, the attempt was never launched. An attempt
// whose shim is gone without a status is not gone while any process with
// its token lives: the handle follows them, and ends as lost after them.
func (x *Executor) Recover(ctx context.Context, job executor.Job, refJSON string) (executor.Handle, error) {
	var r ref
	var group *cgroup.Group
	if refJSON == "" {
		if job.Token == "" {
			return nil, executor.ErrGone
		}
		if x.Cgroups != nil {
			if g := x.Cgroups.Group(job.Token); g.Exists() {
				group = g
			}
		}
		pr, ok := readPidFile(pidFilePath(job))
		switch {
		case ok && pr.Token == job.Token:
			r = ref{PID: pr.PID, StartTime: pr.StartTime}
		case ok:
			return nil, executor.ErrGone // another attempt's: never adopt it
		default:
			// No claim yet: a shim that has not written its pid file, or
			// nothing at all. A shim in the attempt's cgroup is found
			// there, one without by its token.
			if group != nil {
				if pgid, found := groupLeader(group); found {
					st, _ := processStartTime(pgid)
					r = ref{PID: pgid, StartTime: st}
					break
				}
			}
			leader, found := tokenLeader(job.Token)
			if !found {
				if len(tokenProcesses(job.Token)) > 0 || group != nil && !group.Empty() {
					return nil, fmt.Errorf("processes carry the attempt's token but none leads its group")
				}
				if group != nil {
					_ = group.Remove() // made by a Start that never launched
				}
				return nil, executor.ErrNotLaunched
			}
			r = ref{PID: leader.pid, StartTime: leader.startTime}
		}
		r.ExitFile = exitFilePath(job)
		if group != nil {
			r.Cgroup = group.Path()
		}
	} else if err := json.Unmarshal([]byte(refJSON), &r); err != nil {
		return nil, executor.ErrGone
	}
	if group == nil && r.Cgroup != "" && x.Cgroups != nil {
		group = x.Cgroups.At(r.Cgroup)
	}
	// PID 1 is init and no shim (a child of Niuma); Stop would signal
	// group -1, which kill(2) takes to mean every process there is.
	if r.PID <= 1 {
		return nil, executor.ErrGone
	}
	if r.Token == "" {
		r.Token = job.Token
	}
	h := &handle{ref: r, group: group, done: make(chan struct{}), adopted: true}
	if !r.alive() {
		if ex, ok := readExitFile(r.ExitFile); ok {
			h.exit = h.settle(ex)
			close(h.done)
			return h, nil
		}
		if !h.members() {
			h.settle(executor.Exit{})
			return nil, executor.ErrGone
		}
	}
	go h.poll()
	go h.watchDisk(job.StageDir)
	return h, nil
}

// environ is the host environment plus the job's, with the GPU assignment
// in CUDA_VISIBLE_DEVICES. A stage given no GPU sees none, so it cannot
// take memory on a GPU the shepherd gave to another run.
func environ(job executor.Job) []string {
	env := os.Environ()
	keys := make([]string, 0, len(job.Env))
	for k := range job.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+job.Env[k])
	}
	ids := make([]string, len(job.GPUs))
	for i, g := range job.GPUs {
		ids[i] = strconv.Itoa(g.Index)
		if g.UUID != "" {
			ids[i] = g.UUID
		}
	}
	env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(ids, ","))
	if job.Token != "" {
		env = append(env, tokenEnv+"="+job.Token)
	}
	return env
}

func exitFilePath(job executor.Job) string {
	return filepath.Join(job.StageDir, fmt.Sprintf(".attempt-%d.exit", job.Attempt))
}

// stopFileOf is where Stop stores an attempt's kill deadline: beside its
// exit file.
func stopFileOf(exitFile string) string { return strings.TrimSuffix(exitFile, ".exit") + ".stop" }

func pidFilePath(job executor.Job) string {
	return filepath.Join(job.StageDir, fmt.Sprintf(".attempt-%d.pid", job.Attempt))
}

// pidRecord is what the shim writes to the pid file.
type pidRecord struct {
	PID       int
	Token     string
	StartTime uint64
}

// readPidFile reads a pid file; false when there is none or it is not
// complete.
func readPidFile(path string) (pidRecord, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return pidRecord{}, false
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || !strings.HasSuffix(string(b), "\n") {
		return pidRecord{}, false
	}
	pid, err1 := strconv.Atoi(f[0])
	st, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return pidRecord{}, false
	}
	return pidRecord{PID: pid, Token: f[1], StartTime: st}, true
}

// defaultPath is the search path shells use when the environment has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// findCommand checks that the shim's shell will find the command, looking
// where the shell will look: a name with a slash relative to the run
// directory (the command's working directory, not Niuma's), a bare name
// along the PATH the attempt gets, which the job's env may have changed.
func findCommand(name, dir string, env []string) error {
	if strings.ContainsRune(name, '/') {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return checkExecutable(name, p)
	}
	path, ok := lookupEnv(env, "PATH")
	if !ok {
		path = defaultPath
	}
	notExec := ""
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode().Perm()&0o111 != 0 {
			return nil
		}
		if notExec == "" {
			notExec = p
		}
	}
	if notExec != "" {
		return checkExecutable(name, notExec)
	}
	return fmt.Errorf("command %q not found: install it or fix the stage's command", name)
}

func checkExecutable(name, path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("command %q not found: install it or fix the stage's command", name)
	case fi.IsDir():
		return fmt.Errorf("command %q is a directory, not a program", name)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("command %q (%s) is not executable: chmod +x it or fix the stage's command", name, path)
	}
	return nil
}

// lookupEnv finds key in env as exec.Cmd uses it: the last entry wins.
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}
