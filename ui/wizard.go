package ui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/engine/template"
)

// TemplateEntry is one template the wizard offers: bundled or the user's.
type TemplateEntry struct {
	Name, Version, Description string
	Source                     string                             // "bundled" or the template file
	Err                        error                              // the template does not parse
	Load                       func() (*template.Template, error) // parses it, ready to submit
}

// wizard steps.
const (
	stepTemplate = iota
	stepParams
	stepResources
	stepReview
)

var stepNames = []string{"1 · Template", "2 · Parameters", "3 · Resources", "4 · Review"}

// Wizard launches runs by pointing and clicking: template, parameters
// (with sweeps), resources, review, Launch.
type Wizard struct {
	backend Backend
	// tasks are the wizard's calls to the engine (where a run would go,
	// the duplicates, the submits); the window's close ends them.
	tasks    tasks
	entries  []TemplateEntry
	remember map[string]map[string]string // last values per template, shared with the shell
	onLaunch func(ids []string, err error)
	onClose  func()
	// OnOpenRun shows an earlier run (the duplicate dialog's "Open it").
	OnOpenRun func(id string)
	// Win is the window the wizard's own dialogs show over.
	Win    fyne.Window
	step   int
	tmpl   *template.Template
	fields []*paramField
	specs  []engine.RunSpec

	steps   []*widget.Label
	body    *fyne.Container
	back    *keyButton
	next    *keyButton
	launch  *keyButton
	cancel  *keyButton
	status  *widget.Label
	content fyne.CanvasObject

	// template step
	list     *keyList
	selected int
	about    *widget.Label
	// parameters step
	runCount *widget.Label
	reset    *keyButton
	preset   map[string]string  // values a Clone or Retry brought, for this wizard only
	mode     *widget.RadioGroup // runs or a search; nil when the engine launches no studies
	search   *searchForm        // the Search mode's form for the chosen template
	// OnStudy, when set, is told the ID of a study the Search mode launched.
	OnStudy func(id string)
	// resources step
	res       *resourceControls
	resources Resources // as last read from res
	executor  *keySelect
	priority  *keyEntry
	seed      *keyEntry
	resErr    *widget.Label
	// review step
	review  *widget.List
	placed  []placement   // where each run of the review would go now
	where   *widget.Label // where the runs would go, when the user should know
	hostRun *widget.Check // the explicit choice of the host for a docker template that would wait
	refusal error         // why the machine can never hold a run of the review
}

// keyList is a list whose Enter and Escape go to its dialog (Enter on the
// template list goes on to the parameters).
type keyList struct{ widget.List }

func newKeyList(length func() int, create func() fyne.CanvasObject, update func(widget.ListItemID, fyne.CanvasObject)) *keyList {
	l := &keyList{}
	l.Length, l.CreateItem, l.UpdateItem = length, create, update
	l.ExtendBaseWidget(l)
	return l
}

func (l *keyList) TypedKey(ev *fyne.KeyEvent) {
	if routeFrom(l, ev) {
		return
	}
	l.List.TypedKey(ev)
}

func newKeyButton(label string, icon fyne.Resource, tapped func()) *keyButton {
	b := &keyButton{}
	b.Text, b.Icon, b.OnTapped = label, icon, tapped
	b.ExtendBaseWidget(b)
	return b
}

// autoExecutor is the executor choice that lets the engine decide.
const autoExecutor = "automatic (the template's runtime)"

// NewWizard builds a wizard over the given templates. onLaunch gets the
// IDs of the runs it created (or the first error); onClose is called when
// the user cancels or after a launch.
func NewWizard(b Backend, entries []TemplateEntry, remember map[string]map[string]string, onLaunch func([]string, error), onClose func()) *Wizard {
	if remember == nil {
		remember = map[string]map[string]string{}
	}
	w := &Wizard{backend: b, entries: entries, remember: remember, onLaunch: onLaunch, onClose: onClose, selected: -1}
	for _, n := range stepNames {
		l := widget.NewLabel(n)
		w.steps = append(w.steps, l)
	}
	w.body = container.NewStack()
	w.back = newKeyButton("Back", theme.NavigateBackIcon(), w.onBack)
	w.next = newKeyButton("Next", theme.NavigateNextIcon(), w.onNext)
	w.next.IconPlacement = widget.ButtonIconTrailingText
	w.next.Importance = widget.HighImportance
	w.launch = newKeyButton("Launch", theme.MediaPlayIcon(), w.onLaunchTapped)
	w.launch.Importance = widget.HighImportance
	w.cancel = newKeyButton("Cancel", nil, w.Cancel)
	w.reset = newKeyButton("Reset to defaults", theme.ContentUndoIcon(), w.ResetToDefaults)
	w.reset.Importance = widget.LowImportance
	w.status = widget.NewLabel("")
	w.status.Importance = widget.LowImportance
	w.status.Truncation = fyne.TextTruncateEllipsis

	w.about = widget.NewLabel("Pick a template to see what it does.")
	w.about.Wrapping = fyne.TextWrapWord
	w.list = newKeyList(func() int { return len(w.entries) }, func() fyne.CanvasObject {
		name := widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		desc := widget.NewLabel("")
		desc.Truncation = fyne.TextTruncateEllipsis
		desc.Importance = widget.LowImportance
		return container.NewVBox(name, desc)
	}, func(i widget.ListItemID, o fyne.CanvasObject) {
		e := w.entries[i]
		box := o.(*fyne.Container)
		name := e.Name
		if e.Version != "" {
			name += "  v" + e.Version
		}
		box.Objects[0].(*widget.Label).SetText(name + "  ·  " + sourceLabel(e.Source))
		d := box.Objects[1].(*widget.Label)
		if e.Err != nil {
			d.Importance = widget.DangerImportance
			d.SetText("does not parse: " + firstLine(e.Err.Error()))
		} else {
			d.Importance = widget.LowImportance
			d.SetText(e.Description)
		}
	})
	w.list.OnSelected = w.pickTemplate

	w.runCount = widget.NewLabelWithStyle("", fyne.TextAlignTrailing, fyne.TextStyle{Bold: true})
	if _, ok := b.(studyLauncher); ok {
		w.mode = widget.NewRadioGroup([]string{modeRuns, modeSearch}, func(string) {
			if w.step == stepParams {
				w.show(stepParams)
			}
		})
		w.mode.Horizontal = true
		w.mode.Required = true
		w.mode.Selected = modeRuns
	}

	execs := append([]string{autoExecutor}, b.Executors()...)
	w.executor = newKeySelect(execs, func(string) {})
	w.executor.Selected = autoExecutor
	w.priority = newKeyEntry()
	w.priority.SetText("0")
	w.priority.OnChanged = func(string) { w.validate() }
	w.seed = newKeyEntry()
	w.seed.SetText("0")
	w.seed.OnChanged = func(string) { w.validate() }
	w.res = newResourceControls(func() { w.validate() })
	_, takes := b.(resourceBackend)
	w.res.enable(takes)
	w.resErr = widget.NewLabel("")
	w.resErr.Importance = widget.DangerImportance
	w.resErr.Hide()

	w.where = widget.NewLabel("")
	w.where.Wrapping = fyne.TextWrapWord
	w.where.Hide()
	w.hostRun = widget.NewCheck("Run on this machine's host instead, without the container: its network, memory and process limits, "+
		"dropped capabilities and read-only code and data do not apply", func(bool) {
		w.specs, _ = w.buildSpecs()
		w.review.Refresh()
	})
	w.hostRun.Hide()
	w.review = widget.NewList(func() int { return len(w.specs) }, func() fyne.CanvasObject {
		l := widget.NewLabel("")
		l.Truncation = fyne.TextTruncateEllipsis
		at := widget.NewLabel("")
		at.Truncation = fyne.TextTruncateEllipsis
		at.SizeName = theme.SizeNameCaptionText
		return container.NewVBox(l, at)
	}, func(i widget.ListItemID, o fyne.CanvasObject) {
		box := o.(*fyne.Container)
		line := specLine(w.specs[i])
		if extra := resourceLine(w.resources); extra != "" {
			line += "  ·  " + extra
		}
		box.Objects[0].(*widget.Label).SetText(fmt.Sprintf("%d.  %s", i+1, line))
		at := box.Objects[1].(*widget.Label)
		switch {
		case i >= len(w.placed):
			at.SetText("")
		case w.placed[i].wait != "":
			at.Importance = widget.WarningImportance
			at.SetText("      " + w.placed[i].wait)
		default:
			at.Importance = widget.SuccessImportance
			at.SetText("      would start now: " + w.placed[i].where)
		}
	})

	stepBar := container.NewHBox()
	for i, l := range w.steps {
		if i > 0 {
			stepBar.Add(widget.NewIcon(theme.NavigateNextIcon()))
		}
		stepBar.Add(l)
	}
	buttons := container.NewHBox(w.cancel, layout.NewSpacer(), w.back, w.next, w.launch)
	w.content = container.NewBorder(container.NewVBox(stepBar, widget.NewSeparator()),
		container.NewVBox(widget.NewSeparator(), w.status, buttons), nil, nil, w.body)
	w.show(stepTemplate)
	return w
}

// Content is the wizard's root object.
func (w *Wizard) Content() fyne.CanvasObject { return w.content }

// selectFirst picks the first template that can be launched, so that Enter
// goes straight on (a new user's first run is four Enters away).
func (w *Wizard) selectFirst() {
	for i, e := range w.entries {
		if e.Err == nil && e.Load != nil {
			w.list.Select(i)
			return
		}
	}
}

// Cancel closes the wizard without launching anything (its Cancel
// button, and Escape).
func (w *Wizard) Cancel() {
	if w.onClose != nil {
		w.onClose()
	}
}

// Enter is the wizard's answer to the Enter key: Next, or Launch on the
// last step, when the step allows it.
func (w *Wizard) Enter() {
	switch {
	case w.step < stepReview && !w.next.Disabled():
		w.onNext()
	case w.step == stepReview && !w.launch.Disabled():
		w.onLaunchTapped()
	}
}

// ResetToDefaults puts every parameter back to its template default and
// the resources back to theirs: a fresh start after a Clone or Retry.
func (w *Wizard) ResetToDefaults() {
	w.preset = nil
	for _, f := range w.fields {
		f.reset()
	}
	w.priority.SetText("0")
	w.seed.SetText("0")
	w.executor.SetSelected(autoExecutor)
	w.res.reset()
	w.validate()
}

// focus puts the keyboard on the step's first control, so that the user
// sees where typing goes (the focused control is outlined).
func (w *Wizard) focus() {
	c := w.canvas()
	if c == nil {
		return
	}
	switch w.step {
	case stepTemplate:
		c.Focus(w.list)
	case stepParams:
		if len(w.fields) > 0 {
			c.Focus(w.fields[0].focusTarget())
		}
	case stepResources:
		c.Focus(w.firstResourceControl())
	case stepReview:
		c.Unfocus()
	}
}

func (w *Wizard) canvas() fyne.Canvas {
	if app := fyne.CurrentApp(); app != nil {
		if c := app.Driver().CanvasForObject(w.list); c != nil {
			return c
		}
	}
	if w.Win != nil {
		return w.Win.Canvas()
	}
	return nil
}

// sourceLabel says where a template comes from, briefly.
func sourceLabel(source string) string {
	if source == "bundled" || source == "" {
		return "bundled"
	}
	return "yours"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// specLine is one run of the review: its values and resources.
func specLine(s engine.RunSpec) string {
	var parts []string
	for _, n := range s.Template.ParamNames() {
		parts = append(parts, n+"="+template.FormatValue(s.Values[n]))
	}
	line := strings.Join(parts, "  ")
	var res []string
	if s.Executor != "" {
		res = append(res, "on "+s.Executor)
	}
	if s.Priority != 0 {
		res = append(res, fmt.Sprintf("priority %d", s.Priority))
	}
	if s.Seed != 0 {
		res = append(res, fmt.Sprintf("seed %d", s.Seed))
	}
	if len(res) > 0 {
		line += "  ·  " + strings.Join(res, ", ")
	}
	return line
}

// Preset picks a template by name and moves to its parameters, filled
// with values (a Clone or a Retry with the fix; nil: the remembered
// ones) and the given priority and executor ("" keeps automatic). The
// values are this wizard's only: the next New run starts afresh.
func (w *Wizard) Preset(name string, values map[string]string, priority int, executor string) error {
	for i, e := range w.entries {
		if e.Name != name {
			continue
		}
		w.preset = values
		if w.mode != nil {
			w.mode.SetSelected(modeRuns) // a Clone or a suggestion is one run
		}
		if w.selected == i {
			w.pickTemplate(i) // already picked: build its fields again from the values
		} else {
			w.list.Select(i)
		}
		if w.tmpl == nil {
			return fmt.Errorf("template %s cannot be loaded: %s", name, w.about.Text)
		}
		w.priority.SetText(strconv.Itoa(priority))
		for _, x := range w.executor.Options {
			if x == executor {
				w.executor.SetSelected(x)
			}
		}
		w.show(stepParams)
		return nil
	}
	return fmt.Errorf("template %s is no longer installed: the Templates page lists those there are", name)
}

func (w *Wizard) pickTemplate(i widget.ListItemID) {
	w.selected = i
	w.tmpl = nil
	e := w.entries[i]
	if e.Err != nil {
		w.about.Importance = widget.DangerImportance
		w.about.SetText(e.Name + " cannot be launched: its template does not parse.\n\n" + e.Err.Error() +
			"\n\nFix the file (" + e.Source + ") and reopen the wizard.")
		w.validate()
		return
	}
	t, err := e.Load()
	if err != nil {
		w.about.Importance = widget.DangerImportance
		w.about.SetText("Could not load " + e.Name + ": " + err.Error())
		w.validate()
		return
	}
	w.tmpl = t
	w.hostRun.SetChecked(false)
	w.about.Importance = widget.MediumImportance
	stages := t.Order()
	w.about.SetText(fmt.Sprintf("%s\n\nStages: %s\nParameters: %s\nFrom: %s", t.Description, strings.Join(stages, " → "),
		strings.Join(t.ParamNames(), ", "), e.Source))
	w.buildFields()
	w.validate()
}

// buildFields makes the parameter form for the chosen template, starting
// from the values last used with it.
func (w *Wizard) buildFields() {
	w.fields = nil
	last := w.remember[w.tmpl.Name]
	if w.preset != nil {
		last = w.preset
	}
	gpus := w.usableGPUs()
	for _, p := range w.tmpl.Params {
		initial := last[p.Name]
		if initial == "" && gpus > 0 && isGPUCount(w.tmpl, p) && template.FormatValue(p.Default) == "0" {
			// A machine with GPUs (simulated ones too) runs a GPU-ready
			// template on one, so that the shepherd's placement shows.
			initial = "1"
		}
		w.fields = append(w.fields, newParamField(w.tmpl, p, initial, func() { w.validate() }))
	}
	w.search = newSearchForm(w.tmpl, func() { w.validate() })
}

// searching reports whether the wizard is in its Search mode.
func (w *Wizard) searching() bool {
	return w.mode != nil && w.mode.Selected == modeSearch && w.search != nil
}

// usableGPUs is how many healthy GPUs the machine has now.
func (w *Wizard) usableGPUs() int {
	snap, err := w.backend.GPUs(context.Background())
	if err != nil {
		return 0
	}
	n := 0
	for _, g := range snap.GPUs {
		if g.Healthy {
			n++
		}
	}
	return n
}

// isGPUCount reports whether a parameter sets how many GPUs a stage asks for.
func isGPUCount(t *template.Template, p template.Param) bool {
	for _, st := range t.Stages {
		if st.GPUsParam == p.Name {
			return true
		}
	}
	return false
}

func (w *Wizard) show(step int) {
	w.step = step
	for i, l := range w.steps {
		l.TextStyle = fyne.TextStyle{Bold: i == step}
		if i == step {
			l.Importance = widget.HighImportance
		} else {
			l.Importance = widget.LowImportance
		}
		l.Refresh()
	}
	var body fyne.CanvasObject
	switch step {
	case stepTemplate:
		split := container.NewHSplit(w.list, container.NewVScroll(container.NewPadded(w.about)))
		split.Offset = 0.45
		body = split
	case stepParams:
		rows := container.NewVBox()
		onResources := resourceParams(w.tmpl)
		for _, f := range w.fields {
			if !onResources[f.p.Name] { // GPUs and GPU memory are chosen on the Resources step
				rows.Add(f.box)
			}
		}
		if len(rows.Objects) == 0 {
			rows.Add(widget.NewLabel("This template has no parameters."))
		}
		hint := widget.NewLabel("Tick \"sweep\" to try several values of a parameter: every combination becomes a run.")
		hint.Importance = widget.LowImportance
		hint.Wrapping = fyne.TextWrapWord
		var center fyne.CanvasObject = container.NewVScroll(rows)
		if w.searching() {
			hint.SetText("The tuner picks each trial's values in the ranges of the ticked parameters, learning from the trials before; " +
				"the others keep the values below. Trials use the template's resources.")
			others := widget.NewLabelWithStyle("The other parameters", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
			center = container.NewVScroll(container.NewVBox(w.search.box, widget.NewSeparator(), others, rows))
		}
		var top fyne.CanvasObject = container.NewBorder(nil, nil, nil, container.NewHBox(w.reset, w.runCount), hint)
		if w.mode != nil {
			top = container.NewVBox(w.mode, top)
		}
		body = container.NewBorder(top, nil, nil, nil, center)
	case stepResources:
		w.res.acts = sentinelActs(w.tmpl)
		if n, err := w.runTotal(); err == nil {
			w.res.defaultFlagOnly(n)
		}
		body = w.resourceForm()
	case stepReview:
		if w.searching() {
			w.specs = nil
			line := "nothing to launch"
			if spec, words, err := w.studySpec(); err == nil {
				line = studyLine(spec, words)
			}
			head := widget.NewLabelWithStyle(w.tmpl.Name+": "+line, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
			head.Wrapping = fyne.TextWrapWord
			body = container.NewVBox(head, widget.NewLabel("Its trials show on the Board as runs; the Archive's Studies view follows the study."))
			break
		}
		w.specs, _ = w.buildSpecs()
		w.refusal = w.neverFits(w.specs)
		w.placed = nil
		if snap, err := w.backend.GPUs(context.Background()); err == nil && w.refusal == nil {
			w.placed = previewPlacement(snap, w.specs, w.resources, time.Now(), w.sharedStatus())
		}
		verb := "will be queued"
		if w.refusal != nil {
			verb = "cannot be launched"
		}
		head := widget.NewLabelWithStyle(fmt.Sprintf("%d %s of %s %s:", len(w.specs), plural(len(w.specs), "run", "runs"), w.tmpl.Name, verb),
			fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		top := fyne.CanvasObject(head)
		if w.refusal != nil {
			why := widget.NewLabel(w.refusal.Error())
			why.Importance = widget.DangerImportance
			why.Wrapping = fyne.TextWrapWord
			top = container.NewVBox(head, why)
		}
		body = container.NewBorder(top, container.NewVBox(w.where, w.hostRun), nil, nil, w.review)
		w.review.Refresh()
		w.checkPlacement()
	}
	w.body.Objects = []fyne.CanvasObject{body}
	w.body.Refresh()
	if step == stepTemplate {
		w.back.Hide()
	} else {
		w.back.Show()
	}
	if step == stepReview {
		w.next.Hide()
		w.launch.Show()
	} else {
		w.next.Show()
		w.launch.Hide()
	}
	w.validate()
	w.focus()
}

// firstResourceControl is where the keyboard goes on the Resources step:
// the first control that takes input.
func (w *Wizard) firstResourceControl() fyne.Focusable {
	params := resourceParams(w.tmpl)
	for _, f := range w.fields {
		if params[f.p.Name] {
			return f.focusTarget()
		}
	}
	if !w.res.gpus.Disabled() {
		return w.res.gpus
	}
	return w.priority
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (w *Wizard) onNext() {
	if w.validate() == nil && w.step < stepReview {
		if w.searching() && w.step == stepParams {
			w.show(stepReview) // a study's trials use the template's resources
			return
		}
		w.show(w.step + 1)
	}
}

func (w *Wizard) onBack() {
	if w.searching() && w.step == stepReview {
		w.show(stepParams)
		return
	}
	w.show(w.step - 1)
}

// validate checks the current step and enables Next (or Launch) only when
// it is complete; the reason it is not shows in the status line.
func (w *Wizard) validate() error {
	err := w.stepError()
	if err != nil {
		w.next.Disable()
		w.launch.Disable()
		w.status.SetText(firstLine(err.Error()))
	} else {
		w.next.Enable()
		w.launch.Enable()
		w.status.SetText("")
	}
	if w.step == stepResources {
		w.updatePreview()
	}
	if w.step == stepParams && w.searching() {
		if spec, _, cerr := w.studySpec(); cerr == nil {
			w.runCount.SetText(fmt.Sprintf("%d %s", spec.Budget, plural(spec.Budget, "trial", "trials")))
		} else {
			w.runCount.SetText("")
		}
	} else if w.step == stepParams {
		if n, cerr := w.runTotal(); cerr == nil {
			w.runCount.SetText(fmt.Sprintf("%d %s", n, plural(n, "run", "runs")))
		} else {
			w.runCount.SetText("")
		}
	}
	return err
}

func (w *Wizard) stepError() error {
	switch w.step {
	case stepTemplate:
		if w.selected < 0 {
			return errors.New("pick a template")
		}
		if w.tmpl == nil {
			return errors.New("this template cannot be launched: see why on the right")
		}
	case stepParams:
		if w.searching() {
			_, _, err := w.studySpec()
			return err
		}
		if _, err := w.runTotal(); err != nil {
			return err
		}
	case stepResources:
		err := w.resourceError()
		if err != nil {
			w.resErr.SetText(err.Error())
			w.resErr.Show()
		} else {
			w.resErr.Hide()
		}
		return err
	case stepReview:
		if w.searching() {
			_, _, err := w.studySpec()
			return err
		}
		if len(w.specs) == 0 {
			return errors.New("nothing to launch")
		}
		if w.refusal != nil {
			return w.refusal
		}
	}
	return nil
}

// runTotal is how many runs the parameters make, or the first problem.
func (w *Wizard) runTotal() (int, error) {
	runs, err := w.sweep()
	return len(runs), err
}

// sweep is the values of every run the form makes: the template's one
// expansion of a sweep, which `niuma run --sweep` uses too.
func (w *Wizard) sweep() ([]template.Values, error) {
	lists := map[string][]string{}
	for _, f := range w.fields {
		vs, err := f.values()
		if err != nil {
			return nil, err
		}
		lists[f.p.Name] = vs
	}
	return w.tmpl.Sweep(nil, lists)
}

func (w *Wizard) resourceError() error {
	res, err := w.res.read()
	if err != nil {
		return err
	}
	w.resources = res
	if _, err := strconv.Atoi(strings.TrimSpace(w.priority.Text)); err != nil {
		return fmt.Errorf("priority %q is not a whole number (e.g. 0, or 10 to go first)", w.priority.Text)
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(w.seed.Text), 10, 64); err != nil || s < 0 {
		return fmt.Errorf("seed %q is not a whole number ≥ 0 (0 picks a fresh seed)", w.seed.Text)
	}
	return nil
}

// buildSpecs turns the form into one RunSpec per combination of values.
func (w *Wizard) buildSpecs() ([]engine.RunSpec, error) {
	if w.tmpl == nil {
		return nil, errors.New("no template chosen")
	}
	runs, err := w.sweep()
	if err != nil {
		return nil, err
	}
	if err := w.resourceError(); err != nil {
		return nil, err
	}
	prio, _ := strconv.Atoi(strings.TrimSpace(w.priority.Text))
	seed, _ := strconv.ParseInt(strings.TrimSpace(w.seed.Text), 10, 64)
	exec := w.executor.Selected
	if exec == autoExecutor {
		exec = ""
		if w.hostRun.Visible() && w.hostRun.Checked {
			exec = "local"
		}
	}
	var specs []engine.RunSpec
	sweep := ""
	if len(runs) > 1 {
		sweep = engine.NewSweepID(time.Now()) // the runs show as one sweep
	}
	for _, v := range runs {
		specs = append(specs, engine.RunSpec{Template: w.tmpl, Values: v, Seed: seed, Priority: prio, Executor: exec, Sweep: sweep})
	}
	return specs, nil
}

// checkPlacement asks the engine where the runs would go when the engine
// chooses: a docker template whose image is missing, or whose Docker is
// away, waits (the note says why), and the host is offered as an explicit
// choice, saying what it loses; a template that falls back to the host
// says so.
func (w *Wizard) checkPlacement() {
	w.where.Hide()
	w.hostRun.Hide()
	if len(w.specs) == 0 || w.executor.Selected != autoExecutor || w.tmpl.Runtime.Kind != "docker" {
		return
	}
	spec := w.specs[0]
	spec.Executor = ""
	w.tasks.Go(func(context.Context) {
		p, err := w.backend.Provenance(context.Background(), spec)
		onUI(func() {
			if err != nil || p.ExecutorNote == "" || w.step != stepReview {
				return
			}
			w.where.SetText("Where: " + p.ExecutorNote)
			w.where.Show()
			if p.Executor == "docker" {
				w.hostRun.Show()
			}
		})
	})
}

// remembered is the single values of the form, kept for next time.
func (w *Wizard) remembered() map[string]string {
	out := map[string]string{}
	for _, f := range w.fields {
		switch {
		case f.check != nil:
			out[f.p.Name] = strconv.FormatBool(f.check.Checked)
		case f.sel != nil:
			out[f.p.Name] = f.sel.Selected
		default:
			out[f.p.Name] = f.entry.Text
		}
	}
	return out
}

func (w *Wizard) onLaunchTapped() {
	if w.searching() {
		w.launchStudy()
		return
	}
	specs, err := w.buildSpecs()
	if err != nil {
		w.status.SetText(err.Error())
		return
	}
	w.remember[w.tmpl.Name] = w.remembered()
	w.launch.Disable()
	w.back.Disable()
	w.status.SetText("Checking for runs that were already done…")
	w.tasks.Go(func(context.Context) {
		dups, first := w.duplicates(specs)
		onUI(func() {
			if len(dups) == 0 {
				w.submit(specs)
				return
			}
			w.askAboutDuplicates(specs, dups, first)
		})
	})
}

// duplicates finds the specs whose fingerprint matches a run that already
// succeeded; first is the earliest such run found.
func (w *Wizard) duplicates(specs []engine.RunSpec) (dup map[int]bool, first engine.RunInfo) {
	dup = map[int]bool{}
	for i, s := range specs {
		p, err := w.backend.Provenance(context.Background(), s)
		if err != nil || p.Fingerprint == "" {
			continue // a fingerprint that cannot be taken never blocks a launch
		}
		if r, ok, err := w.backend.FindDuplicate(context.Background(), p.Fingerprint); err == nil && ok {
			if len(dup) == 0 {
				first = r
			}
			dup[i] = true
		}
	}
	return dup, first
}

// askAboutDuplicates offers what a researcher may want when runs were
// already done: look at the earlier run, rerun with a new seed, or rerun.
func (w *Wizard) askAboutDuplicates(specs []engine.RunSpec, dup map[int]bool, first engine.RunInfo) {
	msg := fmt.Sprintf("%d of %d %s already succeeded with exactly the same template, values, seed, code and data (for example run %s).",
		len(dup), len(specs), plural(len(specs), "run", "runs"), first.ID)
	w.status.SetText(msg)
	var d dialog.Dialog
	reset := func() {
		d.Hide()
		w.back.Enable()
		w.launch.Enable()
	}
	openIt := func() {
		reset()
		if w.OnOpenRun != nil {
			w.OnOpenRun(first.ID)
		}
		if w.onClose != nil {
			w.onClose()
		}
	}
	open := newKeyButton("Open it", nil, openIt)
	open.Importance = widget.HighImportance
	newSeed := newKeyButton("Run anyway with a new seed", nil, func() {
		d.Hide()
		for i := range specs {
			if dup[i] {
				specs[i].Seed = engine.NewSeed()
			}
		}
		w.submit(specs)
	})
	again := newKeyButton("Run anyway", nil, func() {
		d.Hide()
		w.submit(specs)
	})
	again.Importance = widget.LowImportance
	cancel := newKeyButton("Cancel", nil, reset)
	buttons := container.NewHBox(open, newSeed, again, cancel)
	enter, hint := openIt, "Enter opens the earlier run; Escape goes back."
	if len(dup) < len(specs) {
		// Some points of a sweep are new: launching only those is what a
		// sweep usually wants, and Enter does it.
		var fresh []engine.RunSpec
		for i, s := range specs {
			if !dup[i] {
				fresh = append(fresh, s)
			}
		}
		onlyNew := func() {
			d.Hide()
			w.submit(fresh)
		}
		skip := newKeyButton(fmt.Sprintf("Launch only the %d new", len(fresh)), nil, onlyNew)
		skip.Importance = widget.HighImportance
		open.Importance = widget.MediumImportance
		buttons = container.NewHBox(skip, open, newSeed, again, cancel)
		enter, hint = onlyNew, fmt.Sprintf("Enter launches the %d new %s; Escape goes back.", len(fresh), plural(len(fresh), "run", "runs"))
	}
	label := widget.NewLabel(msg + "\n\n" + hint)
	label.Wrapping = fyne.TextWrapWord
	body := container.NewVBox(label, buttons)
	d = dialog.NewCustomWithoutButtons("Already done", body, w.window())
	d.Resize(fyne.NewSize(720, 200))
	showWithKeys(d, w.window(), enter, reset)
}

// window is where the wizard's dialogs go: Win, else the app's first window.
func (w *Wizard) window() fyne.Window {
	if w.Win != nil {
		return w.Win
	}
	if ws := fyne.CurrentApp().Driver().AllWindows(); len(ws) > 0 {
		return ws[0]
	}
	return nil
}

// submit launches the runs, one Submit each.
func (w *Wizard) submit(specs []engine.RunSpec) {
	w.launch.Disable()
	w.back.Disable()
	w.status.SetText(fmt.Sprintf("Launching %d %s…", len(specs), plural(len(specs), "run", "runs")))
	w.tasks.Go(func(context.Context) {
		var ids []string
		var ferr error
		res := w.resources
		rb, takes := w.backend.(resourceBackend)
		for i, s := range specs {
			var r engine.RunInfo
			var err error
			if takes && !res.zero() {
				r, err = rb.SubmitWithResources(context.Background(), s, res)
			} else {
				r, err = w.backend.Submit(context.Background(), s)
			}
			if err != nil {
				ferr = fmt.Errorf("run %d of %d (%s) was not launched: %w", i+1, len(specs), specLine(s), err)
				break
			}
			ids = append(ids, r.ID)
		}
		onUI(func() {
			w.back.Enable()
			w.launch.Enable()
			if w.onLaunch != nil {
				w.onLaunch(ids, ferr)
			}
			if ferr == nil && w.onClose != nil {
				w.onClose()
			}
		})
	})
}

// launchStudy creates the study the Search form describes and has the
// engine drive it; the wizard closes once it is stored.
func (w *Wizard) launchStudy() {
	spec, _, err := w.studySpec()
	sl, ok := w.backend.(studyLauncher)
	if err != nil || !ok {
		if err == nil {
			err = errors.New("this engine launches no studies")
		}
		w.status.SetText(err.Error())
		return
	}
	w.remember[w.tmpl.Name] = w.remembered()
	w.launch.Disable()
	w.back.Disable()
	w.status.SetText(fmt.Sprintf("Creating a study of %d trials…", spec.Budget))
	w.tasks.Go(func(context.Context) {
		id, err := sl.LaunchStudy(context.Background(), spec)
		onUI(func() {
			w.back.Enable()
			w.launch.Enable()
			if err != nil {
				w.status.SetText(firstLine(err.Error()))
				return
			}
			if w.onClose != nil {
				w.onClose()
			}
			if w.OnStudy != nil {
				w.OnStudy(id)
			}
		})
	})
}
