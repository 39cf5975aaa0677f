package ui

import (
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"
)

// A study's "Launch suggested…" opens the wizard on its template with the
// suggested values, for the user to review and launch.
func TestStudyLaunchSuggestedOpensTheWizard(t *testing.T) {
	b := &studyFake{fakeBackend: fakeBackend{archive: archiveRuns(time.Now())}, studies: []StudyInfo{{
		ID: "st1", Template: "demo", State: "running", Objective: "val_acc", Goal: "max", Budget: 16, Done: 14,
		Best: 0.97, HasBest: true, BestRun: "r-a", Next: map[string]any{"lr": 0.003, "hidden": 128.0},
		Why: "expected val_acc 0.975 ± 0.004 from 14 trials"}, {
		ID: "st0", Template: "demo", State: "done", Budget: 4, Done: 4}}}
	test.NewTempApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	s := NewShell(b, NewMainView(b, w), Options{Templates: func() ([]TemplateEntry, error) { return demoEntries(t), nil }}, w)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1200, 780))
	s.Show("Archive")
	test.Tap(s.Archive.studies)
	var launches []*widget.Button
	for _, o := range s.Archive.studiesBox.Objects {
		if btn, ok := o.(*widget.Button); ok && btn.Text == "Launch suggested…" {
			launches = append(launches, btn)
		}
	}
	require.Len(t, launches, 1, "only the study with a suggestion offers one")
	test.Tap(launches[0])
	require.NotNil(t, s.wizard, "the wizard opened")
	require.Equal(t, stepParams, s.wizard.step, "on the parameters, to review")
	require.Equal(t, "demo", s.wizard.tmpl.Name)
	require.Equal(t, "0.003", fieldOf(s.wizard, "lr").entry.Text)
	require.Equal(t, "128", fieldOf(s.wizard, "hidden").entry.Text)
	require.Equal(t, "adam", fieldOf(s.wizard, "optimizer").sel.Selected, "what the study does not search keeps its default")
	require.NotNil(t, w.Canvas().Overlays().Top(), "the wizard is on screen")
}
