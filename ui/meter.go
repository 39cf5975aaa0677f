package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// meter is a bar for a GPU's utilisation or memory: a neutral track, a
// filled part in the accent colour, and the figure written over it. Fyne's
// ProgressBar tints its track with the accent too, so an idle GPU's bar
// read as full.
type meter struct {
	widget.BaseWidget
	value float64 // 0..1
	text  string
}

func newMeter() *meter {
	m := &meter{}
	m.ExtendBaseWidget(m)
	return m
}

// Set shows value (clamped to 0..1) with text over it.
func (m *meter) Set(value float64, text string) {
	m.value, m.text = clamp01(value), text
	m.Refresh()
}

func (m *meter) CreateRenderer() fyne.WidgetRenderer {
	r := &meterRenderer{m: m, track: canvas.NewRectangle(themeColor(colorNameTrack)), fill: canvas.NewRectangle(accent),
		label: canvas.NewText("", color.White)}
	r.track.CornerRadius, r.fill.CornerRadius = 4, 4
	r.label.Alignment = fyne.TextAlignCenter
	r.Refresh()
	return r
}

type meterRenderer struct {
	m           *meter
	track, fill *canvas.Rectangle
	label       *canvas.Text
}

func (r *meterRenderer) Layout(size fyne.Size) {
	r.track.Resize(size)
	r.fill.Resize(fyne.NewSize(size.Width*float32(r.m.value), size.Height))
	r.label.Resize(size)
	r.label.Move(fyne.NewPos(0, (size.Height-r.label.MinSize().Height)/2))
	r.label.Resize(fyne.NewSize(size.Width, r.label.MinSize().Height))
}

func (r *meterRenderer) MinSize() fyne.Size {
	return fyne.NewSize(r.label.MinSize().Width+2*theme.Padding(), r.label.MinSize().Height+2*theme.Padding())
}

func (r *meterRenderer) Refresh() {
	r.track.FillColor = themeColor(colorNameTrack)
	r.label.Text = r.m.text
	r.label.Color = theme.Color(theme.ColorNameForeground)
	r.Layout(r.m.Size())
	canvas.Refresh(r.m)
}

func (r *meterRenderer) Objects() []fyne.CanvasObject {
	return []fyne.CanvasObject{r.track, r.fill, r.label}
}

func (r *meterRenderer) Destroy() {}
