package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/shepherd"
	"niuma/shepherd/predict"
	"niuma/shepherd/sim"
	"niuma/storage"
)

// keyed answers every query about one key: the replay's jobs and the
// engine's stages name their histories differently.
type keyed struct {
	p   predict.Source
	key string
}

func (k keyed) Predict(q predict.Query) predict.Estimate {
	return k.p.Predict(predict.Query{Key: k.key, Params: q.Params})
}

// A live stage and a replayed trace job with the same needs make the same
// request: one builder (shepherd.Build) from one description
// (shepherd.Need), whatever the estimate regime.
func TestLiveStageMakesTheRequestAReplayedJobMakes(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	tm := parse(t, `
name: live
stages:
  - name: train
    gpus: 2
    gpu_memory: 20GiB
    cpus: 4
    memory: 8GiB
    command: ["true"]
`)
	ctx := context.Background()
	load := func(spec RunSpec) (*liveRun, *liveStage) {
		info, err := e.Submit(ctx, spec)
		require.NoError(t, err)
		r, err := h.store.GetRun(ctx, info.ID)
		require.NoError(t, err)
		lr, err := e.load(ctx, r)
		require.NoError(t, err)
		return lr, lr.stages[0]
	}
	job := func(lr *liveRun) *sim.Job {
		return &sim.Job{ID: lr.run.ID + "/train", GPUs: 2, Priority: 2, Preemptible: true, Shareable: true,
			CPUMilli: 4000, MemMiB: 8192, Duration: (2 * time.Hour).Seconds()}
	}

	// No estimate, no history.
	lr, ls := load(RunSpec{Template: tm, Priority: 2, Spot: true, Share: true})
	got := e.request(lr, ls)
	want := shepherd.Build(sim.NeedOf(job(lr), 20*1024, lr.run.CreatedAt, 0, sim.NoEstimates, nil))
	require.Equal(t, want, got)
	require.Zero(t, got.Estimate)

	// The user's estimate: the noisy regime with no noise is the truth.
	lr, ls = load(RunSpec{Template: tm, Priority: 2, Spot: true, Share: true, Needs: Needs{Estimate: 2 * time.Hour}})
	got = e.request(lr, ls)
	want = shepherd.Build(sim.NeedOf(job(lr), 20*1024, lr.run.CreatedAt, 0, sim.Noisy(0.5), nil))
	require.Equal(t, want, got)
	require.Equal(t, 2*time.Hour, got.Estimate)

	// The predictor, fed from finished runs (the archive, live).
	for i, d := range []time.Duration{40, 50, 60} {
		r := storage.Run{ID: "done" + string(rune('a'+i)), Template: "live", Params: "{}", State: storage.RunSucceeded,
			FinishedAt: time.Now()}
		require.NoError(t, h.store.CreateRun(ctx, r, []storage.Stage{{Name: "train", State: storage.StageSucceeded}}))
		t0 := time.Now().Add(-time.Hour)
		require.NoError(t, h.store.CreateAttempt(ctx, storage.Attempt{RunID: r.ID, Stage: "train", Number: 1,
			State: storage.AttemptSucceeded, StartedAt: t0, FinishedAt: t0.Add(d * time.Minute)}))
	}
	e.pred = nil // as an engine that starts now: it reads the archive
	lr, ls = load(RunSpec{Template: tm, Priority: 2, Spot: true, Share: true})
	got = e.request(lr, ls)
	want = shepherd.Build(sim.NeedOf(job(lr), 20*1024, lr.run.CreatedAt, 0, sim.Predicted, keyed{e.pred, "live/train"}))
	require.Equal(t, want, got)
	require.InDelta(t, (50 * time.Minute).Seconds(), got.Estimate.Seconds(), 1, "the median of the three earlier runs")
}
