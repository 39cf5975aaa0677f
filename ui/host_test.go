package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
)

// hostBackend is the fake backend with the engine's stored host records.
type hostBackend struct {
	*fakeBackend
	usage map[string][]engine.HostUsage
}

func (h *hostBackend) HostUsage(_ context.Context, runID string) ([]engine.HostUsage, error) {
	return h.usage[runID], nil
}

// The run view of an ended run shows each stage's peak memory, its limit
// and its CPU time from the stored records (the live reading is gone by
// then); a run without records has no such section.
func TestRunViewShowsEachStagesHostUse(t *testing.T) {
	now := time.Now()
	b := &hostBackend{fakeBackend: &fakeBackend{runs: []engine.RunInfo{
		{ID: "r2", Template: "t", State: engine.Succeeded, CreatedAt: now, Stages: stages(engine.Succeeded, engine.Succeeded)},
		{ID: "r1", Template: "t", State: engine.Succeeded, CreatedAt: now.Add(-time.Hour), Stages: stages(engine.Succeeded)},
	}}, usage: map[string][]engine.HostUsage{"r2": {
		{Stage: "preprocess", Attempts: []int{1}, MemPeakBytes: 3 << 19, CPUSeconds: 0.0019},
		{Stage: "train", Attempts: []int{1, 2}, MemPeakBytes: 1288490189, MemMeanBytes: 900 << 20, MemLimitBytes: 4 << 30,
			CPUSeconds: 192.4, CPULimitMilli: 2000, Samples: 180},
	}}}
	v, _ := newTestView(t, b.fakeBackend)
	v.backend = b
	v.Reload(context.Background())
	v.list.Select(0)
	v.Reload(context.Background())
	require.True(t, v.detail.hostBox.Visible())
	var lines []string
	for _, o := range v.detail.host.Objects {
		lines = append(lines, o.(*widget.Label).Text)
	}
	require.Equal(t, []string{
		"preprocess · peak memory 1.5 MiB · CPU time 1.9 ms",
		"train · peak memory 1.2 GiB of 4 GiB (mean 900 MiB) · CPU time 3m12s (limit 2 CPUs) · attempts 1, 2 together",
	}, lines)
	require.Contains(t, strings.Join(texts(v.detail.hostBox), "\n"), "Memory and CPU")

	v.list.Select(1) // a run without records: no section
	v.Reload(context.Background())
	require.False(t, v.detail.hostBox.Visible())
}
