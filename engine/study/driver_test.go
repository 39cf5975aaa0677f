package study

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/executor/local"
	"niuma/engine/template"
	"niuma/storage"
	"niuma/tuner"
)

// A workload whose score grows with x and with the step: trials with a
// small x fall behind from the first steps on, so the median rule stops
// them, and the best x is near the top of the range.
const rampYAML = `
name: ramp
objective: {metric: score, goal: max}
params:
  x: {type: float, default: 0.5, min: 0.01, max: 1}
  steps: {type: int, default: 12, min: 1, max: 100}
stages:
  - name: train
    command: [awk, -v, "x=${params.x}", -v, "n=${params.steps}", 'BEGIN { for (i = 1; i <= n; i++) { printf "{\"step\": %d, \"score\": %.6f}\n", i, x * i / n; system("sleep 0.1") } }']
  - name: check
    needs: [train]
    command: ["true"]
`

func newEngine(t *testing.T) (*engine.Engine, *storage.DB) {
	t.Helper()
	home := t.TempDir()
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	e, err := engine.New(engine.Options{Home: home, Store: db, Executors: []executor.Executor{local.New()},
		StopGrace: 2 * time.Second, PollInterval: 50 * time.Millisecond, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.Drive(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-e.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not become the owner")
	}
	return e, db
}

func rampStudy(t *testing.T, db *storage.DB, budget, parallel int) Loaded {
	t.Helper()
	tm, err := template.Parse("ramp.yaml", []byte(rampYAML))
	require.NoError(t, err)
	vals := tm.Defaults()
	s, err := Create(context.Background(), db, Spec{Template: tm, Space: tm.Space("x"), Values: vals, Budget: budget,
		Parallel: parallel, Pruner: tuner.MedianRule, Warmup: 3, Seed: 1})
	require.NoError(t, err)
	l, err := Load(context.Background(), db, s.ID, tm)
	require.NoError(t, err)
	return l
}

// A study runs its whole budget as ordinary runs, never more than its
// parallelism at once, stops losing trials with stored evidence, and
// ends with a best trial at least as good as the template's defaults.
func TestStudyRunsPrunesAndFinishes(t *testing.T) {
	e, db := newEngine(t)
	l := rampStudy(t, db, 10, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var lines []string
	maxActive := 0
	d := &Driver{Engine: e, Store: db, Poll: 100 * time.Millisecond, Say: func(s string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, s)
		ts, _ := db.Trials(context.Background(), l.ID)
		active := 0
		for _, tr := range ts {
			if !tr.State.Done() {
				active++
			}
		}
		maxActive = max(maxActive, active)
	}}
	res, err := d.Drive(ctx, l)
	require.NoError(t, err)
	require.Equal(t, storage.StudyFinished, res.Study.State)
	require.Len(t, res.Trials, 10)
	require.LessOrEqual(t, maxActive, 2, "never more than the parallelism at once")

	ids, _, err := db.SweepRuns(ctx, l.ID)
	require.NoError(t, err)
	require.Len(t, ids, 10, "one run per trial, no more")
	seen := map[string]bool{}
	c := res.Counts()
	require.Positive(t, c[storage.TrialPruned], "some trials were pruned: %v", lines)
	require.Equal(t, 10, c[storage.TrialDone]+c[storage.TrialPruned])
	for _, tr := range res.Trials {
		require.False(t, seen[tr.RunID])
		seen[tr.RunID] = true
		info, err := e.Run(ctx, tr.RunID)
		require.NoError(t, err)
		if tr.State == storage.TrialPruned {
			require.Equal(t, engine.Pruned, info.State, "a pruned trial's run ends pruned, not cancelled")
			p, err := db.RunPrune(ctx, tr.RunID)
			require.NoError(t, err)
			require.Equal(t, "below_median", p.Reason)
			require.Less(t, p.Value, p.Reference, p.Evidence)
			require.GreaterOrEqual(t, len(p.Compared), 4)
			require.Contains(t, p.Evidence, fmt.Sprintf("median of %d trials", p.Trials))
		} else {
			require.Equal(t, engine.Succeeded, info.State)
		}
	}
	require.Equal(t, "defaults", res.Trials[0].Method)
	require.Equal(t, storage.TrialDone, res.Trials[0].State)
	require.GreaterOrEqual(t, res.Best, 0)
	require.GreaterOrEqual(t, res.Trials[res.Best].Objective, res.Trials[0].Objective)
	require.InDelta(t, 0.5, res.Trials[0].Objective, 1e-6, "the defaults' objective: x=0.5 at the last step")
}

// A driver stopped mid-study (its context cancelled, as a killed one
// stops) and a new driver over the same storage: the study finishes with
// its budget of trials, none submitted twice, including a trial that was
// stored but whose run was submitted without being linked.
func TestStudyResumesWithoutRunningATrialTwice(t *testing.T) {
	e, db := newEngine(t)
	l := rampStudy(t, db, 6, 2)
	ctx, cancel := context.WithCancel(context.Background())
	first := &Driver{Engine: e, Store: db, Poll: 50 * time.Millisecond}
	for {
		_, err := first.Pass(ctx, l)
		require.NoError(t, err)
		ts, _ := db.Trials(ctx, l.ID)
		if len(ts) >= 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	// As if the driver died between submitting trial n's run and linking
	// it: the trial is stored as submitting and its run exists.
	ts, err := db.Trials(context.Background(), l.ID)
	require.NoError(t, err)
	n := len(ts)
	tm := l.Template
	v, err := template.ValuesFromJSON(tm, []byte(`{"steps":12,"x":0.97}`))
	require.NoError(t, err)
	params, _ := v.JSON()
	require.NoError(t, db.AddTrial(context.Background(), storage.Trial{StudyID: l.ID, Number: n, Params: string(params), Method: "random"}))
	orphan, err := e.Submit(context.Background(), engine.RunSpec{Template: tm, Values: v, Sweep: l.ID})
	require.NoError(t, err)

	rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer rcancel()
	second := &Driver{Engine: e, Store: db, Poll: 50 * time.Millisecond}
	res, err := second.Drive(rctx, l)
	require.NoError(t, err)
	require.Equal(t, storage.StudyFinished, res.Study.State)
	require.Len(t, res.Trials, 6)
	require.Equal(t, orphan.ID, res.Trials[n].RunID, "the orphaned run was adopted, not submitted again")
	ids, _, err := db.SweepRuns(rctx, l.ID)
	require.NoError(t, err)
	require.Len(t, ids, 6)
	for _, tr := range res.Trials {
		require.True(t, tr.State.Done())
	}
}

func TestCreateRefusesWhatCannotBeSearched(t *testing.T) {
	_, db := newEngine(t)
	tm, err := template.Parse("ramp.yaml", []byte(rampYAML))
	require.NoError(t, err)
	ctx := context.Background()
	base := Spec{Template: tm, Space: tm.Space("x"), Values: tm.Defaults(), Budget: 4, Parallel: 1}
	bad := base
	bad.Budget = 0
	_, err = Create(ctx, db, bad)
	require.ErrorContains(t, err, "budget 0")
	bad = base
	bad.Pruner = "hyperband"
	_, err = Create(ctx, db, bad)
	require.ErrorContains(t, err, `pruner "hyperband"`)
	bad = base
	bad.Space = tuner.Space{}
	_, err = Create(ctx, db, bad)
	require.ErrorContains(t, err, "no parameters to search")
	noObj, err := template.Parse("n.yaml", []byte("name: n\nstages:\n  - name: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	bad = base
	bad.Template = noObj
	_, err = Create(ctx, db, bad)
	require.ErrorContains(t, err, "declares no objective")

	s, err := Create(ctx, db, base)
	require.NoError(t, err)
	changed, err := template.Parse("ramp.yaml", []byte(rampYAML+"\n# edited\n"))
	require.NoError(t, err)
	_, err = Load(ctx, db, s.ID, changed)
	require.ErrorContains(t, err, "has changed since the study began")
}

// The tuner learns from earlier succeeded runs of the same template with
// the study's other values; runs with other fixed values, and the
// study's own, are not counted twice.
func TestWarmStartFromTheArchive(t *testing.T) {
	e, db := newEngine(t)
	ctx := context.Background()
	l := rampStudy(t, db, 2, 1)
	submit := func(x float64, steps int64, sweep string) string {
		v := l.Template.Defaults()
		v["x"], v["steps"] = x, steps
		info, err := e.Submit(ctx, engine.RunSpec{Template: l.Template, Values: v, Sweep: sweep})
		require.NoError(t, err)
		return info.ID
	}
	same := []string{submit(0.9, 12, ""), submit(0.3, 12, "")}
	submit(0.8, 3, "") // other steps: another experiment
	for _, id := range append(same, submit(0.7, 12, l.ID)) {
		require.Eventually(t, func() bool { r, _ := e.Run(ctx, id); return r.State.Done() }, time.Minute, 20*time.Millisecond)
	}
	var said []string
	d := &Driver{Engine: e, Store: db, Say: func(s string) { said = append(said, s) }}
	d.stageOf, d.ended, d.asked = map[string]string{}, map[string]tuner.Curve{}, map[string]bool{}
	warm, err := d.warmStart(ctx, l)
	require.NoError(t, err)
	require.Len(t, warm, 2)
	got := map[string]float64{}
	for _, w := range warm {
		require.Equal(t, tuner.Done, w.State)
		got[w.ID] = w.Objective
		require.Len(t, w.Values, 1, "only the searched values")
	}
	// score at the last step is x · 12/12
	require.InDelta(t, 0.9, got[same[0]], 1e-6)
	require.InDelta(t, 0.3, got[same[1]], 1e-6)
	require.Contains(t, said, "the tuner learns from 2 earlier runs of ramp with the same other values")
}

// A trial that has reported as far as a finished one is not pruned: it
// has done its work.
func TestFullLength(t *testing.T) {
	trials := []storage.Trial{{State: storage.TrialDone}, {State: storage.TrialPruned}, {State: storage.TrialRunning}}
	curves := []tuner.Curve{
		{Steps: []int64{1, 2, 30}},
		{Steps: []int64{1, 2, 3, 40}}, // pruned trials do not count, however far they got
		{Steps: []int64{1, 2, 50}},    // nor running ones
	}
	require.Equal(t, int64(30), fullLength(trials, curves))
	require.Equal(t, int64(0), fullLength(trials[1:], curves[1:]))
}

// A stopped study launches no more trials; its running trials' runs are
// cancelled and recorded as such, and the driver ends.
func TestStopEndsAStudy(t *testing.T) {
	e, db := newEngine(t)
	l := rampStudy(t, db, 8, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := &Driver{Engine: e, Store: db, Poll: 50 * time.Millisecond}
	for {
		_, err := d.Pass(ctx, l)
		require.NoError(t, err)
		ts, _ := db.Trials(ctx, l.ID)
		if len(ts) == 2 {
			break
		}
	}
	st, err := Stop(ctx, db, e, l.ID)
	require.NoError(t, err)
	require.Equal(t, storage.StudyStopped, st.State)
	_, err = Stop(ctx, db, e, l.ID)
	require.ErrorContains(t, err, "has already stopped")

	// Followed without its template, as `niuma tune --stop` does when no
	// driver is left.
	res, err := (&Driver{Engine: e, Store: db, Poll: 50 * time.Millisecond}).Drive(ctx, Loaded{Study: st})
	require.NoError(t, err)
	require.Equal(t, storage.StudyStopped, res.Study.State)
	require.Len(t, res.Trials, 2, "no trial launched after the stop")
	for _, tr := range res.Trials {
		require.True(t, tr.State.Done(), "trial %d %s", tr.Number, tr.State)
	}
	require.Equal(t, 2, res.Counts()[storage.TrialCancelled]+res.Counts()[storage.TrialDone])
}

// A study over a narrowed range that leaves the template's default out
// (`niuma tune --space x=0.6..1`, the wizard's Search mode) suggests its
// trials in that range: the stored default stays inside it.
func TestNarrowedRangeWithoutTheDefault(t *testing.T) {
	e, db := newEngine(t)
	tm, err := template.Parse("ramp.yaml", []byte(rampYAML))
	require.NoError(t, err)
	sp := tm.Space("x", "steps")
	sp.Params[0].Min, sp.Params[0].Default = 0.6, 0.6 // as narrowParam leaves it
	sp.Params[1].Min, sp.Params[1].Max, sp.Params[1].Default = 2, 4, int64(2)
	ctx := context.Background()
	s, err := Create(ctx, db, Spec{Template: tm, Space: sp, Values: tm.Defaults(), Budget: 2, Parallel: 2, Seed: 1})
	require.NoError(t, err)
	l, err := Load(ctx, db, s.ID, tm)
	require.NoError(t, err)
	d := &Driver{Engine: e, Store: db}
	_, err = d.Pass(ctx, l)
	require.NoError(t, err, "the first trials are suggested")
	res, err := Status(ctx, db, s.ID)
	require.NoError(t, err)
	require.Len(t, res.Trials, 2)
	for _, tr := range res.Trials {
		v, err := template.ValuesFromJSON(tm, []byte(tr.Params))
		require.NoError(t, err)
		require.GreaterOrEqual(t, v["x"].(float64), 0.6, "x in the narrowed range")
		require.GreaterOrEqual(t, v["steps"].(int64), int64(2))
		require.LessOrEqual(t, v["steps"].(int64), int64(4), "steps in the narrowed range")
	}
}
