package ui

import (
	"context"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
)

func newTestShell(t *testing.T, b *fakeBackend) (*Shell, fyne.Window) {
	t.Helper()
	newTestApp(t)
	w := test.NewWindow(nil)
	t.Cleanup(w.Close)
	runs := NewMainView(b, w)
	s := NewShell(b, runs, Options{Templates: func() ([]TemplateEntry, error) { return demoEntries(t), nil }}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1200, 780))
	return s, w
}

func TestShellNavigatesBetweenPages(t *testing.T) {
	s, _ := newTestShell(t, &fakeBackend{})
	var names []string
	for _, it := range s.tabs.Items {
		names = append(names, it.Text)
	}
	require.Equal(t, []string{"Board", "Runs", "Archive", "Templates", "Settings"}, names)
	require.Equal(t, "Board", s.tabs.Selected().Text, "the board is home")
	show(t, s, "Templates")
	require.Equal(t, "Templates", s.tabs.Selected().Text)
	require.Equal(t, 2, s.templates.Length(), "bundled and user templates are listed")
}

func TestCtrlNOpensTheWizard(t *testing.T) {
	s, w := newTestShell(t, &fakeBackend{})
	require.Nil(t, w.Canvas().Overlays().Top())
	sc := &desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault}
	w.Canvas().(fyne.Shortcutable).TypedShortcut(sc)
	require.NotNil(t, w.Canvas().Overlays().Top(), "the wizard opens over the window")
	require.NotNil(t, s.wizard)
	require.Equal(t, 2, s.wizard.list.Length())
	tap(s.wizard.cancel)
	require.Nil(t, w.Canvas().Overlays().Top(), "Cancel closes it")
}

func TestOpenRunShowsItsCurve(t *testing.T) {
	now := time.Now()
	var series []engine.Point
	for i := range 50 {
		series = append(series, engine.Point{Stage: "train", Key: "loss", Step: int64(i), Value: 2 / float64(i+1)})
	}
	b := &fakeBackend{series: series, runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Running,
		CreatedAt: now, StartedAt: now, Stages: stages(engine.Running)}}}
	s, _ := newTestShell(t, b)
	s.Runs.Reload(context.Background())
	s.OpenRun("r1")
	require.Equal(t, "Runs", s.tabs.Selected().Text)
	s.Runs.Reload(context.Background())
	d := s.Runs.detail
	require.True(t, d.body.Visible())
	require.Equal(t, "train/val_acc", d.curves.picker.Selected, "the run's metric is picked")
	require.Len(t, d.curves.chart.series, 1)
	require.Len(t, d.curves.chart.series[0].ys, 50)
	img, err := d.curves.chart.render(800, 400, 1)
	require.NoError(t, err)
	require.Equal(t, 800, img.Bounds().Dx(), "the chart is drawn at the size it has")
}

func TestCurveCacheSkipsUnchangedSeries(t *testing.T) {
	newTestApp(t)
	fb := &fakeBackend{series: []engine.Point{{Stage: "train", Key: "loss", Step: 0, Value: 1}, {Stage: "train", Key: "loss", Step: 1, Value: 0.5}}}
	r := engine.RunInfo{ID: "r1"}
	last := []engine.Point{{Stage: "train", Key: "loss", Attempt: 1, Step: 1, Value: 0.5}}
	var c curveCache
	a, err := c.read(context.Background(), fb, r, "train", "loss", last)
	require.NoError(t, err)
	require.Len(t, a.series[0].ys, 2)
	fb.series = append(fb.series, engine.Point{Stage: "train", Key: "loss", Step: 2, Value: 0.3})
	again, _ := c.read(context.Background(), fb, r, "train", "loss", last)
	require.Len(t, again.series[0].ys, 2, "no new last point: the series is not read again")
	last[0].Step, last[0].Value = 2, 0.3
	fresh, _ := c.read(context.Background(), fb, r, "train", "loss", last)
	require.Len(t, fresh.series[0].ys, 3, "a new point: read again")
	require.NotEqual(t, a.id, fresh.id)
}

func TestCloneOpensTheWizardPrefilled(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "demo", State: engine.Failed, CreatedAt: now, Priority: 3, Executor: "local",
		Params: map[string]any{"lr": 0.5, "hidden": float64(256), "optimizer": "sgd", "augment": true}, Stages: stages(engine.Failed)}}}
	s, _ := newTestShell(t, b)
	s.Runs.Reload(context.Background())
	s.OpenRun("r1")
	s.Runs.Reload(context.Background())
	require.False(t, s.Runs.clone.Disabled())
	tap(s.Runs.clone)

	w := s.wizard
	require.Equal(t, stepParams, w.step, "straight to the parameters")
	require.Equal(t, "0.5", w.fields[0].entry.Text)
	require.Equal(t, "256", w.fields[1].entry.Text)
	require.Equal(t, "sgd", w.fields[2].sel.Selected)
	require.True(t, w.fields[3].check.Checked)
	require.Equal(t, "3", w.priority.Text)
	require.Equal(t, "local", w.executor.Selected)
}

func TestDismissAnAnomaly(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Running, CreatedAt: now, StartedAt: now, Stages: stages(engine.Running)}}}
	s, _ := newTestShell(t, b)
	s.Runs.Reload(context.Background())
	s.OpenRun("r1")
	s.Runs.Reload(context.Background())
	var dismiss *widget.Button
	for _, o := range s.Runs.detail.anomalies.Objects {
		if c, ok := o.(*fyne.Container); ok {
			for _, x := range c.Objects {
				if box, ok := x.(*fyne.Container); ok && len(box.Objects) == 1 {
					if btn, ok := box.Objects[0].(*widget.Button); ok {
						dismiss = btn
					}
				}
			}
		}
	}
	require.NotNil(t, dismiss, "a standing anomaly has a Dismiss button")
	tap(dismiss)
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.dismissed) == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"r1#7"}, b.dismissed)
}

func TestNotifications(t *testing.T) {
	tests := []struct {
		name string
		ev   engine.Event
		want *fyne.Notification
	}{
		{"finished", engine.Event{Kind: engine.RunChanged, RunID: "r1", State: engine.Succeeded},
			fyne.NewNotification("Run finished", "Run r1 succeeded.")},
		{"failed", engine.Event{Kind: engine.RunChanged, RunID: "r1", State: engine.Failed, Reason: "train exited with 1"},
			fyne.NewNotification("Run failed", "Run r1 failed. train exited with 1")},
		{"anomaly", engine.Event{Kind: engine.AnomalyRaised, RunID: "r1", Stage: "train", Reason: "loss is NaN"},
			fyne.NewNotification("Trouble in r1/train", "loss is NaN")},
		{"a run starting is not news", engine.Event{Kind: engine.RunChanged, RunID: "r1", State: engine.Running}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestShell(t, &fakeBackend{})
			test.AssertNotificationSent(t, tt.want, func() { s.notify(tt.ev) })
		})
	}
	t.Run("turned off in Settings", func(t *testing.T) {
		s, _ := newTestShell(t, &fakeBackend{})
		require.True(t, s.notifyCheck.Checked, "on by default")
		tap(s.notifyCheck)
		test.AssertNotificationSent(t, nil, func() {
			s.notify(engine.Event{Kind: engine.RunChanged, RunID: "r1", State: engine.Succeeded})
		})
	})
}
