package ui

import (
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// dagNode is one stage of the DAG picture.
type dagNode struct {
	name, line2, line3 string
	state              engine.State
	col, row           int
	needs              []int // indexes of the stages it needs
}

// dagLayout places a run's stages in columns by depth (a stage sits one
// column right of the deepest stage it needs) and rows in stage order.
func dagLayout(stages []engine.StageInfo, sentinelRetries map[string]int, now time.Time) (nodes []dagNode, cols, rows int) {
	index := map[string]int{}
	for i, s := range stages {
		index[s.Name] = i
	}
	depth := make([]int, len(stages))
	for i := range stages { // stages come in topological order
		for _, n := range stages[i].Needs {
			if j, ok := index[n]; ok && j < i {
				depth[i] = max(depth[i], depth[j]+1)
			}
		}
	}
	perCol := map[int]int{}
	for i, s := range stages {
		n := dagNode{name: s.Name, state: s.State, col: depth[i], row: perCol[depth[i]]}
		perCol[depth[i]]++
		for _, need := range s.Needs {
			if j, ok := index[need]; ok {
				n.needs = append(n.needs, j)
			}
		}
		n.line2 = attemptsText(s, sentinelRetries[s.Name])
		// The colour says the state; the words only what it cannot.
		d := stageDuration(s, now)
		switch {
		case s.State == engine.Succeeded && d > 0:
			n.line3 = "took " + shortDuration(d)
		case d > 0:
			n.line3 = string(s.State) + " " + shortDuration(d)
		default:
			n.line3 = string(s.State)
		}
		nodes = append(nodes, n)
		cols = max(cols, n.col+1)
		rows = max(rows, n.row+1)
	}
	return nodes, cols, rows
}

// stageDuration is how long a stage has run (or ran).
func stageDuration(s engine.StageInfo, now time.Time) time.Duration {
	if s.StartedAt.IsZero() {
		return 0
	}
	end := s.FinishedAt
	if end.IsZero() {
		end = now
	}
	return end.Sub(s.StartedAt)
}

func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// attemptsText is how far a stage is through its attempts: "attempt 2 of
// 3", with the attempts the sentinel added said as such; never "3/2"
// (an attempt that spent no retry still counts in the total shown).
func attemptsText(s engine.StageInfo, bySentinel int) string {
	if s.Attempts == 0 {
		return "not started"
	}
	total := max(s.MaxAttempts, s.Attempts)
	text := fmt.Sprintf("attempt %d of %d", s.Attempts, total)
	if bySentinel > 0 {
		text += fmt.Sprintf(", %d by the sentinel", bySentinel)
	}
	return text
}

// dagView draws a run's stages as boxes in their state's colour, with
// arrows from each stage to those that need it.
type dagView struct {
	widget.BaseWidget
	nodes      []dagNode
	cols, rows int
}

func newDAGView() *dagView {
	d := &dagView{}
	d.ExtendBaseWidget(d)
	return d
}

func (d *dagView) set(stages []engine.StageInfo, sentinelRetries map[string]int, now time.Time) {
	d.nodes, d.cols, d.rows = dagLayout(stages, sentinelRetries, now)
	d.Refresh()
}

const (
	dagBoxH   = 62
	dagGap    = 26
	dagMaxBox = 170
	dagMinBox = 88
)

func (d *dagView) MinSize() fyne.Size {
	if d.cols == 0 {
		return fyne.NewSize(0, 0)
	}
	return fyne.NewSize(float32(d.cols)*dagMinBox+float32(d.cols-1)*dagGap, float32(d.rows)*dagBoxH+float32(d.rows-1)*10)
}

func (d *dagView) CreateRenderer() fyne.WidgetRenderer { return &dagRenderer{d: d} }

type dagRenderer struct {
	d    *dagView
	objs []fyne.CanvasObject
}

// boxWidth fits the columns into the width, between the box bounds.
func (r *dagRenderer) boxWidth(size fyne.Size) float32 {
	if r.d.cols == 0 {
		return 0
	}
	w := (size.Width - float32(r.d.cols-1)*dagGap) / float32(r.d.cols)
	return max(dagMinBox, min(dagMaxBox, w))
}

func (r *dagRenderer) Layout(size fyne.Size) { r.build(size) }

func (r *dagRenderer) build(size fyne.Size) {
	d := r.d
	bw := r.boxWidth(size)
	pos := func(n dagNode) fyne.Position {
		return fyne.NewPos(float32(n.col)*(bw+dagGap), float32(n.row)*(dagBoxH+10))
	}
	fg := theme.Color(theme.ColorNameForeground)
	var objs []fyne.CanvasObject
	for _, n := range d.nodes {
		for _, j := range n.needs {
			from, to := pos(d.nodes[j]), pos(n)
			l := canvas.NewLine(withAlpha(fg, 0x90))
			l.StrokeWidth = 1.5
			l.Position1 = fyne.NewPos(from.X+bw, from.Y+dagBoxH/2)
			l.Position2 = fyne.NewPos(to.X, to.Y+dagBoxH/2)
			head := canvas.NewText("▸", withAlpha(fg, 0x90))
			head.TextSize = 12
			head.Move(fyne.NewPos(to.X-8, to.Y+dagBoxH/2-9))
			objs = append(objs, l, head)
		}
	}
	for _, n := range d.nodes {
		p := pos(n)
		col := stateColor(n.state)
		bg := canvas.NewRectangle(withAlpha(col, 0x30))
		bg.StrokeColor = col
		bg.StrokeWidth = 2
		bg.CornerRadius = 8
		bg.Move(p)
		bg.Resize(fyne.NewSize(bw, dagBoxH))
		objs = append(objs, bg)
		for i, line := range []string{n.name, n.line2, n.line3} {
			t := canvas.NewText(fitText(line, bw-14, theme.CaptionTextSize()), fg)
			t.TextSize = theme.CaptionTextSize()
			if i == 0 {
				t.TextStyle = fyne.TextStyle{Bold: true}
				t.TextSize = theme.TextSize() - 1
			}
			t.Move(fyne.NewPos(p.X+7, p.Y+4+float32(i)*18))
			objs = append(objs, t)
		}
	}
	r.objs = objs
}

// fitText cuts s to about what fits in width at size, with an ellipsis.
func fitText(s string, width, size float32) string {
	if fyne.MeasureText(s, size, fyne.TextStyle{}).Width <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 1 {
		r = r[:len(r)-1]
		if fyne.MeasureText(string(r)+"…", size, fyne.TextStyle{}).Width <= width {
			break
		}
	}
	return string(r) + "…"
}

func (r *dagRenderer) MinSize() fyne.Size { return r.d.MinSize() }
func (r *dagRenderer) Refresh() {
	r.build(r.d.Size())
	canvas.Refresh(r.d)
}
func (r *dagRenderer) Objects() []fyne.CanvasObject { return r.objs }
func (r *dagRenderer) Destroy()                     {}
