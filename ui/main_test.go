package ui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/gpumon"
)

// fakeBackend is an engine stand-in holding runs in memory.
type fakeBackend struct {
	mu        sync.Mutex
	runs      []engine.RunInfo
	submitted []engine.RunSpec
	cancelled []string
	events    engine.Broker
	snap      gpumon.Snapshot
	series    []engine.Point
	dismissed []string
	done      map[string]engine.RunInfo // succeeded runs by fingerprint
	archive   []engine.ArchiveEntry     // what Archive returns, when set
	deleted   []string
	bySeries  map[string][]engine.Point // Series by "runID/stage/key", when set
	logs      map[string]string         // LogTail by "runID/stage/attempt"
	logReads  []string                  // the LogTail calls, as "runID/stage/attempt"
	placement engine.Provenance         // the Executor and ExecutorNote Provenance says, when set
}

func (f *fakeBackend) Series(_ context.Context, runID, stage, key string) ([]engine.Point, error) {
	if f.bySeries != nil {
		return f.bySeries[runID+"/"+stage+"/"+key], nil
	}
	return f.series, nil
}

// AttemptSeries gives the same points as Series, each of attempt 1 unless
// it says otherwise.
func (f *fakeBackend) AttemptSeries(ctx context.Context, runID, stage, key string) ([]engine.Point, error) {
	pts, _ := f.Series(ctx, runID, stage, key)
	out := make([]engine.Point, len(pts))
	for i, p := range pts {
		if p.Attempt == 0 {
			p.Attempt = 1
		}
		out[i] = p
	}
	return out, nil
}

func (f *fakeBackend) GPUs(context.Context) (gpumon.Snapshot, error) { return f.snap, nil }

func (f *fakeBackend) Provenance(_ context.Context, spec engine.RunSpec) (engine.Provenance, error) {
	return engine.Provenance{Fingerprint: fmt.Sprintf("fp-%v-%d", spec.Values, spec.Seed),
		Executor: f.placement.Executor, ExecutorNote: f.placement.ExecutorNote}, nil
}

func (f *fakeBackend) FindDuplicate(_ context.Context, fp string) (engine.RunInfo, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.done[fp]
	return r, ok, nil
}

func (f *fakeBackend) Executors() []string { return []string{"docker", "local"} }

func (f *fakeBackend) Dismiss(_ context.Context, runID string, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dismissed = append(f.dismissed, fmt.Sprintf("%s#%d", runID, id))
	return nil
}

func (f *fakeBackend) Runs(context.Context, int) ([]engine.RunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.RunInfo(nil), f.runs...), nil
}

func (f *fakeBackend) Run(_ context.Context, id string) (engine.RunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.runs {
		if r.ID == id {
			return r, nil
		}
	}
	return engine.RunInfo{}, errors.New("no run " + id)
}

func (f *fakeBackend) LastMetrics(_ context.Context, id string) ([]engine.Point, error) {
	return []engine.Point{{Stage: "train", Key: "val_acc", Step: 29, Value: 0.973}}, nil
}

func (f *fakeBackend) Anomalies(_ context.Context, id string) ([]engine.AnomalyInfo, error) {
	return []engine.AnomalyInfo{{ID: 7, Stage: "train", Kind: "divergence", Severity: "critical",
		Message: "loss is diverging", Fix: "lower the learning rate", At: time.Now()}}, nil
}

func (f *fakeBackend) Subscribe(buf int) *engine.Subscription { return f.events.Subscribe(buf) }

func (f *fakeBackend) Submit(_ context.Context, spec engine.RunSpec) (engine.RunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submitted = append(f.submitted, spec)
	r := engine.RunInfo{ID: "new-run", Template: "demo", State: engine.Queued, CreatedAt: time.Now()}
	f.runs = append([]engine.RunInfo{r}, f.runs...)
	return r, nil
}

func (f *fakeBackend) Cancel(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, id)
	return nil
}

func (f *fakeBackend) Archive(context.Context) ([]engine.ArchiveEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.archive != nil {
		return append([]engine.ArchiveEntry(nil), f.archive...), nil
	}
	out := make([]engine.ArchiveEntry, len(f.runs))
	for i, r := range f.runs {
		out[i].RunInfo = r
	}
	return out, nil
}

func (f *fakeBackend) DeleteRun(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := f.archive[:0]
	found := false
	for _, e := range f.archive {
		if e.ID != id {
			keep = append(keep, e)
			continue
		}
		if !e.State.Done() {
			return fmt.Errorf("run %s is %s: cancel it first", id, e.State)
		}
		found = true
	}
	if !found {
		return errors.New("no run " + id)
	}
	f.archive = keep
	f.deleted = append(f.deleted, id)
	return nil
}

func stages(states ...engine.State) []engine.StageInfo {
	names := []string{"preprocess", "train", "validate", "analyze"}
	out := make([]engine.StageInfo, len(states))
	for i, s := range states {
		out[i] = engine.StageInfo{Name: names[i], State: s, MaxAttempts: 1}
	}
	return out
}

func newTestView(t *testing.T, b *fakeBackend) (*MainView, fyne.Window) {
	t.Helper()
	newTestApp(t)
	w := test.NewWindow(nil)
	t.Cleanup(w.Close)
	v := NewMainView(b, w)
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1000, 600))
	return v, w
}

// texts collects every piece of text drawn under o.
func texts(o fyne.CanvasObject) []string {
	var out []string
	var walk func(fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		switch x := o.(type) {
		case *canvas.Text:
			out = append(out, x.Text)
		case *widget.Label:
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

func TestRunsListShowsEachStageState(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{
		{ID: "r2", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now.Add(-5 * time.Second),
			Stages: stages(engine.Succeeded, engine.Running, engine.Queued, engine.Queued)},
		{ID: "r1", Template: "digits-mlp", State: engine.Failed, CreatedAt: now.Add(-time.Hour),
			Stages: stages(engine.Succeeded, engine.Failed, engine.Cancelled, engine.Cancelled)},
	}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())

	require.Equal(t, 2, v.list.Length())
	all := texts(v.list)
	require.Contains(t, all, "r2")
	require.Contains(t, all, "running")
	require.Contains(t, all, "failed")
	require.Contains(t, all, "train")
	require.Equal(t, "2 runs: 1 running, 1 failed", v.status.Text)
	require.True(t, v.cancel.Disabled(), "nothing selected")

	v.list.Select(0)
	v.Reload(context.Background())
	require.Contains(t, v.detail.title.Text, "running")
	require.Contains(t, texts(v.detail.metrics), "train · val_acc = 0.973 (step 29)")
	require.Contains(t, texts(v.detail.anomalies), "    Fix: lower the learning rate", "an anomaly says what to do")
	require.Equal(t, "Anomalies (1)", v.detail.anomItem.Text, "the tab counts what stands")
	require.False(t, v.cancel.Disabled(), "a running run can be cancelled")

	v.list.Select(1)
	v.Reload(context.Background())
	require.True(t, v.cancel.Disabled(), "a finished run cannot")
}

func TestCancelAsksFirst(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Running, CreatedAt: now, StartedAt: now,
		Stages: stages(engine.Running)}}}
	v, w := newTestView(t, b)
	v.Reload(context.Background())
	v.list.Select(0)
	v.Reload(context.Background())
	tap(v.cancel)
	b.mu.Lock()
	require.Empty(t, b.cancelled, "nothing happens before the user confirms")
	b.mu.Unlock()
	require.NotNil(t, w.Canvas().Overlays().Top(), "a confirmation dialog is shown")
}

func TestSummary(t *testing.T) {
	require.Equal(t, "No runs yet. Launch one with New run.", summary(nil))
	require.Equal(t, "3 runs: 1 running, 2 succeeded", summary([]engine.RunInfo{
		{State: engine.Succeeded}, {State: engine.Running}, {State: engine.Succeeded}}))
}

func TestSearchAndStateFilterTheRunsList(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{
		{ID: "r3", Template: "digits-mlp", State: engine.Running, CreatedAt: now, Params: map[string]any{"lr": 0.01}},
		{ID: "r2", Template: "digits-mlp", State: engine.Failed, CreatedAt: now, Params: map[string]any{"lr": 0.5}},
		{ID: "r1", Template: "llm-finetune", State: engine.Succeeded, CreatedAt: now},
	}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	require.Equal(t, 3, v.list.Length())

	tests := []struct {
		name, query, state string
		want               int
	}{
		{"a template", "digits", "", 2},
		{"a parameter value", "lr=0.5", "", 1},
		{"every word must match", "digits lr=0.01", "", 1},
		{"a state", "", "succeeded", 1},
		{"a template in a state", "digits", "failed", 1},
		{"nothing matches", "resnet", "", 0},
		{"cleared", "", "all states", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v.query.SetText("")
			test.Type(v.query, tt.query)
			if tt.state != "" {
				v.stateSel.SetSelected(tt.state)
			} else {
				v.stateSel.SetSelected(stateFilters[0])
			}
			require.Equal(t, tt.want, v.list.Length())
		})
	}
	require.Equal(t, "3 runs: 1 running, 1 succeeded, 1 failed", v.status.Text, "the status counts every run")
}

func (f *fakeBackend) LogTail(_ context.Context, runID, stage string, attempt, lines int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logReads = append(f.logReads, fmt.Sprintf("%s/%s/%d", runID, stage, attempt))
	return f.logs[fmt.Sprintf("%s/%s/%d", runID, stage, attempt)], nil
}
