package ui

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"niuma/engine/template"
)

// The wizard's modes: runs (one, or a sweep's every combination) or a
// search (a study whose trials the tuner picks, as `niuma tune` runs).
const (
	modeRuns   = "Single run or sweep"
	modeSearch = "Search (a study)"
)

// searchForm is the Search mode of the Parameters step: the study's budget,
// parallel trials and pruner, and per searchable parameter whether it is
// searched and over what, prefilled from the template's schema.
type searchForm struct {
	budget   *keyEntry
	parallel *keyEntry
	pruner   *keySelect
	rows     []*searchRow
	box      *fyne.Container
}

// searchRow is one parameter the study may search.
type searchRow struct {
	p       template.Param
	tick    *keyCheck
	lo, hi  *keyEntry // a number's range
	log     *keyCheck // a float's scale
	choices *checkSet // a choice's (or a bool's) values
}

// searchable says whether the Search mode offers p: a number with both
// bounds, a choice or a bool.
func searchable(p template.Param) bool {
	switch p.Type {
	case template.KindFloat, template.KindInt:
		return p.Min != nil && p.Max != nil
	case template.KindChoice, template.KindBool:
		return true
	}
	return false
}

// newSearchForm builds the Search form for t: the parameters `niuma tune`
// would search by default are ticked (the template's tune: search, else
// every searchable one), each over its schema's whole range.
func newSearchForm(t *template.Template, changed func()) *searchForm {
	f := &searchForm{budget: newKeyEntry(), parallel: newKeyEntry()}
	f.budget.SetText("16")
	f.budget.OnChanged = func(string) { changed() }
	f.parallel.SetText("auto")
	f.parallel.OnChanged = func(string) { changed() }
	f.pruner = newKeySelect([]string{"median", "asha", "none"}, func(string) { changed() })
	f.pruner.Selected = "median"
	if p := t.Tune.Pruner; p != "" && slices.Contains(f.pruner.Options, p) {
		f.pruner.Selected = p
	}
	byDefault := t.Searchable()
	form := widget.NewForm(
		widget.NewFormItem("Budget", f.budget),
		widget.NewFormItem("Parallel", f.parallel),
		widget.NewFormItem("Pruner", f.pruner),
	)
	form.Items[0].HintText = "trials the study runs"
	form.Items[1].HintText = "auto: as many as free GPUs (one per 2 CPU cores without GPUs), or a number"
	form.Items[2].HintText = "stops losing trials early: median, asha (successive halving) or none"
	rowsBox := container.NewVBox()
	for _, p := range t.Params {
		if !searchable(p) {
			continue
		}
		r := &searchRow{p: p}
		r.tick = newKeyCheck("search "+p.Name, func(bool) { changed() })
		r.tick.Checked = slices.Contains(byDefault, p.Name)
		var ranges fyne.CanvasObject
		switch p.Type {
		case template.KindFloat, template.KindInt:
			r.lo, r.hi = newKeyEntry(), newKeyEntry()
			r.lo.SetText(strconv.FormatFloat(*p.Min, 'g', -1, 64))
			r.hi.SetText(strconv.FormatFloat(*p.Max, 'g', -1, 64))
			r.lo.OnChanged = func(string) { changed() }
			r.hi.OnChanged = func(string) { changed() }
			c := container.NewGridWithColumns(3, r.lo, r.hi)
			if p.Type == template.KindFloat {
				r.log = newKeyCheck("log", func(bool) { changed() })
				r.log.Checked = p.Log
				c.Add(r.log)
			}
			ranges = c
		case template.KindChoice:
			r.choices = newCheckSet(p.Choices, func([]string) { changed() })
			r.choices.SetSelected(p.Choices)
			ranges = r.choices.box
		case template.KindBool:
			r.choices = newCheckSet([]string{"true", "false"}, func([]string) { changed() })
			r.choices.SetSelected([]string{"true", "false"})
			ranges = r.choices.box
		}
		f.rows = append(f.rows, r)
		rowsBox.Add(container.NewBorder(nil, nil, r.tick, nil, ranges))
	}
	if len(f.rows) == 0 {
		rowsBox.Add(widget.NewLabel("This template has no parameter to search: a number needs min and max."))
	}
	f.box = container.NewVBox(form, widget.NewSeparator(), rowsBox)
	return f
}

// row is the search row of a parameter (nil when it has none).
func (f *searchForm) row(name string) *searchRow {
	for _, r := range f.rows {
		if r.p.Name == name {
			return r
		}
	}
	return nil
}

// space is what the ticked rows search, as `niuma tune --space` writes it,
// and the review's words for it ("lr (1e-05..0.1, log)").
func (f *searchForm) space() (space, words []string, err error) {
	for _, r := range f.rows {
		if !r.tick.Checked {
			continue
		}
		switch {
		case r.choices != nil:
			if len(r.choices.Selected) == 0 {
				return nil, nil, fmt.Errorf("%s: tick at least one value to search", r.p.Name)
			}
			space = append(space, r.p.Name+"="+strings.Join(r.choices.Selected, ","))
			words = append(words, fmt.Sprintf("%s (%s)", r.p.Name, strings.Join(r.choices.Selected, ", ")))
		default:
			lo, err1 := strconv.ParseFloat(strings.TrimSpace(r.lo.Text), 64)
			hi, err2 := strconv.ParseFloat(strings.TrimSpace(r.hi.Text), 64)
			switch {
			case err1 != nil || err2 != nil || math.IsNaN(lo) || math.IsNaN(hi):
				return nil, nil, fmt.Errorf("%s: its range needs two numbers", r.p.Name)
			case lo > hi:
				return nil, nil, fmt.Errorf("%s: %g is above %g", r.p.Name, lo, hi)
			case lo < *r.p.Min || hi > *r.p.Max:
				return nil, nil, fmt.Errorf("%s: the template allows %g..%g", r.p.Name, *r.p.Min, *r.p.Max)
			case r.p.Type == template.KindInt && (lo != math.Trunc(lo) || hi != math.Trunc(hi)):
				return nil, nil, fmt.Errorf("%s: an int's bounds must be whole numbers", r.p.Name)
			}
			rng := strconv.FormatFloat(lo, 'g', -1, 64) + ".." + strconv.FormatFloat(hi, 'g', -1, 64)
			word := rng
			switch {
			case r.log != nil && r.log.Checked:
				if lo <= 0 {
					return nil, nil, fmt.Errorf("%s: a log scale needs the low end above 0", r.p.Name)
				}
				rng += ":log"
				word += ", log"
			case r.log != nil && r.p.Log:
				rng += ":linear" // the schema's log scale, turned off
			}
			space = append(space, r.p.Name+"="+rng)
			words = append(words, fmt.Sprintf("%s (%s)", r.p.Name, word))
		}
	}
	if len(space) == 0 {
		return nil, nil, errors.New("tick at least one parameter to search")
	}
	return space, words, nil
}

// studySpec is the study the Search form describes; the parameters it
// does not search keep the values of the form's fields.
func (w *Wizard) studySpec() (StudySpec, []string, error) {
	f := w.search
	budget, err := strconv.Atoi(strings.TrimSpace(f.budget.Text))
	if err != nil || budget < 1 || budget > 10000 {
		return StudySpec{}, nil, fmt.Errorf("budget %q: give 1 to 10000 trials", f.budget.Text)
	}
	parallel := strings.TrimSpace(f.parallel.Text)
	if parallel != "auto" {
		if n, err := strconv.Atoi(parallel); err != nil || n < 1 {
			return StudySpec{}, nil, fmt.Errorf("parallel %q: give auto or a number of trials, 1 or more", f.parallel.Text)
		}
	}
	space, words, err := f.space()
	if err != nil {
		return StudySpec{}, nil, err
	}
	sets := map[string]string{}
	for name, v := range w.remembered() {
		if r := f.row(name); r == nil || !r.tick.Checked {
			sets[name] = v
		}
	}
	spec := StudySpec{Template: w.tmpl.Name, Budget: budget, Parallel: parallel, Pruner: f.pruner.Selected, Space: space, Sets: sets}
	if w.selected >= 0 && w.selected < len(w.entries) {
		spec.Source = w.entries[w.selected].Source
	}
	if _, err := w.tmpl.Resolve(sets); err != nil {
		return StudySpec{}, nil, err
	}
	return spec, words, nil
}

// studyLine is the review's sentence for a study, e.g. "a study of 16
// trials over lr (1e-05..0.1, log), hidden (8..1024); auto at once,
// pruner median".
func studyLine(s StudySpec, words []string) string {
	at := s.Parallel + " at once"
	if s.Parallel == "auto" {
		at = "parallel auto"
	}
	return fmt.Sprintf("a study of %d %s over %s; %s, pruner %s", s.Budget, plural(s.Budget, "trial", "trials"),
		strings.Join(words, ", "), at, s.Pruner)
}
