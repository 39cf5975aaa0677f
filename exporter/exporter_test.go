package exporter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/gpumon"
	"niuma/metrics"
	"niuma/shepherd"
)

// fakeSource is a Source with canned answers; stages and events are kept
// in order, as storage keeps them, and read from the cursor.
type fakeSource struct {
	mu     sync.Mutex
	snap   gpumon.Snapshot
	queue  []engine.Waiting
	runs   map[engine.State]int
	stages []engine.FinishedStage
	events []string // kinds; the id is the index + 1
	points uint64
	usage  []engine.StageUsage
	err    error
}

func (f *fakeSource) GPUs(context.Context) (gpumon.Snapshot, error) { return f.snap, f.err }
func (f *fakeSource) Queue(context.Context) ([]engine.Waiting, error) {
	return f.queue, nil
}
func (f *fakeSource) RunCounts(context.Context) (map[engine.State]int, error) { return f.runs, nil }
func (f *fakeSource) StagesFinishedAfter(_ context.Context, after time.Time, limit int) ([]engine.FinishedStage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []engine.FinishedStage
	for _, s := range f.stages {
		if s.FinishedAt.After(after) && len(out) < limit {
			out = append(out, s)
		}
	}
	return out, nil
}
func (f *fakeSource) EventKindsAfter(_ context.Context, after int64) (map[string]int, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, last := map[string]int{}, after
	for i := int(after); i < len(f.events); i++ {
		out[f.events[i]]++
		last = int64(i + 1)
	}
	return out, last, nil
}
func (f *fakeSource) Ingested() metrics.WriterStats {
	return metrics.WriterStats{Points: f.points, Failed: 2, Dropped: 1}
}

func (f *fakeSource) Usage() []engine.StageUsage { return f.usage }

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func sampleSource() *fakeSource {
	return &fakeSource{
		snap: gpumon.Snapshot{Source: gpumon.SourceSimulated, Simulated: true, GPUs: []gpumon.GPU{
			{Index: 0, UUID: "GPU-51a1a7ed-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3",
				MemTotalMiB: 81559, MemUsedMiB: 16384, UtilPercent: ptr(87.0), TempC: ptr(71.0), PowerW: ptr(612.5),
				PowerLimitW: ptr(700.0), Healthy: true, ThrottleReasons: []string{"sw_power_cap"},
				Processes: []gpumon.Process{{MemMiB: 16384, Owner: &gpumon.Owner{RunID: "r1", Stage: "train"}}}},
			{Index: 1, UUID: "GPU-51a1a7ed-0000-4000-8000-000000000001", Name: "NVIDIA H100 80GB HBM3",
				MemTotalMiB: 81559, Healthy: true, ThrottleReasons: []string{"gpu_idle"}}, // no utilisation, temperature or power reported
		}},
		queue: []engine.Waiting{
			{RunID: "r2", Stage: "train", Code: "gpu_memory", Since: time.Now().Add(-90 * time.Second)},
			{RunID: "r3", Stage: "train", Code: "gpu_memory", Since: time.Now().Add(-30 * time.Second)},
			{RunID: "r4", Stage: "eval", Code: "needs", Since: time.Now().Add(-10 * time.Second)},
			{RunID: "r5", Stage: "x", Code: "something new", Since: time.Now()},
			{RunID: "r6", Stage: "train", Code: engine.WaitPreempted, Since: time.Now().Add(-5 * time.Second)},
			{RunID: "r7", Stage: "prep", Code: string(shepherd.WaitCPU), Since: time.Now().Add(-5 * time.Second)},
		},
		runs:   map[engine.State]int{engine.Running: 1, engine.Queued: 4, engine.Succeeded: 10},
		stages: []engine.FinishedStage{{Template: "digits-mlp", Stage: "train", State: engine.Succeeded, FinishedAt: t0, Duration: 30 * time.Second}},
		events: []string{"nan", "action_retry", "divergence", "tensorboard_damaged", "nan"},
		points: 4096,
	}
}

func scrape(t *testing.T, x *Exporter) string {
	t.Helper()
	rec := &strings.Builder{}
	srv := x.Handler()
	req, _ := http.NewRequest("GET", "/metrics", nil)
	w := &recorder{header: http.Header{}, body: rec}
	srv.ServeHTTP(w, req)
	require.Equal(t, 200, w.code, rec.String())
	return rec.String()
}

type recorder struct {
	header http.Header
	body   io.Writer
	code   int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { r.setCode(200); return r.body.Write(b) }
func (r *recorder) WriteHeader(c int)           { r.setCode(c) }
func (r *recorder) setCode(c int) {
	if r.code == 0 {
		r.code = c
	}
}

func TestExposition(t *testing.T) {
	src := sampleSource()
	x := New(src, Options{})
	out := scrape(t, x)
	gpu0 := `gpu="0",model="NVIDIA H100 80GB HBM3",simulated="true",uuid="GPU-51a1a7ed-0000-4000-8000-000000000000"`
	for _, want := range []string{
		`niuma_gpus{source="simulated"} 2`,
		`niuma_gpu_info{gpu="0",model="NVIDIA H100 80GB HBM3",simulated="true",source="simulated",uuid="GPU-51a1a7ed-0000-4000-8000-000000000000"} 1`,
		`niuma_gpu_utilization_ratio{` + gpu0 + `} 0.87`,
		`niuma_gpu_memory_used_bytes{` + gpu0 + `} 1.7179869184e+10`,
		`niuma_gpu_run_memory_bytes{` + gpu0 + `} 1.7179869184e+10`,
		`niuma_gpu_temperature_celsius{` + gpu0 + `} 71`,
		`niuma_gpu_power_watts{` + gpu0 + `} 612.5`,
		`niuma_gpu_throttled{` + gpu0 + `} 1`,
		`niuma_gpu_throttled{gpu="1",`,
		`niuma_queue_stages{reason="gpu_memory"} 2`,
		`niuma_queue_stages{reason="needs"} 1`,
		`niuma_queue_stages{reason="scheduling"} 1`, // an unknown code counts as not yet scheduled
		`niuma_queue_stages{reason="never_fits"} 0`,
		`niuma_queue_stages{reason="preempted"} 1`, // the engine's code for a preempted stage, not "scheduling"
		`niuma_queue_stages{reason="cpu"} 1`,
		`niuma_queue_stages{reason="host_memory"} 0`,
		`niuma_runs{state="queued"} 4`,
		`niuma_runs{state="failed"} 0`,
		`niuma_metric_points_ingested_total 4096`,
		`niuma_metric_points_lost_total 3`,
		`niuma_anomalies_total{kind="nan"} 2`,
		`niuma_anomalies_total{kind="divergence"} 1`,
		`niuma_anomalies_total{kind="queue_stuck"} 0`,
		`niuma_sentinel_actions_total{action="retry"} 1`,
		`niuma_stage_duration_seconds_count{stage="train",state="succeeded",template="digits-mlp"} 1`,
		`niuma_stage_duration_seconds_bucket{stage="train",state="succeeded",template="digits-mlp",le="64"} 1`,
		`go_goroutines`, `process_resident_memory_bytes`,
	} {
		require.Contains(t, out, want)
	}
	for _, absent := range []string{
		`niuma_gpu_utilization_ratio{gpu="1"`, // not reported: no series, not 0
		`niuma_gpu_temperature_celsius{gpu="1"`,
		`niuma_queue_stage_wait_seconds`, // no run IDs unless asked
		`tensorboard_damaged`,
		`r2`,
	} {
		require.NotContains(t, out, absent)
	}
	require.Regexp(t, `niuma_queue_longest_wait_seconds\{reason="gpu_memory"\} (8[89]|9[0-2])(\.\d+)?\n`, out)

	problems, err := testutil.GatherAndLint(x.Registry())
	require.NoError(t, err)
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "niuma_") {
			t.Errorf("naming: %s: %s", p.Metric, p.Text)
		}
	}
}

// Counters count each stage and event once, across scrapes, and keep
// counting what is recorded between them.
func TestCountersCountOnce(t *testing.T) {
	src := sampleSource()
	x := New(src, Options{})
	scrape(t, x)
	out := scrape(t, x)
	require.Contains(t, out, `niuma_anomalies_total{kind="nan"} 2`)
	require.Contains(t, out, `niuma_stage_duration_seconds_count{stage="train",state="succeeded",template="digits-mlp"} 1`)
	src.mu.Lock()
	src.events = append(src.events, "nan", "action_stop")
	src.stages = append(src.stages, engine.FinishedStage{Template: "digits-mlp", Stage: "train", State: engine.Failed,
		FinishedAt: t0.Add(time.Minute), Duration: 5 * time.Second},
		engine.FinishedStage{Template: "digits-mlp", Stage: "validate", State: engine.Cancelled, FinishedAt: t0.Add(2 * time.Minute)})
	src.mu.Unlock()
	out = scrape(t, x)
	require.Contains(t, out, `niuma_anomalies_total{kind="nan"} 3`)
	require.Contains(t, out, `niuma_sentinel_actions_total{action="stop"} 1`)
	require.Contains(t, out, `niuma_stage_duration_seconds_count{stage="train",state="failed",template="digits-mlp"} 1`)
	require.NotContains(t, out, `stage="validate"`, "a stage that never started has no duration")
}

func TestLabelsStayBounded(t *testing.T) {
	src := sampleSource()
	src.stages = nil
	for i := range maxStageSeries + 50 {
		src.stages = append(src.stages, engine.FinishedStage{Template: "t", Stage: "s" + string(rune('a'+i%26)) + time.Duration(i).String(),
			State: engine.Succeeded, FinishedAt: t0.Add(time.Duration(i) * time.Second), Duration: time.Second})
	}
	out := scrape(t, New(src, Options{}))
	require.Equal(t, maxStageSeries+1, strings.Count(out, "niuma_stage_duration_seconds_count{"), "the pairs past the bound share one series")
	require.Contains(t, out, `niuma_stage_duration_seconds_count{stage="other",state="succeeded",template="other"} 50`)
}

func TestPerRunSeriesOnlyWhenAsked(t *testing.T) {
	out := scrape(t, New(sampleSource(), Options{PerRun: true}))
	require.Contains(t, out, `niuma_queue_stage_wait_seconds{reason="gpu_memory",run="r2",stage="train"}`)
}

func TestAReadFailureIsCountedNotFatal(t *testing.T) {
	src := sampleSource()
	src.err = errors.New("NVML: GPU is lost")
	out := scrape(t, New(src, Options{}))
	require.Contains(t, out, `niuma_exporter_read_errors_total{what="gpus"} 1`)
	require.Contains(t, out, `niuma_runs{state="succeeded"} 10`, "the rest is still served")
	require.NotContains(t, out, "niuma_gpu_info")
}

// What running stages use of the host: the sum always, each stage's only
// when per-run series are asked for.
func TestStageUsage(t *testing.T) {
	src := sampleSource()
	src.usage = []engine.StageUsage{
		{RunID: "r1", Stage: "train", Attempt: 1, Usage: executor.Usage{MemoryBytes: 3 << 30, PeakBytes: 4 << 30, LimitBytes: 8 << 30, CPUSeconds: 120.5}},
		{RunID: "r2", Stage: "eval", Attempt: 2, Usage: executor.Usage{MemoryBytes: 1 << 30, PeakBytes: 1 << 30, CPUSeconds: 3}},
	}
	out := scrape(t, New(src, Options{}))
	require.Contains(t, out, "niuma_stages_memory_bytes 4.294967296e+09")
	require.Contains(t, out, "niuma_stages_metered 2")
	require.NotContains(t, out, "niuma_stage_memory_bytes{")
	out = scrape(t, New(src, Options{PerRun: true}))
	require.Contains(t, out, `niuma_stage_memory_bytes{run="r1",stage="train"} 3.221225472e+09`)
	require.Contains(t, out, `niuma_stage_memory_peak_bytes{run="r1",stage="train"} 4.294967296e+09`)
	require.Contains(t, out, `niuma_stage_memory_limit_bytes{run="r1",stage="train"} 8.589934592e+09`)
	require.NotContains(t, out, `niuma_stage_memory_limit_bytes{run="r2"`, "no limit, no series")
	require.Contains(t, out, `niuma_stage_cpu_seconds_total{run="r1",stage="train"} 120.5`)
}
