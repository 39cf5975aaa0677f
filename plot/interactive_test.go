package plot

import (
	"image/color"
	"math"
	"strings"
	"testing"
	"time"
)

func TestEMA(t *testing.T) {
	ys := []float64{1, 1, 1, 1}
	if got := EMA(ys, 0.9); !closeAll(got, ys, 1e-12) {
		t.Errorf("a constant series smooths to itself (de-biased), got %v", got)
	}
	// w = 0.5 on 0, 2: last = 0.5·0 + 0.5·0 = 0 → 0/(1-0.5) = 0; then
	// last = 0.5·0 + 0.5·2 = 1 → 1/(1-0.25) = 4/3.
	if got := EMA([]float64{0, 2}, 0.5); !closeAll(got, []float64{0, 4.0 / 3}, 1e-12) {
		t.Errorf("EMA(0,2; 0.5) = %v, want [0 1.333]", got)
	}
	if got := EMA([]float64{3, 5}, 0); !closeAll(got, []float64{3, 5}, 0) {
		t.Errorf("weight 0 keeps the values, got %v", got)
	}
	got := EMA([]float64{1, math.NaN(), 1}, 0.6)
	if !math.IsNaN(got[1]) || math.Abs(got[2]-1) > 1e-12 {
		t.Errorf("a NaN passes through without poisoning what follows, got %v", got)
	}
}

func closeAll(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return true
}

func TestNearest(t *testing.T) {
	xs := []float64{0, 10, 20, 30}
	for _, tc := range []struct {
		x    float64
		want int
	}{{-5, 0}, {4, 0}, {5, 0}, {6, 1}, {19, 2}, {29.9, 3}, {100, 3}} {
		if got := Nearest(xs, tc.x); got != tc.want {
			t.Errorf("Nearest(%g) = %d, want %d", tc.x, got, tc.want)
		}
	}
	if Nearest(nil, 3) != -1 {
		t.Error("an empty series has no nearest point")
	}
}

// The frame maps a data point onto the pixel where the line was drawn.
func TestRenderImageFrameMapsDataToPixels(t *testing.T) {
	red := color.NRGBA{R: 0xff, A: 0xff}
	s := []Series{{Name: "y=x", X: []float64{0, 100}, Y: []float64{0, 100}, Color: red}}
	img, fr, err := RenderImage(s, Options{Width: 400, Height: 300, DPI: 144})
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 800 || img.Bounds().Dy() != 600 {
		t.Fatalf("144 dpi doubles the points: got %v", img.Bounds())
	}
	for _, x := range []float64{20, 50, 80} {
		px, py := fr.PixelX(x), fr.PixelY(x)
		if !fr.Inside(px, py) {
			t.Fatalf("(%g,%g) maps outside the plot area: %v", x, x, fr.Area)
		}
		found := false
		for dx := -2; dx <= 2 && !found; dx++ {
			for dy := -2; dy <= 2 && !found; dy++ {
				r, g, b, _ := img.At(int(px)+dx, int(py)+dy).RGBA()
				found = r > 0xc000 && g < 0x6000 && b < 0x6000
			}
		}
		if !found {
			t.Errorf("no red pixel near (%0.f,%0.f), where the line passes through (%g,%g)", px, py, x, x)
		}
		if back := fr.DataX(px); math.Abs(back-x) > 0.5 {
			t.Errorf("DataX(PixelX(%g)) = %g", x, back)
		}
		if back := fr.DataY(py); math.Abs(back-x) > 1 {
			t.Errorf("DataY(PixelY(%g)) = %g", x, back)
		}
	}
}

func TestFrameLogAxis(t *testing.T) {
	s := []Series{{X: []float64{1, 2, 3}, Y: []float64{1e-3, 1, 1e3}}}
	_, fr, err := RenderImage(s, Options{Width: 300, Height: 200, LogY: true})
	if err != nil {
		t.Fatal(err)
	}
	mid := (fr.PixelY(1e-3) + fr.PixelY(1e3)) / 2
	if math.Abs(fr.PixelY(1)-mid) > 1 {
		t.Errorf("on a log axis 1 sits halfway between 1e-3 and 1e3: %g vs %g", fr.PixelY(1), mid)
	}
}

// A view cuts the series before downsampling: the zoomed chart has the
// range asked for and keeps the detail inside it.
func TestRenderImageView(t *testing.T) {
	n := 100_000
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range n {
		xs[i], ys[i] = float64(i), float64(i%2) // a fine zig-zag LTTB would flatten at full range
	}
	_, fr, err := RenderImage([]Series{{X: xs, Y: ys}}, Options{Width: 400, Height: 200, View: Range{XMin: 1000, XMax: 1100}})
	if err != nil {
		t.Fatal(err)
	}
	if fr.XMin != 1000 || fr.XMax != 1100 {
		t.Errorf("X range %g..%g, want the view 1000..1100", fr.XMin, fr.XMax)
	}
	c := prepare([]Series{{X: xs, Y: ys}}, Options{MaxPoints: 2000, View: Range{XMin: 1000, XMax: 1100}}, lightTheme)
	if got := len(c[0].xys); got != 103 {
		t.Errorf("the view keeps its 101 points and one beyond each edge, got %d", got)
	}
	_, fr, _ = RenderImage([]Series{{X: xs, Y: ys}}, Options{Width: 400, Height: 200, View: Range{XMin: 10, XMax: 20, YMin: -5, YMax: 5}})
	if fr.YMin != -5 || fr.YMax != 5 {
		t.Errorf("a view with Y fixes Y, got %g..%g", fr.YMin, fr.YMax)
	}
}

func TestFaintSeriesLeaveTheLegend(t *testing.T) {
	raw := Series{Name: "loss (raw)", X: []float64{0, 1, 2}, Y: []float64{3, 2, 1}, Slot: 1, Faint: true}
	smooth := Series{Name: "loss", X: []float64{0, 1, 2}, Y: []float64{3, 2.2, 1.4}, Slot: 1}
	earlier := Series{Name: "attempt 1: lr=1", X: []float64{0, 1}, Y: []float64{3, 9}, Slot: 2, Dashed: true}
	svg := string(mustRender(t, []Series{raw, smooth, earlier}, Options{}, "svg"))
	if strings.Contains(svg, "loss (raw)") {
		t.Error("a faint series is not in the legend")
	}
	if !strings.Contains(svg, "attempt 1: lr=1") {
		t.Error("the earlier attempt is in the legend")
	}
	if !strings.Contains(svg, "stroke-dasharray") {
		t.Error("the earlier attempt is dashed")
	}
	c := prepare([]Series{raw, smooth}, Options{}, lightTheme)
	if c[0].style.Color.(color.NRGBA).A == 0xff || sameRGB(c[0].style.Color, c[1].style.Color) == false {
		t.Errorf("the raw series is the smoothed one's colour, translucent: %v vs %v", c[0].style.Color, c[1].style.Color)
	}
}

func sameRGB(a, b color.Color) bool {
	x, y := color.NRGBAModel.Convert(a).(color.NRGBA), color.NRGBAModel.Convert(b).(color.NRGBA)
	return x.R == y.R && x.G == y.G && x.B == y.B
}

func TestNonFiniteValuesAreMarked(t *testing.T) {
	s := []Series{{X: []float64{1, 2, 3, 4}, Y: []float64{1, 10, 1e15, math.NaN()}}}
	c := prepare(s, Options{MarkNonFinite: true}, lightTheme)
	if len(c[0].bad) != 1 || c[0].bad[0] != 4 {
		t.Errorf("the NaN at step 4 is marked, got %v", c[0].bad)
	}
	img, fr, err := RenderImage(s, Options{Width: 300, Height: 200, MarkNonFinite: true, LogY: true})
	if err != nil {
		t.Fatal(err)
	}
	if fr.XMax < 4 {
		t.Errorf("the X range reaches the NaN at step 4, got up to %g", fr.XMax)
	}
	r, g, b, _ := img.At(int(fr.PixelX(4))-1, fr.Area.Min.Y+2).RGBA()
	if !(r > 0xc000 && g < 0x9000 && b < 0x9000) {
		t.Errorf("a red mark at the top of the plot area above step 4, got %x %x %x", r, g, b)
	}
}

func TestDurationLabel(t *testing.T) {
	for sec, want := range map[float64]string{0: "0s", 45: "45s", 90: "1m30s", 3600: "1h", 7260: "2h1m", 93600: "1d2h", 2.5: "2.5s", -30: "-30s"} {
		if got := DurationLabel(sec); got != want {
			t.Errorf("DurationLabel(%g) = %q, want %q", sec, got, want)
		}
	}
}

func TestTimeTicks(t *testing.T) {
	d := durationTicks{target: 5}.Ticks(0, 600)
	if len(d) < 4 || d[1].Label != "2m" && d[1].Label != "1m" {
		t.Errorf("ten minutes in about five ticks of whole minutes: %v", d)
	}
	loc := time.FixedZone("X", 3600)
	start := float64(time.Date(2026, 11, 29, 13, 7, 0, 0, loc).Unix())
	c := clockTicks{target: 4, loc: loc}.Ticks(start, start+3600)
	if len(c) < 3 {
		t.Fatalf("an hour of clock ticks: %v", c)
	}
	if c[0].Label != "13:15" {
		t.Errorf("ticks fall on the local quarter hour: first is %q", c[0].Label)
	}
	s := clockTicks{target: 6, loc: time.UTC}.Ticks(0, 50)
	if len(s) == 0 || !strings.Contains(s[1].Label, ":") || len(s[1].Label) != 8 {
		t.Errorf("under a minute, seconds show: %v", s)
	}
}

// BenchmarkZoomRedraw1M is the window's redraw after a zoom: a million
// points, a tenth of them in view, drawn into an 800×400 image with the
// raw series faint behind its smoothed copy.
func BenchmarkZoomRedraw1M(b *testing.B) {
	xs, ys := syntheticLoss(1_000_000, 1)
	sm := EMA(ys, 0.6)
	series := []Series{{Name: "raw", X: xs, Y: ys, Slot: 1, Faint: true}, {Name: "loss", X: xs, Y: sm, Slot: 1}}
	for _, tc := range []struct {
		name string
		view Range
	}{{"full", Range{}}, {"tenth", Range{XMin: 400_000, XMax: 500_000}}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := RenderImage(series, Options{Width: 800, Height: 400, DPI: 72, View: tc.view, MarkNonFinite: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestRenderParallel(t *testing.T) {
	axes := []Axis{{Name: "lr", Log: true}, {Name: "optimizer", Categories: []string{"adam", "sgd"}}, {Name: "val_acc"}}
	lines := []Line{
		{Values: []float64{0.001, 0, 0.95}, Shade: 0.6},
		{Values: []float64{0.1, 1, 0.97}, Shade: 1},
		{Values: []float64{1, 1, math.NaN()}, Shade: 0},
	}
	img, fr, par, err := RenderParallel(axes, lines, Options{Width: 500, Height: 300, Title: "runs"})
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 667 {
		t.Errorf("500 points at 96 dpi, got %v", img.Bounds())
	}
	// The best line (green) passes through lr=0.1, two thirds up a log
	// axis from 0.001 to 1.
	x, y, ok := par.PositionOf(0, 0.1)
	if !ok || math.Abs(y-2.0/3) > 1e-9 {
		t.Fatalf("lr=0.1 on a log axis 0.001..1 sits at 2/3, got %g", y)
	}
	r, g, b, _ := img.At(int(fr.PixelX(x))+2, int(fr.PixelY(y))).RGBA()
	if !(g > r && g > b) {
		t.Errorf("a green line at the best run's lr, got %x %x %x", r, g, b)
	}
	if _, _, ok := par.PositionOf(2, math.NaN()); ok {
		t.Error("a missing objective is not placed")
	}
	if _, _, _, err := RenderParallel(axes[:1], nil, Options{}); err == nil {
		t.Error("one axis is not a chart")
	}
}
