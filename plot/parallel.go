package plot

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Axis is one vertical axis of a parallel-coordinates chart: a parameter
// (or the objective) and how its values are spread.
type Axis struct {
	Name string
	Log  bool // place values on a log₁₀ scale (all must be > 0)
	// Categories, when set, makes the axis categorical: a line's value
	// is an index into it (a choice parameter such as the optimizer).
	Categories []string
}

// Line is one run across the axes: Values[i] sits on axis i (NaN: the run
// has no value there, and the line skips that axis). Color, when nil,
// comes from the colour scale over Shade.
type Line struct {
	Values []float64
	Shade  float64 // 0..1: where the line's colour sits on the scale, 1 = best
	Color  color.Color
}

// RenderParallel draws lines across vertical axes (parallel coordinates),
// each axis scaled to its own range, labelled with its name below and its
// extremes at its ends. Lines are coloured from red (Shade 0) through
// amber to green (Shade 1), so that the best runs stand out. The Frame's
// X is the axis index (0 … len(axes)-1) and its Y the axis' fraction
// (0 at the bottom, 1 at the top): PositionOf places a line's value.
func RenderParallel(axes []Axis, lines []Line, opt Options) (*image.RGBA, Frame, Parallel, error) {
	opt.View = Range{}
	opt.LogX, opt.LogY, opt.Scatter = false, false, false
	opt, err := opt.normalized()
	if err != nil {
		return nil, Frame{}, Parallel{}, err
	}
	if len(axes) < 2 {
		return nil, Frame{}, Parallel{}, fmt.Errorf("plot: parallel coordinates need at least two axes, got %d", len(axes))
	}
	for i, l := range lines {
		if len(l.Values) != len(axes) {
			return nil, Frame{}, Parallel{}, fmt.Errorf("plot: line %d has %d values for %d axes", i, len(l.Values), len(axes))
		}
	}
	th := lightTheme
	if opt.Dark {
		th = darkTheme
	}
	par := newParallel(axes, lines)
	p := gplot.New()
	applyTheme(p, opt, th)
	p.X.Min, p.X.Max = -0.25, float64(len(axes)-1)+0.25
	p.Y.Min, p.Y.Max = -0.08, 1.08
	ticks := make([]gplot.Tick, len(axes))
	for i, a := range axes {
		ticks[i] = gplot.Tick{Value: float64(i), Label: a.Name}
	}
	p.X.Tick.Marker = gplot.ConstantTicks(ticks)
	p.Y.Tick.Marker = gplot.ConstantTicks{}
	p.Y.LineStyle.Width = 0
	p.Y.Tick.LineStyle.Width = 0
	p.X.Tick.Label.Font = font.From(sans, 10)
	p.X.Tick.Label.Color = th.text

	for i := range axes {
		p.Add(&plotter.Line{XYs: plotter.XYs{{X: float64(i), Y: 0}, {X: float64(i), Y: 1}},
			LineStyle: draw.LineStyle{Color: th.axis, Width: vg.Points(1)}})
	}
	// Worst first, so that the best lines are drawn on top.
	order := make([]int, len(lines))
	for i := range order {
		order[i] = i
	}
	sortByShade(order, lines)
	for _, li := range order {
		l := lines[li]
		col := l.Color
		if col == nil {
			col = shadeColor(l.Shade)
		}
		var seg plotter.XYs
		flush := func() {
			if len(seg) > 1 {
				p.Add(&plotter.Line{XYs: seg, LineStyle: draw.LineStyle{Color: faded(col, 0xc0), Width: vg.Points(1.4)}})
			}
			seg = nil
		}
		for i := range axes {
			y, ok := par.frac(i, l.Values[i])
			if !ok {
				flush()
				continue
			}
			seg = append(seg, plotter.XY{X: float64(i), Y: y})
		}
		flush()
	}
	p.Add(axisLabels{par: par, style: text.Style{Color: th.muted, Font: font.From(sans, 8.5), Handler: gplot.DefaultTextHandler}})
	img, fr := drawImage(p, opt, th)
	return img, fr, par, nil
}

// Parallel is how a parallel-coordinates chart scaled its axes, for
// hit-testing a click against the lines.
type Parallel struct {
	axes   []Axis
	lo, hi []float64
}

func newParallel(axes []Axis, lines []Line) Parallel {
	par := Parallel{axes: axes, lo: make([]float64, len(axes)), hi: make([]float64, len(axes))}
	for i, a := range axes {
		lo, hi := math.Inf(1), math.Inf(-1)
		if len(a.Categories) > 0 {
			lo, hi = 0, float64(len(a.Categories)-1)
		} else {
			for _, l := range lines {
				v := l.Values[i]
				if !isFinite(v) || (a.Log && v <= 0) {
					continue
				}
				if a.Log {
					v = math.Log10(v)
				}
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		par.lo[i], par.hi[i] = lo, hi
	}
	return par
}

// frac is where value v sits on axis i, from 0 (bottom) to 1 (top).
func (par Parallel) frac(i int, v float64) (float64, bool) {
	a := par.axes[i]
	if !isFinite(v) || (a.Log && v <= 0) {
		return 0, false
	}
	if a.Log {
		v = math.Log10(v)
	}
	lo, hi := par.lo[i], par.hi[i]
	if !(hi > lo) {
		return 0.5, lo <= hi
	}
	return (v - lo) / (hi - lo), true
}

// PositionOf is the data point (axis index, fraction) where value v of
// axis i is drawn; ok is false for a value the axis cannot show.
func (par Parallel) PositionOf(i int, v float64) (x, y float64, ok bool) {
	y, ok = par.frac(i, v)
	return float64(i), y, ok
}

// axisLabels writes each axis' extremes at its ends.
type axisLabels struct {
	par   Parallel
	style text.Style
}

func (a axisLabels) Plot(c draw.Canvas, plt *gplot.Plot) {
	trX, trY := plt.Transforms(&c)
	for i, ax := range a.par.axes {
		top, bottom := a.label(i, ax, true), a.label(i, ax, false)
		sty := a.style
		sty.XAlign = draw.XCenter
		sty.YAlign = draw.YBottom
		c.FillText(sty, vg.Point{X: trX(float64(i)), Y: trY(1) + vg.Points(3)}, top)
		sty.YAlign = draw.YTop
		c.FillText(sty, vg.Point{X: trX(float64(i)), Y: trY(0) - vg.Points(3)}, bottom)
	}
}

func (a axisLabels) label(i int, ax Axis, top bool) string {
	if len(ax.Categories) > 0 {
		if top {
			return ax.Categories[len(ax.Categories)-1]
		}
		return ax.Categories[0]
	}
	v := a.par.lo[i]
	if top {
		v = a.par.hi[i]
	}
	if math.IsInf(v, 0) {
		return ""
	}
	if ax.Log {
		v = math.Pow(10, v)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e7 {
		return strconv.FormatFloat(v, 'f', 0, 64) // 1024, not 1.02e+03
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// shadeColor runs from red (0) through amber (0.5) to green (1).
func shadeColor(s float64) color.Color {
	s = math.Max(0, math.Min(1, s))
	lo, mid, hi := hex(0xd64545), hex(0xe3a33b), hex(0x2e9d5b)
	mix := func(a, b color.NRGBA, t float64) color.NRGBA {
		return color.NRGBA{R: uint8(float64(a.R) + t*(float64(b.R)-float64(a.R))), G: uint8(float64(a.G) + t*(float64(b.G)-float64(a.G))),
			B: uint8(float64(a.B) + t*(float64(b.B)-float64(a.B))), A: 0xff}
	}
	if s < 0.5 {
		return mix(lo, mid, s*2)
	}
	return mix(mid, hi, (s-0.5)*2)
}

func sortByShade(order []int, lines []Line) {
	for i := 1; i < len(order); i++ { // insertion sort: a few hundred lines
		for j := i; j > 0 && lines[order[j]].Shade < lines[order[j-1]].Shade; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
}
