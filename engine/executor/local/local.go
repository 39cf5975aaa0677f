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
	"niuma/engine/executor/logcap"
)

// shim runs the stage's command as a child and records its exit status in a
// file. The file is what lets a later Niuma process learn how an adopted
// attempt ended: only a parent can wait(2) for a process, and the parent may
// have crashed. The command arrives as positional parameters, so no part of
// it is ever parsed by the shell; exec makes the shell run the program on
// PATH even where it has a builtin of the same name (echo, printf, kill).
//
// The shim and the command share a process group, and Stop signals the
// group, so the command gets Stop's SIGTERM straight from the kernel,
// exactly once, as a job in a terminal gets Ctrl-C. The shim only catches
// the signals so that it lives on to record the status. It must not forward
// them: the command would see SIGTERM twice, which many programs take as
// "force quit now". And it runs the command in the foreground, because a
// trapped signal interrupts wait(1) for a background child, after which
// some shells (bash, also as /bin/sh) have already reaped the child and
// report 143 or nothing instead of its status.
const shim = `exit_file=$1; shift
trap : TERM INT HUP
(exec "$@")
code=$?
printf '%s\n' "$code" > "$exit_file.tmp" && mv "$exit_file.tmp" "$exit_file"
exit "$code"
`

// Executor runs attempts as host processes.
type Executor struct {
	// Shell runs the shim; "/bin/sh" when empty.
	Shell string
	// LogCap is how many bytes of each of an attempt's streams its log
	// keeps (0: logcap.DefaultCap); see logcap.Attach.
	LogCap int64
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
}

// Start implements executor.Executor.
func (x *Executor) Start(ctx context.Context, job executor.Job) (executor.Handle, error) {
	if len(job.Argv) == 0 || job.Argv[0] == "" {
		return nil, errors.New("the stage has an empty command")
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

	exitFile := exitFilePath(job)
	_ = os.Remove(exitFile)
	shell := x.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	args := append([]string{"-c", shim, "niuma-stage", exitFile}, job.Argv...)
	// Not exec.CommandContext: the attempt must outlive ctx (and this
	// process); it ends through Stop.
	cmd := exec.Command(shell, args...)
	cmd.Dir = job.RunDir
	cmd.Env = env
	logs, err := logcap.Attach(cmd, x.LogCap, stdout, stderr)
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	logs.Started()
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("start %s: %w", job.Argv[0], err)
	}
	st, _ := processStartTime(cmd.Process.Pid)
	h := &handle{
		ref:  ref{PID: cmd.Process.Pid, StartTime: st, ExitFile: exitFile},
		done: make(chan struct{}),
	}
	go func() {
		err := cmd.Wait()
		logs.Wait(logGrace)
		h.exit = exitFromWait(cmd.ProcessState, err, exitFile)
		close(h.done)
	}()
	return h, nil
}

// Recover implements executor.Executor.
func (x *Executor) Recover(ctx context.Context, job executor.Job, refJSON string) (executor.Handle, error) {
	var r ref
	// PID 1 is init and no shim (a child of Niuma); Stop would signal
	// group -1, which kill(2) takes to mean every process there is.
	if err := json.Unmarshal([]byte(refJSON), &r); err != nil || r.PID <= 1 {
		return nil, executor.ErrGone
	}
	h := &handle{ref: r, done: make(chan struct{}), adopted: true}
	if !r.alive() {
		ex, ok := readExitFile(r.ExitFile)
		if !ok {
			return nil, executor.ErrGone
		}
		h.exit = ex
		close(h.done)
		return h, nil
	}
	go h.poll()
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
	return append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(ids, ","))
}

func exitFilePath(job executor.Job) string {
	return filepath.Join(job.StageDir, fmt.Sprintf(".attempt-%d.exit", job.Attempt))
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
