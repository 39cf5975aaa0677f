package gpumon

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted is a source that returns the snapshots it is given, in order.
type scripted struct {
	snaps []Snapshot
	err   error
	calls int
}

func (s *scripted) Snapshot(context.Context) (Snapshot, error) {
	if s.err != nil {
		return Snapshot{}, s.err
	}
	snap := s.snaps[s.calls]
	s.calls++
	return snap, nil
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func gpuAt(util, temp, power *float64, mem int64) Snapshot {
	return Snapshot{Source: SourceNVML, GPUs: []GPU{{UUID: "GPU-a", MemUsedMiB: mem, UtilPercent: util, TempC: temp, PowerW: power}}}
}

func TestSamplerAggregatesMinutes(t *testing.T) {
	// Three samples in minute 12:00, one in 12:01 that closes it. The
	// second sample has no utilisation (MIG, say): it is left out of the
	// utilisation statistics, not counted as 0.
	snaps := []Snapshot{
		gpuAt(ptr(20.0), ptr(50.0), ptr(100.0), 1000),
		gpuAt(nil, ptr(70.0), ptr(300.0), 4000),
		gpuAt(ptr(80.0), ptr(60.0), ptr(200.0), 1000),
		gpuAt(ptr(10.0), ptr(40.0), ptr(90.0), 500),
	}
	for i := range snaps {
		snaps[i].At = t0.Add(time.Duration(i) * 25 * time.Second) // 0, 25, 50, 75 s
	}
	var stored [][]Minute
	s := NewSampler(&scripted{snaps: snaps}, SamplerOptions{
		Store: func(_ context.Context, m []Minute) error { stored = append(stored, m); return nil },
	})
	ctx := context.Background()
	for range 4 {
		_, err := s.Sample(ctx)
		require.NoError(t, err)
	}
	s.store(ctx)
	require.Len(t, stored, 1)
	require.Len(t, stored[0], 1)
	// util: min 20, mean (20+80)/2 = 50, max 80; memory mean (1000+4000+1000)/3 = 2000
	got := stored[0][0]
	assert.True(t, math.IsNaN(got.PowerLimitW))
	got.PowerLimitW = 0
	assert.Equal(t, Minute{GPU: "GPU-a", Minute: t0, Samples: 3,
		UtilMin: 20, UtilMean: 50, UtilMax: 80,
		MemUsedMin: 1000, MemUsedMean: 2000, MemUsedMax: 4000,
		TempMean: 60, TempMax: 70, PowerMean: 200, PowerMax: 300}, got)

	s.flush() // shutdown stores the unfinished minute too
	s.store(ctx)
	require.Len(t, stored, 2)
	assert.Equal(t, t0.Add(time.Minute), stored[1][0].Minute)
	assert.Equal(t, 10.0, stored[1][0].UtilMean)
}

func TestSamplerMinuteWithoutUtilisationIsNaN(t *testing.T) {
	src := &scripted{snaps: []Snapshot{gpuAt(nil, nil, nil, 100)}}
	src.snaps[0].At = t0
	var got []Minute
	s := NewSampler(src, SamplerOptions{Store: func(_ context.Context, m []Minute) error { got = m; return nil }})
	_, err := s.Sample(context.Background())
	require.NoError(t, err)
	s.flush()
	s.store(context.Background())
	require.Len(t, got, 1)
	assert.True(t, math.IsNaN(got[0].UtilMean))
	assert.True(t, math.IsNaN(got[0].TempMax))
	assert.True(t, math.IsNaN(got[0].PowerMean))
	assert.Equal(t, int64(100), got[0].MemUsedMax)
}

func TestSamplerRetriesAFailedStore(t *testing.T) {
	src := &scripted{snaps: []Snapshot{gpuAt(ptr(1.0), nil, nil, 1)}}
	src.snaps[0].At = t0
	fail := true
	var got []Minute
	s := NewSampler(src, SamplerOptions{Store: func(_ context.Context, m []Minute) error {
		if fail {
			return errors.New("database is locked")
		}
		got = m
		return nil
	}})
	_, err := s.Sample(context.Background())
	require.NoError(t, err)
	s.flush()
	s.store(context.Background())
	assert.Empty(t, got)
	fail = false
	s.store(context.Background())
	assert.Len(t, got, 1, "the minute kept for the next try")
}

func TestSamplerHistoryRing(t *testing.T) {
	var snaps []Snapshot
	for i := range 5 {
		sn := gpuAt(ptr(float64(i)), nil, nil, int64(i))
		sn.At = t0.Add(time.Duration(i) * time.Second)
		snaps = append(snaps, sn)
	}
	s := NewSampler(&scripted{snaps: snaps}, SamplerOptions{History: 3})
	for range 5 {
		_, err := s.Sample(context.Background())
		require.NoError(t, err)
	}
	h := s.History("GPU-a")
	require.Len(t, h, 3, "the ring keeps the newest 3")
	assert.Equal(t, []int64{2, 3, 4}, []int64{h[0].MemUsedMiB, h[1].MemUsedMiB, h[2].MemUsedMiB})
	assert.True(t, math.IsNaN(float64(h[0].TempC)), "a temperature not reported is NaN")
	assert.Nil(t, s.History("GPU-none"))
}

func TestSamplerDefaultHistoryIsAnHourAt1Hz(t *testing.T) {
	s := NewSampler(Absent{}, SamplerOptions{})
	assert.Equal(t, time.Second, s.opts.Interval)
	assert.Equal(t, 3600, s.opts.History)
}

func TestSamplerSnapshotIsTheLatestSample(t *testing.T) {
	src := &scripted{snaps: []Snapshot{gpuAt(ptr(1.0), nil, nil, 1), gpuAt(ptr(2.0), nil, nil, 2)}}
	var seen []Snapshot
	s := NewSampler(src, SamplerOptions{OnSample: func(s Snapshot) { seen = append(seen, s) }})
	ctx := context.Background()
	first, err := s.Snapshot(ctx) // nothing sampled yet: samples now
	require.NoError(t, err)
	again, err := s.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, 1, src.calls, "reading the picture does not touch the source")
	assert.Equal(t, []Snapshot{first}, seen, "OnSample sees each sample once")
}

func TestSamplerForwardsAssignmentsToASimulatedSource(t *testing.T) {
	sim, _ := newSim(t, "1xT4", 1)
	s := NewSampler(sim, SamplerOptions{})
	var a Assigner = s
	snap, err := s.Sample(context.Background())
	require.NoError(t, err)
	a.Assign(snap.GPUs[0].UUID, "r9/fit", 1234)
	snap, err = s.Sample(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1234), snap.GPUs[0].MemUsedMiB)
	a.Release(snap.GPUs[0].UUID, "r9/fit")
	NewSampler(Absent{}, SamplerOptions{}).Assign("GPU-x", "r", 1) // no-op, no panic
}

// signalling tells the test when its source was first asked.
type signalling struct {
	Source
	asked chan struct{}
}

func (s *signalling) Snapshot(ctx context.Context) (Snapshot, error) {
	select {
	case s.asked <- struct{}{}:
	default:
	}
	return s.Source.Snapshot(ctx)
}

func TestSamplerRunStopsAndStoresOnCancel(t *testing.T) {
	sim, _ := newSim(t, "1xT4", 1)
	src := &signalling{Source: sim, asked: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	stored := make(chan []Minute, 1)
	s := NewSampler(src, SamplerOptions{Interval: time.Hour, Store: func(_ context.Context, m []Minute) error {
		stored <- m
		return nil
	}})
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	<-src.asked // the first sample is taken at once
	cancel()
	require.NoError(t, <-done)
	m := <-stored // the unfinished minute is stored on the way out
	require.Len(t, m, 1)
	assert.Equal(t, sim.gpus[0].uuid, m[0].GPU)
}

func TestSamplerPrunesHourly(t *testing.T) {
	clock := &fakeClock{t: t0}
	var cutoffs []time.Time
	s := NewSampler(Absent{}, SamplerOptions{Now: clock.now, Retention: 24 * time.Hour,
		Prune: func(_ context.Context, before time.Time) error { cutoffs = append(cutoffs, before); return nil }})
	ctx := context.Background()
	for _, step := range []time.Duration{0, 30 * time.Minute, 30 * time.Minute, time.Minute} { // t = 0, 30 min, 1 h, 1 h 1 min
		clock.t = clock.t.Add(step)
		s.prune(ctx)
	}
	assert.Equal(t, []time.Time{t0.Add(-24 * time.Hour), t0.Add(time.Hour - 24*time.Hour)}, cutoffs,
		"at start, then not before an hour has passed")
}

// A minute keeps what a report needs: the simulated mark of its source,
// the GPU's identity, how many readings were throttled by a limit (not by
// idleness) and why, the XIDs, and each run's memory.
func TestSamplerMinuteRecord(t *testing.T) {
	owner := func(run, stage string) *Owner { return &Owner{RunID: run, Stage: stage} }
	gpu := func(mem1, mem2 int64, reasons []string, xids []uint64) GPU {
		g := GPU{UUID: "GPU-s", Index: 3, Name: "NVIDIA H100 80GB HBM3", MemTotalMiB: 81559, MemUsedMiB: mem1 + mem2,
			UtilPercent: ptr(90.0), TempC: ptr(80.0), PowerW: ptr(600.0), PowerLimitW: ptr(700.0),
			ThrottleReasons: reasons, XIDs: xids,
			Processes: []Process{{PID: 10, MemMiB: mem1, Owner: owner("r1", "train")}, {PID: 11, MemMiB: 7}}}
		if mem2 > 0 {
			g.Processes = append(g.Processes, Process{PID: 12, MemMiB: mem2, Owner: owner("r2", "eval")},
				Process{PID: 13, MemMiB: mem2, Owner: owner("r2", "eval")})
		}
		return g
	}
	snaps := []Snapshot{
		{Source: SourceSimulated, Simulated: true, At: t0, GPUs: []GPU{gpu(1000, 0, []string{"gpu_idle"}, nil)}},
		{Source: SourceSimulated, Simulated: true, At: t0.Add(10 * time.Second),
			GPUs: []GPU{gpu(3000, 100, []string{"sw_thermal_slowdown", "sw_power_cap"}, []uint64{13})}},
		{Source: SourceSimulated, Simulated: true, At: t0.Add(20 * time.Second),
			GPUs: []GPU{gpu(2000, 300, []string{"sw_power_cap"}, []uint64{31, 79})}},
	}
	var got []Minute
	s := NewSampler(&scripted{snaps: snaps}, SamplerOptions{Store: func(_ context.Context, m []Minute) error { got = m; return nil }})
	for range snaps {
		_, err := s.Sample(context.Background())
		require.NoError(t, err)
	}
	s.flush()
	s.store(context.Background())
	require.Len(t, got, 1)
	m := got[0]
	assert.True(t, m.Simulated)
	assert.Equal(t, 3, m.Samples)
	assert.Equal(t, 3, m.Index)
	assert.Equal(t, "NVIDIA H100 80GB HBM3", m.Name)
	assert.Equal(t, int64(81559), m.MemTotalMiB)
	assert.Equal(t, 700.0, m.PowerLimitW)
	assert.Equal(t, 2, m.Throttled, "the idle reading is not throttled")
	assert.Equal(t, []string{"sw_power_cap", "sw_thermal_slowdown"}, m.ThrottleReasons)
	assert.Equal(t, []uint64{13, 31, 79}, m.XIDs)
	// r1: 1000, 3000, 2000 → mean 2000, max 3000; r2 (two processes) held
	// 200 and 600 in the two readings it was there for → mean 400, max 600.
	assert.Equal(t, []OwnerMinute{
		{Owner: Owner{RunID: "r1", Stage: "train"}, Samples: 3, MemMeanMiB: 2000, MemMaxMiB: 3000},
		{Owner: Owner{RunID: "r2", Stage: "eval"}, Samples: 2, MemMeanMiB: 400, MemMaxMiB: 600},
	}, m.Owners)
}

// A simulated source's records are all marked simulated; the simulated
// holders are owned processes, so their memory is counted per run.
func TestSamplerMarksSimulatedMinutes(t *testing.T) {
	now := t0
	sim, err := NewSimulated("2xA100-80GB", SimOptions{Now: func() time.Time { return now }})
	require.NoError(t, err)
	var got []Minute
	s := NewSampler(sim, SamplerOptions{Store: func(_ context.Context, m []Minute) error { got = append(got, m...); return nil }})
	snap, err := s.Sample(context.Background())
	require.NoError(t, err)
	s.Assign(snap.GPUs[1].UUID, "r1/train", 16384)
	for range 5 {
		now = now.Add(time.Second)
		_, err := s.Sample(context.Background())
		require.NoError(t, err)
	}
	s.flush()
	s.store(context.Background())
	require.Len(t, got, 2)
	byGPU := map[string]Minute{}
	for _, m := range got {
		assert.True(t, m.Simulated, m.GPU)
		byGPU[m.GPU] = m
	}
	assert.Empty(t, byGPU[snap.GPUs[0].UUID].Owners)
	held := byGPU[snap.GPUs[1].UUID]
	require.Len(t, held.Owners, 1)
	assert.Equal(t, int64(16384), held.Owners[0].MemMaxMiB)
	assert.Equal(t, "r1", held.Owners[0].RunID)
}
