package ui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// StudyInfo is one hyperparameter study as the window shows it: a search
// whose trials are ordinary runs (`niuma tune`).
type StudyInfo struct {
	ID, Template string
	State        string // running, done, stopped
	// Objective and Goal ("min" or "max") are what the trials are judged by.
	Objective, Goal string
	Budget          int // trials it may run
	Done, Running   int // trials finished, and running now
	Pruned          int // trials stopped early as losing
	// Best is the best objective so far and BestRun its trial (valid when
	// HasBest).
	Best    float64
	HasBest bool
	BestRun string
	// Next is the values the search suggests next and Why, in words, why
	// (what the model expects of them); empty when it has none.
	Next map[string]any
	Why  string
	// Drivers names the earlier trials that weigh most in the next
	// suggestion and Importance how much each searched parameter matters
	// ("lr 62%, hidden 21%"); empty while the model has too few results.
	Drivers, Importance string
	Trials              []StudyTrial
}

// StudyTrial is one trial of a study: its run, state (running, done,
// pruned, failed, cancelled), searched values and objective; Why is a
// pruned trial's evidence.
type StudyTrial struct {
	Number       int
	Run, State   string
	Method       string // what proposed it: defaults, random, parzen, bayes
	Params       map[string]any
	Objective    float64
	HasObjective bool
	Why          string
}

// studyBackend is what the engine offers for the archive's study view:
// every study, newest first, as StudyInfo. Without it the archive has no
// Studies button; a study's trials are still runs, grouped as their sweep.
type studyBackend interface {
	Studies(ctx context.Context) ([]StudyInfo, error)
}

// StudySpec is a study the wizard's Search mode launches, in the terms of
// `niuma tune`: Space and Sets read as its --space and --set.
type StudySpec struct {
	Template string // the template's name
	Source   string // where it comes from: "bundled" or its file (TemplateEntry.Source)
	Budget   int    // trials
	Parallel string // "auto" or a number of trials at once
	Pruner   string // median, asha or none
	// Space is what to search, one NAME=LO..HI, NAME=LO..HI:log or
	// NAME=A,B per parameter, in the template's order.
	Space []string
	// Sets is the values of the parameters not searched.
	Sets map[string]string
}

// studyLauncher is what the engine offers for the wizard's Search mode:
// store a study and drive its trials, returning its ID. Without it the
// wizard offers no Search.
type studyLauncher interface {
	LaunchStudy(ctx context.Context, spec StudySpec) (id string, err error)
}

// studyLines is what the study view says about one study: a title and a
// line of figures, and the suggestion when there is one.
func studyLines(s StudyInfo) (title, figures, next string) {
	title = fmt.Sprintf("%s · %s · %s", s.ID, s.Template, s.State)
	parts := []string{fmt.Sprintf("%d of %d trials done", s.Done, s.Budget)}
	if s.Running > 0 {
		parts = append(parts, fmt.Sprintf("%d running", s.Running))
	}
	if s.Pruned > 0 {
		parts = append(parts, fmt.Sprintf("%d stopped early", s.Pruned))
	}
	if s.HasBest {
		arrow := "↓"
		if s.Goal == "max" {
			arrow = "↑"
		}
		parts = append(parts, fmt.Sprintf("best %s %s %.4g (run %s)", s.Objective, arrow, s.Best, s.BestRun))
	}
	figures = strings.Join(parts, " · ")
	if len(s.Next) > 0 {
		next = "Next: " + strings.Join(paramPairs(s.Next, nil), " ")
		if s.Why != "" {
			next += " — " + s.Why
		}
	}
	return title, figures, next
}

// Studies shows every study with its progress, best trial (a tap opens
// it) and next suggestion; Enter and Escape close it. While it is open it
// stays live: each reload of the archive (a run submitted or changing
// state, which is what a trial is) reads the studies again.
func (v *ArchiveView) Studies() {
	sb, ok := v.backend.(studyBackend)
	if !ok || v.win == nil {
		return
	}
	read := v.studiesRead.Add(1)
	studies, err := sb.Studies(context.Background())
	if err != nil {
		showError(fmt.Errorf("read the studies: %w", err), v.win)
		return
	}
	box := container.NewVBox()
	scroll := container.NewVScroll(box)
	scroll.SetMinSize(fyne.NewSize(640, 360))
	d := dialog.NewCustom("Studies", "Close", scroll, v.win)
	v.studiesMu.Lock()
	v.studiesFilled = read
	v.studiesBox, v.studiesDlg = box, d
	v.fillStudiesLocked(studies)
	v.studiesMu.Unlock()
	v.studiesOpen.Store(true)
	closed := make(chan struct{})
	showWithKeysUntil(d, v.win, d.Hide, d.Hide, func() {
		v.studiesOpen.Store(false)
		close(closed)
	})
	// A study's own changes (it ends, its next suggestion moves) come
	// with no run event: read them every couple of seconds too, until
	// the dialog or the view closes.
	v.tasks.Follow(context.Background(), func(ctx context.Context) {
		tick := time.NewTicker(studiesPeriod)
		defer tick.Stop()
		for {
			select {
			case <-closed:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if fill := v.refreshStudies(ctx); fill != nil {
					onUI(fill)
				}
			}
		}
	})
}

// maxTrialLines is how many trials a study shows in the study view.
const maxTrialLines = 40

// trialLine is one trial in the study view: "#3 pruned (bayes) ·
// hidden=128 lr=0.003 · val_acc 0.951 · stopped early: … · run r-b".
func trialLine(t StudyTrial, objective string) string {
	head := fmt.Sprintf("#%d %s", t.Number, t.State)
	if t.Method != "" {
		head += " (" + t.Method + ")"
	}
	parts := []string{head}
	var vals []string
	for _, k := range sortedParamKeys(t.Params) {
		vals = append(vals, k+"="+shortParam(t.Params[k]))
	}
	if len(vals) > 0 {
		parts = append(parts, strings.Join(vals, " "))
	}
	if t.HasObjective {
		parts = append(parts, fmt.Sprintf("%s %.4g", objective, t.Objective))
	}
	if t.Why != "" {
		parts = append(parts, "stopped early: "+t.Why)
	}
	if t.Run != "" {
		parts = append(parts, "run "+t.Run)
	}
	return strings.Join(parts, " · ")
}

// lowLine is a wrapped line of lesser importance.
func lowLine(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.LowImportance
	return l
}

// studiesPeriod is how often the open study view reads the studies again.
const studiesPeriod = 2 * time.Second

// refreshStudies reads the studies again for the open study view (off
// Fyne's thread); fill, called on it, shows them. Nil while none is open
// or the read failed (the view keeps what it shows).
func (v *ArchiveView) refreshStudies(ctx context.Context) (fill func()) {
	sb, ok := v.backend.(studyBackend)
	if !ok || !v.studiesOpen.Load() {
		return nil
	}
	read := v.studiesRead.Add(1)
	studies, err := sb.Studies(ctx)
	if err != nil {
		return nil
	}
	return func() {
		// Reads overlap (the ticker's and a reload's): an older one
		// landing last must not put back what a newer one replaced. The
		// lock is taken first: a test that holds it while it closes the
		// view sees no fill after.
		v.studiesMu.Lock()
		defer v.studiesMu.Unlock()
		if v.studiesOpen.Load() && read > v.studiesFilled {
			v.studiesFilled = read
			v.fillStudiesLocked(studies)
		}
	}
}

// fillStudies puts studies in the study view, in place of what it showed.
func (v *ArchiveView) fillStudies(studies []StudyInfo) {
	v.studiesMu.Lock()
	defer v.studiesMu.Unlock()
	v.fillStudiesLocked(studies)
}

// fillStudiesLocked is fillStudies with studiesMu held. On Fyne's thread in the window; the lock keeps a test's reads of the
// box apart from the ticker's fills (its driver runs them where they are
// called).
func (v *ArchiveView) fillStudiesLocked(studies []StudyInfo) {
	box, d := v.studiesBox, v.studiesDlg
	box.RemoveAll()
	if len(studies) == 0 {
		box.Add(widget.NewLabel("No studies yet: `niuma tune TEMPLATE --budget 40` starts one."))
	}
	for _, s := range studies {
		title, figures, next := studyLines(s)
		box.Add(widget.NewLabelWithStyle(title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true}))
		box.Add(widget.NewLabel(figures))
		if next != "" {
			n := widget.NewLabel(next)
			n.Wrapping = fyne.TextWrapWord
			n.Importance = widget.LowImportance
			box.Add(n)
		}
		if s.Drivers != "" {
			box.Add(lowLine("Driven most by " + s.Drivers))
		}
		if s.Importance != "" {
			box.Add(lowLine("Parameter importance: " + s.Importance))
		}
		for i, tr := range s.Trials {
			if i == maxTrialLines {
				box.Add(lowLine(fmt.Sprintf("… and %d more trials (`niuma tune --status %s` lists them all)", len(s.Trials)-i, s.ID)))
				break
			}
			line := widget.NewButton(trialLine(tr, s.Objective), nil)
			line.Alignment, line.Importance = widget.ButtonAlignLeading, widget.LowImportance
			if run := tr.Run; run != "" && v.OnOpen != nil {
				line.OnTapped = func() {
					d.Hide()
					v.OnOpen(run)
				}
			} else {
				line.Disable()
			}
			box.Add(line)
		}
		if len(s.Next) > 0 && v.OnLaunch != nil {
			tmpl, vals := s.Template, s.Next
			launch := widget.NewButtonWithIcon("Launch suggested…", theme.MediaPlayIcon(), func() {
				d.Hide()
				v.OnLaunch(tmpl, vals)
			})
			box.Add(launch)
		}
		if s.HasBest && s.BestRun != "" && v.OnOpen != nil {
			id := s.BestRun
			box.Add(widget.NewButtonWithIcon("Open the best trial", theme.NavigateNextIcon(), func() {
				d.Hide()
				v.OnOpen(id)
			}))
		}
		box.Add(widget.NewSeparator())
	}
	box.Refresh()
}
