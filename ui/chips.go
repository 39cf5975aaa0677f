package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"

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
