package ui

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/plot"
)

// xMode is what a chart's X axis shows.
type xMode int

const (
	xStep     xMode = iota // the workload's step
	xRelative              // time since the series' first point
	xWall                  // the clock
)

// xModeNames are the X axis choices, in xMode order.
var xModeNames = []string{"step", "relative time", "wall time"}

// chartSeries is one line of a chart: the points as the engine gave them,
// which the chart hit-tests against (never its pixels).
type chartSeries struct {
	name   string    // in the legend and the hover box
	steps  []float64 // ascending
	walls  []float64 // Unix seconds; NaN where unknown
	ys     []float64
	slot   int  // palette colour + 1: the series of one run share one
	dashed bool // an earlier attempt
}

// chart is an interactive line chart drawn by niuma/plot at the pixel size
// it has on screen (so it fills its pane and redraws on resize): hover
// shows the step, wall time and value of every series at the pointer, a
// drag zooms to the box dragged, a double click resets the zoom. Smoothing
// draws an EMA of each series with the raw values faint behind.
type chart struct {
	widget.BaseWidget

	mu     sync.Mutex // guards everything below: the raster draws off the caller's goroutine in tests
	title  string
	series []chartSeries
	mode   xMode
	smooth float64 // EMA weight, 0 = off
	logY   bool
	dark   bool
	view   plot.Range // the zoom; zero = everything

	xs      map[xMode][][]float64 // per mode, each series' X
	smoothY [][]float64           // each series' EMA at smoothW
	smoothW float64

	// The last drawing: its pixels, where the data landed, and the
	// pixels per point it was drawn at.
	img   *image.RGBA
	frame plot.Frame
	scale float32
	drawn string // what img shows, to skip identical redraws

	hoverAt  fyne.Position
	hovering bool
	dragFrom fyne.Position
	dragTo   fyne.Position
	dragging bool

	raster *canvas.Raster
	r      *chartRenderer // set by CreateRenderer: hover redraws only the overlays
	// OnZoom is called after the view changes (a drag, a double click).
	OnZoom func(zoomed bool)
}

func newChart() *chart {
	c := &chart{xs: map[xMode][][]float64{}}
	c.raster = canvas.NewRaster(c.generate)
	c.ExtendBaseWidget(c)
	return c
}

// SetSeries replaces what the chart draws; the zoom stays when the title
// (the metric) does, so that live points do not undo it.
func (c *chart) SetSeries(title string, s []chartSeries) {
	c.mu.Lock()
	if title != c.title {
		c.view = plot.Range{}
	}
	c.title, c.series = title, s
	c.xs, c.smoothY = map[xMode][][]float64{}, nil
	c.drawn = ""
	c.mu.Unlock()
	c.Refresh()
}

// SetMode chooses the X axis; the zoom is reset (its range meant another
// axis).
func (c *chart) SetMode(m xMode) {
	c.mu.Lock()
	c.mode, c.view = m, plot.Range{}
	c.mu.Unlock()
	c.Refresh()
}

// SetSmoothing sets the EMA weight (0 off, up to 0.99).
func (c *chart) SetSmoothing(w float64) {
	c.mu.Lock()
	c.smooth = math.Max(0, math.Min(w, 0.99))
	c.mu.Unlock()
	c.Refresh()
}

// SetLogY draws Y on a log scale; the zoom's Y range is dropped.
func (c *chart) SetLogY(on bool) {
	c.mu.Lock()
	c.logY = on
	c.view.YMin, c.view.YMax = 0, 0
	c.mu.Unlock()
	c.Refresh()
}

// Zoomed reports whether a zoom is in effect.
func (c *chart) Zoomed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view.HasX()
}

// ResetZoom shows everything again.
func (c *chart) ResetZoom() {
	c.mu.Lock()
	c.view = plot.Range{}
	c.mu.Unlock()
	c.Refresh()
	if c.OnZoom != nil {
		c.OnZoom(false)
	}
}

// xOf is each series' X for the mode, computed once per data and mode.
func (c *chart) xOf(m xMode) [][]float64 {
	if xs, ok := c.xs[m]; ok {
		return xs
	}
	out := make([][]float64, len(c.series))
	for i, s := range c.series {
		switch m {
		case xStep:
			out[i] = s.steps
		case xWall:
			out[i] = s.walls
		case xRelative:
			x := make([]float64, len(s.walls))
			t0 := math.NaN()
			for j, w := range s.walls {
				if math.IsNaN(t0) && !math.IsNaN(w) {
					t0 = w
				}
				x[j] = w - t0
			}
			out[i] = x
		}
	}
	c.xs[m] = out
	return out
}

// smoothed is each series' EMA at the current weight.
func (c *chart) smoothed() [][]float64 {
	if c.smooth <= 0 {
		return nil
	}
	if c.smoothY == nil || c.smoothW != c.smooth {
		c.smoothY = make([][]float64, len(c.series))
		for i, s := range c.series {
			c.smoothY[i] = plot.EMA(s.ys, c.smooth)
		}
		c.smoothW = c.smooth
	}
	return c.smoothY
}

// plotSeries is what plot.RenderImage draws for the chart's state.
func (c *chart) plotSeries() []plot.Series {
	xs := c.xOf(c.mode)
	sm := c.smoothed()
	var out []plot.Series
	for i, s := range c.series {
		slot := s.slot
		if slot == 0 {
			slot = i + 1
		}
		if sm == nil {
			out = append(out, plot.Series{Name: s.name, X: xs[i], Y: s.ys, Slot: slot, Dashed: s.dashed})
			continue
		}
		out = append(out,
			plot.Series{Name: s.name + " (raw)", X: xs[i], Y: s.ys, Slot: slot, Faint: true},
			plot.Series{Name: s.name, X: xs[i], Y: sm[i], Slot: slot, Dashed: s.dashed})
	}
	return out
}

// generate is the raster's generator: the chart at w×h pixels.
func (c *chart) generate(w, h int) image.Image {
	size := c.Size()
	if w < 2 || h < 2 || size.Width < 1 {
		return image.NewRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	}
	img, err := c.render(w, h, float32(w)/size.Width)
	if err != nil {
		return image.NewRGBA(image.Rect(0, 0, w, h))
	}
	return img
}

// render draws the chart at w×h pixels, scale pixels per point, and keeps
// the frame for hit-testing. An unchanged chart is not drawn again.
func (c *chart) render(w, h int, scale float32) (*image.RGBA, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fmt.Sprintf("%d|%d|%g|%d|%g|%t|%t|%v|%d", w, h, scale, c.mode, c.smooth, c.logY, c.dark, c.view, len(c.series))
	if c.img != nil && c.drawn == key {
		return c.img, nil
	}
	wpt, hpt := float64(w)/float64(scale), float64(h)/float64(scale)
	opt := plot.Options{
		Title: c.title, Width: math.Max(wpt, 64), Height: math.Max(hpt, 64), DPI: 72 * float64(scale),
		LogY: c.logY, Dark: c.dark, View: c.view, MarkNonFinite: true,
		// One point per pixel column is all a line can show.
		MaxPoints: max(w, 300), Location: time.Local,
	}
	switch c.mode {
	case xStep:
		opt.XLabel = "step"
	case xRelative:
		opt.XLabel, opt.XTicks = "time since start", plot.TickDuration
	case xWall:
		opt.XLabel, opt.XTicks = "wall time", plot.TickClock
	}
	img, fr, err := plot.RenderImage(c.plotSeries(), opt)
	if err != nil {
		return nil, err
	}
	c.img, c.frame, c.scale, c.drawn = img, fr, scale, key
	return img, nil
}

// hoverLines is what the hover box says with the pointer at pos (widget
// coordinates): for each series, its point nearest the pointer's X, with
// step, wall time and value (and the smoothed value). ok is false off
// the plot area or before the first drawing.
func (c *chart) hoverLines(pos fyne.Position) (lines []string, lineX float32, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.img == nil || c.scale == 0 {
		return nil, 0, false
	}
	px, py := float64(pos.X*c.scale), float64(pos.Y*c.scale)
	if !c.frame.Inside(px, py) {
		return nil, 0, false
	}
	x := c.frame.DataX(px)
	xs := c.xOf(c.mode)
	sm := c.smoothed()
	nearX := math.NaN()
	for i, s := range c.series {
		j := nearestFinite(xs[i], x)
		if j < 0 {
			continue
		}
		if math.IsNaN(nearX) || math.Abs(xs[i][j]-x) < math.Abs(nearX-x) {
			nearX = xs[i][j]
		}
		line := s.name + ":  " + formatValue(s.ys[j])
		if sm != nil {
			line += "  (smoothed " + formatValue(sm[i][j]) + ")"
		}
		line += fmt.Sprintf("  ·  step %d", int64(s.steps[j]))
		if w := s.walls[j]; !math.IsNaN(w) {
			t := time.Unix(0, int64(w*1e9)).Local()
			line += "  ·  " + t.Format("15:04:05")
			if t0 := firstFinite(s.walls); !math.IsNaN(t0) {
				line += " (+" + plot.DurationLabel(w-t0) + ")"
			}
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return nil, 0, false
	}
	return lines, float32(c.frame.PixelX(nearX)) / c.scale, true
}

// nearestFinite is the index of the point of xs nearest x (NaN X, a wall
// time that was not recorded, are skipped), or -1.
func nearestFinite(xs []float64, x float64) int {
	i := plot.Nearest(xs, x)
	if i < 0 || !math.IsNaN(xs[i]) {
		return i
	}
	return -1
}

func firstFinite(v []float64) float64 {
	for _, x := range v {
		if !math.IsNaN(x) {
			return x
		}
	}
	return math.NaN()
}

// formatValue writes a metric value with four significant digits, and
// says NaN and ±Inf in words a reader expects.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return fmt.Sprintf("%.4g", v)
}

// zoomTo zooms to the box between two widget points: its X always, its Y
// when the box is taller than a flick of the hand. A box narrower than a
// few pixels is a click, not a zoom.
func (c *chart) zoomTo(a, b fyne.Position) bool {
	c.mu.Lock()
	if c.img == nil || math.Abs(float64(a.X-b.X)) < 5 {
		c.mu.Unlock()
		return false
	}
	s := float64(c.scale)
	x0, x1 := c.frame.DataX(float64(a.X)*s), c.frame.DataX(float64(b.X)*s)
	v := plot.Range{XMin: math.Min(x0, x1), XMax: math.Max(x0, x1)}
	if math.Abs(float64(a.Y-b.Y)) >= 12 {
		y0, y1 := c.frame.DataY(float64(a.Y)*s), c.frame.DataY(float64(b.Y)*s)
		v.YMin, v.YMax = math.Min(y0, y1), math.Max(y0, y1)
	}
	c.view = v
	c.mu.Unlock()
	c.Refresh()
	if c.OnZoom != nil {
		c.OnZoom(true)
	}
	return true
}

// MouseIn, MouseMoved and MouseOut show and move the hover box.
func (c *chart) MouseIn(e *desktop.MouseEvent) { c.MouseMoved(e) }
func (c *chart) MouseMoved(e *desktop.MouseEvent) {
	c.hovering, c.hoverAt = true, e.Position
	c.refreshOverlays()
}
func (c *chart) MouseOut() { c.hovering = false; c.refreshOverlays() }

// refreshOverlays moves the hover line and box without drawing the chart
// again: the pointer moves far more often than the data changes.
func (c *chart) refreshOverlays() {
	if c.r == nil {
		return
	}
	c.r.place(c.Size())
	canvas.Refresh(c)
}

// Dragged draws the zoom box; DragEnd zooms to it.
func (c *chart) Dragged(e *fyne.DragEvent) {
	if !c.dragging {
		c.dragging = true
		c.dragFrom = e.Position.Subtract(e.Dragged)
	}
	c.dragTo = e.Position
	c.refreshOverlays()
}

func (c *chart) DragEnd() {
	if c.dragging {
		c.dragging = false
		c.zoomTo(c.dragFrom, c.dragTo)
		c.Refresh()
	}
}

// DoubleTapped resets the zoom.
func (c *chart) DoubleTapped(*fyne.PointEvent) { c.ResetZoom() }

// Cursor is a crosshair over the chart: it reads values, it is not a button.
func (c *chart) Cursor() desktop.Cursor { return desktop.CrosshairCursor }

func (c *chart) MinSize() fyne.Size { return fyne.NewSize(320, 200) }

func (c *chart) CreateRenderer() fyne.WidgetRenderer {
	r := &chartRenderer{c: c, line: canvas.NewLine(theme.Color(theme.ColorNameForeground)),
		box: canvas.NewRectangle(color.Transparent), tipBG: canvas.NewRectangle(theme.Color(theme.ColorNameOverlayBackground))}
	r.line.StrokeWidth = 1
	r.box.StrokeWidth = 1
	r.tipBG.StrokeWidth = 1
	r.tipBG.CornerRadius = 4
	c.r = r
	return r
}

type chartRenderer struct {
	c     *chart
	line  *canvas.Line      // the hover's vertical line
	box   *canvas.Rectangle // the zoom box being dragged
	tipBG *canvas.Rectangle
	tip   []*canvas.Text
	objs  []fyne.CanvasObject
}

func (r *chartRenderer) Layout(size fyne.Size) {
	r.c.raster.Resize(size)
	r.c.raster.Move(fyne.NewPos(0, 0))
	r.place(size)
}

// place positions the overlays: the hover line and box, the zoom box.
func (r *chartRenderer) place(size fyne.Size) {
	c := r.c
	fg := theme.Color(theme.ColorNameForeground)
	r.line.StrokeColor = withAlpha(fg, 0x70)
	r.box.StrokeColor = accent
	r.box.FillColor = color.NRGBA{R: accent.R, G: accent.G, B: accent.B, A: 0x30}
	r.tipBG.FillColor = theme.Color(theme.ColorNameOverlayBackground)
	r.tipBG.StrokeColor = theme.Color(theme.ColorNameInputBorder)

	if c.dragging {
		a, b := c.dragFrom, c.dragTo
		r.box.Move(fyne.NewPos(min(a.X, b.X), min(a.Y, b.Y)))
		r.box.Resize(fyne.NewSize(abs32(a.X-b.X), abs32(a.Y-b.Y)))
		r.box.Show()
	} else {
		r.box.Hide()
	}

	var lines []string
	var lx float32
	ok := false
	if c.hovering && !c.dragging {
		lines, lx, ok = c.hoverLines(c.hoverAt)
	}
	if !ok {
		r.line.Hide()
		r.tipBG.Hide()
		for _, t := range r.tip {
			t.Hide()
		}
		return
	}
	c.mu.Lock()
	top := float32(c.frame.Area.Min.Y) / c.scale
	bottom := float32(c.frame.Area.Max.Y) / c.scale
	c.mu.Unlock()
	r.line.Position1 = fyne.NewPos(lx, top)
	r.line.Position2 = fyne.NewPos(lx, bottom)
	r.line.Show()
	for len(r.tip) < len(lines) {
		t := canvas.NewText("", fg)
		t.TextSize = theme.CaptionTextSize()
		r.tip = append(r.tip, t)
		r.objs = nil
	}
	pad := theme.Padding()
	var w, h float32
	for i, t := range r.tip {
		if i >= len(lines) {
			t.Hide()
			continue
		}
		t.Text, t.Color = lines[i], fg
		t.Refresh()
		ms := t.MinSize()
		w = max(w, ms.Width)
		h += ms.Height
	}
	w, h = w+2*pad, h+2*pad
	// Beside the pointer, flipped to stay inside the chart.
	x, y := c.hoverAt.X+14, c.hoverAt.Y+14
	if x+w > size.Width {
		x = max(0, c.hoverAt.X-14-w)
	}
	if y+h > size.Height {
		y = max(0, size.Height-h)
	}
	r.tipBG.Move(fyne.NewPos(x, y))
	r.tipBG.Resize(fyne.NewSize(w, h))
	r.tipBG.Show()
	ty := y + pad
	for i, t := range r.tip {
		if i >= len(lines) {
			break
		}
		t.Move(fyne.NewPos(x+pad, ty))
		t.Show()
		ty += t.MinSize().Height
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

func withAlpha(c color.Color, a uint8) color.Color {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	n.A = a
	return n
}

func (r *chartRenderer) MinSize() fyne.Size { return r.c.MinSize() }

func (r *chartRenderer) Refresh() {
	c := r.c
	c.mu.Lock()
	c.dark = isDark()
	c.mu.Unlock()
	c.raster.Refresh()
	r.place(c.Size())
	canvas.Refresh(c)
}

func (r *chartRenderer) Objects() []fyne.CanvasObject {
	if r.objs == nil {
		r.objs = []fyne.CanvasObject{r.c.raster, r.line, r.box, r.tipBG}
		for _, t := range r.tip {
			r.objs = append(r.objs, t)
		}
	}
	return r.objs
}

func (r *chartRenderer) Destroy() {}

// newChartSeries makes one chart series from steps, wall times and values.
func newChartSeries(name string, n int) chartSeries {
	return chartSeries{name: name, steps: make([]float64, 0, n), walls: make([]float64, 0, n), ys: make([]float64, 0, n)}
}

func (s *chartSeries) add(step int64, wall time.Time, v float64) {
	w := math.NaN()
	if !wall.IsZero() {
		w = float64(wall.UnixNano()) / 1e9
	}
	s.steps = append(s.steps, float64(step))
	s.walls = append(s.walls, w)
	s.ys = append(s.ys, v)
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}
