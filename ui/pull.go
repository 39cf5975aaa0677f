package ui

import (
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// PullIndicator shows, on the board, a container image being pulled before
// its stage can start: which image, and how far along it is. It stays
// hidden while nothing is being pulled.
type PullIndicator struct {
	label *widget.Label
	bar   *widget.ProgressBar
	wait  *widget.ProgressBarInfinite
	box   *fyne.Container
}

func newPullIndicator() *PullIndicator {
	p := &PullIndicator{label: widget.NewLabel(""), bar: widget.NewProgressBar(), wait: widget.NewProgressBarInfinite()}
	p.wait.Stop()
	p.box = container.NewBorder(nil, nil, p.label, nil, container.NewStack(p.bar, p.wait))
	p.box.Hide()
	return p
}

// Content is the indicator's object.
func (p *PullIndicator) Content() fyne.CanvasObject { return p.box }

// Update shows the progress of pulling image: current of total bytes
// (total 0 while unknown); done hides the indicator. It may be called from
// any goroutine.
func (p *PullIndicator) Update(image string, current, total int64, done bool) {
	onUI(func() { p.apply(image, current, total, done) })
}

func (p *PullIndicator) apply(image string, current, total int64, done bool) {
	if done {
		p.wait.Stop()
		p.box.Hide()
		return
	}
	p.box.Show()
	if total <= 0 {
		p.label.SetText("Pulling " + image + "…")
		p.bar.Hide()
		p.wait.Show()
		p.wait.Start()
		return
	}
	p.wait.Stop()
	p.wait.Hide()
	p.bar.Show()
	p.label.SetText(fmt.Sprintf("Pulling %s (%d of %d MB)", image, current>>20, total>>20))
	p.bar.SetValue(float64(current) / float64(total))
}
