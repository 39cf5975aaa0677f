package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"go/parser"
	"go/token"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var demoPath = flag.String("demo", "", "write demo charts (PNG, dark PNG, SVG) next to this .png path")

// syntheticLoss returns n steps of a noisy, exponentially decaying training
// loss, deterministic for a given seed.
func syntheticLoss(n int, seed uint64) (xs, ys []float64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	xs = make([]float64, n)
	ys = make([]float64, n)
	tau := float64(n) * 0.18
	for i := range n {
		x := float64(i)
		clean := 0.35 + 2.1*math.Exp(-x/tau)
		xs[i] = x
		ys[i] = clean * (1 + 0.05*rng.NormFloat64())
	}
	return xs, ys
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("output is not a PNG: %v", err)
	}
	return img
}

func mustRender(t *testing.T, series []Series, opt Options, format string) []byte {
	t.Helper()
	b, err := Render(series, opt, format)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if len(b) == 0 {
		t.Fatalf("Render returned no bytes")
	}
	return b
}

func twoSeries(n int) []Series {
	x1, y1 := syntheticLoss(n, 1)
	x2, y2 := syntheticLoss(n, 2)
	for i := range y2 {
		y2[i] *= 1.1
	}
	return []Series{{Name: "train/loss", X: x1, Y: y1}, {Name: "val/loss", X: x2, Y: y2}}
}

func TestRenderPNGPixelSize(t *testing.T) {
	// vgimg rasterises at DPI=96 dots per inch and a point is 1/72 inch, so
	// pixels = round(points·96/72): 640pt → 853.33 → 853 px, 360pt → 480 px.
	tests := []struct {
		w, h         float64
		wantW, wantH int
	}{
		{0, 0, 853, 480},       // defaults 640×360 points
		{640, 360, 853, 480},   // explicit defaults
		{300, 200, 400, 267},   // 300·4/3 = 400; 200·4/3 = 266.67 → 267
		{72, 72, 96, 96},       // one inch square
		{1200, 675, 1600, 900}, // 1200·4/3 = 1600; 675·4/3 = 900
	}
	for _, tc := range tests {
		img := decodePNG(t, mustRender(t, twoSeries(500), Options{Title: "size", Width: tc.w, Height: tc.h}, "png"))
		if got := img.Bounds().Size(); got.X != tc.wantW || got.Y != tc.wantH {
			t.Errorf("%gx%g points: PNG is %dx%d px, want %dx%d", tc.w, tc.h, got.X, got.Y, tc.wantW, tc.wantH)
		}
		if DPI != 96 {
			t.Fatalf("DPI = %d, the table above assumes 96", DPI)
		}
	}
}

func TestRenderSVG(t *testing.T) {
	b := mustRender(t, twoSeries(1000), Options{Title: "Loss curves", XLabel: "step", YLabel: "loss"}, "svg")
	s := string(b)
	if !strings.HasPrefix(s, "<?xml") && !strings.HasPrefix(s, "<svg") {
		t.Fatalf("SVG starts with %q", s[:min(len(s), 40)])
	}
	for _, want := range []string{"Loss curves", "train/loss", "val/loss", ">step<", ">loss<", `width="640pt"`, `height="360pt"`} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	wellFormed(t, b)
}

func wellFormed(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
	}
}

func TestRenderSVGEscapesText(t *testing.T) {
	b := mustRender(t, []Series{{Name: "a<b", X: []float64{0, 1}, Y: []float64{1, 2}}, {Name: "c&d", X: []float64{0, 1}, Y: []float64{2, 1}}},
		Options{Title: `loss <"lr" & wd>`}, "svg")
	wellFormed(t, b)
	for _, want := range []string{"a&lt;b", "c&amp;d", "&amp; wd&gt;"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("SVG lacks escaped %q", want)
		}
	}
}

func TestRenderLegendOnlyForSeveralSeries(t *testing.T) {
	one := mustRender(t, []Series{{Name: "only-series", X: []float64{0, 1, 2}, Y: []float64{3, 2, 1}}}, Options{}, "svg")
	if bytes.Contains(one, []byte("only-series")) {
		t.Errorf("a single series got a legend")
	}
	two := mustRender(t, []Series{{Name: "first", X: []float64{0, 1}, Y: []float64{3, 2}}, {X: []float64{0, 1}, Y: []float64{1, 2}}}, Options{}, "svg")
	for _, want := range []string{"first", "series 2"} { // unnamed series get "series N"
		if !bytes.Contains(two, []byte(want)) {
			t.Errorf("legend lacks %q", want)
		}
	}
}

func TestRenderDarkBackgroundDiffers(t *testing.T) {
	s := twoSeries(200)
	light := decodePNG(t, mustRender(t, s, Options{Title: "t"}, "png"))
	dark := decodePNG(t, mustRender(t, s, Options{Title: "t", Dark: true}, "png"))
	for _, pt := range []image.Point{{1, 1}, {light.Bounds().Dx() - 2, light.Bounds().Dy() - 2}} {
		l, d := color.NRGBAModel.Convert(light.At(pt.X, pt.Y)), color.NRGBAModel.Convert(dark.At(pt.X, pt.Y))
		if l != lightTheme.background {
			t.Errorf("light background at %v = %v, want %v", pt, l, lightTheme.background)
		}
		if d != darkTheme.background {
			t.Errorf("dark background at %v = %v, want %v", pt, d, darkTheme.background)
		}
	}
	darkSVG := mustRender(t, s, Options{Dark: true}, "svg")
	if !bytes.Contains(bytes.ToLower(darkSVG), []byte("#16181d")) {
		t.Errorf("dark SVG does not paint the dark background")
	}
}

func TestRenderNoData(t *testing.T) {
	nan := math.NaN()
	cases := map[string]struct {
		series []Series
		opt    Options
	}{
		"nil":              {nil, Options{}},
		"empty series":     {[]Series{{Name: "loss"}}, Options{}},
		"all NaN":          {[]Series{{Name: "loss", X: []float64{0, 1, 2}, Y: []float64{nan, nan, nan}}}, Options{}},
		"all Inf x":        {[]Series{{Name: "loss", X: []float64{math.Inf(1), math.Inf(-1)}, Y: []float64{1, 2}}}, Options{}},
		"two empty":        {[]Series{{Name: "a"}, {Name: "b", X: []float64{nan}, Y: []float64{1}}}, Options{Dark: true}},
		"log non-positive": {[]Series{{Name: "loss", X: []float64{0, 1, 2}, Y: []float64{0, -1, -2}}}, Options{LogY: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.opt.Title = "Empty run"
			tc.opt.XLabel = "step"
			img := decodePNG(t, mustRender(t, tc.series, tc.opt, "png"))
			if img.Bounds().Dx() != 853 {
				t.Errorf("width %d", img.Bounds().Dx())
			}
			svg := string(mustRender(t, tc.series, tc.opt, "svg"))
			for _, want := range []string{"Empty run", "no data", ">step<"} {
				if !strings.Contains(svg, want) {
					t.Errorf("SVG lacks %q", want)
				}
			}
		})
	}
}

func TestRenderEdgeCases(t *testing.T) {
	nan := math.NaN()
	many := make([]Series, 23) // more than the palette: colours repeat with dashes
	for i := range many {
		x, y := syntheticLoss(100, uint64(i))
		many[i] = Series{Name: "run " + strconv.Itoa(i), X: x, Y: y}
	}
	cases := map[string]struct {
		series []Series
		opt    Options
	}{
		"single point":         {[]Series{{Name: "a", X: []float64{3}, Y: []float64{0.5}}}, Options{}},
		"single point log":     {[]Series{{Name: "a", X: []float64{3}, Y: []float64{0.5}}}, Options{LogY: true}},
		"flat zero":            {[]Series{{Name: "a", X: []float64{0, 1, 2}, Y: []float64{0, 0, 0}}}, Options{}},
		"flat log":             {[]Series{{Name: "a", X: []float64{0, 1, 2}, Y: []float64{2, 2, 2}}}, Options{LogY: true}},
		"same x":               {[]Series{{Name: "a", X: []float64{5, 5, 5}, Y: []float64{1, 2, 3}}}, Options{}},
		"gaps":                 {[]Series{{Name: "a", X: []float64{0, 1, 2, 3, 4}, Y: []float64{1, nan, 3, math.Inf(1), 2}}}, Options{}},
		"log mixed signs":      {[]Series{{Name: "a", X: []float64{0, 1, 2, 3}, Y: []float64{-1, 0, 10, 0.001}}}, Options{LogY: true}},
		"log many decades":     {[]Series{{Name: "a", X: []float64{0, 1, 2}, Y: []float64{1e-12, 1, 1e12}}}, Options{LogY: true}},
		"log narrow":           {[]Series{{Name: "a", X: []float64{0, 1, 2}, Y: []float64{0.31, 0.5, 0.89}}}, Options{LogY: true}},
		"huge values":          {[]Series{{Name: "a", X: []float64{0, 1e15}, Y: []float64{-1e300, 1e300}}}, Options{}},
		"tiny values":          {[]Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1e-9, 3e-9}}}, Options{}},
		"nearly equal":         {[]Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1, 1 + 1e-15}}}, Options{}},
		"many series":          {many, Options{Dark: true}},
		"unsorted x":           {[]Series{{Name: "a", X: []float64{3, 1, 2, 0}, Y: []float64{1, 2, 3, 4}}}, Options{MaxPoints: 3}},
		"minimum size":         {twoSeries(100), Options{Width: 64, Height: 64, Title: "a long title that does not fit"}},
		"no downsampling":      {twoSeries(5000), Options{MaxPoints: -1}},
		"empty and full mixed": {[]Series{{Name: "empty"}, {Name: "full", X: []float64{0, 1}, Y: []float64{1, 0}}}, Options{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			decodePNG(t, mustRender(t, tc.series, tc.opt, "png"))
			wellFormed(t, mustRender(t, tc.series, tc.opt, "svg"))
		})
	}
}

func TestRenderErrors(t *testing.T) {
	ok := []Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1, 2}}}
	cases := []struct {
		name   string
		series []Series
		opt    Options
		format string
		want   string
	}{
		{"unknown format", ok, Options{}, "jpeg", `unsupported format "jpeg"`},
		{"empty format", ok, Options{}, "", `unsupported format ""`},
		{"mismatched lengths", []Series{{Name: "loss", X: []float64{0, 1, 2}, Y: []float64{1}}}, Options{}, "png", `series 0 ("loss") has 3 X values but 1 Y values`},
		{"negative width", ok, Options{Width: -10}, "png", "out of range"},
		{"NaN height", ok, Options{Height: math.NaN()}, "svg", "out of range"},
		{"huge", ok, Options{Width: 1e6, Height: 1e6}, "png", "out of range"},
		{"negative DPI", ok, Options{DPI: -1}, "png", "resolution -1 dpi is out of range"},
		{"huge DPI", ok, Options{DPI: 5000}, "png", "out of range"},
		// 4096² points at 600 dpi would be 34133² pixels (4.3 GiB of RGBA)
		{"huge at high DPI", ok, Options{Width: 4096, Height: 4096, DPI: 600}, "png", "over 64 megapixels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Render(tc.series, tc.opt, tc.format)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render error = %v, want one containing %q", err, tc.want)
			}
			if b != nil {
				t.Errorf("Render returned bytes with an error")
			}
		})
	}
	if _, err := Render(ok, Options{}, " PNG "); err != nil {
		t.Errorf("format should be case- and space-insensitive: %v", err)
	}
}

func TestPrepare(t *testing.T) {
	xs, ys := syntheticLoss(10_000, 7)
	ys[10] = math.NaN()
	ys[20] = -1
	ys[30] = 0
	s := []Series{{Name: "a", X: xs, Y: ys}}

	if got := prepare(s, mustNormalize(t, Options{}), lightTheme)[0].xys; len(got) != DefaultMaxPoints {
		t.Errorf("default budget: %d points, want %d", len(got), DefaultMaxPoints)
	}
	if got := prepare(s, mustNormalize(t, Options{MaxPoints: -1}), lightTheme)[0].xys; len(got) != 9_999 {
		t.Errorf("no downsampling: %d points, want 9999 (NaN dropped)", len(got))
	}
	if got := prepare(s, mustNormalize(t, Options{MaxPoints: 1}), lightTheme)[0].xys; len(got) != 3 {
		t.Errorf("MaxPoints 1: %d points, want 3", len(got))
	}
	logged := prepare(s, mustNormalize(t, Options{LogY: true, MaxPoints: -1}), lightTheme)[0].xys
	if len(logged) != 9_997 {
		t.Errorf("LogY: %d points, want 9997 (NaN, -1 and 0 dropped)", len(logged))
	}
	for _, p := range logged {
		if !(p.Y > 0) {
			t.Fatalf("LogY kept y=%v", p.Y)
		}
	}

	// LogX drops x <= 0: the steps 0 of syntheticLoss.
	if got := prepare(s, mustNormalize(t, Options{LogX: true, MaxPoints: -1}), lightTheme)[0].xys; len(got) != 9_998 {
		t.Errorf("LogX: %d points, want 9998 (x=0 and NaN y dropped)", len(got))
	}

	// Colours follow the series index; after the palette, dashes start.
	many := make([]Series, len(lightTheme.palette)+1)
	cs := prepare(many, mustNormalize(t, Options{}), lightTheme)
	if cs[0].style.Color != lightTheme.palette[0] || cs[1].style.Color != lightTheme.palette[1] {
		t.Errorf("series colours do not follow the palette")
	}
	last := cs[len(cs)-1].style
	if last.Color != lightTheme.palette[0] || len(last.Dashes) == 0 {
		t.Errorf("series %d should reuse colour 0 with dashes, got %v", len(cs)-1, last)
	}
}

func mustNormalize(t *testing.T, o Options) Options {
	t.Helper()
	o, err := o.normalized()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestDemo writes the demo charts when run with -demo=/tmp/plot-demo.png.
func TestDemo(t *testing.T) {
	if *demoPath == "" {
		t.Skip("pass -demo=/path/to/demo.png to write the demo charts")
	}
	train, val := demoSeries()
	opt := Options{Title: "resnet50-cifar10 · loss", XLabel: "step", YLabel: "loss"}
	base := strings.TrimSuffix(*demoPath, filepath.Ext(*demoPath))
	write := func(path string, series []Series, opt Options, format string) {
		if err := os.WriteFile(path, mustRender(t, series, opt, format), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
	series := []Series{train, val}
	write(*demoPath, series, opt, "png")
	write(base+".svg", series, opt, "svg")
	dark := opt
	dark.Dark = true
	write(base+"-dark.png", series, dark, "png")
	logOpt := opt
	logOpt.LogY = true
	write(base+"-log.png", series, logOpt, "png")
	write(base+"-empty.png", nil, Options{Title: "resnet50-cifar10 · loss", XLabel: "step", YLabel: "loss"}, "png")
	x, y := syntheticLoss(300, 9)
	for i := range y {
		y[i] = 1 - y[i]/3
	}
	write(base+"-single.png", []Series{{Name: "val/acc", X: x, Y: y}}, Options{Title: "accuracy", XLabel: "step", YLabel: "accuracy"}, "png")
}

// demoSeries is a training loss logged every step for 200k steps and a
// validation loss evaluated every 2,000 steps.
func demoSeries() (train, val Series) {
	tx, ty := syntheticLoss(200_000, 1)
	rng := rand.New(rand.NewPCG(11, 12))
	var vx, vy []float64
	for s := 0; s <= 200_000; s += 2_000 {
		x := float64(s)
		vx = append(vx, x)
		vy = append(vy, (0.42+2.0*math.Exp(-x/36_000))*(1+0.015*rng.NormFloat64()))
	}
	return Series{Name: "train/loss", X: tx, Y: ty}, Series{Name: "val/loss", X: vx, Y: vy}
}

// TestNoIOImports keeps the package pure: data in, bytes out.
func TestNoIOImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"os", "net", "database", "syscall", "io/ioutil", "path/filepath"}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %q: package plot must stay free of I/O", name, path)
				}
			}
		}
	}
}

func BenchmarkRender2x1M(b *testing.B) {
	series := twoSeries(1_000_000)
	for _, format := range []string{"png", "svg"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(series, Options{Title: "bench", XLabel: "step", YLabel: "loss"}, format); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestRenderPNGDPI(t *testing.T) {
	// 72 points are one inch, so a 72×72 chart is DPI×DPI pixels.
	for _, tc := range []struct {
		dpi  float64
		want int
	}{{0, 96}, {96, 96}, {192, 192}, {300, 300}} {
		img := decodePNG(t, mustRender(t, twoSeries(50), Options{Width: 72, Height: 72, DPI: tc.dpi}, "png"))
		if b := img.Bounds(); b.Dx() != tc.want || b.Dy() != tc.want {
			t.Errorf("DPI %g: %dx%d pixels, want %dx%d", tc.dpi, b.Dx(), b.Dy(), tc.want, tc.want)
		}
	}
}

func TestRenderScatterDrawsNoLines(t *testing.T) {
	// A line chart of n points is one stroked path; a scatter is n glyphs
	// and no polyline through them.
	pts := []Series{{Name: "runs", X: []float64{1, 2, 3, 4}, Y: []float64{4, 1, 3, 2}}}
	lines := string(mustRender(t, pts, Options{}, "svg"))
	dots := string(mustRender(t, pts, Options{Scatter: true}, "svg"))
	if strings.Count(dots, "<path") <= strings.Count(lines, "<path") {
		t.Errorf("scatter has %d paths, the line chart %d: want one more per dot", strings.Count(dots, "<path"), strings.Count(lines, "<path"))
	}
	wellFormed(t, []byte(dots))
}
