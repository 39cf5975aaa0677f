package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// stateColor is the one colour each state has everywhere in the window.
func stateColor(s engine.State) color.Color {
	switch s {
	case engine.Succeeded:
		return color.NRGBA{R: 0x2e, G: 0x9d, B: 0x5b, A: 0xff}
	case engine.Running:
		return color.NRGBA{R: 0x2d, G: 0x7f, B: 0xf9, A: 0xff}
	case engine.Failed:
		return color.NRGBA{R: 0xd6, G: 0x45, B: 0x45, A: 0xff}
	case engine.Cancelled:
		return color.NRGBA{R: 0xb0, G: 0x8a, B: 0x3e, A: 0xff}
	case engine.Pruned:
		// A pruned trial did its job (it told the study what loses):
		// a muted violet, neither failure red nor cancel amber.
		return color.NRGBA{R: 0x8e, G: 0x6c, B: 0xb8, A: 0xff}
	default:
		return color.NRGBA{R: 0x8a, G: 0x8f, B: 0x98, A: 0xff}
	}
}

// chip is a small coloured pill with a label: a stage and its state, or a
// run's state.
func chip(text string, s engine.State) fyne.CanvasObject {
	bg := canvas.NewRectangle(stateColor(s))
	bg.CornerRadius = 9
	label := canvas.NewText(text, color.White)
	label.TextSize = theme.CaptionTextSize()
	label.TextStyle = fyne.TextStyle{Bold: true}
	return container.NewStack(bg, container.New(&padLayout{h: 8, v: 2}, label))
}

// stageChips shows a run's DAG in order, one pill per stage.
func stageChips(stages []engine.StageInfo) []fyne.CanvasObject {
	out := make([]fyne.CanvasObject, len(stages))
	for i, s := range stages {
		out[i] = chip(s.Name, s.State)
	}
	return out
}

// padLayout pads its single child by fixed amounts.
type padLayout struct{ h, v float32 }

func (p *padLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var m fyne.Size
	for _, o := range objs {
		m = m.Max(o.MinSize())
	}
	return m.Add(fyne.NewSize(2*p.h, 2*p.v))
}

func (p *padLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Move(fyne.NewPos(p.h, p.v))
		o.Resize(size.Subtract(fyne.NewSize(2*p.h, 2*p.v)))
	}
}

// tag is a small outlined label in a colour, such as "simulated" on a GPU
// card or an anomaly badge.
func tag(text string, c color.Color) fyne.CanvasObject {
	bg := canvas.NewRectangle(color.Transparent)
	bg.CornerRadius = 8
	bg.StrokeColor = c
	bg.StrokeWidth = 1.5
	label := canvas.NewText(text, c)
	label.TextSize = theme.CaptionTextSize()
	label.TextStyle = fyne.TextStyle{Bold: true}
	return container.NewStack(bg, container.New(&padLayout{h: 7, v: 2}, label))
}

// stageStrip shows a run's stages in order: as named chips when they fit
// the width it is given, else as a dot per stage in its state's colour, so
// that it never needs more room than it has.
type stageStrip struct {
	widget.BaseWidget
	stages []engine.StageInfo
	chips  []fyne.CanvasObject
	dots   []fyne.CanvasObject
}

func newStageStrip() *stageStrip {
	s := &stageStrip{}
	s.ExtendBaseWidget(s)
	return s
}

func (s *stageStrip) set(stages []engine.StageInfo) {
	s.stages = stages
	s.chips = stageChips(stages)
	s.dots = make([]fyne.CanvasObject, len(stages))
	for i, st := range stages {
		d := canvas.NewCircle(stateColor(st.State))
		d.Resize(fyne.NewSize(stripDot, stripDot))
		s.dots[i] = d
	}
	s.Refresh()
}

const (
	stripDot = 10
	stripGap = 4
)

// MinSize is the dots' width: the strip shrinks to them before it would
// cover anything.
func (s *stageStrip) MinSize() fyne.Size {
	n := float32(len(s.stages))
	if n == 0 {
		return fyne.NewSize(0, 0)
	}
	h := float32(stripDot)
	for _, c := range s.chips {
		h = max(h, c.MinSize().Height)
	}
	return fyne.NewSize(n*stripDot+(n-1)*stripGap, h)
}

func (s *stageStrip) CreateRenderer() fyne.WidgetRenderer { return &stripRenderer{s: s} }

type stripRenderer struct {
	s     *stageStrip
	shown []fyne.CanvasObject
}

// chipsWidth is the width of the named chips side by side.
func (r *stripRenderer) chipsWidth() float32 { return r.s.fullWidth() }

// fullWidth is the width the named chips need side by side.
func (s *stageStrip) fullWidth() float32 {
	var w float32
	for i, c := range s.chips {
		if i > 0 {
			w += stripGap
		}
		w += c.MinSize().Width
	}
	return w
}

// headLayout lays a row's head out: the state badge, the title at its
// natural width, and the stage strip right-aligned in what is left; when
// the width runs short the strip shrinks to dots first, then the title is
// cut. Nothing is drawn over anything.
type headLayout struct {
	title *widget.Label // the title when it is a truncating label, else nil
	strip *stageStrip
}

func (l *headLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var w, h float32
	for _, o := range objs {
		if !o.Visible() {
			continue
		}
		ms := o.MinSize()
		w += ms.Width
		h = max(h, ms.Height)
	}
	return fyne.NewSize(w, h)
}

func (l *headLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	state, title, strip := objs[0], objs[1], objs[2]
	sw := state.MinSize().Width
	state.Resize(fyne.NewSize(sw, size.Height))
	state.Move(fyne.NewPos(0, 0))
	tw := title.MinSize().Width
	if l.title != nil && title == fyne.CanvasObject(l.title) {
		// A truncating label's MinSize is an ellipsis: measure its text.
		tw = fyne.MeasureText(l.title.Text, theme.TextSize(), l.title.TextStyle).Width + 2*theme.InnerPadding() + theme.Padding()
	}
	left := size.Width - sw
	stripW := float32(0)
	if strip.Visible() {
		stripW = min(l.strip.fullWidth(), max(0, left-tw))
		stripW = max(stripW, l.strip.MinSize().Width)
	}
	tw = max(0, min(tw, left-stripW))
	title.Move(fyne.NewPos(sw, 0))
	title.Resize(fyne.NewSize(tw, size.Height))
	strip.Move(fyne.NewPos(size.Width-stripW, 0))
	strip.Resize(fyne.NewSize(stripW, size.Height))
}

func (r *stripRenderer) Layout(size fyne.Size) {
	s := r.s
	if w := r.chipsWidth(); w <= size.Width {
		x := size.Width - w // right-aligned
		for _, c := range s.chips {
			ms := c.MinSize()
			c.Resize(ms)
			c.Move(fyne.NewPos(x, (size.Height-ms.Height)/2))
			x += ms.Width + stripGap
		}
		r.shown = s.chips
		return
	}
	x := size.Width - (float32(len(s.dots))*stripDot + float32(len(s.dots)-1)*stripGap)
	for _, d := range s.dots {
		d.Resize(fyne.NewSize(stripDot, stripDot))
		d.Move(fyne.NewPos(x, (size.Height-stripDot)/2))
		x += stripDot + stripGap
	}
	r.shown = s.dots
}

func (r *stripRenderer) MinSize() fyne.Size { return r.s.MinSize() }
func (r *stripRenderer) Refresh() {
	r.Layout(r.s.Size())
	canvas.Refresh(r.s)
}
func (r *stripRenderer) Objects() []fyne.CanvasObject {
	if r.shown == nil {
		r.Layout(r.s.Size())
	}
	return r.shown
}
func (r *stripRenderer) Destroy() {}
