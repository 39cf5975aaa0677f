package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/gpumon"
	"niuma/storage"
)

// The arithmetic of a run's GPU summary over stored records: only the
// minutes its attempts held the GPU count, means weigh each minute by its
// readings, the run's memory is its own processes', and the GPU's
// anomalies of that time come along.
func TestGPUUsageSummarizesTheRunsMinutes(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	ctx := context.Background()
	m0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	run := storage.Run{ID: "20261129-120000-abcdef", State: storage.RunSucceeded, CreatedAt: m0}
	require.NoError(t, h.store.CreateRun(ctx, run, []storage.Stage{
		{RunID: run.ID, Name: "prep", Position: 0, State: storage.StageSucceeded},
		{RunID: run.ID, Name: "train", Position: 1, GPUs: 1, State: storage.StageSucceeded}}))
	// train held GPU-a from 12:01:10 to 12:03:20 (attempt 1 failed at
	// 12:02:00, attempt 2 from 12:02:05); minutes 12:01, 12:02 and 12:03.
	for _, a := range []storage.Attempt{
		{RunID: run.ID, Stage: "train", Number: 1, State: "failed", GPUs: []string{"GPU-a"},
			StartedAt: m0.Add(70 * time.Second), FinishedAt: m0.Add(120 * time.Second)},
		{RunID: run.ID, Stage: "train", Number: 2, State: "succeeded", GPUs: []string{"GPU-a"},
			StartedAt: m0.Add(125 * time.Second), FinishedAt: m0.Add(200 * time.Second)},
	} {
		require.NoError(t, h.store.CreateAttempt(ctx, a))
	}
	minute := func(i int, util, temp, power float64, samples int, runMem int64, throttled int, xids ...uint64) storage.GPUSample {
		s := storage.GPUSample{GPU: "GPU-a", Minute: m0.Add(time.Duration(i) * time.Minute), Simulated: true, Samples: samples,
			UtilMean: util, UtilMax: util + 5, TempMean: temp, TempMax: temp + 2, PowerMean: power, PowerMax: power + 50,
			MemUsedMax: runMem + 500, Throttled: throttled, XIDs: xids}
		if throttled > 0 {
			s.ThrottleReasons = []string{"sw_thermal_slowdown"}
		}
		if runMem > 0 {
			s.Runs = []storage.GPURunSample{{RunID: run.ID, Stage: "train", Samples: samples, MemMeanMiB: runMem - 100, MemMaxMiB: runMem},
				{RunID: "someone-else", Stage: "train", Samples: samples, MemMeanMiB: 9000, MemMaxMiB: 9000}}
		}
		return s
	}
	require.NoError(t, h.store.AddGPUSamples(ctx, []storage.GPUSample{
		minute(0, 99, 90, 700, 60, 0, 60),        // before the run: left out
		minute(1, 50, 60, 300, 60, 4000, 0),      // 12:01
		minute(2, 80, 70, 500, 20, 8000, 10, 13), // 12:02, only 20 readings
		minute(3, 90, 80, 600, 60, 6000, 0),      // 12:03
		minute(4, 1, 40, 100, 60, 0, 0),          // after: left out
	}))
	require.NoError(t, h.store.RecordGPUs(ctx, []storage.GPUInfo{{UUID: "GPU-a", Index: 1, Name: "NVIDIA A100-SXM4-80GB",
		Simulated: true, MemTotalMiB: 81920, PowerLimitW: 400, LastSeen: m0}}))
	_, err := h.store.AddEvent(ctx, storage.Event{GPU: "GPU-a", Kind: "overheating", Severity: "warning",
		Message: "hot", At: m0.Add(150 * time.Second)})
	require.NoError(t, err)
	_, err = h.store.AddEvent(ctx, storage.Event{GPU: "GPU-a", Kind: "overheating", Severity: "warning",
		Message: "hot before the run", At: m0.Add(10 * time.Second)})
	require.NoError(t, err)

	got, err := e.GPUUsage(ctx, "abcdef")
	require.NoError(t, err)
	require.Len(t, got, 1)
	u := got[0]
	require.Equal(t, "GPU-a", u.UUID)
	require.Equal(t, 1, u.Index)
	require.Equal(t, "NVIDIA A100-SXM4-80GB", u.Name)
	require.True(t, u.Simulated)
	require.Equal(t, int64(81920), u.MemTotalMiB)
	require.Equal(t, []string{"train"}, u.Stages)
	require.Equal(t, m0.Add(70*time.Second), u.From)
	require.Equal(t, m0.Add(200*time.Second), u.To)
	require.Len(t, u.Minutes, 3)
	require.Equal(t, 140, u.Samples)
	// util mean: (50·60 + 80·20 + 90·60) / 140 = 10000/140 ≈ 71.43; peak 95
	require.InDelta(t, 10000.0/140, u.Util.Mean, 1e-9)
	require.Equal(t, 95.0, u.Util.Peak)
	// the run's memory: means 3900, 7900, 5900 weighted (60, 20, 60) → 5328.57; peak 8000
	require.InDelta(t, (3900.0*60+7900*20+5900*60)/140, u.RunMem.Mean, 1e-9)
	require.Equal(t, 8000.0, u.RunMem.Peak, "its own processes, not someone else's 9000")
	require.Equal(t, 82.0, u.Temp.Peak)
	require.Equal(t, 650.0, u.Power.Peak)
	require.Equal(t, 10, u.Throttled)
	require.Equal(t, 1, u.ThrottledMinutes)
	require.Equal(t, []string{"sw_thermal_slowdown"}, u.ThrottleReasons)
	require.Equal(t, []XID{{At: m0.Add(2 * time.Minute), Code: 13}}, u.XIDs)
	require.Len(t, u.Anomalies, 1)
	require.Equal(t, "hot", u.Anomalies[0].Message)
}

func TestGPUUsageOfARunWithoutGPUsOrRecords(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	ctx := context.Background()
	now := time.Now()
	require.NoError(t, h.store.CreateRun(ctx, storage.Run{ID: "cpu", State: storage.RunSucceeded},
		[]storage.Stage{{RunID: "cpu", Name: "s", State: storage.StageSucceeded}}))
	require.NoError(t, h.store.CreateAttempt(ctx, storage.Attempt{RunID: "cpu", Stage: "s", Number: 1, State: "succeeded",
		StartedAt: now, FinishedAt: now}))
	got, err := e.GPUUsage(ctx, "cpu")
	require.NoError(t, err)
	require.Empty(t, got)

	require.NoError(t, h.store.CreateRun(ctx, storage.Run{ID: "gone", State: storage.RunSucceeded},
		[]storage.Stage{{RunID: "gone", Name: "s", GPUs: 1, State: storage.StageSucceeded}}))
	require.NoError(t, h.store.CreateAttempt(ctx, storage.Attempt{RunID: "gone", Stage: "s", Number: 1, State: "succeeded",
		GPUs: []string{"GPU-x"}, StartedAt: now.Add(-time.Hour), FinishedAt: now.Add(-59 * time.Minute)}))
	got, err = e.GPUUsage(ctx, "gone")
	require.NoError(t, err)
	require.Len(t, got, 1, "the GPU is listed even when its records are gone")
	require.Zero(t, got[0].Samples)
	require.True(t, math.IsNaN(got[0].Util.Mean))
}

// The whole path on simulated GPUs: a stage placed on a GPU, the sampler
// storing its minutes through RecordGPUMinutes, the engine reading them
// back: every record says simulated, and the run's memory is what it was
// given.
func TestGPUUsageOfASimulatedRun(t *testing.T) {
	h := newHarness(t)
	sim, err := gpumon.NewSimulated("2xA100-80GB", gpumon.SimOptions{Seed: 3})
	require.NoError(t, err)
	sampler := gpumon.NewSampler(sim, gpumon.SamplerOptions{Interval: 50 * time.Millisecond,
		Store: func(ctx context.Context, ms []gpumon.Minute) error { return RecordGPUMinutes(ctx, h.store, ms) }})
	e := h.engine(func(o *Options) { o.GPUs = sampler })
	sctx, stopSampler := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { defer close(sampled); _ = sampler.Run(sctx) }()
	h.drive(e)
	tm := parse(t, `
name: gpu
stages:
  - name: train
    gpus: 1
    gpu_memory: 20GiB
    command: [sh, -c, 'sleep 1']
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	stopSampler() // stores the unfinished minute
	<-sampled

	got, err := e.GPUUsage(context.Background(), info.ID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	u := got[0]
	require.Equal(t, r.Stages[0].History[0].GPUs[0], u.UUID)
	require.True(t, u.Simulated, "a simulated GPU is labelled so in its records")
	require.Equal(t, "NVIDIA A100-SXM4-80GB", u.Name)
	require.Positive(t, u.Samples)
	require.Equal(t, float64(20*1024), u.RunMem.Peak, "the run's processes held what it was given")
	require.False(t, math.IsNaN(u.Power.Mean))
	rows, err := h.store.GPUSamples(context.Background(), "", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	for _, s := range rows {
		require.True(t, s.Simulated, "every stored record of a simulated GPU says so: %s %v", s.GPU, s.Minute)
	}
}
