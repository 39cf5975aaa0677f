package ui

import (
	"context"
	"os"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine/template"
)

// A study's "Launch suggested…" opens the wizard on its template with the
// suggested values, for the user to review and launch.
func TestStudyLaunchSuggestedOpensTheWizard(t *testing.T) {
	b := &studyFake{fakeBackend: fakeBackend{archive: archiveRuns(time.Now())}, studies: []StudyInfo{{
		ID: "st1", Template: "demo", State: "running", Objective: "val_acc", Goal: "max", Budget: 16, Done: 14,
		Best: 0.97, HasBest: true, BestRun: "r-a", Next: map[string]any{"lr": 0.003, "hidden": 128.0},
		Why: "expected val_acc 0.975 ± 0.004 from 14 trials"}, {
		ID: "st0", Template: "demo", State: "done", Budget: 4, Done: 4}}}
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	s := NewShell(b, NewMainView(b, w), Options{Templates: func() ([]TemplateEntry, error) { return demoEntries(t), nil }}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1200, 780))
	show(t, s, "Archive")
	tap(s.Archive.studies)
	var launches []*widget.Button
	for _, o := range s.Archive.studiesBox.Objects {
		if btn, ok := o.(*widget.Button); ok && btn.Text == "Launch suggested…" {
			launches = append(launches, btn)
		}
	}
	require.Len(t, launches, 1, "only the study with a suggestion offers one")
	tap(launches[0])
	require.NotNil(t, s.wizard, "the wizard opened")
	require.Equal(t, stepParams, s.wizard.step, "on the parameters, to review")
	require.Equal(t, "demo", s.wizard.tmpl.Name)
	require.Equal(t, "0.003", fieldOf(s.wizard, "lr").entry.Text)
	require.Equal(t, "128", fieldOf(s.wizard, "hidden").entry.Text)
	require.Equal(t, "adam", fieldOf(s.wizard, "optimizer").sel.Selected, "what the study does not search keeps its default")
	require.NotNil(t, w.Canvas().Overlays().Top(), "the wizard is on screen")
}

// launcherFake keeps the studies the wizard's Search mode launches.
type launcherFake struct {
	studyFake
	launched []StudySpec
}

func (l *launcherFake) LaunchStudy(_ context.Context, spec StudySpec) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.launched = append(l.launched, spec)
	return "st-new", nil
}

func (l *launcherFake) got() []StudySpec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]StudySpec(nil), l.launched...)
}

// The wizard's Search mode: prefilled from the schema, its form makes the
// StudySpec the engine launches, and Review says what the study is.
func TestWizardSearchModeMakesTheStudySpec(t *testing.T) {
	newTestApp(t)
	b := &launcherFake{}
	var study string
	closed := false
	wz := NewWizard(b, demoEntries(t), nil, nil, func() { closed = true })
	wz.OnStudy = func(id string) { study = id }
	w := test.NewWindow(wz.Content())
	defer w.Close()
	w.Resize(fyne.NewSize(940, 660))
	wz.list.Select(1)
	tap(wz.next)
	require.Equal(t, stepParams, wz.step)
	require.NotNil(t, wz.mode, "an engine that launches studies offers Search")
	require.Equal(t, []string{modeRuns, modeSearch}, wz.mode.Options)
	wz.mode.SetSelected(modeSearch)

	// Prefilled from the schema.
	sf := wz.search
	require.Equal(t, "16", sf.budget.Text)
	require.Equal(t, "auto", sf.parallel.Text)
	require.Equal(t, "median", sf.pruner.Selected)
	lr, hidden, opt, aug := sf.row("lr"), sf.row("hidden"), sf.row("optimizer"), sf.row("augment")
	require.Equal(t, []string{"1e-05", "1"}, []string{lr.lo.Text, lr.hi.Text})
	require.True(t, lr.log.Checked, "lr is a log float")
	require.Equal(t, []string{"8", "1024"}, []string{hidden.lo.Text, hidden.hi.Text})
	require.Nil(t, hidden.log, "an int has no scale to choose")
	require.Equal(t, []string{"adam", "sgd"}, opt.choices.Selected)
	require.Contains(t, texts(wz.body), "16 trials")

	// The user narrows lr and hidden, fixes the optimizer and augment.
	sf.budget.SetText("8")
	sf.parallel.SetText("2")
	sf.pruner.SetSelected("asha")
	lr.lo.SetText("1e-4")
	lr.hi.SetText("0.1")
	hidden.lo.SetText("16")
	hidden.hi.SetText("256")
	opt.tick.SetChecked(false)
	aug.tick.SetChecked(false)
	fieldOf(wz, "optimizer").sel.SetSelected("sgd")
	require.False(t, wz.next.Disabled(), wz.status.Text)

	// A bad range is refused on the step.
	hidden.hi.SetText("4096")
	require.True(t, wz.next.Disabled())
	require.Equal(t, "hidden: the template allows 8..1024", wz.status.Text)
	hidden.hi.SetText("256")

	tap(wz.next)
	require.Equal(t, stepReview, wz.step, "a study's trials use the template's resources: straight to Review")
	require.Contains(t, texts(wz.body), "demo: a study of 8 trials over lr (0.0001..0.1, log), hidden (16..256); 2 at once, pruner asha")
	tap(wz.back)
	require.Equal(t, stepParams, wz.step, "Back from Review goes to the parameters")
	tap(wz.next)
	tap(wz.launch)
	require.Eventually(t, func() bool { return len(b.got()) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, StudySpec{Template: "demo", Source: "bundled", Budget: 8, Parallel: "2", Pruner: "asha",
		Space: []string{"lr=0.0001..0.1:log", "hidden=16..256"},
		Sets:  map[string]string{"optimizer": "sgd", "augment": "false"}}, b.got()[0])
	require.Eventually(t, func() bool { return study == "st-new" }, 5*time.Second, 10*time.Millisecond, "the new study is shown")
	require.True(t, closed, "the wizard closes")
	require.Empty(t, b.submitted, "no run is submitted by the wizard itself")

	// An engine that launches no studies offers no Search.
	plain := NewWizard(&fakeBackend{}, demoEntries(t), nil, nil, nil)
	require.Nil(t, plain.mode)
}

// The bundled demo's Search mode, as the README quotes its Review.
func TestWizardSearchModeOnTheDemo(t *testing.T) {
	newTestApp(t)
	yaml, err := os.ReadFile("../assets/templates/digits-mlp/template.yaml")
	require.NoError(t, err)
	tm, err := template.Parse("template.yaml", yaml)
	require.NoError(t, err)
	entries := []TemplateEntry{{Name: tm.Name, Source: "bundled", Load: func() (*template.Template, error) { return tm, nil }}}
	wz := NewWizard(&launcherFake{}, entries, nil, nil, nil)
	w := test.NewWindow(wz.Content())
	defer w.Close()
	wz.list.Select(0)
	tap(wz.next)
	wz.mode.SetSelected(modeSearch)
	tap(wz.next)
	require.Equal(t, stepReview, wz.step)
	require.Contains(t, texts(wz.body), "digits-mlp: a study of 16 trials over lr (1e-05..1, log), hidden (8..1024), optimizer (adam, sgd), batch_size (8..1024); parallel auto, pruner median")
}
