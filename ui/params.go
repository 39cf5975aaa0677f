package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"niuma/engine/template"
	"niuma/tuner"
)

// paramField is one parameter's row in the wizard: a widget for one value
// (slider with an exact entry, check, select or text), and a "sweep" switch
// that swaps it for several values.
type paramField struct {
	p       template.Param
	t       *template.Template
	changed func() // called after every edit, to revalidate the step

	entry  *keyEntry  // float, int, string
	slider *keySlider // float/int with both bounds
	check  *keyCheck  // bool
	sel    *keySelect // choice

	sweep       *keyCheck
	sweepEntry  *keyEntry       // numbers and strings: "a, b, c" or "a..b" / "a..b:step" for ints
	sweepChoice *checkSet       // choice and bool
	single      *fyne.Container // shown when not sweeping
	multi       *fyne.Container // shown when sweeping
	problem     *widget.Label   // the validation error, red
	syncing     bool            // slider and entry are updating each other
	box         fyne.CanvasObject
}

func newParamField(t *template.Template, p template.Param, initial string, changed func()) *paramField {
	f := &paramField{p: p, t: t, changed: changed}
	f.problem = widget.NewLabel("")
	f.problem.Importance = widget.DangerImportance
	f.problem.Wrapping = fyne.TextWrapWord
	f.problem.Hide()
	if initial == "" {
		initial = template.FormatValue(p.Default)
	}
	var single fyne.CanvasObject
	switch p.Type {
	case template.KindBool:
		f.check = newKeyCheck("", func(bool) { f.edited() })
		f.check.Checked = initial == "true"
		single = f.check
		f.sweepChoice = newCheckSet([]string{"true", "false"}, func([]string) { f.edited() })
	case template.KindChoice:
		f.sel = newKeySelect(p.Choices, func(string) { f.edited() })
		f.sel.Selected = initial
		single = f.sel
		f.sweepChoice = newCheckSet(p.Choices, func([]string) { f.edited() })
	default:
		f.entry = newKeyEntry()
		f.entry.SetText(initial)
		f.entry.OnChanged = func(string) { f.entryEdited() }
		single = f.entry
		if (p.Type == template.KindFloat || p.Type == template.KindInt) && p.Min != nil && p.Max != nil && *p.Max > *p.Min {
			f.slider = f.newSlider()
			f.setSlider(initial)
			entryBox := container.NewGridWrap(fyne.NewSize(120, f.entry.MinSize().Height), f.entry)
			single = container.NewBorder(nil, nil, nil, entryBox, f.slider)
		}
		f.sweepEntry = newKeyEntry()
		f.sweepEntry.SetPlaceHolder(tuner.SweepHint(tuner.Kind(p.Type)))
		f.sweepEntry.OnChanged = func(string) { f.edited() }
	}
	f.single = container.NewStack(single)
	if f.sweepChoice != nil {
		f.multi = container.NewStack(f.sweepChoice.box)
	} else {
		f.multi = container.NewStack(f.sweepEntry)
	}
	f.multi.Hide()
	name := widget.NewLabelWithStyle(p.Name, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	help := widget.NewLabel(describeParam(p))
	f.sweep = newKeyCheck("sweep", func(on bool) {
		if on {
			f.single.Hide()
			f.multi.Show()
			f.seedSweep()
			// The values box starts with the current value, which hides
			// its placeholder: the help line says how to write several.
			if f.sweepEntry != nil {
				help.SetText("several " + f.sweepEntry.PlaceHolder + " · " + describeParam(p))
			}
		} else {
			f.multi.Hide()
			f.single.Show()
			help.SetText(describeParam(p))
		}
		f.edited()
	})
	help.Importance = widget.LowImportance
	help.Truncation = fyne.TextTruncateEllipsis
	left := container.NewGridWrap(fyne.NewSize(130, name.MinSize().Height), name)
	row := container.NewBorder(nil, nil, left, f.sweep, container.NewStack(f.single, f.multi))
	f.box = container.NewVBox(row, help, f.problem)
	return f
}

// describeParam is the help line under a parameter: its help and bounds.
func describeParam(p template.Param) string {
	var parts []string
	if p.Help != "" {
		parts = append(parts, p.Help)
	}
	switch {
	case p.Min != nil && p.Max != nil:
		r := fmt.Sprintf("%s in [%g, %g]", p.Type, *p.Min, *p.Max)
		if p.Log {
			r += ", log scale"
		}
		parts = append(parts, r)
	case p.Min != nil:
		parts = append(parts, fmt.Sprintf("%s ≥ %g", p.Type, *p.Min))
	case p.Max != nil:
		parts = append(parts, fmt.Sprintf("%s ≤ %g", p.Type, *p.Max))
	default:
		parts = append(parts, string(p.Type))
	}
	return strings.Join(parts, " · ")
}

// newSlider maps the parameter's range onto a slider, in log₁₀ space when
// the schema asks for a log scale.
func (f *paramField) newSlider() *keySlider {
	lo, hi := *f.p.Min, *f.p.Max
	if f.p.Log && lo > 0 {
		lo, hi = math.Log10(lo), math.Log10(hi)
	}
	s := newKeySlider(lo, hi)
	s.Step = (hi - lo) / 400
	if f.p.Type == template.KindInt && !f.p.Log {
		s.Step = math.Max(1, math.Round((hi-lo)/400))
	}
	s.OnChanged = func(x float64) {
		if f.syncing {
			return
		}
		f.syncing = true
		f.entry.SetText(f.sliderText(x))
		f.syncing = false
		f.edited()
	}
	return s
}

// sliderText formats a slider position as the parameter's value: whole
// numbers for ints, three significant digits for floats.
func (f *paramField) sliderText(x float64) string {
	if f.p.Log && *f.p.Min > 0 {
		x = math.Pow(10, x)
	}
	if f.p.Type == template.KindInt {
		return strconv.FormatInt(int64(math.Round(x)), 10)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

func (f *paramField) setSlider(text string) {
	if f.slider == nil {
		return
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil {
		return
	}
	if f.p.Log && *f.p.Min > 0 {
		if x <= 0 {
			return
		}
		x = math.Log10(x)
	}
	f.syncing = true
	f.slider.SetValue(math.Max(f.slider.Min, math.Min(f.slider.Max, x)))
	f.syncing = false
}

func (f *paramField) entryEdited() {
	if f.syncing {
		return
	}
	f.setSlider(f.entry.Text)
	f.edited()
}

// seedSweep starts a sweep from the current single value.
func (f *paramField) seedSweep() {
	switch {
	case f.sweepChoice != nil && len(f.sweepChoice.Selected) == 0:
		if f.sel != nil && f.sel.Selected != "" {
			f.sweepChoice.SetSelected([]string{f.sel.Selected})
		} else if f.check != nil {
			f.sweepChoice.SetSelected([]string{strconv.FormatBool(f.check.Checked)})
		}
	case f.sweepEntry != nil && f.sweepEntry.Text == "":
		f.sweepEntry.SetText(f.entry.Text)
	}
}

// reset puts the schema's default back, as a single value.
func (f *paramField) reset() {
	def := template.FormatValue(f.p.Default)
	if f.sweep.Checked {
		f.sweep.SetChecked(false)
	}
	switch {
	case f.check != nil:
		f.check.SetChecked(def == "true")
	case f.sel != nil:
		f.sel.SetSelected(def)
	default:
		f.entry.SetText(def)
	}
	if f.sweepEntry != nil {
		f.sweepEntry.SetText("")
	}
	if f.sweepChoice != nil {
		f.sweepChoice.SetSelected(nil)
	}
	f.edited()
}

// focusTarget is the widget the keyboard starts on in this field.
func (f *paramField) focusTarget() fyne.Focusable {
	switch {
	case f.entry != nil:
		return f.entry
	case f.sel != nil:
		return f.sel
	default:
		return f.check
	}
}

func (f *paramField) edited() {
	if _, err := f.values(); err != nil {
		f.problem.SetText(err.Error())
		f.problem.Show()
	} else {
		f.problem.Hide()
	}
	if f.changed != nil {
		f.changed()
	}
}

// values is what the user chose for the parameter, as text the template
// parses: one value, or several when sweeping. Each one is checked
// against the schema; repeats are dropped. The sweep's text is read by
// the template, as `niuma run --sweep` reads it.
func (f *paramField) values() ([]string, error) {
	var raw []string
	switch {
	case f.sweep.Checked && f.sweepChoice != nil:
		raw = append(raw, f.sweepChoice.Selected...)
		if len(raw) == 0 {
			return nil, fmt.Errorf("%s: tick at least one value to sweep", f.p.Name)
		}
	case f.sweep.Checked:
		return f.t.ParseSweep(f.p.Name, f.sweepEntry.Text)
	case f.check != nil:
		raw = []string{strconv.FormatBool(f.check.Checked)}
	case f.sel != nil:
		raw = []string{f.sel.Selected}
	default:
		raw = []string{f.entry.Text}
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range raw {
		if _, err := f.t.Resolve(map[string]string{f.p.Name: s}); err != nil {
			return nil, err
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// parseSweep reads a sweep's values as written (a list, or an int range).
func parseSweep(p template.Param, text string) ([]string, error) {
	return tuner.SplitSweep(p.Name, tuner.Kind(p.Type), text)
}
