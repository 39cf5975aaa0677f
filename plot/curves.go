package plot

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

const (
	// DefaultWidth and DefaultHeight are the chart size, in points
	// (1/72 inch), used when Options leaves them zero.
	DefaultWidth, DefaultHeight = 640, 360

	// DefaultMaxPoints is the per-series point budget used when
	// Options.MaxPoints is zero.
	DefaultMaxPoints = 2000

	// DPI is the resolution of PNG output: a chart of W×H points is
	// round(W·DPI/72) × round(H·DPI/72) pixels, so the default 640×360 points
	// give an 853×480 PNG. SVG output is sized in points directly.
	DPI = vgimg.DefaultDPI

	// maxSide bounds Width and Height (in points) so that a typo cannot ask
	// for a multi-gigabyte image.
	maxSide = 4096
	// maxPixels bounds a PNG's pixel count (size × resolution): 64 Mpx,
	// a 256 MiB RGBA canvas.
	maxPixels = 64 << 20
	// minSide is the smallest Width or Height that still fits the axes.
	minSide = 64
)

// Series is one named curve. X and Y must have the same length; X is
// expected in increasing order (steps, time), as metric streams are.
type Series struct {
	Name string
	X, Y []float64

	// Slot picks the palette colour: 0 follows the series' index, k > 0
	// is colour k-1, so that several series (an attempt and its smoothed
	// curve) can share one colour. Color, when set, overrides both.
	Slot  int
	Color color.Color
	// Dashed draws the line dashed: an earlier attempt of a stage.
	Dashed bool
	// Faint draws the line thin and translucent behind the others (the
	// raw values under a smoothed curve) and leaves it out of the legend.
	Faint bool
}

// Options controls a chart's look. The zero value is a usable light chart
// of DefaultWidth × DefaultHeight points.
type Options struct {
	Title, XLabel, YLabel string

	// Width and Height are in points (1/72 inch); zero means 640×360.
	// Either must otherwise lie in [64, 4096].
	Width, Height float64

	// LogY draws the Y axis on a log₁₀ scale. Points with Y <= 0 cannot be
	// placed on it and are dropped.
	LogY bool

	// LogX draws the X axis on a log₁₀ scale (for a parameter such as a
	// learning rate); points with X <= 0 are dropped. For a scatter the X
	// range gets the same head room as Y.
	LogX bool

	// Dark selects the dark palette (for a dark window theme).
	Dark bool

	// DPI is the resolution of PNG output in dots per inch; zero means
	// [DPI] (96). Print (a PDF) wants 192 or more. SVG ignores it.
	DPI float64

	// Scatter draws each point as a dot instead of joining them with lines
	// (for a parameter against an objective, where order means nothing).
	Scatter bool

	// MaxPoints caps the points drawn per series; longer series are reduced
	// with LTTB. Zero means DefaultMaxPoints, a negative value disables
	// downsampling, and 1 or 2 are raised to 3.
	MaxPoints int

	// View, when it has XMax > XMin, shows only that X range (a zoom): the
	// series are cut to it before downsampling, so a zoomed chart shows
	// the detail of the range. With YMax > YMin it fixes the Y range too;
	// otherwise Y fits the points in view.
	View Range

	// XTicks says how X tick labels read: numbers (the default), durations
	// in seconds ("1m30s", for time since the start) or clock times (X in
	// Unix seconds, shown in Location, UTC when nil).
	XTicks   TickKind
	Location *time.Location

	// XCategories, when set, labels X at 0, 1, 2… with these names (a
	// choice parameter on a scatter's X axis).
	XCategories []string

	// MarkNonFinite draws a red mark at the top of the plot area at each
	// X whose Y is NaN or ±Inf, so that a loss that blew up is seen where
	// it did instead of silently ending the line.
	MarkNonFinite bool
}

// Range is a rectangle of data coordinates; a zero axis means "fit".
type Range struct{ XMin, XMax, YMin, YMax float64 }

// HasX reports whether the range fixes X.
func (r Range) HasX() bool { return r.XMax > r.XMin }

// HasY reports whether the range fixes Y.
func (r Range) HasY() bool { return r.YMax > r.YMin }

// TickKind is how an axis labels its ticks.
type TickKind int

// The kinds of X tick labels.
const (
	TickNumber   TickKind = iota // 0, 20k, 1.5M
	TickDuration                 // 0s, 30s, 1m30s, 2h
	TickClock                    // 14:05, 14:05:30, Jan 2 14:05
)

// Render draws series as line charts and returns the encoded image. format is
// "png" or "svg" (case-insensitive); anything else is an error.
//
// What is drawn:
//   - one line per series, colours taken in order from the theme's palette
//     (after the palette's ten colours, the colours repeat with dashes);
//     a series that has a single drawable point is shown as a dot;
//   - horizontal and vertical grid lines at the labelled ticks;
//   - a legend, when more than one series is given, in the corner of the
//     plot area that covers the fewest data points;
//   - the title and axis labels from opt.
//
// Points with a NaN or ±Inf coordinate are dropped, as are points with Y <= 0
// when opt.LogY is set. When nothing drawable is left — no series, empty
// series, all NaN — the result is an empty chart with the title and a
// "no data" note, not an error. Render returns an error only for an unknown
// format, a size out of range, or a series whose X and Y lengths differ.
func Render(series []Series, opt Options, format string) (out []byte, err error) {
	f := strings.ToLower(strings.TrimSpace(format))
	if f != "png" && f != "svg" {
		return nil, fmt.Errorf("plot: unsupported format %q: use \"png\" or \"svg\"", format)
	}
	opt, err = opt.normalized()
	if err != nil {
		return nil, err
	}
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("plot: series %d (%q) has %d X values but %d Y values", i, s.Name, len(s.X), len(s.Y))
		}
	}

	// gonum/plot panics on some inputs it considers impossible; the cases we
	// know of are handled above and in build, and this keeps anything we
	// missed from taking the window down with it.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("plot: rendering chart %q failed: %v", opt.Title, r)
		}
	}()

	th := lightTheme
	if opt.Dark {
		th = darkTheme
	}
	p := build(series, opt, th)
	return encode(p, opt, th, f)
}

func (o Options) normalized() (Options, error) {
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Height == 0 {
		o.Height = DefaultHeight
	}
	for _, v := range []float64{o.Width, o.Height} {
		if !(v >= minSide && v <= maxSide) { // also rejects NaN
			return o, fmt.Errorf("plot: chart size %gx%g points is out of range: each side must be between %d and %d (or 0 for the default %dx%d)",
				o.Width, o.Height, minSide, maxSide, DefaultWidth, DefaultHeight)
		}
	}
	if !(o.DPI >= 0 && o.DPI <= 600) { // also rejects NaN
		return o, fmt.Errorf("plot: PNG resolution %g dpi is out of range: use 0 (the default %d) up to 600", o.DPI, DPI)
	}
	if dpi := max(o.DPI, DPI); o.Width*o.Height*(dpi/72)*(dpi/72) > maxPixels {
		return o, fmt.Errorf("plot: a %gx%g point chart at %g dpi is over %d megapixels: lower the size or the resolution",
			o.Width, o.Height, dpi, maxPixels>>20)
	}
	switch {
	case o.MaxPoints == 0:
		o.MaxPoints = DefaultMaxPoints
	case o.MaxPoints > 0 && o.MaxPoints < 3:
		o.MaxPoints = 3
	}
	return o, nil
}

// curve is a series reduced to the points that will be drawn.
type curve struct {
	name  string
	style draw.LineStyle
	xys   plotter.XYs
	faint bool
	bad   []float64 // X of the points whose Y is NaN or ±Inf (MarkNonFinite)
}

// prepare drops undrawable points, cuts each series to the view, downsamples
// and assigns each series its style. Styles follow the series' index (or
// Slot), so a series keeps its colour even when an earlier one has no data.
func prepare(series []Series, opt Options, th theme) []curve {
	keep := func(x, y float64) bool {
		return isFinite(x) && isFinite(y) && (!opt.LogY || y > 0) && (!opt.LogX || x > 0)
	}
	curves := make([]curve, len(series))
	for i, s := range series {
		sx, sy := s.X, s.Y
		if n := min(len(sx), len(sy)); opt.View.HasX() && n > 0 {
			lo, hi := viewSlice(sx[:n], opt.View.XMin, opt.View.XMax)
			sx, sy = sx[lo:hi], sy[lo:hi]
		}
		var bad []float64
		if opt.MarkNonFinite {
			for j := range min(len(sx), len(sy)) {
				if isFinite(sx[j]) && !isFinite(sy[j]) {
					bad = append(bad, sx[j])
				}
			}
		}
		xs, ys := keepPoints(sx, sy, keep)
		if opt.MaxPoints > 0 {
			xs, ys = LTTB(xs, ys, opt.MaxPoints)
		}
		xys := make(plotter.XYs, len(xs))
		for j := range xs {
			xys[j] = plotter.XY{X: xs[j], Y: ys[j]}
		}
		name := s.Name
		if name == "" {
			name = fmt.Sprintf("series %d", i+1)
		}
		n := len(th.palette)
		slot := i
		if s.Slot > 0 {
			slot = s.Slot - 1
		}
		var col color.Color = th.palette[slot%n]
		if s.Color != nil {
			col = s.Color
		}
		style := draw.LineStyle{Color: col, Width: vg.Points(1.25)}
		dashes := dashCycles[(slot/n)%len(dashCycles)]
		if s.Dashed {
			dashes = []float64{5, 3}
		}
		for _, d := range dashes {
			style.Dashes = append(style.Dashes, vg.Points(d))
		}
		if s.Faint {
			style.Color = faded(col, 0x50)
			style.Width = vg.Points(1)
		}
		curves[i] = curve{name: name, style: style, xys: xys, faint: s.Faint, bad: bad}
	}
	return curves
}

// viewSlice is the index range of xs (sorted ascending) that covers
// [lo, hi], with one point beyond each end so that lines run to the edges.
func viewSlice(xs []float64, lo, hi float64) (int, int) {
	a := sort.SearchFloat64s(xs, lo)
	b := sort.Search(len(xs), func(i int) bool { return xs[i] > hi })
	return max(0, a-1), min(len(xs), b+1)
}

// faded is c with alpha a (colours are drawn non-premultiplied).
func faded(c color.Color, a uint8) color.Color {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	n.A = a
	return n
}

func build(series []Series, opt Options, th theme) *gplot.Plot {
	p := gplot.New()
	applyTheme(p, opt, th)

	curves := prepare(series, opt, th)
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, c := range curves {
		for _, pt := range c.xys {
			if opt.View.HasX() && (pt.X < opt.View.XMin || pt.X > opt.View.XMax) {
				continue // the point beyond the edge that lines run to
			}
			xmin, xmax = math.Min(xmin, pt.X), math.Max(xmax, pt.X)
			ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
		}
		// A value that blew up is part of the story: keep its X in range.
		for _, x := range c.bad {
			if xmin <= xmax && (!opt.View.HasX() || (x >= opt.View.XMin && x <= opt.View.XMax)) {
				xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			}
		}
	}
	if xmin > xmax && opt.View.HasX() && opt.View.HasY() {
		xmin, xmax, ymin, ymax = opt.View.XMin, opt.View.XMax, opt.View.YMin, opt.View.YMax
	}
	if xmin > xmax { // nothing drawable
		noData(p, opt, th)
		return p
	}

	xTarget := clamp(int(math.Round(opt.Width/110)), 3, 10)
	yTarget := clamp(int(math.Round(opt.Height/70)), 3, 8)
	p.X.Tick.Marker = linearTicks{target: xTarget}
	switch opt.XTicks {
	case TickDuration:
		p.X.Tick.Marker = durationTicks{target: xTarget}
	case TickClock:
		p.X.Tick.Marker = clockTicks{target: xTarget, loc: opt.Location}
	}
	p.Y.Tick.Marker = linearTicks{target: yTarget}
	if opt.LogY {
		p.Y.Scale = gplot.LogScale{}
		p.Y.Tick.Marker = logTicks{target: yTarget}
	}
	if opt.LogX {
		p.X.Scale = gplot.LogScale{}
		p.X.Tick.Marker = logTicks{target: xTarget}
	}
	if len(opt.XCategories) > 0 {
		ticks := make([]gplot.Tick, len(opt.XCategories))
		for i, c := range opt.XCategories {
			ticks[i] = gplot.Tick{Value: float64(i), Label: c}
		}
		p.X.Tick.Marker = gplot.ConstantTicks(ticks)
		xmin, xmax = math.Min(xmin, 0), math.Max(xmax, float64(len(ticks)-1))
	}

	grid := plotter.NewGrid()
	grid.Vertical = draw.LineStyle{Color: th.grid, Width: vg.Points(0.75)}
	grid.Horizontal = grid.Vertical
	p.Add(grid)

	// Faint curves first, so that the others are drawn over them.
	order := make([]int, 0, len(curves))
	for i, c := range curves {
		if c.faint {
			order = append(order, i)
		}
	}
	for i, c := range curves {
		if !c.faint {
			order = append(order, i)
		}
	}
	for _, i := range order {
		c := curves[i]
		switch n := len(c.xys); {
		case n == 0:
		case n == 1 || opt.Scatter: // a one-point line is invisible: draw a dot
			s, _ := plotter.NewScatter(c.xys) // cannot fail: points are finite
			s.GlyphStyle = draw.GlyphStyle{Color: c.style.Color, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(s)
		default:
			p.Add(chunkedLine{xys: c.xys, style: c.style})
		}
	}

	var marks []float64
	for _, c := range curves {
		marks = append(marks, c.bad...)
	}
	if len(marks) > 0 {
		p.Add(nonFiniteMarks{xs: marks, color: th.palette[3]})
	}

	var shown []curve
	for _, c := range curves {
		if !c.faint {
			shown = append(shown, c)
		}
	}
	if len(shown) > 1 {
		p.Add(newLegend(shown, th))
	}

	// Set the ranges last: Add widens them to the data, we add margins.
	p.X.Min, p.X.Max = xmin, xmax
	switch {
	case opt.View.HasX():
		p.X.Min, p.X.Max = opt.View.XMin, opt.View.XMax
	case opt.LogX || opt.Scatter:
		// Dots at the very edge would be cut in half: pad like Y.
		p.X.Min, p.X.Max = paddedRange(xmin, xmax, opt.LogX)
	case xmin == xmax:
		p.X.Min, p.X.Max = xmin-1, xmax+1
	}
	p.Y.Min, p.Y.Max = paddedRange(ymin, ymax, opt.LogY)
	if opt.View.HasY() && (!opt.LogY || opt.View.YMin > 0) {
		p.Y.Min, p.Y.Max = opt.View.YMin, opt.View.YMax
	}
	return p
}

// chunkedLine strokes a polyline in pieces of lineChunk points. The
// rasteriser behind PNG output (freetype's) looks cells up by a linear
// scan per row, so one long noisy path costs time quadratic in how much
// of the row it covers: a zoomed-in training curve took seconds as one
// path and takes milliseconds in pieces. SVG output is the same either way.
type chunkedLine struct {
	xys   plotter.XYs
	style draw.LineStyle
}

const lineChunk = 16

func (l chunkedLine) Plot(c draw.Canvas, plt *gplot.Plot) {
	trX, trY := plt.Transforms(&c)
	pts := make([]vg.Point, len(l.xys))
	for i, p := range l.xys {
		pts[i] = vg.Point{X: trX(p.X), Y: trY(p.Y)}
	}
	for start := 0; start < len(pts)-1; start += lineChunk {
		end := min(len(pts), start+lineChunk+1) // overlap one point: no gaps
		c.StrokeLines(l.style, c.ClipLinesXY(pts[start:end])...)
	}
}

// nonFiniteMarks draws a small red triangle pointing down at the top edge
// of the plot area at each X where a series' value was NaN or ±Inf.
type nonFiniteMarks struct {
	xs    []float64
	color color.Color
}

func (m nonFiniteMarks) Plot(c draw.Canvas, plt *gplot.Plot) {
	trX, _ := plt.Transforms(&c)
	r := vg.Points(4)
	c.SetColor(m.color)
	for _, x := range m.xs {
		if x < plt.X.Min || x > plt.X.Max {
			continue
		}
		px := trX(x)
		var path vg.Path
		path.Move(vg.Point{X: px - r, Y: c.Max.Y})
		path.Line(vg.Point{X: px + r, Y: c.Max.Y})
		path.Line(vg.Point{X: px, Y: c.Max.Y - 1.6*r})
		path.Close()
		c.Fill(path)
	}
}

// paddedRange adds 5% head room above and below the data (in log space for a
// log axis) and widens a flat range so the line sits in the middle.
func paddedRange(lo, hi float64, logY bool) (float64, float64) {
	if logY {
		l, h := math.Log10(lo), math.Log10(hi)
		if l == h {
			l, h = l-0.5, h+0.5
		}
		pad := (h - l) * 0.05
		return math.Pow(10, l-pad), math.Pow(10, h+pad)
	}
	if lo == hi {
		d := math.Abs(lo) * 0.1
		if d == 0 {
			d = 1
		}
		return lo - d, hi + d
	}
	pad := (hi - lo) * 0.05
	return lo - pad, hi + pad
}

func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }

// applyTheme styles every part of p that gonum draws itself.
func applyTheme(p *gplot.Plot, opt Options, th theme) {
	p.BackgroundColor = th.background

	p.Title.Text = opt.Title
	p.Title.TextStyle.Font = font.From(sansBold, 13)
	p.Title.TextStyle.Color = th.text
	p.Title.Padding = vg.Points(10)

	for _, ax := range []*gplot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, 10.5)
		ax.Label.TextStyle.Color = th.text
		ax.Label.Padding = vg.Points(4)
		ax.LineStyle = draw.LineStyle{Color: th.axis, Width: vg.Points(0.75)}
		ax.Padding = 0
		ax.Tick.Label.Font = font.From(sans, 9)
		ax.Tick.Label.Color = th.muted
		ax.Tick.LineStyle = draw.LineStyle{Color: th.axis, Width: vg.Points(0.75)}
		ax.Tick.Length = vg.Points(3)
	}
	p.X.Label.Text = opt.XLabel
	p.Y.Label.Text = opt.YLabel
}

// noData turns p into an empty frame with a centred note.
func noData(p *gplot.Plot, opt Options, th theme) {
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.X.Tick.Marker = gplot.ConstantTicks{}
	p.Y.Tick.Marker = gplot.ConstantTicks{}
	msg := "no data"
	if opt.LogY || opt.LogX {
		msg = "no data (a log scale shows only values > 0)"
	}
	sty := p.Y.Tick.Label // carries the text handler
	sty.Font = font.From(sans, 11)
	sty.Color = th.muted
	sty.Rotation = 0
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	p.Add(note{text: msg, style: sty})
}

// note is a plotter that writes one line of text in the middle of the plot area.
type note struct {
	text  string
	style text.Style
}

func (n note) Plot(c draw.Canvas, _ *gplot.Plot) { c.FillText(n.style, c.Center(), n.text) }

// legend is drawn as a plotter (after the lines) rather than with gonum's
// Legend so that it gets a background box and picks the emptiest corner.
type legend struct {
	curves     []curve
	style      text.Style
	bg, edge   color.Color
	pad, thumb vg.Length
	gap, row   vg.Length
}

func newLegend(curves []curve, th theme) *legend {
	sty := text.Style{
		Color:   th.text,
		Font:    font.From(sans, 9),
		XAlign:  draw.XLeft,
		YAlign:  draw.YCenter,
		Handler: gplot.DefaultTextHandler,
	}
	return &legend{
		curves: curves,
		style:  sty,
		bg:     th.legendBG,
		edge:   th.legendEdge,
		pad:    vg.Points(6),
		thumb:  vg.Points(18),
		gap:    vg.Points(5),
		row:    vg.Points(3),
	}
}

func (l *legend) Plot(c draw.Canvas, plt *gplot.Plot) {
	lineH := l.style.FontExtents().Height
	var textW vg.Length
	for _, cv := range l.curves {
		textW = max(textW, l.style.Width(cv.name))
	}
	n := vg.Length(len(l.curves))
	w := l.pad + l.thumb + l.gap + textW + l.pad
	h := 2*l.pad + n*lineH + (n-1)*l.row

	box := l.place(c, plt, w, h)
	c.SetColor(l.bg)
	c.Fill(box.Path())
	edge := draw.LineStyle{Color: l.edge, Width: vg.Points(0.75)}
	c.StrokeLines(edge, []vg.Point{
		box.Min, {X: box.Max.X, Y: box.Min.Y}, box.Max, {X: box.Min.X, Y: box.Max.Y}, box.Min,
	})

	y := box.Max.Y - l.pad - lineH/2
	for _, cv := range l.curves {
		x := box.Min.X + l.pad
		thumb := cv.style
		thumb.Width = vg.Points(2)
		c.StrokeLine2(thumb, x, y, x+l.thumb, y)
		c.FillText(l.style, vg.Point{X: x + l.thumb + l.gap, Y: y}, cv.name)
		y -= lineH + l.row
	}
}

// place returns the w×h box in the corner of c that hides the fewest drawn
// points; on a tie the order is top right, top left, bottom right, bottom left.
func (l *legend) place(c draw.Canvas, plt *gplot.Plot, w, h vg.Length) vg.Rectangle {
	inset := vg.Points(8)
	left, right := c.Min.X+inset, c.Max.X-inset-w
	bottom, top := c.Min.Y+inset, c.Max.Y-inset-h
	corners := []vg.Point{{X: right, Y: top}, {X: left, Y: top}, {X: right, Y: bottom}, {X: left, Y: bottom}}

	trX, trY := plt.Transforms(&c)
	best, bestHidden := 0, math.MaxInt
	for i, corner := range corners {
		r := vg.Rectangle{Min: corner, Max: vg.Point{X: corner.X + w, Y: corner.Y + h}}
		hidden := 0
		for _, cv := range l.curves {
			for _, pt := range cv.xys {
				x, y := trX(pt.X), trY(pt.Y)
				if x >= r.Min.X && x <= r.Max.X && y >= r.Min.Y && y <= r.Max.Y {
					hidden++
				}
			}
		}
		if hidden < bestHidden {
			best, bestHidden = i, hidden
		}
	}
	return vg.Rectangle{Min: corners[best], Max: vg.Point{X: corners[best].X + w, Y: corners[best].Y + h}}
}

// encode draws p on a canvas of the requested format, leaving a margin so
// that the title and axis labels do not touch the image edge.
func encode(p *gplot.Plot, opt Options, th theme, format string) ([]byte, error) {
	w, h := vg.Points(opt.Width), vg.Points(opt.Height)
	margin := vg.Points(12)
	var buf bytes.Buffer
	switch format {
	case "png":
		dpi := opt.DPI
		if dpi == 0 {
			dpi = DPI
		}
		ic := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(int(dpi)), vgimg.UseBackgroundColor(th.background))
		p.Draw(draw.Crop(draw.New(ic), margin, -margin, margin, -margin))
		if _, err := (vgimg.PngCanvas{Canvas: ic}).WriteTo(&buf); err != nil {
			return nil, fmt.Errorf("plot: encode png: %w", err)
		}
	case "svg":
		sc := vgsvg.New(w, h)
		dc := draw.New(sc)
		dc.SetColor(th.background)
		dc.Fill(dc.Rectangle.Path())
		p.Draw(draw.Crop(dc, margin, -margin, margin, -margin))
		if _, err := sc.WriteTo(&buf); err != nil {
			return nil, fmt.Errorf("plot: encode svg: %w", err)
		}
	}
	return buf.Bytes(), nil
}
