package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
)

// The test binary doubles as a child process: with helperEnv set in its
// environment it does what the mode names instead of running tests. A Go
// child reports its argv and environment exactly, with no shell or
// interpreter in between.
const helperEnv = "NIUMA_LOCAL_TEST_HELPER"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(helperEnv); mode {
	case "":
		os.Exit(m.Run())
	case "report":
		helperReport()
	case "count-term":
		helperCountTerm(os.Args[1], os.Args[2], os.Args[3])
	case "owner":
		helperOwner(os.Args[1], os.Args[2], os.Args[3])
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		os.Exit(2)
	}
}

type report struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
}

// helperReport prints its argv, working directory and environment as JSON.
func helperReport() {
	r := report{Argv: os.Args[1:], Env: map[string]string{}}
	r.Cwd, _ = os.Getwd()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		r.Env[k] = v
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		os.Exit(2)
	}
	os.Exit(0)
}

// helperCountTerm appends a line to log for every SIGTERM it gets, creates
// ready, and exits 0 once something is written to the FIFO release.
func helperCountTerm(log, release, ready string) {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGTERM)
	go func() {
		for range c {
			f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				os.Exit(3)
			}
			_, _ = f.WriteString("TERM\n")
			_ = f.Close()
		}
	}()
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		os.Exit(3)
	}
	if _, err := os.ReadFile(release); err != nil {
		os.Exit(3)
	}
	os.Exit(0)
}

// helperArgv is the argv that runs the test binary as a helper.
func helperArgv(t *testing.T, args ...string) []string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	return append([]string{self}, args...)
}

// newJob returns a job whose run directory is a fresh temporary directory;
// the command runs there, so the shell snippets below name their files
// relative to it.
func newJob(t *testing.T, argv ...string) executor.Job {
	t.Helper()
	run := t.TempDir()
	stage := filepath.Join(run, "train")
	return executor.Job{
		RunID:      "run-1",
		Stage:      "train",
		Attempt:    2,
		Argv:       argv,
		Env:        map[string]string{"NIUMA_RUN_ID": "run-1", "NIUMA_STAGE": "train", "NIUMA_ATTEMPT": "2"},
		RunDir:     run,
		StageDir:   stage,
		StdoutPath: filepath.Join(stage, "stdout.log"),
		StderrPath: filepath.Join(stage, "stderr.log"),
	}
}

// start starts the job and makes sure nothing it started outlives the test.
func start(t *testing.T, x *Executor, job executor.Job) executor.Handle {
	t.Helper()
	h, err := x.Start(context.Background(), job)
	require.NoError(t, err)
	t.Cleanup(func() { reap(h) })
	return h
}

// reap kills an attempt a test left running. It signals the group only
// while the shim is known to live, so the group id cannot have been reused.
func reap(h executor.Handle) {
	hh := h.(*handle)
	select {
	case <-hh.done:
		return
	default:
	}
	_ = syscall.Kill(-hh.ref.PID, syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = h.Wait(ctx)
}

// wait waits for the attempt to end, failing the test if it does not.
func wait(t *testing.T, h executor.Handle) executor.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := h.Wait(ctx)
	require.NoError(t, err, "the attempt did not end")
	return ex
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := os.Stat(path)
		return err == nil
	}, 20*time.Second, 5*time.Millisecond, "the child never wrote %s", path)
}

// readPID reads a pid a child wrote (with write-then-rename, so the file is
// complete once it exists).
func readPID(t *testing.T, path string) int {
	t.Helper()
	waitForFile(t, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Greater(t, pid, 1)
	return pid
}

// dead reports whether pid is gone or a zombie (init here may never reap
// orphans, so a killed orphan can stay a zombie).
func dead(pid int) bool {
	st, ok := processStat(pid)
	return !ok || !st.running()
}

func requireDead(t *testing.T, pid int, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return dead(pid) }, 5*time.Second, 5*time.Millisecond,
		"%s (pid %d) is still alive", what, pid)
}

// killLater kills pid at the end of the test if it is still a live member of
// pgid, for grandchildren a failing test would otherwise leak.
func killLater(t *testing.T, pid, pgid int) {
	t.Cleanup(func() {
		if st, ok := processStat(pid); ok && st.running() && st.pgid == pgid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o600))
}

// release writes a line to the FIFO a child is blocked reading. Opening a
// FIFO for writing blocks until there is a reader, hence the goroutine: a
// child that died early must fail the test, not hang it.
func release(fifo string) {
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		_, _ = f.WriteString("go\n")
		_ = f.Close()
	}()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// exitStatus is the status line the shim wrote over the exit file's blank
// line, with its newline; "" while there is none.
func exitStatus(t *testing.T, path string) string {
	t.Helper()
	line, _, _ := strings.Cut(readFile(t, path), "\n")
	if strings.TrimSpace(line) == "" {
		return ""
	}
	return line + "\n"
}

func shimPID(h executor.Handle) int { return h.(*handle).ref.PID }

// shells are the shells the shim is tested under: /bin/sh (dash on Debian),
// bash, and bash started as "sh", which puts it in POSIX mode as it runs
// where /bin/sh is bash (RHEL, Fedora, Arch).
func shells(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{"default": ""}
	if bash, err := exec.LookPath("bash"); err == nil {
		m["bash"] = bash
		link := filepath.Join(t.TempDir(), "sh")
		require.NoError(t, os.Symlink(bash, link))
		m["bash-as-sh"] = link
	}
	if dash, err := exec.LookPath("dash"); err == nil {
		m["dash"] = dash
	}
	return m
}

func TestName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "local", New().Name())
	var _ executor.Executor = New()
}

func TestExitZeroIsSuccessAndOutputGoesToLogs(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", `echo out1; echo err1 >&2; echo out2`)
	h := start(t, New(), job)
	ex := wait(t, h)
	require.Equal(t, executor.Exit{Code: 0}, ex)
	require.True(t, ex.Success())
	require.Equal(t, "exited with code 0", ex.Describe())
	require.Equal(t, "out1\nout2\n", readFile(t, job.StdoutPath))
	require.Equal(t, "err1\n", readFile(t, job.StderrPath))
	require.Equal(t, "0\n", exitStatus(t, filepath.Join(job.StageDir, ".attempt-2.exit")))
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, "sh", "-c", "echo failing >&2; exit 3")
			ex := wait(t, start(t, &Executor{Shell: shell}, job))
			require.Equal(t, executor.Exit{Code: 3}, ex)
			require.False(t, ex.Success())
			require.Equal(t, "exited with code 3", ex.Describe())
			require.Equal(t, "failing\n", readFile(t, job.StderrPath))
			require.Equal(t, "3\n", exitStatus(t, filepath.Join(job.StageDir, ".attempt-2.exit")))
		})
	}
}

func TestLogsAreAppended(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", `echo "out $NIUMA_ATTEMPT"; echo "err $NIUMA_ATTEMPT" >&2`)
	require.NoError(t, os.MkdirAll(job.StageDir, 0o755))
	require.NoError(t, os.WriteFile(job.StdoutPath, []byte("earlier out\n"), 0o644))
	require.NoError(t, os.WriteFile(job.StderrPath, []byte("earlier err\n"), 0o644))

	x := New()
	require.True(t, wait(t, start(t, x, job)).Success())
	job.Attempt = 3
	job.Env["NIUMA_ATTEMPT"] = "3"
	require.True(t, wait(t, start(t, x, job)).Success())

	require.Equal(t, "earlier out\nout 2\nout 3\n", readFile(t, job.StdoutPath))
	require.Equal(t, "earlier err\nerr 2\nerr 3\n", readFile(t, job.StderrPath))
}

// runReport runs the test binary as a reporting child and decodes what it
// printed.
func runReport(t *testing.T, x *Executor, job executor.Job) report {
	t.Helper()
	job.Env[helperEnv] = "report"
	ex := wait(t, start(t, x, job))
	require.True(t, ex.Success(), "%s; stderr: %s", ex.Describe(), readFile(t, job.StderrPath))
	var r report
	require.NoError(t, json.Unmarshal([]byte(readFile(t, job.StdoutPath)), &r))
	return r
}

// Not parallel: it sets the test process's own environment.
func TestEnvironment(t *testing.T) {
	t.Setenv("NIUMA_STAGE", "stale-from-host")
	t.Setenv("CUDA_VISIBLE_DEVICES", "7")
	t.Setenv("NIUMA_LOCAL_TEST_HOST_ONLY", "from host")

	job := newJob(t, helperArgv(t)...)
	odd := `$(touch pwned) ; "double" 'single' $HOME` + "\nsecond line"
	job.Env["NIUMA_ODD"] = odd
	job.Env["NIUMA_EMPTY"] = ""
	r := runReport(t, New(), job)

	require.Equal(t, "run-1", r.Env["NIUMA_RUN_ID"])
	require.Equal(t, "train", r.Env["NIUMA_STAGE"], "the job's env wins over the host's")
	require.Equal(t, "2", r.Env["NIUMA_ATTEMPT"])
	require.Equal(t, odd, r.Env["NIUMA_ODD"])
	require.Contains(t, r.Env, "NIUMA_EMPTY")
	require.Equal(t, "", r.Env["NIUMA_EMPTY"])
	require.Equal(t, "from host", r.Env["NIUMA_LOCAL_TEST_HOST_ONLY"], "the host environment passes through")

	cuda, ok := r.Env["CUDA_VISIBLE_DEVICES"]
	require.True(t, ok, "CUDA_VISIBLE_DEVICES must be set, to empty, for a stage with no GPU")
	require.Equal(t, "", cuda, "the host's CUDA_VISIBLE_DEVICES must not leak into a CPU stage")

	want, err := filepath.EvalSymlinks(job.RunDir)
	require.NoError(t, err)
	require.Equal(t, want, r.Cwd)
	require.NoFileExists(t, filepath.Join(job.RunDir, "pwned"))
}

func TestCUDAVisibleDevices(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gpus []executor.GPU
		env  string // the job's own CUDA_VISIBLE_DEVICES, overridden
		want string
	}{
		{name: "none", want: ""},
		{name: "none overrides job env", env: "0,1", want: ""},
		{name: "uuids", gpus: []executor.GPU{{Index: 0, UUID: "GPU-aaa"}, {Index: 1, UUID: "GPU-bbb"}}, want: "GPU-aaa,GPU-bbb"},
		{name: "indices", gpus: []executor.GPU{{Index: 2}, {Index: 5}}, want: "2,5"},
		{name: "index zero", gpus: []executor.GPU{{Index: 0}}, want: "0"},
		{name: "mixed", gpus: []executor.GPU{{Index: 1, UUID: "GPU-aaa"}, {Index: 3}}, env: "9", want: "GPU-aaa,3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, "sh", "-c", `printf '%s|%s' "${CUDA_VISIBLE_DEVICES+set}" "$CUDA_VISIBLE_DEVICES"`)
			job.GPUs = tc.gpus
			if tc.env != "" {
				job.Env["CUDA_VISIBLE_DEVICES"] = tc.env
			}
			require.True(t, wait(t, start(t, New(), job)).Success())
			require.Equal(t, "set|"+tc.want, readFile(t, job.StdoutPath))
		})
	}
}

func TestArgvReachesTheChildVerbatim(t *testing.T) {
	t.Parallel()
	args := []string{
		"two words",
		`"double quoted"`,
		`'single quoted'`,
		"$(touch pwned-subst)",
		"`touch pwned-backtick`",
		"a; touch pwned-semicolon",
		"x && touch pwned-and",
		"| touch pwned-pipe",
		"> pwned-redirect",
		"$HOME",
		"${NIUMA_RUN_ID}",
		"*",
		"",
		"line\nbreak",
		`back\slash`,
		"trailing space ",
		"-n",
		"--",
		"#not a comment",
		"~",
	}
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, helperArgv(t, args...)...)
			r := runReport(t, &Executor{Shell: shell}, job)
			require.Equal(t, args, r.Argv)
			entries, err := os.ReadDir(job.RunDir)
			require.NoError(t, err)
			for _, e := range entries {
				require.False(t, strings.HasPrefix(e.Name(), "pwned"), "the shell interpreted an argument: %s exists", e.Name())
			}
		})
	}
}

// A command named like a shell builtin runs the program on PATH, not the
// builtin: dash's builtin echo would turn `\n` into a newline.
func TestBuiltinNamesRunThePrograms(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("echo"); err != nil {
		t.Skip("no echo program on PATH")
	}
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, "echo", `a\nb\c`)
			require.True(t, wait(t, start(t, &Executor{Shell: shell}, job)).Success())
			require.Equal(t, "a\\nb\\c\n", readFile(t, job.StdoutPath))
		})
	}
}

func TestEmptyCommand(t *testing.T) {
	t.Parallel()
	for _, argv := range [][]string{nil, {}, {""}, {"", "x"}} {
		job := newJob(t, argv...)
		h, err := New().Start(context.Background(), job)
		require.Error(t, err, "argv %q", argv)
		require.Nil(t, h)
		require.Contains(t, err.Error(), "empty command")
	}
}

func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cmd, want string
		setup           func(t *testing.T, runDir string)
	}{
		{name: "not on PATH", cmd: "niuma-no-such-command", want: "not found"},
		{name: "absolute", cmd: "/nonexistent/bin/train", want: "not found"},
		{name: "relative", cmd: "./missing.sh", want: "not found"},
		{name: "not executable", cmd: "./notexec.sh", want: "not executable", setup: func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notexec.sh"), []byte("#!/bin/sh\n"), 0o644))
		}},
		{name: "directory", cmd: "./subdir", want: "directory", setup: func(t *testing.T, dir string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "subdir"), 0o755))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, tc.cmd, "arg")
			if tc.setup != nil {
				tc.setup(t, job.RunDir)
			}
			h, err := New().Start(context.Background(), job)
			require.Error(t, err)
			require.Nil(t, h)
			require.Contains(t, err.Error(), strconv.Quote(tc.cmd), "the error names the command")
			require.Contains(t, err.Error(), tc.want)
			require.NoDirExists(t, job.StageDir, "nothing is created for a command that cannot start")
		})
	}
}

// A relative command is found where it runs: in the run directory, not in
// Niuma's working directory.
func TestRelativeCommandIsFoundInRunDir(t *testing.T) {
	t.Parallel()
	job := newJob(t)
	require.NoError(t, os.MkdirAll(filepath.Join(job.RunDir, "scripts"), 0o755))
	script := "#!/bin/sh\necho \"ran $0 $1\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(job.RunDir, "train.sh"), []byte(script), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(job.RunDir, "scripts", "eval.sh"), []byte(script), 0o755))

	job.Argv = []string{"./train.sh", "x"}
	require.True(t, wait(t, start(t, New(), job)).Success())
	job.Argv = []string{"scripts/eval.sh", "y"}
	require.True(t, wait(t, start(t, New(), job)).Success())
	require.Equal(t, "ran ./train.sh x\nran scripts/eval.sh y\n", readFile(t, job.StdoutPath))
}

// A bare command is looked up along the PATH the attempt gets, which the
// job's env may set (a virtualenv's bin, say).
func TestCommandIsFoundOnJobPATH(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "niuma-test-tool"), []byte("#!/bin/sh\necho tool ran\n"), 0o755))

	job := newJob(t, "niuma-test-tool")
	_, err := New().Start(context.Background(), job)
	require.ErrorContains(t, err, "not found")

	job.Env["PATH"] = bin + string(os.PathListSeparator) + os.Getenv("PATH")
	require.True(t, wait(t, start(t, New(), job)).Success())
	require.Equal(t, "tool ran\n", readFile(t, job.StdoutPath))
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	t.Run("missing run dir", func(t *testing.T) {
		t.Parallel()
		job := newJob(t, "true")
		job.RunDir = filepath.Join(job.RunDir, "nonexistent")
		_, err := New().Start(context.Background(), job)
		require.Error(t, err)
	})
	t.Run("missing shell", func(t *testing.T) {
		t.Parallel()
		job := newJob(t, "true")
		_, err := (&Executor{Shell: "/nonexistent/sh"}).Start(context.Background(), job)
		require.Error(t, err)
	})
	t.Run("unwritable log", func(t *testing.T) {
		t.Parallel()
		job := newJob(t, "true")
		job.StdoutPath = filepath.Join(job.RunDir, "no", "such", "dir", "stdout.log")
		_, err := New().Start(context.Background(), job)
		require.ErrorContains(t, err, "stdout")
	})
}

func TestRef(t *testing.T) {
	t.Parallel()
	job := newJob(t, "true")
	h := start(t, New(), job)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(h.Ref()), &r))
	require.Equal(t, float64(shimPID(h)), r["pid"])
	require.NotZero(t, r["start_time"])
	require.Equal(t, filepath.Join(job.StageDir, ".attempt-2.exit"), r["exit_file"])
	wait(t, h)
	require.Equal(t, r, func() map[string]any {
		var again map[string]any
		require.NoError(t, json.Unmarshal([]byte(h.Ref()), &again))
		return again
	}(), "the ref does not change when the attempt ends")
}

func TestWaitHonoursContextAndMayBeCalledConcurrently(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", "touch ready; read x < release; exit 7")
	mkfifo(t, filepath.Join(job.RunDir, "release"))
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h.Wait(ctx)
	require.ErrorIs(t, err, context.Canceled)

	results := make(chan executor.Exit, 3)
	for range 3 {
		go func() {
			ex, err := h.Wait(context.Background())
			if err != nil {
				ex = executor.Exit{Code: -100}
			}
			results <- ex
		}()
	}
	release(filepath.Join(job.RunDir, "release"))
	for range 3 {
		select {
		case ex := <-results:
			require.Equal(t, executor.Exit{Code: 7}, ex)
		case <-time.After(30 * time.Second):
			t.Fatal("Wait did not return")
		}
	}
}

// A stale exit file from an earlier run of the same attempt number must not
// be taken for this run's outcome.
func TestStartRemovesStaleExitFile(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", "touch ready; read x < release")
	mkfifo(t, filepath.Join(job.RunDir, "release"))
	exitFile := filepath.Join(job.StageDir, ".attempt-2.exit")
	require.NoError(t, os.MkdirAll(job.StageDir, 0o755))
	require.NoError(t, os.WriteFile(exitFile, []byte("9\n"), 0o644))

	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))
	require.Equal(t, "", exitStatus(t, exitFile), "no status while it runs")

	adopted, err := New().Recover(context.Background(), job, h.Ref())
	require.NoError(t, err)
	select {
	case <-adopted.(*handle).done:
		t.Fatal("a running attempt was adopted as finished")
	default:
	}

	release(filepath.Join(job.RunDir, "release"))
	require.Equal(t, executor.Exit{Code: 0}, wait(t, h))
	require.Equal(t, executor.Exit{Code: 0}, wait(t, adopted))
	require.Equal(t, "0\n", exitStatus(t, exitFile))
}

// stopGraceful is a child that exits 0 on SIGTERM, with a grandchild that
// dies of it. The grandchild writes its own pid, from a freshly exec'd
// shell: a forked shell that has not exec'd yet still has its parent's TERM
// handler, and a SIGTERM that lands then is lost.
const stopGraceful = `trap 'exit 0' TERM
sh -c 'echo $$ > gc.tmp && mv gc.tmp gc; exec sleep 60' &
wait`

// stopStubborn is a child that ignores SIGTERM, as does its grandchild. It
// writes both pids.
const stopStubborn = `trap '' TERM
sleep 60 & echo $! > gc.tmp && mv gc.tmp gc
echo $$ > child.tmp && mv child.tmp child
wait`

func TestStopGracefulChild(t *testing.T) {
	t.Parallel()
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Repeated: whether a shim mistakes the child's status
			// for its own interrupted wait is a race.
			for i := range 5 {
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					job := newJob(t, "sh", "-c", stopGraceful)
					h := start(t, &Executor{Shell: shell}, job)
					gc := readPID(t, filepath.Join(job.RunDir, "gc"))
					killLater(t, gc, shimPID(h))

					const grace = 60 * time.Second
					began := time.Now()
					require.NoError(t, h.Stop(context.Background(), grace))
					require.Less(t, time.Since(began), grace/2, "Stop must return when the child exits, not wait out grace")

					ex := wait(t, h)
					require.Equal(t, executor.Exit{Code: 0}, ex, "the child exited 0 on SIGTERM: %s", ex.Describe())
					require.True(t, ex.Success())
					require.True(t, dead(gc), "Stop returned while the grandchild still ran")
				})
			}
		})
	}
}

// The command gets Stop's SIGTERM once. A shim that forwarded the signal it
// got as a member of the group would deliver it twice, and many programs
// take a second SIGTERM as "abandon the checkpoint and quit now".
func TestStopSendsTERMOnce(t *testing.T) {
	t.Parallel()
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t)
			log := filepath.Join(job.RunDir, "terms")
			fifo := filepath.Join(job.RunDir, "release")
			ready := filepath.Join(job.RunDir, "ready")
			mkfifo(t, fifo)
			job.Argv = helperArgv(t, log, fifo, ready)
			job.Env[helperEnv] = "count-term"
			h := start(t, &Executor{Shell: shell}, job)
			waitForFile(t, ready)

			stopped := make(chan error, 1)
			go func() { stopped <- h.Stop(context.Background(), time.Minute) }()
			// The line, not the file: the helper creates the log before it
			// writes to it, and once released it may exit in between.
			require.Eventually(t, func() bool {
				b, _ := os.ReadFile(log)
				return len(b) > 0
			}, 20*time.Second, 5*time.Millisecond, "the command never got SIGTERM")
			release(fifo)
			select {
			case err := <-stopped:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Stop did not return after the child exited")
			}
			require.Equal(t, executor.Exit{Code: 0}, wait(t, h))
			require.Equal(t, "TERM\n", readFile(t, log))
		})
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, "sh", "-c", stopStubborn)
			h := start(t, &Executor{Shell: shell}, job)
			gc := readPID(t, filepath.Join(job.RunDir, "gc"))
			child := readPID(t, filepath.Join(job.RunDir, "child"))
			killLater(t, gc, shimPID(h))

			const grace = 300 * time.Millisecond
			began := time.Now()
			require.NoError(t, h.Stop(context.Background(), grace))
			require.GreaterOrEqual(t, time.Since(began), grace)

			ex := wait(t, h)
			require.False(t, ex.Success())
			require.True(t, ex.Signal != "" || ex.Code >= 128, "not reported as killed: %+v", ex)
			require.NotEmpty(t, ex.Describe())
			requireDead(t, child, "the child")
			requireDead(t, gc, "the grandchild")
		})
	}
}

// A command that exits on SIGTERM but leaves behind a process that ignores
// it: that process ends with the command (it carries the attempt's token),
// not only when grace runs out.
func TestStopKillsWhatTheCommandLeftBehind(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", `trap 'exit 0' TERM
sh -c 'trap "" TERM; echo $$ > gc.tmp && mv gc.tmp gc; exec sleep 60' &
wait`)
	h := start(t, New(), job)
	gc := readPID(t, filepath.Join(job.RunDir, "gc"))
	killLater(t, gc, shimPID(h))

	require.NoError(t, h.Stop(context.Background(), time.Minute))
	require.Equal(t, executor.Exit{Code: 0}, wait(t, h), "the command itself exited 0 on SIGTERM")
	require.True(t, dead(gc), "the left-behind grandchild outlived its stage")
}

func TestStopAfterExitIsNoop(t *testing.T) {
	t.Parallel()
	h := start(t, New(), newJob(t, "sh", "-c", "exit 2"))
	require.Equal(t, executor.Exit{Code: 2}, wait(t, h))
	require.NoError(t, h.Stop(context.Background(), time.Minute))
	require.Equal(t, executor.Exit{Code: 2}, wait(t, h))
}

func TestStopHonoursContext(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", stopStubborn)
	h := start(t, New(), job)
	readPID(t, filepath.Join(job.RunDir, "child"))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, h.Stop(ctx, time.Hour), context.Canceled)
	require.True(t, h.(*handle).ref.alive(), "a stubborn child survives SIGTERM")

	require.NoError(t, h.Stop(context.Background(), 0), "zero grace kills at once")
	require.False(t, wait(t, h).Success())
}

// A child killed from outside (not through Stop, and not the shim) is
// reported through the shell's status: 128+9.
func TestChildKilledFromOutside(t *testing.T) {
	t.Parallel()
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, "sh", "-c", "echo $$ > child.tmp && mv child.tmp child; exec sleep 60")
			h := start(t, &Executor{Shell: shell}, job)
			child := readPID(t, filepath.Join(job.RunDir, "child"))
			require.NotEqual(t, shimPID(h), child)

			require.NoError(t, syscall.Kill(child, syscall.SIGKILL))
			ex := wait(t, h)
			require.Equal(t, 137, ex.Code)
			require.False(t, ex.Success())
			require.Contains(t, ex.Describe(), "137")
			require.Contains(t, ex.Describe(), "killed")
			require.Equal(t, "137\n", exitStatus(t, filepath.Join(job.StageDir, ".attempt-2.exit")))
		})
	}
}

// The shim itself killed (as by an OOM killer picking it): no exit file, and
// the Exit says it died of a signal.
func TestShimKilled(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", "touch ready; exec sleep 60")
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))
	require.NoError(t, syscall.Kill(-shimPID(h), syscall.SIGKILL))
	ex := wait(t, h)
	require.Equal(t, executor.Exit{Code: -1, Signal: "killed"}, ex)
	require.False(t, ex.Success())
	require.Equal(t, "", exitStatus(t, filepath.Join(job.StageDir, ".attempt-2.exit")), "no status")
}

func TestRecoverRunningAttempt(t *testing.T) {
	t.Parallel()
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, "sh", "-c", "touch ready; read x < release; exit 5")
			fifo := filepath.Join(job.RunDir, "release")
			mkfifo(t, fifo)
			h := start(t, &Executor{Shell: shell}, job)
			waitForFile(t, filepath.Join(job.RunDir, "ready"))
			ref := h.Ref()

			// A new Niuma process: a new executor with nothing but the ref.
			adopted, err := New().Recover(context.Background(), job, ref)
			require.NoError(t, err)
			require.Equal(t, ref, adopted.Ref())

			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err = adopted.Wait(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded, "Wait must block while the attempt runs")

			release(fifo)
			ex := wait(t, adopted)
			require.Equal(t, executor.Exit{Code: 5}, ex, "read from the exit file")
			require.Equal(t, executor.Exit{Code: 5}, wait(t, h))
		})
	}
}

func TestRecoverFinishedAttempt(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", "exit 4")
	h := start(t, New(), job)
	require.Equal(t, executor.Exit{Code: 4}, wait(t, h))

	adopted, err := New().Recover(context.Background(), job, h.Ref())
	require.NoError(t, err)
	select {
	case <-adopted.(*handle).done:
	default:
		t.Fatal("the outcome of a finished attempt is known at once")
	}
	require.Equal(t, executor.Exit{Code: 4}, wait(t, adopted))
	require.NoError(t, adopted.Stop(context.Background(), time.Minute))
}

func TestRecoverFinishedAttemptKilledBySignal(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", "kill -TERM $$")
	h := start(t, New(), job)
	wait(t, h)
	adopted, err := New().Recover(context.Background(), job, h.Ref())
	require.NoError(t, err)
	ex := wait(t, adopted)
	require.Equal(t, 143, ex.Code)
	require.Contains(t, ex.Describe(), "terminated")
}

func TestRecoverGoneWithoutExitFile(t *testing.T) {
	t.Parallel()
	job := newJob(t, "true")
	h := start(t, New(), job)
	wait(t, h)
	require.NoError(t, os.Remove(filepath.Join(job.StageDir, ".attempt-2.exit")))

	_, err := New().Recover(context.Background(), job, h.Ref())
	require.ErrorIs(t, err, executor.ErrGone)
}

func TestRecoverGarbageRef(t *testing.T) {
	t.Parallel()
	job := newJob(t, "true")
	exitFile := filepath.Join(t.TempDir(), "exit")
	for _, ref := range []string{
		"",
		"not json",
		"null",
		"[1,2]",
		`{"pid":"x"}`,
		"{}",
		`{"pid":0}`,
		`{"pid":-5}`,
		// init: Stop on an adopted pid 1 would signal group -1, that is
		// every process.
		`{"pid":1,"start_time":1,"exit_file":"` + exitFile + `"}`,
		// a live pid with no start time could be anyone's
		fmt.Sprintf(`{"pid":%d}`, os.Getpid()),
		fmt.Sprintf(`{"pid":%d,"exit_file":%q}`, os.Getpid(), exitFile),
	} {
		_, err := New().Recover(context.Background(), job, ref)
		require.ErrorIs(t, err, executor.ErrGone, "ref %q", ref)
	}
}

// A live PID whose start time differs from the ref's belongs to another
// process that reused the PID.
func TestRecoverPIDReuseGuard(t *testing.T) {
	t.Parallel()
	self, ok := processStartTime(os.Getpid())
	require.True(t, ok)
	require.True(t, ref{PID: os.Getpid(), StartTime: self}.alive(), "sanity: the right start time is alive")

	job := newJob(t, "true")
	for _, st := range []uint64{self + 1, self - 1, 0} {
		r, err := json.Marshal(ref{PID: os.Getpid(), StartTime: st, ExitFile: filepath.Join(job.StageDir, ".attempt-2.exit")})
		require.NoError(t, err)
		_, err = New().Recover(context.Background(), job, string(r))
		require.ErrorIs(t, err, executor.ErrGone, "start time %d", st)
	}

	// The same with a real attempt's ref.
	job = newJob(t, "sh", "-c", "touch ready; exec sleep 60")
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))
	r := h.(*handle).ref
	r.StartTime++
	// A ref as written before attempts had tokens: the start time alone
	// tells the process apart (with its token, the attempt's processes
	// would rightly be adopted by it).
	r.Token = ""
	b, err := json.Marshal(r)
	require.NoError(t, err)
	_, err = New().Recover(context.Background(), job, string(b))
	require.ErrorIs(t, err, executor.ErrGone)
}

func TestStopAdoptedGracefulChild(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", stopGraceful)
	h := start(t, New(), job)
	gc := readPID(t, filepath.Join(job.RunDir, "gc"))
	killLater(t, gc, shimPID(h))

	adopted, err := New().Recover(context.Background(), job, h.Ref())
	require.NoError(t, err)
	const grace = time.Minute
	began := time.Now()
	require.NoError(t, adopted.Stop(context.Background(), grace))
	require.Less(t, time.Since(began), grace/2)
	require.Equal(t, executor.Exit{Code: 0}, wait(t, adopted))
	require.Equal(t, executor.Exit{Code: 0}, wait(t, h))
	require.True(t, dead(gc))
}

func TestStopAdoptedStubbornChild(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", stopStubborn)
	h := start(t, New(), job)
	gc := readPID(t, filepath.Join(job.RunDir, "gc"))
	child := readPID(t, filepath.Join(job.RunDir, "child"))
	killLater(t, gc, shimPID(h))

	adopted, err := New().Recover(context.Background(), job, h.Ref())
	require.NoError(t, err)
	require.NoError(t, adopted.Stop(context.Background(), 300*time.Millisecond))

	ex := wait(t, adopted)
	require.False(t, ex.Success())
	require.True(t, ex.Lost, "killed with its shim, the attempt leaves no exit status: %+v", ex)
	require.False(t, wait(t, h).Success())
	requireDead(t, child, "the child")
	requireDead(t, gc, "the grandchild")
}

func TestExitFromCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   int
		reason string
	}{
		{0, ""},
		{3, ""},
		{127, ""},
		{128, ""},
		{130, "exited with code 130 (interrupt)"},
		{137, "exited with code 137 (killed)"},
		{143, "exited with code 143 (terminated)"},
		{255, ""},
	} {
		ex := exitFromCode(tc.code)
		require.Equal(t, executor.Exit{Code: tc.code, Reason: tc.reason}, ex)
		require.Equal(t, tc.code == 0, ex.Success())
	}
}

func TestReadExitFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for content, want := range map[string]int{"0\n": 0, " 7 \n": 7, "137": 137} {
		p := filepath.Join(dir, "exit")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		ex, ok := readExitFile(p)
		require.True(t, ok, "%q", content)
		require.Equal(t, want, ex.Code)
	}
	for _, content := range []string{"", "x", "3 4\n"} {
		p := filepath.Join(dir, "bad")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		_, ok := readExitFile(p)
		require.False(t, ok, "%q", content)
	}
	_, ok := readExitFile(filepath.Join(dir, "missing"))
	require.False(t, ok)
}

// The command name in /proc/PID/stat may hold spaces and parentheses.
func TestProcessStatWithOddName(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "a) b (c")
	require.NoError(t, os.Symlink(sleep, link))
	cmd := exec.Command(link, "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
	require.NoError(t, err)
	require.Equal(t, "a) b (c\n", string(comm), "sanity: the name made it into /proc")

	st, ok := processStat(cmd.Process.Pid)
	require.True(t, ok)
	require.True(t, st.running(), "state %q", st.state)
	require.Equal(t, syscall.Getpgrp(), st.pgid)
	self, _ := processStat(os.Getpid())
	require.GreaterOrEqual(t, st.startTime, self.startTime)
	require.True(t, ref{PID: cmd.Process.Pid, StartTime: st.startTime}.alive())

	_, ok = processStat(-1)
	require.False(t, ok)
}

// Start's error for a command that cannot run is not a wrapped ErrGone or
// anything a caller might take for a lost attempt.
func TestStartErrorIsNotErrGone(t *testing.T) {
	t.Parallel()
	_, err := New().Start(context.Background(), newJob(t, "niuma-no-such-command"))
	require.Error(t, err)
	require.False(t, errors.Is(err, executor.ErrGone))
}
