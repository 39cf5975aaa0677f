package ui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"
)

// adviserFake answers the Templates page's question from a table.
type adviserFake struct {
	fakeBackend
	amu    sync.Mutex
	advice map[string]Advice
	asked  []string
}

func (a *adviserFake) Advise(_ context.Context, tmpl string) (Advice, error) {
	a.amu.Lock()
	defer a.amu.Unlock()
	a.asked = append(a.asked, tmpl)
	adv, ok := a.advice[tmpl]
	if !ok {
		return Advice{}, errors.New("a suggestion needs 2 succeeded runs of " + tmpl + " that report val_acc with the same other values; the archive has 1")
	}
	return adv, nil
}

// The Templates page says what to run next of the template on screen, as
// the archive's model sees it, and one click opens the wizard with those
// values; a template with too few runs says why it has no suggestion.
func TestTemplatesPageSuggestsTheNextRun(t *testing.T) {
	b := &adviserFake{advice: map[string]Advice{"demo": {
		Values:   map[string]any{"lr": 0.0031622776601683794, "hidden": int64(128), "optimizer": "sgd"},
		Searched: []string{"lr", "hidden"},
		Why:      "expected val_acc 0.975 ± 0.004 from 14 runs",
	}}}
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	s := NewShell(b, NewMainView(b, w), Options{Templates: func() ([]TemplateEntry, error) { return demoEntries(t), nil }}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1200, 780))
	show(t, s, "Templates")
	require.False(t, s.advice.box.Visible(), "nothing picked, nothing suggested")
	s.advice.answered = make(chan struct{}, 8)
	answered := func() {
		t.Helper()
		select {
		case <-s.advice.answered:
		case <-time.After(10 * time.Second):
			t.Fatal("no answer shown")
		}
	}

	s.templates.Select(1) // demo
	answered()
	require.Equal(t, "Suggested next: lr=0.00316, hidden=128 — expected val_acc 0.975 ± 0.004 from 14 runs", s.advice.line.Text)
	require.True(t, s.advice.launch.Visible())
	tap(s.advice.launch)
	require.NotNil(t, s.wizard, "the wizard opened")
	require.Equal(t, stepParams, s.wizard.step, "on the parameters, to review")
	require.Equal(t, "demo", s.wizard.tmpl.Name)
	require.Equal(t, "0.0031622776601683794", fieldOf(s.wizard, "lr").entry.Text, "the value itself, not its rounding")
	require.Equal(t, "128", fieldOf(s.wizard, "hidden").entry.Text)
	require.Equal(t, "sgd", fieldOf(s.wizard, "optimizer").sel.Selected, "the other values of the runs it learnt from")
	tap(s.wizard.cancel)

	s.templates.Select(0) // broken: does not parse
	require.False(t, s.advice.box.Visible())

	b.amu.Lock()
	b.advice = nil
	b.amu.Unlock()
	s.templates.Unselect(0)
	s.templates.Select(1)
	answered()
	require.Equal(t, "No suggestion yet: a suggestion needs 2 succeeded runs of demo that report val_acc with the same other values; the archive has 1", s.advice.line.Text)
	require.False(t, s.advice.launch.Visible(), "nothing to launch")

	// A template that can never be advised on (no objective) shows no
	// suggestion at all.
	b.amu.Lock()
	b.advice = map[string]Advice{"demo": {}}
	b.amu.Unlock()
	s.templates.Unselect(1)
	s.templates.Select(1)
	answered()
	require.False(t, s.advice.box.Visible())
	b.amu.Lock()
	defer b.amu.Unlock()
	require.Equal(t, []string{"demo", "demo", "demo"}, b.asked, "a template that does not parse is not asked about")
}

// liveStudies is a study backend whose studies change under the test.
type liveStudies struct {
	fakeBackend
	smu     sync.Mutex
	studies []StudyInfo
}

func (l *liveStudies) Studies(context.Context) ([]StudyInfo, error) {
	l.smu.Lock()
	defer l.smu.Unlock()
	return append([]StudyInfo(nil), l.studies...), nil
}

func (l *liveStudies) set(s ...StudyInfo) {
	l.smu.Lock()
	defer l.smu.Unlock()
	l.studies = s
}

// The study view is live: a trial's run changing (the archive's reload)
// shows the study's new figures, and so does a study's own change, with
// no run event, within a few seconds; closed, it reads nothing more.
func TestStudyViewIsLive(t *testing.T) {
	b := &liveStudies{fakeBackend: fakeBackend{archive: archiveRuns(time.Now())}}
	b.set(StudyInfo{ID: "st1", Template: "demo", State: "running", Objective: "val_acc", Goal: "max", Budget: 8, Done: 2, Running: 2})
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	v := NewArchiveView(b, w)
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1000, 600))
	tap(v.studies)
	boxText := func() []string {
		v.studiesMu.Lock()
		defer v.studiesMu.Unlock()
		return texts(v.studiesBox)
	}
	require.Contains(t, boxText(), "2 of 8 trials done · 2 running")

	b.set(StudyInfo{ID: "st1", Template: "demo", State: "running", Objective: "val_acc", Goal: "max", Budget: 8, Done: 3, Running: 2,
		Best: 0.95, HasBest: true, BestRun: "r-a"})
	v.Reload(context.Background()) // what a trial's run event does while the Archive is on screen
	require.Contains(t, boxText(), "3 of 8 trials done · 2 running · best val_acc ↑ 0.95 (run r-a)")

	b.set(StudyInfo{ID: "st1", Template: "demo", State: "done", Objective: "val_acc", Goal: "max", Budget: 8, Done: 8,
		Best: 0.97, HasBest: true, BestRun: "r-b"})
	require.Eventually(t, func() bool {
		got := boxText()
		return len(got) > 0 && got[0] == "st1 · demo · done"
	}, 10*time.Second, 20*time.Millisecond, "the view followed the study's end")

	v.studiesMu.Lock() // no tick's fill while the dialog closes
	pressKey(w, fyne.KeyEscape)
	v.studiesMu.Unlock()
	require.Nil(t, w.Canvas().Overlays().Top())
	require.False(t, v.studiesOpen.Load())
	b.set()
	v.Reload(context.Background())
	require.Contains(t, boxText(), "st1 · demo · done", "a closed view is not read again")
}

// The study view lists each trial with its state, searched values and
// objective (a tap opens its run), what drove the next suggestion and
// how much each parameter matters.
func TestStudyViewListsTheTrials(t *testing.T) {
	b := &liveStudies{fakeBackend: fakeBackend{archive: archiveRuns(time.Now())}}
	b.set(StudyInfo{ID: "st1", Template: "demo", State: "running", Objective: "val_acc", Goal: "max", Budget: 8, Done: 2, Running: 1, Pruned: 1,
		Next: map[string]any{"lr": 0.003}, Why: "expected val_acc 0.9750 ± 0.004 from 2 trials",
		Drivers: "r-a (val_acc 0.97, 60%), r-b (val_acc 0.81, 40%)", Importance: "lr 80%, hidden 20%",
		Trials: []StudyTrial{
			{Number: 1, Run: "r-a", State: "done", Method: "defaults", Params: map[string]any{"lr": 0.0031622776601683794, "hidden": int64(1024)}, Objective: 0.97, HasObjective: true},
			{Number: 2, Run: "r-b", State: "pruned", Params: map[string]any{"lr": 0.3, "hidden": int64(8)}, Objective: 0.81, HasObjective: true,
				Why: "val_acc 0.81 at step 10, median of 2 trials 0.90"},
			{Number: 3, State: "running", Params: map[string]any{"lr": 0.01, "hidden": int64(64)}},
		}})
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	v := NewArchiveView(b, w)
	var opened string
	v.OnOpen = func(id string) { opened = id }
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1000, 600))
	tap(v.studies)
	got := texts(v.studiesBox)
	require.Contains(t, got, "Driven most by r-a (val_acc 0.97, 60%), r-b (val_acc 0.81, 40%)")
	require.Contains(t, got, "Parameter importance: lr 80%, hidden 20%")
	require.Contains(t, got, "#1 done (defaults) · hidden=1024 lr=0.00316 · val_acc 0.97 · run r-a")
	require.Contains(t, got, "#2 pruned · hidden=8 lr=0.3 · val_acc 0.81 · stopped early: val_acc 0.81 at step 10, median of 2 trials 0.90 · run r-b")
	require.Contains(t, got, "#3 running · hidden=64 lr=0.01")
	for _, o := range v.studiesBox.Objects {
		if btn, ok := o.(*widget.Button); ok && strings.HasPrefix(btn.Text, "#2 ") {
			tap(btn)
		}
	}
	require.Equal(t, "r-b", opened, "a trial opens its run")
	require.Nil(t, w.Canvas().Overlays().Top())
}
