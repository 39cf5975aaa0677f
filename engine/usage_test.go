package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/cgroup"
	"niuma/engine/executor/local"
)

// A running stage's host memory and CPU use, from its attempt's cgroup,
// is in the run's read model and in Usage while it runs, and gone after.
func TestRunningStageUsageFromItsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root (CI runs as root)")
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl holds the memory here; it is not installed")
	}
	tr, err := cgroup.Detect(fmt.Sprintf("niuma/test-%d-usage", os.Getpid()))
	if err != nil || !tr.Features().Memory {
		t.Skipf("no cgroup with memory accounting here: %v", err)
	}
	t.Cleanup(func() { _ = tr.RemoveAll() })
	h := newHarness(t)
	e := h.engine(func(o *Options) { o.Executors = []executor.Executor{&local.Executor{Cgroups: tr}} })
	h.drive(e)
	tm := parse(t, `
name: holder
stages:
  - name: hold
    memory: 256MiB
    command: [perl, -e, '$x = "a" x (48*1024*1024); open(my $f, ">", "held"); close $f; sleep 1 until -e "release"']
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	var u *StageUsage
	require.Eventually(t, func() bool {
		if _, err := os.Stat(filepath.Join(info.Dir, "held")); err != nil {
			return false
		}
		r, err := e.Run(context.Background(), info.ID)
		require.NoError(t, err)
		u = r.Stages[0].Usage
		return u != nil && u.MemoryBytes >= 48<<20
	}, 60*time.Second, 50*time.Millisecond, "the stage's memory use never showed")
	require.Equal(t, int64(256<<20), u.LimitBytes, "memory: is its limit")
	require.GreaterOrEqual(t, u.PeakBytes, u.MemoryBytes)
	require.Positive(t, u.CPUSeconds)
	all := e.Usage()
	require.Len(t, all, 1)
	require.Equal(t, "hold", all[0].Stage)

	require.NoError(t, os.WriteFile(filepath.Join(info.Dir, "release"), nil, 0o644))
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State)
	require.Nil(t, r.Stages[0].Usage)
	require.Eventually(t, func() bool { return len(e.Usage()) == 0 }, 30*time.Second, 20*time.Millisecond)
}
