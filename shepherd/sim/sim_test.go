package sim

import (
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/shepherd"
	"niuma/shepherd/predict"
)

func philly(t *testing.T, seed uint64) []Job {
	f, err := os.Open("testdata/philly-2017-10-20.csv")
	require.NoError(t, err)
	defer f.Close()
	jobs, err := LoadPhilly(f, 8, seed)
	require.NoError(t, err)
	return jobs
}

func TestLoadPhilly(t *testing.T) {
	jobs := philly(t, 1)
	// 3,712 rows on 2017-10-20, all with 1–8 GPUs and a positive duration
	// except those dropped here.
	require.Greater(t, len(jobs), 3500)
	require.Equal(t, 0.0, jobs[0].Submit)
	classes := map[int]int{}
	for i, j := range jobs {
		require.GreaterOrEqual(t, j.GPUs, 1)
		require.LessOrEqual(t, j.GPUs, 8)
		if i > 0 {
			require.GreaterOrEqual(t, j.Submit, jobs[i-1].Submit)
		}
		if j.GPUs > 1 {
			require.Equal(t, 1000, j.MemMilli, "multi-GPU jobs take whole GPUs")
		}
		require.Equal(t, j.Priority == 0, j.Preemptible)
		require.Equal(t, j.MemMilli < 1000, j.Shareable)
		classes[j.Priority]++
	}
	// 30% / 50% / 20% by construction, within a few points on 3.7k jobs.
	require.InDelta(t, 0.3, float64(classes[0])/float64(len(jobs)), 0.03)
	require.InDelta(t, 0.5, float64(classes[1])/float64(len(jobs)), 0.03)
	require.Equal(t, jobs, philly(t, 1), "the same seed derives the same jobs")
	require.NotEqual(t, jobs, philly(t, 2))
}

func TestLoadRefusesAnotherFormat(t *testing.T) {
	f, err := os.Open("testdata/pai2023-pods-1000.csv")
	require.NoError(t, err)
	defer f.Close()
	_, err = LoadPhilly(f, 8, 1)
	require.ErrorContains(t, err, `no column "timestamp"`)
	require.ErrorContains(t, err, "--format")
}

func TestRescale(t *testing.T) {
	// Work 2×100 + 1×300 = 500 GPU-s on 2 GPUs at load 0.5: span 500/(2·0.5) = 500 s;
	// the trace's span is 10 s, so gaps stretch ×50.
	jobs := []Job{{Submit: 5, Duration: 100, GPUs: 2}, {Submit: 15, Duration: 300, GPUs: 1}}
	out := Rescale(jobs, 0.5, 2)
	require.Equal(t, []float64{0, 500}, []float64{out[0].Submit, out[1].Submit})
	require.Equal(t, 5.0, jobs[0].Submit, "the input is left alone")
}

func TestWindow(t *testing.T) {
	jobs := []Job{{ID: "a", Submit: 0.5 * 86400}, {ID: "b", Submit: 1.5 * 86400}, {ID: "c", Submit: 3 * 86400}}
	w := Window(jobs, 1, 2)
	require.Len(t, w, 1)
	require.Equal(t, "b", w[0].ID)
	require.Equal(t, 0.5*86400, w[0].Submit)
}

func TestParseGPUs(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		mib  int64
		fail bool
	}{
		{"8x80GiB", 8, 80 * 1024, false},
		{"4x24gib", 4, 24 * 1024, false},
		{"2x40960MiB", 2, 40960, false},
		{"8x80", 0, 0, true},
		{"0x80GiB", 0, 0, true},
		{"8x80TB", 0, 0, true},
	} {
		n, mib, err := ParseGPUs(tt.in)
		require.Equal(t, tt.fail, err != nil, tt.in)
		require.Equal(t, tt.n, n, tt.in)
		require.Equal(t, tt.mib, mib, tt.in)
	}
}

// TestReplayArithmetic checks the event loop on jobs small enough to work
// out by hand, on one 80 GiB GPU.
func TestReplayArithmetic(t *testing.T) {
	one := Config{GPUs: 1, GPUMiB: 80 * 1024, Policy: shepherd.BestFit(), Alpha: 0.5, PreemptLossSec: 300}
	t.Run("two whole-GPU jobs run one after the other", func(t *testing.T) {
		// a: 0–100 s, JCT 100; b arrives at 10, starts at 100, ends at 300: JCT 290, wait 90.
		r := Replay([]Job{{ID: "a", Duration: 100, GPUs: 1, MemMilli: 1000, Priority: 1},
			{ID: "b", Submit: 10, Duration: 200, GPUs: 1, MemMilli: 1000, Priority: 1}}, one)
		require.Equal(t, 2, r.Jobs)
		require.InDelta(t, (100+290)/2.0, r.AvgJCT, 1e-6)
		require.InDelta(t, 45, r.AvgWait, 1e-6)
		require.InDelta(t, 300, r.Makespan, 1e-6)
		require.InDelta(t, 1, r.GPUUtil, 1e-9)
	})
	t.Run("co-location slows both", func(t *testing.T) {
		// Two 40 GiB shareable jobs of 100 s share the GPU, each at 1/(1+0.5) = 2/3
		// speed: both end at 150 s.
		r := Replay([]Job{{ID: "a", Duration: 100, GPUs: 1, MemMilli: 500, Shareable: true},
			{ID: "b", Duration: 100, GPUs: 1, MemMilli: 500, Shareable: true}}, one)
		require.InDelta(t, 150, r.AvgJCT, 1e-6)
		require.InDelta(t, 0, r.AvgWait, 1e-6)
	})
	t.Run("herd preempts a spot job and it resumes", func(t *testing.T) {
		// spot (prio 0) runs from 0; urgent arrives at 3600 (spot has run an hour,
		// past the 30 min grace) and takes the GPU; spot loses 300 s of work and
		// resumes at 3600+600 = 4200 with 10000-3600+300 = 6700 s left: ends at 10900.
		cfg := one
		cfg.Policy = shepherd.Herd(shepherd.HerdOptions{})
		cfg.Estimates = Noisy(0) // users' estimates, exact
		r := Replay([]Job{{ID: "spot", Duration: 10000, GPUs: 1, MemMilli: 1000, Preemptible: true},
			{ID: "urgent", Submit: 3600, Duration: 600, GPUs: 1, MemMilli: 1000, Priority: 2}}, cfg)
		require.Equal(t, 1, r.Preemptions)
		require.InDelta(t, 600, r.Classes[1].AvgJCT, 1e-6)
		require.InDelta(t, 10900, r.Classes[0].AvgJCT, 1e-6)
	})
	t.Run("a job too big for the machine is refused, not waited for", func(t *testing.T) {
		r := Replay([]Job{{ID: "big", Duration: 10, GPUs: 2, MemMilli: 1000}, {ID: "ok", Duration: 10, GPUs: 1, MemMilli: 1000}}, one)
		require.Equal(t, 1, r.Refused)
		require.Equal(t, 1, r.Jobs)
	})
}

// TestReplayTestdata replays the committed day of Philly under every
// policy: every job finishes exactly once, nothing is over-committed (the
// replay panics if it is), and the figures are sane.
func TestReplayTestdata(t *testing.T) {
	jobs := Rescale(philly(t, 1), 0.8, 8)
	for _, name := range shepherd.Policies {
		cfg := DefaultConfig()
		cfg.Policy, _ = shepherd.ByName(name)
		r := Replay(jobs, cfg)
		require.Equal(t, len(jobs), r.Jobs+r.Refused, name)
		require.Zero(t, r.Refused, name)
		require.GreaterOrEqual(t, r.P95JCT, r.P50JCT, name)
		require.GreaterOrEqual(t, r.AvgJCT, r.AvgWait, name)
		require.Greater(t, r.GPUUtil, 0.3, name)
		require.LessOrEqual(t, r.GPUUtil, 1.0, name)
		require.False(t, math.IsNaN(r.BoundedSlowdown), name)
		require.Len(t, r.Classes, 3, name)
		require.Contains(t, r.String(), "policy "+name)
	}
}

func TestPackTestdata(t *testing.T) {
	f, err := os.Open("testdata/pai2023-pods-1000.csv")
	require.NoError(t, err)
	defer f.Close()
	pods, err := LoadPAI(f, 8)
	require.NoError(t, err)
	require.NotEmpty(t, pods)
	r := Pack(pods, Workstation(8, 80*1024, 0), shepherd.BestFit())
	// 8 GPUs hold at most 8 whole-GPU pods' worth: the first refusal comes early.
	require.Positive(t, r.Placed)
	require.LessOrEqual(t, r.UsedGiB, 8*80.0)
	require.InDelta(t, 8*80-r.UsedGiB, r.FreeGiB, 1)
	require.Contains(t, r.Refused, "needs")
}

// liveStage is what the engine knows of a ready stage: the template's
// declared needs, the run's flags and priority, when the stage became ready
// and what its earlier attempts ran.
type liveStage struct {
	gpus               int
	gpuMemory          string // as a template writes it
	cpus, memMiB       int64
	priority           int
	spot, share        bool
	readySince         time.Time
	attained           time.Duration
	userEstimate       time.Duration
	templateAndStage   string
	predictFromArchive *predict.Predictor
}

func (l liveStage) need(id string) shepherd.Need {
	var mib int64
	fmt.Sscanf(l.gpuMemory, "%dMiB", &mib)
	n := shepherd.Need{ID: id, GPUs: l.gpus, GPUMemMiB: mib, CPUMilli: l.cpus, MemMiB: l.memMiB, Priority: l.priority,
		Spot: l.spot, Share: l.share, ReadySince: l.readySince, Attained: l.attained, Estimate: l.userEstimate}
	if l.userEstimate == 0 && l.predictFromArchive != nil {
		n.Predicted = l.predictFromArchive.Predict(predict.Query{Key: l.templateAndStage})
	}
	return n
}

// TestReplayAndLiveBuildTheSameRequest: every request the replay builds
// for a job is the request a live stage with the same needs gets — the
// same resources, flags, ready time and attained run time, and an
// estimate from a predictor fed the same finished runs (the archive, live).
// Covers every regime, and preempted jobs coming back.
func TestReplayAndLiveBuildTheSameRequest(t *testing.T) {
	jobs := Rescale(philly(t, 1), 1.0, 8)[:800]
	for _, est := range []Estimates{NoEstimates, Predicted, Noisy(0.5)} {
		t.Run(est.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Estimates = est
			archive := predict.New(predict.Options{})
			checked, requeued := 0, 0
			prevRan, ready := map[string]time.Duration{}, map[string]time.Time{}
			_, _ = replay(jobs, cfg, hooks{
				learn: func(_ float64, r predict.Run) { archive.Observe(r) },
				request: func(now float64, j *Job, got shepherd.Request) {
					// Ready since its submit, or since it was preempted (its
					// attained run time grew).
					if _, seen := ready[j.ID]; !seen {
						ready[j.ID] = at(j.Submit)
					}
					if got.Attained > prevRan[j.ID] {
						ready[j.ID] = at(now)
						requeued++
					}
					prevRan[j.ID] = got.Attained
					mem := int64(math.Ceil(float64(j.MemMilli) / 1000 * float64(cfg.GPUMiB)))
					live := liveStage{gpus: j.GPUs, gpuMemory: fmt.Sprintf("%dMiB", mem), cpus: j.CPUMilli, memMiB: j.MemMiB,
						priority: j.Priority, spot: j.Preemptible, share: j.Shareable, readySince: ready[j.ID],
						attained: got.Attained, templateAndStage: predictKey(j)}
					if est.Mode == "noisy" {
						live.userEstimate = seconds(j.Duration * math.Exp(est.Sigma*j.Noise))
					}
					if est.Mode == "predicted" {
						live.predictFromArchive = archive
					}
					require.Equal(t, shepherd.Build(live.need(j.ID)), got, "job %s at %.0f s", j.ID, now)
					checked++
				},
			})
			require.Greater(t, checked, len(jobs)-1, "every job's request was checked")
			if est.Mode != "none" {
				require.Positive(t, requeued, "preempted jobs came back with their attained run time")
			}
		})
	}
}
