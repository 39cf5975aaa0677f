package local

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
)

// escapees is a stage command that leaves behind, before it ends with
// status code, a child in a session of its own (setsid) and a double-forked
// one (reparented to init, still in the stage's group); both ignore SIGTERM
// and write their pids first, so the test knows they ran.
func escapees(tail string) []string {
	return []string{"sh", "-c", `setsid sh -c 'trap "" TERM; echo $$ > escaped.tmp && mv escaped.tmp escaped; exec sleep 60' </dev/null >/dev/null 2>&1 &
(sh -c 'trap "" TERM; echo $$ > forked.tmp && mv forked.tmp forked; exec sleep 60' </dev/null >/dev/null 2>&1 &)
while [ ! -e escaped ] || [ ! -e forked ]; do sleep 0.01; done
` + tail}
}

// leftovers reads the pids the escapees wrote, and kills them when the
// test ends whatever happened, so a failing run leaks nothing.
func leftovers(t *testing.T, job executor.Job) map[string]int {
	t.Helper()
	pids := map[string]int{
		"the setsid child":        readPID(t, filepath.Join(job.RunDir, "escaped")),
		"the double-forked child": readPID(t, filepath.Join(job.RunDir, "forked")),
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			if carriesToken(pid, job.Token) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return pids
}

func carriesToken(pid int, token string) bool {
	for _, p := range tokenProcesses(token) {
		if p.pid == pid {
			return true
		}
	}
	return false
}

// Nothing a stage started outlives it: when Wait says how the attempt
// ended, its setsid and double-forked children are gone too — after
// success, after a failure, and after Stop.
func TestNothingOutlivesItsStage(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		tail string
		stop bool
		code int
	}{
		"succeeded": {tail: "exit 0", code: 0},
		"failed":    {tail: "exit 3", code: 3},
		"stopped":   {tail: "trap 'exit 143' TERM; while :; do sleep 0.05; done", stop: true, code: 143},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := tokenJob(t, escapees(c.tail)...)
			h := start(t, New(), job)
			pids := leftovers(t, job)
			if c.stop {
				require.NoError(t, h.Stop(context.Background(), 5*time.Second))
			}
			require.Equal(t, c.code, wait(t, h).Code)
			for what, pid := range pids {
				require.True(t, dead(pid), "%s (pid %d) outlived its stage", what, pid)
			}
			require.Empty(t, tokenProcesses(job.Token), "no process carries the attempt's token once it has ended")
		})
	}
}

// An attempt started without a token (an engine that gives none) gets one
// of its own, so that what it leaves behind is still found.
func TestNothingOutlivesAStageWithoutAToken(t *testing.T) {
	t.Parallel()
	job := newJob(t, escapees("exit 0")...)
	h := start(t, New(), job)
	job.Token = h.(*handle).ref.Token
	require.NotEmpty(t, job.Token)
	pids := leftovers(t, job)
	require.Equal(t, executor.Exit{Code: 0}, wait(t, h))
	for what, pid := range pids {
		require.True(t, dead(pid), "%s (pid %d) outlived its stage", what, pid)
	}
}

// An adopted attempt (its owner died while it ran) is reaped the same way
// when it ends: the new owner polls it and finds its exit file.
func TestNothingOutlivesAnAdoptedStage(t *testing.T) {
	t.Parallel()
	job := tokenJob(t, escapees("read x < release; exit 0")...)
	fifo := filepath.Join(job.RunDir, "release")
	mkfifo(t, fifo)
	h := start(t, New(), job)
	pids := leftovers(t, job)
	adopted, err := New().Recover(context.Background(), job, h.Ref())
	require.NoError(t, err)
	release(fifo)
	require.Equal(t, executor.Exit{Code: 0}, wait(t, adopted))
	for what, pid := range pids {
		require.True(t, dead(pid), "%s (pid %d) outlived its stage", what, pid)
	}
}
