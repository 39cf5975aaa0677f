package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
)

// tokenJob is a job with an attempt token, as the engine gives it. The
// token is found in every process on the machine, so it is this test
// binary's own, as the engine's are random: a second run of these tests
// beside this one (another checkout's) would otherwise share it, and each
// would find the other's processes as its attempt's.
func tokenJob(t *testing.T, argv ...string) executor.Job {
	job := newJob(t, argv...)
	job.Token = fmt.Sprintf("a%d-%s", os.Getpid(), strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"))
	return job
}

// The pid file names the shim, the token and its start time, and is
// written before Start returns.
func TestStartWritesPidFileBeforeItReturns(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "sh", "-c", "exec sleep 60")
	h := start(t, New(), job)
	r, ok := readPidFile(pidFilePath(job))
	require.True(t, ok, "the pid file is complete when Start returns")
	require.Equal(t, shimPID(h), r.PID)
	require.Equal(t, job.Token, r.Token)
	require.Equal(t, h.(*handle).ref.StartTime, r.StartTime)
	procs := tokenProcesses(job.Token)
	pids := map[int]bool{}
	for _, p := range procs {
		pids[p.pid] = true
	}
	require.True(t, pids[r.PID], "the shim's wrapper carries the token: %v", procs)
	require.GreaterOrEqual(t, len(procs), 2, "so do the shim and the command: %v", procs)
	for _, p := range procs {
		// The perl capper carries no token (it is no leftover); until it
		// has exec'd, its subshell does, and reapLeftovers knows it by
		// its wrapper's name. The subshell may exec between the scan and
		// this look: a process that is perl now is asked again.
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
		if !strings.HasPrefix(string(b), "perl") {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		require.NotContains(t, string(env), tokenEnv+"="+job.Token, "the log capper carries the token: %v", procs)
	}
}

// By token alone (the owner died before it recorded the handle), a live
// attempt is adopted and its exit read from the exit file.
func TestRecoverByTokenAlive(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "sh", "-c", "touch ready; read x < release; exit 6")
	fifo := filepath.Join(job.RunDir, "release")
	mkfifo(t, fifo)
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))

	adopted, err := New().Recover(context.Background(), job, "")
	require.NoError(t, err)
	require.Equal(t, shimPID(h), adopted.(*handle).ref.PID)
	select {
	case <-adopted.(*handle).done:
		t.Fatal("a running attempt was adopted as finished")
	default:
	}
	release(fifo)
	require.Equal(t, executor.Exit{Code: 6}, wait(t, adopted))
}

// By token alone, an attempt that ended while no one owned it is known by
// its exit file: the status is read, never guessed.
func TestRecoverByTokenExited(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "sh", "-c", "exit 0")
	require.Equal(t, executor.Exit{Code: 0}, wait(t, start(t, New(), job)))
	adopted, err := New().Recover(context.Background(), job, "")
	require.NoError(t, err)
	require.Equal(t, executor.Exit{Code: 0}, wait(t, adopted))
}

// Nothing ever ran under the token: ErrNotLaunched, and the engine may
// launch it. A token no process has and whose pid file is missing is that.
func TestRecoverByTokenNeverLaunched(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "true")
	_, err := New().Recover(context.Background(), job, "")
	require.ErrorIs(t, err, executor.ErrNotLaunched)
	// A launch after it runs once.
	require.Equal(t, executor.Exit{Code: 0}, wait(t, start(t, New(), job)))
}

// A shim gone without a status and no process with the token: ErrGone.
func TestRecoverByTokenGone(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "sh", "-c", "exec sleep 60")
	h := start(t, New(), job)
	require.NoError(t, syscall.Kill(-shimPID(h), syscall.SIGKILL))
	wait(t, h)
	// The shim's end is seen before its command's: the kill reaches the
	// group at once, but the command may still be exiting. Until it has,
	// a process carries the token and Recover rightly adopts it.
	require.Eventually(t, func() bool { return len(tokenProcesses(job.Token)) == 0 },
		10*time.Second, 5*time.Millisecond, "the killed command kept its token")
	_, err := New().Recover(context.Background(), job, "")
	require.ErrorIs(t, err, executor.ErrGone)
	_, err = New().Recover(context.Background(), job, h.Ref())
	require.ErrorIs(t, err, executor.ErrGone)
}

// The shim killed while the command lives on: the attempt is not gone
// while a process carries its token; it ends as lost only after them.
func TestShimGoneButCommandAliveIsNotGone(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "sh", "-c", "echo $$ > cmd.pid.tmp && mv cmd.pid.tmp cmd.pid; read x < release")
	fifo := filepath.Join(job.RunDir, "release")
	mkfifo(t, fifo)
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "cmd.pid"))
	b, err := os.ReadFile(filepath.Join(job.RunDir, "cmd.pid"))
	require.NoError(t, err)
	cmdPID, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	killLater(t, cmdPID, shimPID(h)) // a failing test leaves no reader of the FIFO behind
	// The shim is the command's parent and its wrapper the shim's: those
	// two are killed, by pid. Not "every token carrier but the command and
	// the capper": the command's own children (its mv) carry the token
	// too, one on its way out is gone before a kill reaches it, and a
	// capper still in its exec is not yet known as perl. The wrapper
	// first: killed after the shim, it may have exited already.
	shim := parentPID(t, cmdPID)
	require.Equal(t, shimPID(h), parentPID(t, shim), "the shim runs under its wrapper")
	for _, pid := range []int{shimPID(h), shim} {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	wait(t, h)

	adopted, err := New().Recover(context.Background(), job, "")
	require.NoError(t, err, "a process with the token lives")
	ctx, cancel := context.WithTimeout(context.Background(), 3*pollInterval)
	defer cancel()
	_, err = adopted.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "not lost while the command runs")

	release(fifo)
	ex := wait(t, adopted)
	require.True(t, ex.Lost, "no status once it is over: %+v", ex)
	require.Empty(t, tokenProcesses(job.Token))
}

// Two launches of one attempt (an owner that launched it and died, and one
// that thought it never launched): the command runs once; the second
// Start follows the first.
func TestSecondStartOfOneAttemptFollowsTheFirst(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "sh", "-c", "echo x >> runs; touch ready; read x < release")
	fifo := filepath.Join(job.RunDir, "release")
	mkfifo(t, fifo)
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))
	h2 := start(t, New(), job)
	require.Equal(t, shimPID(h), shimPID(h2))
	release(fifo)
	require.Equal(t, executor.Exit{Code: 0}, wait(t, h2))
	b, err := os.ReadFile(filepath.Join(job.RunDir, "runs"))
	require.NoError(t, err)
	require.Equal(t, "x\n", string(b), "the command ran once")
}

// A pid file of another attempt (another token) left in the stage's
// folder is no claim on this one: Start replaces it and runs the command
// once.
func TestStaleClaimOfAnotherAttemptIsReplaced(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, "sh", "-c", "echo x >> runs")
	require.NoError(t, os.MkdirAll(job.StageDir, 0o755))
	require.NoError(t, os.WriteFile(pidFilePath(job), []byte("1 other-token 1\n"), 0o644))
	h, err := New().Start(context.Background(), job)
	require.NoError(t, err, "another attempt's stale claim is replaced")
	require.Equal(t, executor.Exit{Code: 0}, wait(t, h))
	b, _ := os.ReadFile(filepath.Join(job.RunDir, "runs"))
	require.Equal(t, "x\n", string(b))
}

// parentPID is pid's parent, from /proc/PID/stat.
func parentPID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return ppid
}
