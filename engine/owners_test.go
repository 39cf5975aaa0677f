package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/gpumon"
)

// A local stage's processes are traced to its run through their process
// group: the engine tells gpumon's resolver about the group as the attempt
// starts, so a GPU process of a local stage is the run's, not "another
// process". Real processes and the real /proc.
func TestLocalStageProcessesBelongToTheirRun(t *testing.T) {
	h := newHarness(t)
	owners := gpumon.NewOwners(nil)
	e := h.engine(func(o *Options) { o.Owners = owners })
	h.drive(e)
	tm := parse(t, "name: t\nruntime: {kind: local}\nstages:\n  - name: a\n    command: [/bin/sh, -c, 'echo $$$$ > ${stage_dir}/pid.txt; exec sleep 30']\n")
	ctx := context.Background()
	r, err := e.Submit(ctx, RunSpec{Template: tm})
	require.NoError(t, err)

	pidFile := filepath.Join(r.Dir, "a", "pid.txt")
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "the stage starts")
	require.Eventually(t, func() bool {
		o, ok := owners.Owner(ctx, pid)
		return ok && o == gpumon.Owner{RunID: r.ID, Stage: "a", Attempt: 1}
	}, 10*time.Second, 20*time.Millisecond, "the stage's process is traced to its run")

	require.NoError(t, e.Cancel(ctx, r.ID))
	waitDone(t, e, r.ID)
	_, ok := owners.Owner(ctx, pid)
	require.False(t, ok, "a finished attempt's group is forgotten")
}
