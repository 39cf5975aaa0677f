package shepherd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/shepherd/predict"
)

func TestBuild(t *testing.T) {
	ready := t0.Add(time.Hour)
	pred := predict.Estimate{Median: 20 * time.Minute, Low: 10 * time.Minute, High: 50 * time.Minute, N: 9}
	base := Need{ID: "r1/train", GPUs: 2, GPUMemMiB: 20 * gib, CPUMilli: 4000, MemMiB: 16 * gib, Priority: 1,
		Spot: true, Share: true, ReadySince: ready}
	with := func(f func(*Need)) Need { n := base; f(&n); return n }
	tests := []struct {
		name      string
		need      Need
		est, high time.Duration
	}{
		{"no estimate, no history: unknown", base, 0, 0},
		{"the predictor's median, bounded by its 90th percentile", with(func(n *Need) { n.Predicted = pred }), 20 * time.Minute, 50 * time.Minute},
		{"the user's estimate overrides the predictor", with(func(n *Need) { n.Predicted, n.Estimate = pred, 2*time.Hour }), 2 * time.Hour, 2 * time.Hour},
		// 2 h estimated, 30 min already run before a preemption: 1.5 h left.
		{"earlier attempts are taken off", with(func(n *Need) { n.Estimate, n.Attained = 2*time.Hour, 30*time.Minute }), 90 * time.Minute, 90 * time.Minute},
		// 20 min predicted (50 min high), 40 min run: past the median, 10 min under the bound.
		{"past the estimate: as long again as it ran", with(func(n *Need) { n.Predicted, n.Attained = pred, 40*time.Minute }), 40 * time.Minute, 10 * time.Minute},
		{"past the bound too: no bound", with(func(n *Need) { n.Predicted, n.Attained = pred, time.Hour }), time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Build(tt.need)
			require.Equal(t, Request{ID: "r1/train", GPUs: 2, MemPerGPUMiB: 20 * gib, CPUMilli: 4000, MemMiB: 16 * gib, Priority: 1,
				Submit: ready, Preemptible: true, Shareable: true, Estimate: tt.est, EstimateHigh: tt.high, Attained: tt.need.Attained}, r)
		})
	}
	require.Equal(t, Request{}, Build(Need{GPUs: -1, GPUMemMiB: -5, CPUMilli: -1, MemMiB: -1, Attained: -time.Second}), "negative needs are none")
}

func TestPlacementRecordsTheRequest(t *testing.T) {
	r := Build(Need{ID: "a", GPUs: 1, GPUMemMiB: 10 * gib, CPUMilli: 2000, MemMiB: 4 * gib, Priority: 2, Spot: true,
		Estimate: time.Hour, Attained: 10 * time.Minute, ReadySince: t0})
	run := r.Placement([]GPU{{UUID: "G3"}}, "ws", t0.Add(time.Minute))
	require.Equal(t, Running{ID: "a", GPUs: []string{"G3"}, Host: "ws", MemPerGPUMiB: 10 * gib, CPUMilli: 2000, MemMiB: 4 * gib,
		Priority: 2, Preemptible: true, Start: t0.Add(time.Minute), Estimate: 50 * time.Minute, Attained: 10 * time.Minute}, run)
}
