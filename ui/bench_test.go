package ui

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"niuma/engine"
	"niuma/plot"
)

// BenchmarkCurveRender1M draws a noisy, decaying loss of 1,000,000 points
// to an 800×400-pixel PNG (plot reduces it with LTTB first) and decodes it
// for a canvas.Image, as the run view does.
func BenchmarkCurveRender1M(b *testing.B) {
	const n = 1_000_000
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = float64(i)
		ys[i] = 2*math.Exp(-float64(i)/2e5) + 0.05*math.Sin(float64(i)*0.37) + 0.02*math.Sin(float64(i)*7.1)
	}
	for _, bc := range []struct {
		name      string
		maxPoints int
	}{
		{"lttb-default-2000", 0}, // plot's default budget, what the run view uses
		{"lttb-800", 800},        // one point per pixel column
	} {
		b.Run(bc.name, func(b *testing.B) {
			opt := plot.Options{Title: "train · loss", XLabel: "step", Width: 800, Height: 400, DPI: 72, MaxPoints: bc.maxPoints}
			b.ReportAllocs()
			for b.Loop() {
				out, err := plot.Render([]plot.Series{{Name: "loss", X: xs, Y: ys}}, opt, "png")
				if err != nil {
					b.Fatal(err)
				}
				img, err := png.Decode(bytes.NewReader(out))
				if err != nil {
					b.Fatal(err)
				}
				if img.Bounds().Dx() != 800 || img.Bounds().Dy() != 400 {
					b.Fatalf("image is %v, want 800×400", img.Bounds())
				}
			}
		})
	}
}

// millionPoints is a training run's loss as the run view holds it: a
// million steps, one every 10 ms of wall time.
func millionPoints() chartSeries {
	const n = 1_000_000
	s := newChartSeries("loss", n)
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.Local)
	for i := range n {
		v := 2*math.Exp(-float64(i)/2e5) + 0.05*math.Sin(float64(i)*0.37) + 0.02*math.Sin(float64(i)*7.1)
		s.add(int64(i), t0.Add(time.Duration(i)*10*time.Millisecond), v)
	}
	return s
}

// BenchmarkChartHover1M is one hover answer over a 1,000,000-point series
// (the run view's chart at 800×400): the pointer's step found in the data
// by binary search, the hover box's lines written with step, wall time and
// value. Smoothing on, as most users keep it, so the smoothed value is
// said too. Target: ≤ 5 ms.
func BenchmarkChartHover1M(b *testing.B) {
	c := testChart(b, []chartSeries{millionPoints()}, 800, 400)
	c.SetSmoothing(0.6)
	if _, err := c.render(800, 400, 1); err != nil {
		b.Fatal(err)
	}
	fr := c.frame
	xs := []float32{}
	for i := range 64 {
		xs = append(xs, float32(fr.Area.Min.X)+float32(fr.Area.Dx())*float32(i)/63)
	}
	y := float32(fr.Area.Min.Y + fr.Area.Dy()/2)
	i := 0
	for b.Loop() {
		lines, _, ok := c.hoverLines(fyne.NewPos(xs[i%len(xs)], y))
		if !ok || len(lines) != 1 {
			b.Fatalf("no hover answer: %v", lines)
		}
		i++
	}
}

// BenchmarkChartZoom1M is the redraw after a drag-zoom over the same
// series: the chart drawn again at 800×400 pixels for the range dragged (a
// tenth of the run, and a hundredth), with the raw series faint behind
// its smoothed copy. Target: ≤ 50 ms.
func BenchmarkChartZoom1M(b *testing.B) {
	c := testChart(b, []chartSeries{millionPoints()}, 800, 400)
	c.SetSmoothing(0.6)
	if _, err := c.render(800, 400, 1); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		lo, hi float64
	}{{"tenth", 400_000, 500_000}, {"hundredth", 400_000, 410_000}} {
		b.Run(tc.name, func(b *testing.B) {
			from := fyne.NewPos(float32(c.frame.PixelX(tc.lo)), 100)
			to := fyne.NewPos(float32(c.frame.PixelX(tc.hi)), 104)
			full := c.frame
			for b.Loop() {
				c.frame = full // each zoom starts from the whole run
				c.view = plot.Range{}
				c.drawn = "" // and is drawn, not taken from the cache
				if !c.zoomTo(from, to) {
					b.Fatal("no zoom")
				}
				if _, err := c.render(800, 400, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// manyRuns is an archive of n runs of three templates in every state.
func manyRuns(n int) []engine.ArchiveEntry {
	states := []engine.State{engine.Succeeded, engine.Failed, engine.Cancelled, engine.Running, engine.Queued}
	tmpls := []string{"digits-mlp", "llm-finetune", "resnet-cifar"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]engine.ArchiveEntry, n)
	for i := range out {
		created := t0.Add(time.Duration(n-i) * time.Minute)
		out[i] = engine.ArchiveEntry{
			RunInfo: engine.RunInfo{
				ID: fmt.Sprintf("20260101-%06d-%04x", i, i*7919%65536), Template: tmpls[i%3], State: states[i%5],
				Params:    map[string]any{"lr": []float64{0.1, 0.01, 0.001}[i%3], "hidden": float64(int(32) << (i % 4)), "optimizer": []string{"adam", "sgd"}[i%2]},
				CreatedAt: created, StartedAt: created.Add(time.Second), FinishedAt: created.Add(time.Duration(i%600) * time.Second),
			},
			Objective: "val_acc", Goal: "max", Best: float64(i%1000) / 1000, HasBest: i%7 != 0,
		}
	}
	return out
}

// BenchmarkArchiveFirstPaint100k is the archive page opening over 100,000
// runs already read: building the view and its table model (filter,
// newest-first sort) and the first Refresh that lays out the visible rows.
func BenchmarkArchiveFirstPaint100k(b *testing.B) {
	newTestApp(b)
	all := manyRuns(100_000)
	w := test.NewWindow(nil)
	defer w.Close()
	w.Resize(fyne.NewSize(1000, 700))
	now := time.Now()
	for b.Loop() {
		v := NewArchiveView(&fakeBackend{}, w)
		w.SetContent(v.Content())
		v.show(all, now)
		if len(v.model.rows) != 100_000 {
			b.Fatalf("%d rows", len(v.model.rows))
		}
	}
}

// BenchmarkArchiveReload100k is the same through Reload, with the copy
// of 100,000 runs that the fake backend hands over (the engine's SQLite
// read is not in it).
func BenchmarkArchiveReload100k(b *testing.B) {
	newTestApp(b)
	fb := &fakeBackend{archive: manyRuns(100_000)}
	w := test.NewWindow(nil)
	defer w.Close()
	w.Resize(fyne.NewSize(1000, 700))
	for b.Loop() {
		v := NewArchiveView(fb, w)
		w.SetContent(v.Content())
		v.Reload(context.Background())
	}
}

// BenchmarkArchiveFilter100k is one keystroke in the search box over
// 100,000 runs: refilter, re-sort and redraw the table.
func BenchmarkArchiveFilter100k(b *testing.B) {
	newTestApp(b)
	fb := &fakeBackend{archive: manyRuns(100_000)}
	w := test.NewWindow(nil)
	defer w.Close()
	w.Resize(fyne.NewSize(1000, 700))
	v := NewArchiveView(fb, w)
	w.SetContent(v.Content())
	v.Reload(context.Background())
	queries := []string{"lr=0.01", "adam", "digits lr=0.1", ""}
	i := 0
	for b.Loop() {
		v.query.SetText(queries[i%len(queries)])
		i++
	}
}

// BenchmarkArchiveSortBest100k is a tap on the "Best objective" header
// over 100,000 runs.
func BenchmarkArchiveSortBest100k(b *testing.B) {
	newTestApp(b)
	fb := &fakeBackend{archive: manyRuns(100_000)}
	w := test.NewWindow(nil)
	defer w.Close()
	w.Resize(fyne.NewSize(1000, 700))
	v := NewArchiveView(fb, w)
	w.SetContent(v.Content())
	v.Reload(context.Background())
	for b.Loop() {
		v.SortBy(colBest)
	}
}
