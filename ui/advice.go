package ui

import (
	"context"
	"math"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Advice is what the archive suggests running next of a template, outside
// any study: the Templates page's "Suggested next", one click from the
// wizard.
type Advice struct {
	Values   map[string]any // every parameter of the run to launch
	Searched []string       // the parameters the tuner chose, in the template's order
	Why      string         // what the model expects, e.g. "expected val_acc 0.975 ± 0.004 from 14 runs"
}

// adviser is what the engine offers for it: no Values and no error for a
// template that can never be advised on. Without it the Templates page
// suggests nothing.
type adviser interface {
	Advise(ctx context.Context, template string) (Advice, error)
}

// adviceText is the page's line for a: the searched values, short, and why.
func adviceText(a Advice) string {
	pairs := make([]string, 0, len(a.Searched))
	for _, k := range a.Searched {
		if x, ok := a.Values[k]; ok {
			pairs = append(pairs, k+"="+shortParam(x))
		}
	}
	text := "Suggested next: " + strings.Join(pairs, ", ")
	if a.Why != "" {
		text += " — " + a.Why
	}
	return text
}

// shortParam writes a parameter's value to read, not to launch: a float
// to three digits (0.00316), anything else whole.
func shortParam(x any) string {
	if f, ok := x.(float64); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', 3, 64)
	}
	return formatParam(x)
}

// advicePane is the Templates page's suggestion for the template on
// screen: a line, and a button that opens the wizard with its values.
type advicePane struct {
	line   *widget.Label
	launch *widget.Button
	box    *fyne.Container

	shown  string // the template the pane is for
	values map[string]any
	open   func(tmpl string, values map[string]any)
	// asked counts the questions put to the adviser: an answer to any
	// but the latest is dropped; cancel ends the latest's work when
	// another template is picked.
	asked  int
	cancel context.CancelFunc
	// tasks are the goroutines of the page the pane is on.
	tasks *tasks
	// answered, when set, is signalled once an answer has been shown
	// (or dropped), for tests.
	answered chan struct{}
}

func newAdvicePane(open func(string, map[string]any), t *tasks) *advicePane {
	p := &advicePane{line: widget.NewLabel(""), open: open, tasks: t}
	p.line.Wrapping = fyne.TextWrapWord
	p.launch = widget.NewButtonWithIcon("Launch it…", theme.MediaPlayIcon(), func() {
		if p.values != nil {
			p.open(p.shown, p.values)
		}
	})
	p.launch.Hide()
	p.box = container.NewVBox(p.line, container.NewHBox(p.launch))
	p.box.Hide()
	return p
}

// show works out the suggestion for tmpl with adv, off the UI goroutine
// (it reads every earlier run's curve), saying so meanwhile; picking
// another template cancels the work for this one.
func (p *advicePane) show(ctx context.Context, adv adviser, tmpl string) {
	p.stop()
	p.asked++
	asked := p.asked
	ctx, p.cancel = context.WithCancel(ctx)
	p.shown, p.values = tmpl, nil
	p.line.Importance = widget.LowImportance
	p.line.SetText("Suggested next: working it out from the earlier runs of " + tmpl + "…")
	p.launch.Hide()
	p.box.Show()
	p.tasks.GoUnder(ctx, func(ctx context.Context) {
		a, err := adv.Advise(ctx, tmpl)
		defer func() {
			if p.answered != nil {
				p.answered <- struct{}{}
			}
		}()
		onUIWait(func() {
			if p.asked != asked {
				return // another question was put since
			}
			switch {
			case err != nil:
				p.line.Importance = widget.LowImportance
				p.line.SetText("No suggestion yet: " + err.Error())
			case a.Values == nil:
				p.box.Hide() // this template is never advised on
			default:
				p.values = a.Values
				p.line.Importance = widget.MediumImportance
				p.line.SetText(adviceText(a))
				p.launch.Show()
			}
		})
	})
}

// stop cancels the work for the suggestion on screen, if any.
func (p *advicePane) stop() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

// hide empties the pane (a template that does not parse).
func (p *advicePane) hide() {
	p.stop()
	p.asked++
	p.shown, p.values = "", nil
	p.box.Hide()
}
