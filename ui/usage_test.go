package ui

import (
	"context"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/gpumon"
)

func TestUsageText(t *testing.T) {
	u := &engine.StageUsage{Usage: executor.Usage{MemoryBytes: 1229 << 20, PeakBytes: 1536 << 20, LimitBytes: 4 << 30, CPUSeconds: 12.2}}
	require.Equal(t, "1.2 GiB memory (peak 1.5 GiB, limit 4 GiB) · 12.2s CPU", usageText(engine.StageInfo{Usage: u}))
	u.LimitBytes = 0
	require.Equal(t, "1.2 GiB memory (peak 1.5 GiB) · 12.2s CPU", usageText(engine.StageInfo{Usage: u}))
	require.Equal(t, "1.2 GiB memory (peak 1.5 GiB) · 12.2s CPU · 1557 metric points lost", usageText(engine.StageInfo{Usage: u, PointsLost: 1557}))
	require.Equal(t, "1557 metric points lost", usageText(engine.StageInfo{PointsLost: 1557}))
	require.Empty(t, usageText(engine.StageInfo{}))
}

// The board's process table says what a Niuma process's stage uses of
// the host; other processes have no stage to say it of.
func TestProcessRowsShowTheStagesHostUsage(t *testing.T) {
	snap := gpumon.Snapshot{GPUs: []gpumon.GPU{{Index: 0, Processes: []gpumon.Process{
		{PID: 10, MemMiB: 2048, Owner: &gpumon.Owner{RunID: "r1", Stage: "train", Attempt: 1}},
		{PID: 11, MemMiB: 1024},
	}}}}
	usage := map[[2]string]engine.StageUsage{{"r1", "train"}: {RunID: "r1", Stage: "train",
		Usage: executor.Usage{MemoryBytes: 3 << 30, CPUSeconds: 90}}}
	rows := processRows(snap, nil, usage)
	require.Len(t, rows, 2)
	require.Equal(t, "3 GiB · 1m30s CPU", rows[0].host)
	require.Empty(t, rows[1].host)
	require.Empty(t, processRows(snap, nil, nil)[0].host, "unknown without usage")
}

// modeBackend is a backend that says how stages' processes are found, as
// app's window backend does.
type modeBackend struct {
	*fakeBackend
	mode string
}

func (b modeBackend) ProcessMode() string { return b.mode }

// The board says how the stages' processes are found and limited (a
// cgroup per attempt, or the token scan), on a machine with GPUs and on
// one without them, where there is no GPU process table.
func TestBoardSaysWhichProcessModeIsInForce(t *testing.T) {
	const mode = "cgroup v1, a group per attempt under /sys/fs/cgroup/{freezer,memory}/niuma; memory limits, freezing"
	for name, snap := range map[string]gpumon.Snapshot{
		"simulated GPUs": simSnapshot(t, "1xA100-80GB"),
		"no GPU":         {Source: gpumon.SourceNone, Reason: "NVML is not available: libnvidia-ml.so.1 not found"},
	} {
		t.Run(name, func(t *testing.T) {
			newTestApp(t)
			v := NewBoard(modeBackend{fakeBackend: &fakeBackend{snap: snap, runs: boardRuns(time.Now())}, mode: mode})
			w := test.NewWindow(v.Content())
			w.Resize(fyne.NewSize(1100, 700))
			t.Cleanup(w.Close)
			v.Reload(context.Background())
			require.Contains(t, labelTexts(v.Content()), "Stages' processes: "+mode, "shown, not hidden")
		})
	}
}
