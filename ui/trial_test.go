package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"

	"niuma/engine"
)

// These tests come from a first-use trial of the window (a new user
// driving it under Xvfb); each pins a trap that user fell into.

// A run launched while another is open goes on top of the list and
// shifts the rows down. The highlight must follow the open run, not stay
// on its old row: else it sits on a run the detail does not show, and a
// click on that highlighted row does nothing (the list thinks it is
// already picked).
func TestRunsListHighlightFollowsTheOpenRunWhenRowsShift(t *testing.T) {
	now := time.Now()
	old := engine.RunInfo{ID: "20261202-171722-e42d7d", Template: "digits-mlp", State: engine.Succeeded,
		CreatedAt: now.Add(-time.Minute), Stages: stages(engine.Succeeded)}
	b := &fakeBackend{runs: []engine.RunInfo{old}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	v.list.Select(0)
	v.Reload(context.Background())
	require.Contains(t, v.detail.idLine.Text, old.ID)

	// A new run arrives; the engine lists the newest first.
	fresh := engine.RunInfo{ID: "20261202-171933-ccccef", Template: "digits-mlp", State: engine.Running,
		CreatedAt: now, StartedAt: now, Stages: stages(engine.Running)}
	b.mu.Lock()
	b.runs = []engine.RunInfo{fresh, old}
	b.mu.Unlock()
	v.Reload(context.Background())
	require.Equal(t, 0, v.rowOf(fresh.ID))
	require.Contains(t, v.detail.idLine.Text, old.ID, "the open run stays open")

	// The user clicks the new run, on the row the old one had.
	v.list.Select(v.rowOf(fresh.ID))
	v.Reload(context.Background())
	require.Contains(t, v.detail.idLine.Text, fresh.ID, "a click on the new run's row opens it")
	require.False(t, v.cancel.Disabled(), "and offers to cancel it")
}

// A running run whose next stage waits for a GPU is waiting, whatever
// the engine's run state says: the Queue's count must not say
// "0 waiting" above a line that says "waits: train needs 1×60 GiB".
func TestBoardCountsARunWaitingForAGPUAsWaiting(t *testing.T) {
	now := time.Now()
	st := stages(engine.Succeeded, engine.Queued, engine.Queued, engine.Queued)
	st[1].Reason = "needs 1×60 GiB; largest free is 20 GiB on GPU 0; first in line"
	st[1].ReasonCode = "gpu_memory"
	busy := stages(engine.Succeeded, engine.Running, engine.Queued, engine.Queued)
	runs := []engine.RunInfo{
		{ID: "r3", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now, Stages: st},
		{ID: "r1", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now, Stages: busy},
		{ID: "r2", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now, Stages: busy},
	}
	m := buildBoard(simSnapshot(t, "2xA100-80GB"), runs, nil, nil, now)
	require.Equal(t, "2 running · 1 waiting", m.counts)
	require.Equal(t, "r3", m.queue[2].id, "and it is listed with the waiting runs, after the running ones")

	// A DAG with one branch running and another waiting is running.
	both := stages(engine.Succeeded, engine.Running, engine.Queued)
	both[2].Reason, both[2].ReasonCode = "needs 1 GPU", "gpu_busy"
	m = buildBoard(simSnapshot(t, "2xA100-80GB"), []engine.RunInfo{
		{ID: "r4", Template: "t", State: engine.Running, CreatedAt: now, StartedAt: now, Stages: both}}, nil, nil, now)
	require.Equal(t, "1 running · 0 waiting", m.counts)
}

// Before the archive's first read comes back (seconds on a busy machine)
// the page must not say "0 of 0 runs": a new user takes that for an
// empty archive.
func TestArchiveSaysItIsReadingBeforeItsFirstRead(t *testing.T) {
	v := NewArchiveView(&fakeBackend{archive: archiveRuns(time.Now())}, nil)
	require.NotContains(t, v.status.Text, "0 of 0")
	require.Contains(t, v.status.Text, "Reading")
	v.Reload(context.Background())
	require.True(t, strings.HasPrefix(v.status.Text, "4 of 4 runs"), v.status.Text)
}

// The Archive's ID column shows a run's whole ID: the part that tells
// the runs of a sweep apart is its end ("…-ccccef"), and under a sweep's
// header the ID is indented; truncated, every run of a sweep read
// "20261202-171933-cccc…".
func TestArchiveShowsWholeRunIDsUnderASweep(t *testing.T) {
	now := time.Now()
	var all []engine.ArchiveEntry
	for i, id := range []string{"20261202-171933-ccccef", "20261202-171933-1db2a3", "20261202-171933-f6bfc0"} {
		r := engine.RunInfo{ID: id, Template: "digits-mlp", State: engine.Succeeded, Sweep: "sw1",
			CreatedAt: now.Add(-time.Duration(i) * time.Minute), StartedAt: now.Add(-time.Duration(i) * time.Minute),
			FinishedAt: now, Params: map[string]any{"lr": 0.01 / float64(i+1)}}
		all = append(all, engine.ArchiveEntry{RunInfo: r, Objective: "val_acc", Goal: "max", Best: 0.97, HasBest: true})
	}
	v, _ := newArchiveRig(t, &fakeBackend{archive: all})
	shown := drawnTexts(v.table)
	for _, e := range all {
		found := false
		for _, s := range shown {
			if strings.TrimSpace(s) == e.ID {
				found = true
			}
		}
		require.True(t, found, "%s is not shown whole; the table shows %q", e.ID, shown)
	}
}

// drawnTexts is the text drawn under o as drawn: after truncation, and
// none of what is hidden (texts gives a label's whole text, however little
// of it fits, and hidden text too).
func drawnTexts(o fyne.CanvasObject) []string {
	var out []string
	var walk func(fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if !o.Visible() {
			return
		}
		if x, ok := o.(*canvas.Text); ok {
			out = append(out, x.Text)
		}
		if c, ok := o.(*fyne.Container); ok {
			for _, ch := range c.Objects {
				walk(ch)
			}
		}
		if w, ok := o.(fyne.Widget); ok {
			for _, ch := range test.WidgetRenderer(w).Objects() {
				walk(ch)
			}
		}
	}
	walk(o)
	return out
}

// Ticking "sweep" fills the values box with the current value, so its
// placeholder (how to write several values) never shows: the help line
// under the parameter must say it while sweeping.
func TestSweepSaysHowToWriteSeveralValues(t *testing.T) {
	r := newWizardRig(t)
	r.w.list.Select(1)
	tap(r.w.next)
	lr := r.field("lr")
	tap(lr.sweep)
	require.Equal(t, "0.01", lr.sweepEntry.Text, "the sweep starts from the current value")
	shown := strings.Join(drawnTexts(lr.box), "\n")
	require.Contains(t, shown, "values: 0.1, 0.01, 0.001", "how to write a sweep is on screen")
	tap(lr.sweep)
	require.NotContains(t, strings.Join(drawnTexts(lr.box), "\n"), "values:", "and goes with the sweep")
}

// A run waiting for a GPU between two stages gets no "ETA 14 s": it does
// not end in 14 s, it runs about that long once it gets its GPU.
func TestBoardGivesAWaitingRunNoETA(t *testing.T) {
	now := time.Now()
	st := stages(engine.Succeeded, engine.Queued, engine.Queued, engine.Queued)
	st[1].Reason, st[1].ReasonCode = "needs 1×60 GiB; largest free is 20 GiB on GPU 0; first in line", "gpu_memory"
	m := buildBoard(simSnapshot(t, "2xA100-80GB"), []engine.RunInfo{
		{ID: "r3", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now, Stages: st}}, nil, nil, now)
	addETAs(&m, map[string]engine.ETA{"r3": {Left: 14 * time.Second, Runs: 2, Known: true}})
	require.NotContains(t, m.queue[0].detail, "ETA")
	require.Contains(t, m.queue[0].detail, "waits: train: needs 1×60 GiB")
	require.Contains(t, m.queue[0].detail, "then runs about 14 s, from 2 earlier runs")
}
