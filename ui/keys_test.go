package ui

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/gpumon"
)

// Enter goes through the wizard's steps and launches; the focus starts on
// each step's first control, where it can be seen.
func TestWizardKeyboard(t *testing.T) {
	b := &fakeBackend{}
	s, w := newTestShell(t, b)
	s.OpenWizard()
	wz := s.wizard
	require.Equal(t, fyne.Focusable(wz.list), w.Canvas().Focused(), "the template list has the focus")
	require.Equal(t, 1, wz.selected, "the first template that can be launched is picked")
	pressKey(w, fyne.KeyReturn)
	require.Equal(t, stepParams, wz.step)
	require.Equal(t, fyne.Focusable(fieldOf(wz, "lr").entry), w.Canvas().Focused(), "the first parameter has the focus")
	fieldOf(wz, "lr").entry.SetText("lots")
	pressKey(w, fyne.KeyReturn)
	require.Equal(t, stepParams, wz.step, "a bad value: Enter does not go on")
	fieldOf(wz, "lr").entry.SetText("0.02")
	pressKey(w, fyne.KeyReturn) // from the focused entry
	require.Equal(t, stepResources, wz.step)
	require.Equal(t, fyne.Focusable(wz.priority), w.Canvas().Focused())
	pressKey(w, fyne.KeyReturn)
	require.Equal(t, stepReview, wz.step)
	pressKey(w, fyne.KeyReturn)
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.submitted) == 1
	}, 5*time.Second, 10*time.Millisecond, "Enter on Review launches")
	require.Eventually(t, func() bool { return w.Canvas().Overlays().Top() == nil }, 5*time.Second, 10*time.Millisecond, "and closes the wizard")

	// Escape from every step.
	for step := stepTemplate; step <= stepReview; step++ {
		s.OpenWizard()
		s.wizard.list.Select(1)
		for s.wizard.step < step {
			s.wizard.Enter()
		}
		pressKey(w, fyne.KeyEscape)
		require.Nil(t, w.Canvas().Overlays().Top(), "Escape on step %d", step+1)
	}
}

// Reset to defaults undoes a Clone's values.
func TestWizardResetToDefaults(t *testing.T) {
	s, _ := newTestShell(t, &fakeBackend{})
	s.CloneRun(engine.RunInfo{ID: "r1", Template: "demo", Priority: 5, Params: map[string]any{"lr": 0.5, "hidden": 128.0, "optimizer": "sgd", "augment": true}})
	wz := s.wizard
	fieldOf(wz, "hidden").sweep.SetChecked(true)
	fieldOf(wz, "hidden").sweepEntry.SetText("32, 64")
	tap(wz.reset)
	require.Equal(t, "0.01", fieldOf(wz, "lr").entry.Text)
	require.Equal(t, "64", fieldOf(wz, "hidden").entry.Text)
	require.False(t, fieldOf(wz, "hidden").sweep.Checked, "no sweep")
	require.Equal(t, "adam", fieldOf(wz, "optimizer").sel.Selected)
	require.False(t, fieldOf(wz, "augment").check.Checked)
	require.Equal(t, "0", wz.priority.Text)
	n, err := wz.runTotal()
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// On a machine with GPUs, a template whose GPU count is a parameter
// (digits-mlp's gpus) starts at one GPU.
func TestWizardAsksForAGPUWhereThereIsOne(t *testing.T) {
	const gpuYAML = `name: g
runtime: {kind: local}
params:
  gpus: {type: int, default: 0, min: 0, max: 8}
  gpu_memory: {type: string, default: 2GiB}
stages:
  - {name: train, command: [/bin/true], gpus: "${params.gpus}", gpu_memory: "${params.gpu_memory}"}
`
	entries := func(t *testing.T) []TemplateEntry {
		return []TemplateEntry{{Name: "g", Load: func() (*templateT, error) { return parseT(t, gpuYAML) }}}
	}
	newTestApp(t)
	with := &fakeBackend{snap: simSnapshot(t, "2xA100-80GB")}
	wz := NewWizard(with, entries(t), nil, nil, nil)
	wz.list.Select(0)
	require.Equal(t, "1", fieldOf(wz, "gpus").entry.Text)
	wz.show(stepReview)
	require.Nil(t, wz.refusal, "one A100 holds it")
	require.Equal(t, "gpu_memory=2GiB  gpus=1", specLine(wz.specs[0]))

	without := &fakeBackend{snap: gpumon.Snapshot{Reason: "NVML library not found"}}
	wz = NewWizard(without, entries(t), nil, nil, nil)
	wz.list.Select(0)
	require.Equal(t, "0", fieldOf(wz, "gpus").entry.Text, "no GPU: the CPU")
	fieldOf(wz, "gpus").entry.SetText("1")
	wz.show(stepReview)
	require.ErrorContains(t, wz.refusal, "stage train can never start here: it needs 1 GPU with 2 GiB each and this machine has no usable GPU (NVML library not found). Lower gpus")
	require.True(t, wz.launch.Disabled())
}

func TestCancelConfirmKeys(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Running, CreatedAt: now, StartedAt: now,
		Stages: stages(engine.Running)}}}
	v, w := newTestView(t, b)
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	tap(v.cancel)
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape keeps the run")
	b.mu.Lock()
	require.Empty(t, b.cancelled)
	b.mu.Unlock()
	tap(v.cancel)
	pressKey(w, fyne.KeyReturn)
	require.Nil(t, w.Canvas().Overlays().Top())
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.cancelled) == 1
	}, 5*time.Second, 10*time.Millisecond, "Enter stops it")
}

func TestDuplicateDialogKeys(t *testing.T) {
	r := newWizardRig(t)
	var opened string
	r.w.OnOpenRun = func(id string) { opened = id }
	r.w.Win = r.win
	r.w.list.Select(1)
	r.w.show(stepReview)
	p, err := r.b.Provenance(context.Background(), r.w.specs[0])
	require.NoError(t, err)
	r.b.done = map[string]engine.RunInfo{p.Fingerprint: {ID: "earlier-run", State: engine.Succeeded}}

	tap(r.w.launch)
	require.Eventually(t, func() bool { return r.win.Canvas().Overlays().Top() != nil }, 5*time.Second, 10*time.Millisecond)
	pressKey(r.win, fyne.KeyEscape)
	require.Nil(t, r.win.Canvas().Overlays().Top(), "Escape goes back to the review")
	require.False(t, r.w.launch.Disabled())

	tap(r.w.launch)
	require.Eventually(t, func() bool { return r.win.Canvas().Overlays().Top() != nil }, 5*time.Second, 10*time.Millisecond)
	pressKey(r.win, fyne.KeyReturn)
	require.Equal(t, "earlier-run", opened, "Enter opens the earlier run")
	r.b.mu.Lock()
	require.Empty(t, r.b.submitted)
	r.b.mu.Unlock()
}

func TestExportDialogKeys(t *testing.T) {
	dir := t.TempDir()
	rec := &recordingExporter{}
	v := exportView(t, rec, dir)
	w := v.win
	tap(v.export)
	require.NotNil(t, w.Canvas().Overlays().Top())
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape closes the export dialog")

	tap(v.export)
	w.Canvas().Focus(v.exportForm.format)
	pressKey(w, fyne.KeyReturn) // from the focused format choice
	select {
	case err := <-v.exported:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Enter did not export")
	}
	_, err := os.Stat(filepath.Join(dir, "report-r1.pdf"))
	require.NoError(t, err, "Enter confirmed the form: the PDF was written")
}

func TestErrorAndArchiveDialogKeys(t *testing.T) {
	b := &fakeBackend{archive: archiveRuns(time.Now())}
	v, w := newArchiveRig(t, b)
	showError(os.ErrNotExist, w)
	require.NotNil(t, w.Canvas().Overlays().Top())
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape dismisses an error")

	v.confirm = func(title, msg string, cb func(bool)) { showConfirm(w, title, msg, "Delete", "Keep them", cb) }
	v.Pick("r-a", true)
	v.Pick("r-b", true)
	tap(v.delete)
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top())
	b.mu.Lock()
	require.Empty(t, b.deleted, "Escape deletes nothing")
	b.mu.Unlock()

	v.loadCompare = func(*compareView) {}
	tap(v.compare)
	require.NotNil(t, w.Canvas().Overlays().Top())
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape closes the comparison")

	tap(v.hparams)
	require.NotNil(t, w.Canvas().Overlays().Top())
	pressKey(w, fyne.KeyReturn)
	require.Nil(t, w.Canvas().Overlays().Top(), "Enter closes the hyperparameter view")

	v.deleted = make(chan error, 1)
	tap(v.delete)
	pressKey(w, fyne.KeyReturn)
	select {
	case err := <-v.deleted:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Enter did not delete")
	}
	b.mu.Lock()
	require.ElementsMatch(t, []string{"r-a", "r-b"}, b.deleted)
	b.mu.Unlock()
}

// A focused button answers Enter as a click.
func TestKeyButtonEnter(t *testing.T) {
	newTestApp(t)
	n := 0
	b := newKeyButton("Go", nil, func() { n++ })
	w := test.NewWindow(b)
	defer w.Close()
	w.Canvas().Focus(b)
	pressKey(w, fyne.KeyReturn)
	require.Equal(t, 1, n)
	b.Disable()
	pressKey(w, fyne.KeyReturn)
	require.Equal(t, 1, n, "not when disabled")

}

// A sweep with a point already done launches only the new ones on Enter.
func TestDuplicateDialogLaunchesOnlyTheNewPoints(t *testing.T) {
	r := newWizardRig(t)
	r.w.Win = r.win
	r.w.list.Select(1)
	tap(r.w.next)
	h := r.field("hidden")
	h.sweep.SetChecked(true)
	h.sweepEntry.SetText("32, 64, 128")
	r.w.show(stepReview)
	require.Len(t, r.w.specs, 3)
	require.NotEmpty(t, r.w.specs[0].Sweep, "the points of a sweep share its id")
	require.Equal(t, r.w.specs[0].Sweep, r.w.specs[2].Sweep)
	p, err := r.b.Provenance(context.Background(), r.w.specs[1])
	require.NoError(t, err)
	r.b.done = map[string]engine.RunInfo{p.Fingerprint: {ID: "earlier-run", State: engine.Succeeded}}
	tap(r.w.launch)
	require.Eventually(t, func() bool { return r.win.Canvas().Overlays().Top() != nil }, 5*time.Second, 10*time.Millisecond)
	pressKey(r.win, fyne.KeyReturn)
	select {
	case <-r.launched:
	case <-time.After(10 * time.Second):
		t.Fatal("the launch never finished")
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	require.Len(t, r.b.submitted, 2, "the point already done is left out")
	for _, s := range r.b.submitted {
		require.NotEqual(t, int64(64), s.Values["hidden"])
	}
}

func TestWideRangeTurnsOnLogY(t *testing.T) {
	blowUp := newChartSeries("attempt 1", 3)
	for i, v := range []float64{2, 1e3, 1e15} {
		blowUp.add(int64(i), time.Time{}, v)
	}
	calm := newChartSeries("attempt 2", 2)
	calm.add(0, time.Time{}, 2)
	calm.add(1, time.Time{}, 0.5)
	require.True(t, wideRange([]chartSeries{blowUp, calm}))
	require.False(t, wideRange([]chartSeries{calm}))
	neg := newChartSeries("x", 2)
	neg.add(0, time.Time{}, -1)
	neg.add(1, time.Time{}, 1e9)
	require.False(t, wideRange([]chartSeries{neg}), "not on a log scale: a value ≤ 0")

	newTestApp(t)
	p := newCurvePanel()
	p.show([]string{"train/loss"}, curveData{name: "train/loss", id: "1", series: []chartSeries{blowUp, calm}})
	require.True(t, p.logY.Checked, "a metric that blew up opens on a log scale")
	p.logY.SetChecked(false)
	p.show([]string{"train/loss"}, curveData{name: "train/loss", id: "2", series: []chartSeries{blowUp, calm}})
	require.False(t, p.logY.Checked, "new points keep the user's choice")
}

// The archive's column chooser: Escape keeps the columns as they were,
// Enter applies what is ticked.
func TestArchiveColumnsDialogKeys(t *testing.T) {
	b := &fakeBackend{archive: archiveRuns(time.Now())}
	v, w := newArchiveRig(t, b)
	before := v.model.columnCount()
	tap(v.columns)
	require.NotNil(t, w.Canvas().Overlays().Top())
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape closes the chooser")
	require.Equal(t, before, v.model.columnCount())

	v.setHidden(map[string]bool{"lr": true})
	require.Equal(t, before-1, v.model.columnCount())
	tap(v.columns)
	pressKey(w, fyne.KeyReturn)
	require.Nil(t, w.Canvas().Overlays().Top(), "Enter applies and closes")
	require.Equal(t, before-1, v.model.columnCount(), "Enter kept what was ticked: lr stays off")
}

// endedFake's run ends while the user confirms the cancel.
type endedFake struct{ fakeBackend }

func (e *endedFake) Cancel(_ context.Context, id string) error {
	return &engine.EndedError{ID: id, State: engine.Succeeded}
}

// A cancel that races the run's end is no error: the window says there
// was nothing to stop, under a title that says so, not "Error".
func TestCancelOfARunThatJustEndedIsNoError(t *testing.T) {
	now := time.Now()
	b := &endedFake{fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Running, CreatedAt: now, StartedAt: now,
		Stages: stages(engine.Running)}}}}
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	v := NewMainView(b, w)
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1000, 700))
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	tap(v.cancel)
	pressKey(w, fyne.KeyReturn)
	var got []string
	require.Eventually(t, func() bool {
		fyne.DoAndWait(func() {
			got = nil
			if top := w.Canvas().Overlays().Top(); top != nil {
				got = texts(top)
			}
		})
		return slices.Contains(got, "Nothing to stop")
	}, 5*time.Second, 10*time.Millisecond, "got %q", got)
	require.Contains(t, got, "Run r1 had already succeeded before the cancel reached it.")
	require.NotContains(t, got, "Error")
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape dismisses it")
}
