package ui

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine"
)

// gpuBackend is the fake backend with the engine's GPU history.
type gpuBackend struct {
	*fakeBackend
	usage map[string][]engine.GPUUsage
}

func (g *gpuBackend) GPUUsage(_ context.Context, runID string) ([]engine.GPUUsage, error) {
	return g.usage[runID], nil
}

func TestRunViewShowsTheGPUSummary(t *testing.T) {
	now := time.Now()
	b := &gpuBackend{fakeBackend: &fakeBackend{runs: []engine.RunInfo{
		{ID: "r2", Template: "t", State: engine.Succeeded, CreatedAt: now, Stages: []engine.StageInfo{{Name: "train",
			State: engine.Succeeded, MaxAttempts: 1, History: []engine.AttemptInfo{{Number: 1,
				GPUs: []string{"GPU-51a1a7ed-0000-4000-8000-000000000000"}}}}}},
		{ID: "r1", Template: "t", State: engine.Succeeded, CreatedAt: now.Add(-time.Hour), Stages: stages(engine.Succeeded)},
	}}, usage: map[string][]engine.GPUUsage{"r2": {{
		UUID: "GPU-51a1a7ed-0000-4000-8000-000000000000", Index: 0, Name: "NVIDIA A100-SXM4-80GB", Simulated: true,
		MemTotalMiB: 81920, Samples: 120, Util: engine.Stat{Mean: 93.2, Peak: 99}, RunMem: engine.Stat{Mean: 12288, Peak: 12288},
		Temp: engine.Stat{Mean: 57, Peak: 72}, Power: engine.Stat{Mean: 375, Peak: 398},
		Throttled: 3, ThrottleReasons: []string{"sw_thermal_slowdown"}, XIDs: []engine.XID{{Code: 79}},
	}}}}
	v, _ := newTestView(t, b.fakeBackend)
	v.backend = b
	v.Reload(context.Background())
	v.list.Select(0)
	v.Reload(context.Background())
	require.True(t, v.detail.gpuBox.Visible())
	line := strings.Join(texts(v.detail.gpus), "\n")
	for _, want := range []string{"GPU 0", "NVIDIA A100-SXM4-80GB (simulated)", "utilisation 93% mean, 99% peak",
		"run's memory 12.0 GiB peak of 80.0 GiB", "57 °C mean, 72 °C peak", "375 W mean, 398 W peak",
		"throttled in 3 of 120 readings (sw_thermal_slowdown)", "XID errors 79"} {
		require.Contains(t, line, want)
	}

	require.Contains(t, v.detail.idLine.Text, "GPU-51a1a7ed… (simulated)", "the run's GPU line says simulated too")

	v.list.Select(1) // a run without GPUs: no section
	v.Reload(context.Background())
	require.False(t, v.detail.gpuBox.Visible())
}

func TestGPUSummaryWithoutRecords(t *testing.T) {
	got := gpuSummary(engine.GPUUsage{UUID: "GPU-x", Index: 2, Util: engine.Stat{Mean: math.NaN(), Peak: math.NaN()}})
	require.Equal(t, "GPU 2 · GPU-x · no GPU record of the run's time yet (a minute is stored when it ends)", got)
	got = gpuSummary(engine.GPUUsage{Index: 1, Name: "T4", Samples: 5, Util: engine.Stat{Mean: math.NaN(), Peak: math.NaN()},
		RunMem: engine.Stat{Mean: 100, Peak: 200}, Temp: engine.Stat{Mean: math.NaN(), Peak: math.NaN()},
		Power: engine.Stat{Mean: math.NaN(), Peak: math.NaN()}})
	require.Equal(t, "GPU 1 · T4 · run's memory 200 MiB peak · not throttled · no XID errors", got,
		"what the GPU did not report is left out, not shown as 0")
}
