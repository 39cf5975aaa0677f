package ui

import (
	"context"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
)

// archiveRuns are four runs of two templates: two finished with an
// objective, one running, one failed without any value of its objective.
func archiveRuns(now time.Time) []engine.ArchiveEntry {
	run := func(id, tmpl string, st engine.State, age, took time.Duration, params map[string]any) engine.ArchiveEntry {
		r := engine.RunInfo{ID: id, Template: tmpl, State: st, Params: params, CreatedAt: now.Add(-age), StartedAt: now.Add(-age)}
		if st.Done() {
			r.FinishedAt = r.StartedAt.Add(took)
		}
		return engine.ArchiveEntry{RunInfo: r, Objective: "val_acc", Goal: "max"}
	}
	a := run("r-a", "digits-mlp", engine.Succeeded, 4*time.Hour, 90*time.Second, map[string]any{"lr": 0.01, "hidden": 64.0, "optimizer": "adam"})
	a.Best, a.HasBest = 0.97, true
	b := run("r-b", "digits-mlp", engine.Succeeded, 3*time.Hour, 30*time.Second, map[string]any{"lr": 1.0, "hidden": 64.0, "optimizer": "sgd"})
	b.Best, b.HasBest = 0.41, true
	c := run("r-c", "llm-finetune", engine.Running, time.Hour, 0, map[string]any{"rank": 8.0})
	c.Best, c.HasBest = 0.80, true
	d := run("r-d", "digits-mlp", engine.Failed, 2*time.Hour, 5*time.Second, map[string]any{"lr": 0.5, "hidden": 32.0, "optimizer": "adam"})
	return []engine.ArchiveEntry{c, d, b, a} // newest first, as the engine lists them
}

func rowIDs(m *archiveModel) []string {
	out := make([]string, len(m.rows))
	for i, r := range m.rows {
		out[i] = m.all[r].ID
	}
	return out
}

func TestArchiveModelFiltersAndSorts(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name               string
		query, state, tmpl string
		back               time.Duration
		sortBy             []int // header taps, in order
		want               []string
	}{
		{name: "newest first by default", want: []string{"r-c", "r-d", "r-b", "r-a"}},
		{name: "search a parameter value", query: "optimizer=adam", want: []string{"r-d", "r-a"}},
		{name: "every search word must match", query: "digits lr=1", want: []string{"r-b"}},
		{name: "state filter", state: "succeeded", want: []string{"r-b", "r-a"}},
		{name: "template filter", tmpl: "llm-finetune", want: []string{"r-c"}},
		{name: "date filter", back: 150 * time.Minute, want: []string{"r-c", "r-d"}},
		{name: "ID ascending", sortBy: []int{colID}, want: []string{"r-a", "r-b", "r-c", "r-d"}},
		{name: "ID tapped twice is descending", sortBy: []int{colID, colID}, want: []string{"r-d", "r-c", "r-b", "r-a"}},
		{name: "duration ascending", sortBy: []int{colDuration}, want: []string{"r-d", "r-b", "r-a", "r-c"}},
		{name: "best ascending, runs without a value last", sortBy: []int{colBest}, want: []string{"r-b", "r-c", "r-a", "r-d"}},
		{name: "best descending, runs without a value still last", sortBy: []int{colBest, colBest}, want: []string{"r-a", "r-c", "r-b", "r-d"}},
		{name: "state ascending", sortBy: []int{colState}, want: []string{"r-d", "r-c", "r-b", "r-a"}},
		{name: "template then filter keeps the order", sortBy: []int{colTemplate}, state: "succeeded", want: []string{"r-b", "r-a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newArchiveModel()
			m.set(archiveRuns(now), now)
			for _, c := range tc.sortBy {
				m.sortBy(c)
			}
			if tc.query != "" {
				m.query = tc.query
			}
			if tc.state != "" {
				m.state = tc.state
			}
			if tc.tmpl != "" {
				m.tmpl = tc.tmpl
			}
			m.back = tc.back
			m.apply()
			require.Equal(t, tc.want, rowIDs(m))
		})
	}
}

func TestArchiveCellsSayWhatARunDid(t *testing.T) {
	now := time.Now()
	m := newArchiveModel()
	m.set(archiveRuns(now), now)
	e, ok := m.entry(3) // r-a, the oldest
	require.True(t, ok)
	require.Equal(t, "r-a", m.cellText(e, colID))
	require.Equal(t, "1m30s", m.cellText(e, colDuration))
	require.Equal(t, "val_acc ↑ 0.97", m.cellText(e, colBest))
	d, _ := m.entry(1) // r-d failed before reporting its objective
	require.Equal(t, "val_acc —", m.cellText(d, colBest))
	require.Equal(t, "Created ▼", m.header(colCreated), "the sort column shows its direction")
	require.Equal(t, []string{allTemplates, "digits-mlp", "llm-finetune"}, m.templates())
}

func TestParamDiffKeepsOnlyParametersThatDiffer(t *testing.T) {
	runs := archiveRuns(time.Now())
	a, b, d := runs[3], runs[2], runs[1]
	require.Equal(t, [][]string{
		{"parameter", "r-a", "r-b"},
		{"lr", "0.01", "1"},
		{"optimizer", "adam", "sgd"},
	}, paramDiff([]engine.ArchiveEntry{a, b}), "hidden is 64 in both and is left out")
	require.Equal(t, [][]string{
		{"parameter", "r-a", "r-d"},
		{"hidden", "64", "32"},
		{"lr", "0.01", "0.5"},
	}, paramDiff([]engine.ArchiveEntry{a, d}))
	require.Len(t, paramDiff([]engine.ArchiveEntry{a, a}), 1, "identical runs: only the header")
}

func newArchiveRig(t *testing.T, b *fakeBackend) (*ArchiveView, fyne.Window) {
	t.Helper()
	newTestApp(t)
	w := test.NewWindow(nil)
	t.Cleanup(w.Close)
	v := NewArchiveView(b, w)
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1000, 600))
	v.Reload(context.Background())
	return v, w
}

// headerButton finds the header button of a column by its title.
func headerButton(t *testing.T, v *ArchiveView, title string) *widget.Button {
	t.Helper()
	var found *widget.Button
	var walk func(fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && (b.Text == title || b.Text == title+" ▲" || b.Text == title+" ▼") {
			found = b
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
	walk(v.table)
	require.NotNil(t, found, "no header %q", title)
	return found
}

func TestArchiveHeaderTapSortsAndFiltersNarrow(t *testing.T) {
	b := &fakeBackend{archive: archiveRuns(time.Now())}
	v, _ := newArchiveRig(t, b)
	require.Equal(t, []string{"r-c", "r-d", "r-b", "r-a"}, rowIDs(v.model))

	tap(headerButton(t, v, "Best objective"))
	tap(headerButton(t, v, "Best objective"))
	require.Equal(t, []string{"r-a", "r-c", "r-b", "r-d"}, rowIDs(v.model), "tapped twice: best first")
	require.Equal(t, "Best objective ▼", headerButton(t, v, "Best objective").Text)

	test.Type(v.query, "adam")
	require.Equal(t, []string{"r-a", "r-d"}, rowIDs(v.model))
	v.stateSel.SetSelected("failed")
	require.Equal(t, []string{"r-d"}, rowIDs(v.model))
	require.Equal(t, []string{allTemplates, "digits-mlp", "llm-finetune"}, v.tmplSel.Options)
	require.Contains(t, v.status.Text, "1 of 4 runs")
	v.stateSel.SetSelected(stateFilters[0])
	v.dateSel.SetSelected("last 24 hours")
	require.Equal(t, []string{"r-a", "r-d"}, rowIDs(v.model), "all four are recent")
}

func TestArchiveComparesPickedRuns(t *testing.T) {
	series := func(vals ...float64) []engine.Point {
		out := make([]engine.Point, len(vals))
		for i, x := range vals {
			out[i] = engine.Point{Stage: "train", Key: "val_acc", Step: int64(i), Value: x}
		}
		return out
	}
	b := &fakeBackend{archive: archiveRuns(time.Now()), bySeries: map[string][]engine.Point{
		"r-a/train/val_acc": series(0.5, 0.8, 0.97),
		"r-b/train/val_acc": series(0.3, 0.41, 0.2),
	}}
	v, _ := newArchiveRig(t, b)
	require.True(t, v.compare.Disabled(), "nothing picked: nothing to compare")
	v.table.Select(widget.TableCellID{Row: 3, Col: colPick}) // r-a
	require.True(t, v.compare.Disabled(), "one run is not a comparison")
	v.table.Select(widget.TableCellID{Row: 2, Col: colPick}) // r-b
	require.False(t, v.compare.Disabled())
	require.Contains(t, v.status.Text, "2 picked")

	tap(v.compare)
	cv := v.compareView
	require.NotNil(t, cv)
	require.Equal(t, [][]string{{"parameter", "r-b", "r-a"}, {"lr", "1", "0.01"}, {"optimizer", "sgd", "adam"}}, cv.rows)

	require.Equal(t, "train/val_acc", cv.curves.picker.Selected, "the runs' objective is drawn first")
	drawn := cv.curves.chart.series
	require.Len(t, drawn, 2, "the overlaid curves are drawn")
	require.Equal(t, "lr=1 optimizer=sgd", drawn[0].name, "legends say the parameters that differ, not run IDs")
	require.Equal(t, "lr=0.01 optimizer=adam", drawn[1].name)
	img, err := cv.curves.chart.render(600, 300, 1)
	require.NoError(t, err)
	require.Equal(t, 600, img.Bounds().Dx())
}

func TestArchiveDeletesAfterConfirmationAndReportsRefusals(t *testing.T) {
	b := &fakeBackend{archive: archiveRuns(time.Now())}
	v, _ := newArchiveRig(t, b)
	var asked string
	answer := false
	v.confirm = func(_, msg string, cb func(bool)) { asked = msg; cb(answer) }
	v.deleted = make(chan error, 1)

	v.Pick("r-b", true)
	tap(v.delete)
	require.Contains(t, asked, "Delete run r-b")
	require.Empty(t, b.deleted, "declined: nothing is deleted")

	answer = true
	v.Pick("r-c", true) // running: the engine refuses it
	tap(v.delete)
	err := <-v.deleted
	require.ErrorContains(t, err, "run r-c is running")
	b.mu.Lock()
	require.Equal(t, []string{"r-b"}, b.deleted)
	b.mu.Unlock()
	require.Equal(t, []string{"r-c", "r-d", "r-a"}, rowIDs(v.model), "the deleted run left the table")
	require.Equal(t, []string{"r-c"}, idsOf(v.model.pickedRuns()), "the refused run stays picked")
}

func idsOf(es []engine.ArchiveEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestArchiveGolden(t *testing.T) {
	newTestApp(t)
	local := time.Local
	time.Local = time.UTC // the Created column prints local times
	t.Cleanup(func() { time.Local = local })
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	v := NewArchiveView(&fakeBackend{}, nil)
	w := test.NewWindow(v.Content())
	defer w.Close()
	w.Resize(fyne.NewSize(1100, 420))
	v.show(archiveRuns(now), now)
	v.Pick("r-a", true)
	v.Pick("r-b", true)
	test.AssertRendersToMarkup(t, "archive.xml", w.Canvas())
}

func TestArchiveOnScreenFollowsRunEvents(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{archive: archiveRuns(now)}
	s, _ := newTestShell(t, b)
	s.Archive.reloaded = make(chan struct{}, 4)
	ctx := context.Background()

	show(t, s, "Archive")
	<-s.Archive.reloaded
	require.Len(t, s.Archive.model.rows, 4, "opening the page reads the archive")

	b.mu.Lock()
	b.archive = append([]engine.ArchiveEntry{{RunInfo: engine.RunInfo{ID: "r-e", Template: "digits-mlp", State: engine.Queued, CreatedAt: now}}}, b.archive...)
	b.mu.Unlock()
	s.onEvent(ctx, engine.Event{Kind: engine.RunSubmitted, RunID: "r-e"})
	<-s.Archive.reloaded
	require.Len(t, s.Archive.model.rows, 5, "a new run shows without a reload tap")

	show(t, s, "Board")
	s.onEvent(ctx, engine.Event{Kind: engine.RunChanged, RunID: "r-e", State: engine.Running})
	require.Empty(t, s.Archive.reloaded, "off screen, the archive is not read again")
}
