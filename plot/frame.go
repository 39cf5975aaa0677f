package plot

import (
	"fmt"
	"image"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Frame maps between a rendered chart's pixels and its data: where the
// plot area lies in the image and which ranges its axes show. A window
// hit-tests the mouse against the data through it (hover values, a zoom
// box, a click on a dot) instead of reading pixels back.
type Frame struct {
	// Area is the plot area in image pixels (Y grows downwards).
	Area image.Rectangle
	// The data ranges the axes show, and whether each is logarithmic.
	XMin, XMax, YMin, YMax float64
	LogX, LogY             bool
	// Empty is set when nothing was drawable ("no data").
	Empty bool
}

// PixelX is the image column of data X (fractional).
func (f Frame) PixelX(x float64) float64 {
	return float64(f.Area.Min.X) + f.frac(x, f.XMin, f.XMax, f.LogX)*float64(f.Area.Dx())
}

// PixelY is the image row of data Y (fractional).
func (f Frame) PixelY(y float64) float64 {
	return float64(f.Area.Max.Y) - f.frac(y, f.YMin, f.YMax, f.LogY)*float64(f.Area.Dy())
}

// DataX is the data X at an image column.
func (f Frame) DataX(px float64) float64 {
	return f.unfrac((px-float64(f.Area.Min.X))/float64(max(1, f.Area.Dx())), f.XMin, f.XMax, f.LogX)
}

// DataY is the data Y at an image row.
func (f Frame) DataY(py float64) float64 {
	return f.unfrac((float64(f.Area.Max.Y)-py)/float64(max(1, f.Area.Dy())), f.YMin, f.YMax, f.LogY)
}

// Inside reports whether an image point lies in the plot area.
func (f Frame) Inside(px, py float64) bool {
	return !f.Empty && px >= float64(f.Area.Min.X) && px <= float64(f.Area.Max.X) &&
		py >= float64(f.Area.Min.Y) && py <= float64(f.Area.Max.Y)
}

func (f Frame) frac(v, lo, hi float64, log bool) float64 {
	if log {
		v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
	}
	if hi == lo {
		return 0.5
	}
	return (v - lo) / (hi - lo)
}

func (f Frame) unfrac(t, lo, hi float64, log bool) float64 {
	if log {
		return math.Pow(10, math.Log10(lo)+t*(math.Log10(hi)-math.Log10(lo)))
	}
	return lo + t*(hi-lo)
}

// RenderImage draws series as Render does, straight into an image of
// opt.Width × opt.Height points at opt.DPI (no PNG round trip: a window
// redraws on every zoom and resize), and returns the Frame to hit-test it.
func RenderImage(series []Series, opt Options) (img *image.RGBA, fr Frame, err error) {
	opt, err = opt.normalized()
	if err != nil {
		return nil, Frame{}, err
	}
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return nil, Frame{}, fmt.Errorf("plot: series %d (%q) has %d X values but %d Y values", i, s.Name, len(s.X), len(s.Y))
		}
	}
	defer func() {
		if r := recover(); r != nil {
			img, fr, err = nil, Frame{}, fmt.Errorf("plot: rendering chart %q failed: %v", opt.Title, r)
		}
	}()
	th := lightTheme
	if opt.Dark {
		th = darkTheme
	}
	p := build(series, opt, th)
	img, fr = drawImage(p, opt, th)
	return img, fr, nil
}

// drawImage rasterises p and works out where its data area landed.
func drawImage(p *gplot.Plot, opt Options, th theme) (*image.RGBA, Frame) {
	dpi := opt.DPI
	if dpi == 0 {
		dpi = DPI
	}
	w, h := vg.Points(opt.Width), vg.Points(opt.Height)
	ic := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(int(dpi)), vgimg.UseBackgroundColor(th.background))
	margin := vg.Points(12)
	dc := draw.Crop(draw.New(ic), margin, -margin, margin, -margin)
	p.Draw(dc)
	area := p.DataCanvas(dc)
	rgba := ic.Image().(*image.RGBA)
	scale := dpi / 72
	hpx := float64(rgba.Bounds().Dy())
	fr := Frame{
		Area: image.Rect(int(math.Round(float64(area.Min.X)*scale)), int(math.Round(hpx-float64(area.Max.Y)*scale)),
			int(math.Round(float64(area.Max.X)*scale)), int(math.Round(hpx-float64(area.Min.Y)*scale))),
		XMin: p.X.Min, XMax: p.X.Max, YMin: p.Y.Min, YMax: p.Y.Max,
		LogX: opt.LogX, LogY: opt.LogY,
	}
	_, fr.Empty = p.X.Tick.Marker.(gplot.ConstantTicks)
	return rgba, fr
}
