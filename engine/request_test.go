package engine

import (
	"context"
	"os"
	"path/filepath"
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
	e := h.engine(func(o *Options) { o.Host = shepherd.Host{CPUMilli: 16000} })
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

func TestStageNeedsDefaultsAndOverrides(t *testing.T) {
	tm := parse(t, `
name: n
runtime: {kind: docker, image: x:1, cpus: 2.5, memory: 4GiB}
stages:
  - name: prep
    command: ["true"]
  - name: train
    needs: [prep]
    gpus: 1
    cpus: 8
    command: ["true"]
`)
	stages := func() []storage.Stage {
		return []storage.Stage{{Name: "prep"}, {Name: "train", GPUs: 1}}
	}
	got := stages()
	require.NoError(t, stageNeeds(tm, nil, Needs{}, got))
	require.Equal(t, int64(2500), got[0].CPUMilli, "the container's cpus")
	require.Equal(t, int64(4096), got[0].MemMiB, "the container's memory")
	require.Equal(t, int64(8000), got[1].CPUMilli, "the stage's own cpus win")

	two := 2
	got = stages()
	require.NoError(t, stageNeeds(tm, nil, Needs{GPUs: &two, GPUMemoryMiB: 1024, Estimate: time.Hour}, got))
	require.Equal(t, storage.Stage{Name: "prep", CPUMilli: 2500, MemMiB: 4096}, got[0], "only the GPU stage is overridden")
	require.Equal(t, 2, got[1].GPUs)
	require.Equal(t, int64(1024), got[1].GPUMemoryMiB)
	require.Equal(t, time.Hour, got[1].Estimate)

	neg := -1
	require.ErrorContains(t, stageNeeds(tm, nil, Needs{GPUs: &neg}, stages()), "gpus -1: write a whole number from 0 to 4096")
}

// Aging counts from when a stage became ready: the end of its needs, of its
// backoff, or of its preempted attempt; not from when its run was made.
func TestRequestIsReadySinceTheStageBecameReady(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	tm := parse(t, "name: r\nstages:\n  - {name: prep, command: [\"true\"]}\n  - {name: train, needs: [prep], command: [\"true\"]}\n")
	ctx := context.Background()
	info, err := e.Submit(ctx, RunSpec{Template: tm})
	require.NoError(t, err)
	r, err := h.store.GetRun(ctx, info.ID)
	require.NoError(t, err)
	lr, err := e.load(ctx, r)
	require.NoError(t, err)
	prep, train := lr.stage("prep"), lr.stage("train")
	require.Equal(t, r.CreatedAt, e.request(lr, prep).Submit, "a first stage is ready when its run is made")

	prep.st.State, prep.st.FinishedAt = storage.StageSucceeded, r.CreatedAt.Add(time.Hour)
	require.Equal(t, r.CreatedAt.Add(time.Hour), e.request(lr, train).Submit, "from the end of its needs")

	train.st.NextAttemptAt = r.CreatedAt.Add(2 * time.Hour)
	require.Equal(t, r.CreatedAt.Add(2*time.Hour), e.request(lr, train).Submit, "from the end of its backoff")

	train.attempt = storage.Attempt{State: storage.AttemptPreempted, StartedAt: r.CreatedAt.Add(2 * time.Hour), FinishedAt: r.CreatedAt.Add(3 * time.Hour)}
	train.place.attained = time.Hour
	got := e.request(lr, train)
	require.Equal(t, r.CreatedAt.Add(3*time.Hour), got.Submit, "from its preemption")
	require.Equal(t, time.Hour, got.Attained, "with the run time it already had")
}

func TestSubmitRefusesWhatThisMachineCanNeverHold(t *testing.T) {
	h := newHarness(t)
	e := h.engine(func(o *Options) { o.Host = shepherd.Host{CPUMilli: 2000, MemMiB: 4096} })
	ctx := context.Background()
	for _, tt := range []struct{ field, want string }{
		{"cpus: 2.5", "stage a asks for 2.5 CPUs; this machine gives its stages 2 in all: ask for fewer (cpus: in the template), or raise shepherd: cpus in settings.yaml"},
		{"memory: 8GiB", "stage a asks for 8192 MiB of host memory; this machine gives its stages 4096 MiB in all"},
	} {
		_, err := e.Submit(ctx, RunSpec{Template: parse(t, "name: big\nstages:\n  - {name: a, command: [\"true\"], "+tt.field+"}\n")})
		require.ErrorContains(t, err, tt.want)
	}
	runs, err := h.store.ListRuns(ctx, storage.RunFilter{})
	require.NoError(t, err)
	require.Empty(t, runs, "nothing stored")
	entries, err := os.ReadDir(filepath.Join(h.home, "runs"))
	if err == nil {
		require.Empty(t, entries, "no run directory left")
	}
	_, err = e.Submit(ctx, RunSpec{Template: parse(t, "name: fits\nstages:\n  - {name: a, command: [\"true\"], cpus: 2}\n")})
	require.NoError(t, err)
}
