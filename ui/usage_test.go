package ui

import (
	"testing"

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
