package ui

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
)

// launchedBackend also says what runs were launched with and what each
// attempt ran with, as the engine is to.
type launchedBackend struct {
	anomalyBackend
	launched map[string]map[string]any
	attempts map[int]map[string]any
}

func (l *launchedBackend) LaunchedParams(_ context.Context, id string) (map[string]any, error) {
	return l.launched[id], nil
}

func (l *launchedBackend) AttemptParams(context.Context, string, string) (map[int]map[string]any, error) {
	return l.attempts, nil
}

// A sentinel-retried run (lr=1.0, retried with 0.1) and a plain one.
func retriedRuns(now time.Time) []engine.RunInfo {
	retried := engine.RunInfo{ID: "r1", Template: "digits-mlp", State: engine.Succeeded, CreatedAt: now,
		Params: map[string]any{"lr": 0.1, "optimizer": "sgd"},
		Stages: []engine.StageInfo{{Name: "train", State: engine.Succeeded, Attempts: 2, MaxAttempts: 2, History: []engine.AttemptInfo{
			{Number: 1, State: "failed"}, {Number: 2, State: "succeeded"}}}}}
	plain := engine.RunInfo{ID: "r0", Template: "digits-mlp", State: engine.Succeeded, CreatedAt: now.Add(-time.Minute),
		Params: map[string]any{"lr": 0.01, "optimizer": "adam"},
		Stages: []engine.StageInfo{{Name: "train", State: engine.Succeeded, Attempts: 1, MaxAttempts: 2}}}
	return []engine.RunInfo{retried, plain}
}

var retryRecords = []engine.AnomalyInfo{{ID: 1, Stage: "train", Kind: "nan", Severity: "critical", Message: "loss is NaN at step 9"},
	{ID: 2, Stage: "train", Kind: "action_retry", Severity: "info", Message: "retrying after nan"}}

func blowUpSeries() []engine.Point {
	var pts []engine.Point
	for i := range 10 {
		pts = append(pts, engine.Point{Stage: "train", Key: "loss", Attempt: 1, Step: int64(i), Value: math.Pow(10, float64(i))})
	}
	for i := range 30 {
		pts = append(pts, engine.Point{Stage: "train", Key: "loss", Attempt: 2, Step: int64(i), Value: 2 / float64(i+1)})
	}
	return pts
}

// Everywhere a sentinel-changed run is shown — header, list row, legend,
// archive (its best marked, the changed parameter with its launched value)
// — it says so.
func TestLaunchedVersusRanEverywhere(t *testing.T) {
	now := time.Now()
	b := &launchedBackend{anomalyBackend: anomalyBackend{fakeBackend: fakeBackend{runs: retriedRuns(now), series: blowUpSeries()},
		anomalies: retryRecords},
		launched: map[string]map[string]any{"r1": {"lr": 1.0, "optimizer": "sgd"}},
		attempts: map[int]map[string]any{1: {"lr": 1.0, "optimizer": "sgd"}, 2: {"lr": 0.1, "optimizer": "sgd"}}}
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	v := NewMainView(b, w)
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1200, 780))
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	require.Equal(t, "Parameters: lr 1 → 0.1 · optimizer=sgd", v.detail.params.Text)
	series := v.detail.curves.chart.series
	require.Len(t, series, 2)
	require.Equal(t, "attempt 1: lr=1", series[0].name)
	require.Equal(t, "attempt 2: lr=0.1", series[1].name)
	list := strings.Join(texts(v.list), "\n")
	require.Contains(t, list, "r1 · "+sentinelMark+" · lr 1 → 0.1 · optimizer=sgd")
	require.Contains(t, list, "r0 · lr=0.01 · optimizer=adam", "a run the sentinel left alone reads as before")

	// The archive: the best of r1 is not what was launched.
	b.archive = []engine.ArchiveEntry{{RunInfo: b.runs[0], Objective: "val_acc", Goal: "max", Best: 0.9778, HasBest: true},
		{RunInfo: b.runs[1], Objective: "val_acc", Goal: "max", Best: 0.97, HasBest: true}}
	a := NewArchiveView(b, w)
	a.Reload(context.Background())
	e0, e1 := &a.model.all[0], &a.model.all[1]
	lrCol := -1
	for c := archiveCols; c < a.model.columnCount(); c++ {
		if k, _ := a.model.paramColumn(c); k == "lr" {
			lrCol = c
		}
	}
	require.Equal(t, "val_acc ↑ 0.9778 "+sentinelMark, a.model.cellText(e0, colBest))
	require.Equal(t, "0.1 (was 1)", a.model.cellText(e0, lrCol))
	require.Equal(t, "val_acc ↑ 0.97", a.model.cellText(e1, colBest))
	require.Equal(t, "0.01", a.model.cellText(e1, lrCol))
}

// Without the engine's launch records, a retried run is still marked (by
// its action_retry record's code), with the values it ran with.
func TestSentinelMarkWithoutLaunchRecords(t *testing.T) {
	now := time.Now()
	b := &anomalyBackend{fakeBackend: fakeBackend{runs: retriedRuns(now), series: blowUpSeries()}, anomalies: retryRecords}
	v, _ := newTestView(t, &b.fakeBackend)
	v.backend = b
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	require.Equal(t, "Parameters: lr=0.1 · optimizer=sgd", v.detail.params.Text)
	require.Contains(t, strings.Join(texts(v.list), "\n"), "r1 · "+sentinelMark+" · lr=0.1")
	require.Equal(t, "attempt 1", v.detail.curves.chart.series[0].name)

	// A run whose only anomaly is a flag is not marked.
	b.anomalies = retryRecords[:1]
	v2, _ := newTestView(t, &b.fakeBackend)
	v2.backend = b
	v2.Reload(context.Background())
	require.NotContains(t, strings.Join(texts(v2.list), "\n"), sentinelMark)
}

// etaFake gives the predictor's estimate for r1.
type etaFake struct{ fakeBackend }

func (e *etaFake) RunETA(_ context.Context, id string) (engine.ETA, error) {
	if id == "r1" {
		return engine.ETA{Left: 14 * time.Minute, Runs: 9, Known: true}, nil
	}
	return engine.ETA{}, nil
}

func TestBoardShowsTheETA(t *testing.T) {
	now := time.Now()
	b := &etaFake{fakeBackend{runs: []engine.RunInfo{
		{ID: "r1", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now.Add(-time.Minute),
			Stages: []engine.StageInfo{{Name: "train", State: engine.Running}}},
		{ID: "r2", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now.Add(-time.Minute),
			Stages: []engine.StageInfo{{Name: "train", State: engine.Running}}}}}}
	newTestApp(t)
	v := NewBoard(b)
	m := v.read(context.Background())
	require.Len(t, m.queue, 2)
	byID := map[string]string{}
	for _, it := range m.queue {
		byID[it.id] = it.detail
	}
	require.Contains(t, byID["r1"], " · ETA 14 min, from 9 earlier runs")
	require.NotContains(t, byID["r2"], "ETA", "no history: no ETA")
}

// The Runs page's Columns… turns each run's second line into a cell per
// chosen parameter under a header; Enter keeps the choice, Escape drops it.
func TestRunsPageParameterColumns(t *testing.T) {
	now := time.Now()
	b := &launchedBackend{anomalyBackend: anomalyBackend{fakeBackend: fakeBackend{runs: retriedRuns(now)}, anomalies: retryRecords},
		launched: map[string]map[string]any{"r1": {"lr": 1.0, "optimizer": "sgd"}}}
	v, w := newTestView(t, &b.fakeBackend)
	v.backend = b
	v.Reload(context.Background())
	require.False(t, v.colHead.Visible(), "no columns chosen: the line of what differs")

	tap(v.cols)
	require.NotNil(t, w.Canvas().Overlays().Top())
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape drops the choice")
	require.Empty(t, v.columns)

	v.setColumns([]string{"lr", "optimizer"})
	require.True(t, v.colHead.Visible())
	var heads []string
	for _, o := range v.colHead.Objects {
		heads = append(heads, o.(*widget.Label).Text)
	}
	require.Equal(t, []string{"run", "lr", "optimizer"}, heads)
	list := texts(v.list)
	for _, want := range []string{"r1 ⚑", "1 → 0.1", "sgd", "r0", "0.01", "adam"} {
		require.Contains(t, list, want)
	}
	require.Equal(t, "lr,optimizer", fyne.CurrentApp().Preferences().String(prefRunColumns), "kept for next time")

	// Enter in the chooser keeps what is ticked.
	tap(v.cols)
	pressKey(w, fyne.KeyReturn)
	require.Nil(t, w.Canvas().Overlays().Top())
	require.Equal(t, []string{"lr", "optimizer"}, v.columns)
	v2 := NewMainView(b, w)
	require.Equal(t, []string{"lr", "optimizer"}, v2.columns, "the next window starts with them")
}

// studyFake keeps one study.
type studyFake struct {
	fakeBackend
	studies []StudyInfo
}

func (s *studyFake) Studies(context.Context) ([]StudyInfo, error) { return s.studies, nil }

func TestArchiveStudyView(t *testing.T) {
	b := &studyFake{fakeBackend: fakeBackend{archive: archiveRuns(time.Now())}, studies: []StudyInfo{{
		ID: "st1", Template: "digits-mlp", State: "running", Objective: "val_acc", Goal: "max", Budget: 40, Done: 12, Running: 2,
		Pruned: 3, Best: 0.9852, HasBest: true, BestRun: "r-a", Next: map[string]any{"lr": 0.003, "hidden": 128.0},
		Why: "expected val_acc 0.987 ± 0.004"}}}
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	v := NewArchiveView(b, w)
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1000, 600))
	require.True(t, v.studies.Visible())
	var opened string
	v.OnOpen = func(id string) { opened = id }
	tap(v.studies)
	require.NotNil(t, w.Canvas().Overlays().Top())
	got := texts(v.studiesBox)
	require.Contains(t, got, "st1 · digits-mlp · running")
	require.Contains(t, got, "12 of 40 trials done · 2 running · 3 stopped early · best val_acc ↑ 0.9852 (run r-a)")
	require.Contains(t, got, "Next: hidden=128 lr=0.003 — expected val_acc 0.987 ± 0.004")
	for _, o := range v.studiesBox.Objects {
		if btn, ok := o.(*widget.Button); ok {
			tap(btn)
		}
	}
	require.Equal(t, "r-a", opened, "the best trial opens")
	require.Nil(t, w.Canvas().Overlays().Top())
	tap(v.studies)
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape closes the study view")

	plain := NewArchiveView(&fakeBackend{}, w)
	require.False(t, plain.studies.Visible(), "no studies kept: no button")
}
