//go:build !nowindow

package app

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/study"
	"niuma/storage"
	"niuma/ui"
)

const windowStudyYAML = `name: quick
objective: {metric: loss, goal: min}
params:
  x: {type: float, default: 0.5, min: 0, max: 1}
  y: {type: int, default: 1, min: 1, max: 9}
stages:
  - name: train
    command: [sh, -c, 'sleep 0.2; echo "{\"step\": 1, \"loss\": ${params.x}}"']
`

// waitStudy polls a study until it has ended or the deadline passes.
func waitStudy(t *testing.T, db *storage.DB, id string, cond func(study.Result) bool) study.Result {
	t.Helper()
	var res study.Result
	deadline := time.Now().Add(90 * time.Second)
	for {
		r, err := study.Status(context.Background(), db, id)
		require.NoError(t, err)
		res = r
		if cond(r) {
			return res
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(studyLog(os.Getenv("NIUMA_HOME"), id))
			t.Fatalf("study %s: %s, %d trials; its log:\n%s", id, r.Study.State, len(r.Trials), log)
		}
		time.Sleep(50 * time.Millisecond) // the poll's period, not a wait for an outcome
	}
}

// The wizard's Search mode reaches the engine through LaunchStudy: it
// stores the study as `niuma tune` does, with the space and fixed values
// it was given, and drives its trials from the window's process to the
// budget.
func TestWindowLaunchStudyRunsToTheBudget(t *testing.T) {
	tempHome(t)
	path := writeTemplate(t, windowStudyYAML)
	s, err := open(io.Discard)
	require.NoError(t, err)
	defer s.close()
	ctx, stop := context.WithCancel(context.Background())
	done := s.drive(ctx)
	drivers := &studyDrivers{ctx: ctx, eng: s.engine, db: s.store, home: s.home}
	defer func() { stop(); drivers.wait(); <-done }()
	var b ui.Backend = windowBackend{Engine: s.engine, store: s.store, home: s.home, studies: drivers}
	sl, ok := b.(interface {
		LaunchStudy(context.Context, ui.StudySpec) (string, error)
	})
	require.True(t, ok, "the window's backend launches studies")
	id, err := sl.LaunchStudy(ctx, ui.StudySpec{Template: "quick", Source: path, Budget: 4, Parallel: "2", Pruner: "none",
		Space: []string{"x=0.1..0.4"}, Sets: map[string]string{"y": "7"}})
	require.NoError(t, err)
	res := waitStudy(t, s.store, id, func(r study.Result) bool { return r.Study.State != storage.StudyRunning })
	require.Equal(t, storage.StudyFinished, res.Study.State)
	require.Equal(t, 4, res.Study.Budget)
	require.Equal(t, 2, res.Study.Parallel)
	require.Equal(t, "none", res.Study.Pruner)
	require.Len(t, res.Trials, 4, "trials to the budget")
	for _, tr := range res.Trials {
		require.Equal(t, storage.TrialDone, tr.State, "trial %s", tr.RunID)
		var p map[string]any
		require.NoError(t, json.Unmarshal([]byte(tr.Params), &p))
		x := p["x"].(float64)
		require.GreaterOrEqual(t, x, 0.1)
		require.LessOrEqual(t, x, 0.4, "searched in the range given, the first trial too (the default 0.5 is outside)")
		require.EqualValues(t, 7, p["y"], "the fixed value")
		require.InDelta(t, x, tr.Objective, 1e-9, "the trial's result is its run's loss")
	}

	// The window's study view gets each trial with its searched values.
	infos, err := b.(interface {
		Studies(context.Context) ([]ui.StudyInfo, error)
	}).Studies(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Len(t, infos[0].Trials, 4)
	for i, tr := range infos[0].Trials {
		require.Equal(t, i, tr.Number, "numbered as `niuma tune --status` numbers them")
		require.Equal(t, "done", tr.State)
		require.Equal(t, res.Trials[i].RunID, tr.Run)
		require.Len(t, tr.Params, 1, "the searched value only: %v", tr.Params)
		require.IsType(t, float64(0), tr.Params["x"])
		require.True(t, tr.HasObjective)
		require.InDelta(t, res.Trials[i].Objective, tr.Objective, 1e-12)
	}

	// What `niuma tune` refuses, LaunchStudy refuses, storing nothing.
	_, err = sl.LaunchStudy(ctx, ui.StudySpec{Template: "quick", Source: path, Budget: 4, Space: []string{"x=0.1..2"}})
	require.ErrorContains(t, err, "the template allows 0..1")
	all, err := s.store.ListStudies(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
}

// A study left running when the window closes is carried on by the next
// window: resume takes on every running study no other niuma drives.
func TestWindowResumesItsStudies(t *testing.T) {
	tempHome(t)
	path := writeTemplate(t, windowStudyYAML)
	s, err := open(io.Discard)
	require.NoError(t, err)
	defer s.close()
	ctx, stop := context.WithCancel(context.Background())
	done := s.drive(ctx)
	defer func() { stop(); <-done }()

	first, closeFirst := context.WithCancel(ctx)
	d1 := &studyDrivers{ctx: first, eng: s.engine, db: s.store, home: s.home}
	id, err := windowBackend{Engine: s.engine, store: s.store, home: s.home, studies: d1}.LaunchStudy(ctx,
		ui.StudySpec{Template: "quick", Source: path, Budget: 5, Parallel: "1", Pruner: "none", Space: []string{"x"}})
	require.NoError(t, err)
	waitStudy(t, s.store, id, func(r study.Result) bool { return len(r.Trials) >= 1 })
	closeFirst() // the window closes
	d1.wait()
	res, err := study.Status(ctx, s.store, id)
	require.NoError(t, err)
	require.Equal(t, storage.StudyRunning, res.Study.State)
	require.Less(t, len(res.Trials), 5, "the closed window's driver launched no more")

	d2 := &studyDrivers{ctx: ctx, eng: s.engine, db: s.store, home: s.home}
	defer d2.wait()
	ids, err := d2.resume()
	require.NoError(t, err)
	require.Equal(t, []string{id}, ids, "the next window takes it on")
	again, err := (&studyDrivers{ctx: ctx, eng: s.engine, db: s.store, home: s.home}).resume()
	require.NoError(t, err)
	require.Empty(t, again, "a study another driver holds is left to it")
	res = waitStudy(t, s.store, id, func(r study.Result) bool { return r.Study.State != storage.StudyRunning })
	require.Equal(t, storage.StudyFinished, res.Study.State)
	require.Len(t, res.Trials, 5)
}
