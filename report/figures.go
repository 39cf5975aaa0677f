package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/png"
	"math"
	"sort"
	"strings"

	"niuma/plot"
)

// figure is one chart of a report, before it is rendered.
type figure struct {
	Title   string
	Caption string
	XLabel  string
	YLabel  string
	Series  []plot.Series
	Scatter bool
	LogY    bool
	LogX    bool
	// Tall charts leave room for a long legend.
	Tall bool
	// Parallel, when set, makes the figure parallel coordinates (Series
	// unused): a raster chart, wrapped in an SVG for HTML.
	Parallel *parallelFig
}

// parallelFig is a parallel-coordinates chart's data.
type parallelFig struct {
	Axes  []plot.Axis
	Lines []plot.Line
}

// renderParallel draws a parallel-coordinates figure as PNG, or as an SVG
// holding that PNG.
func (f figure) renderParallel(format string, w, h, dpi float64) ([]byte, error) {
	img, _, _, err := plot.RenderParallel(f.Parallel.Axes, f.Parallel.Lines, plot.Options{Title: f.Title, Width: w, Height: h, DPI: dpi})
	if err != nil {
		return nil, fmt.Errorf("report: chart %q: %w", f.Title, err)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, fmt.Errorf("report: chart %q: %w", f.Title, err)
	}
	if format != "svg" {
		return b.Bytes(), nil
	}
	svg := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%gpt" height="%gpt" viewBox="0 0 %g %g"><image width="%g" height="%g" href="data:image/png;base64,%s"/></svg>`,
		w, h, w, h, w, h, base64.StdEncoding.EncodeToString(b.Bytes()))
	return []byte(svg), nil
}

// Limits on what a report draws, so that a run with fifty metrics or a
// hundred-run comparison stays a document rather than a flip book.
const (
	maxRunFigures     = 8 // curves of a run report
	maxOverlayFigures = 4 // overlaid curves of a comparison
	maxOverlayRuns    = 8 // runs drawn in one overlay: the best ones
	maxScatterFigures = 6 // parameter-vs-objective figures
)

// runFigures picks a run report's charts: the objective first, then every
// loss, then the other metrics, one chart per key with a line per stage
// that reported it.
func runFigures(r *Run) []figure {
	o := r.EffectiveObjective()
	var keys []string
	byKey := map[string][]*Metric{}
	for i := range r.Metrics {
		m := &r.Metrics[i]
		if _, seen := byKey[m.Key]; !seen {
			keys = append(keys, m.Key)
		}
		byKey[m.Key] = append(byKey[m.Key], m)
	}
	sort.SliceStable(keys, func(i, j int) bool { return keyRank(keys[i], o) < keyRank(keys[j], o) })
	var figs []figure
	for _, k := range keys {
		if len(figs) == maxRunFigures {
			break
		}
		if flat(byKey[k]) {
			continue // a constant (a fixed learning rate) is read better in the table
		}
		f := figure{Title: k, XLabel: "step", YLabel: k}
		for _, m := range byKey[k] {
			f.Series = append(f.Series, toSeries(m.Stage, m))
		}
		if k == o.Metric {
			f.Caption = fmt.Sprintf("The objective (%s is better).", goalWord(o.Goal))
		}
		f.LogY = wantLogY(byKey[k])
		figs = append(figs, f)
	}
	return figs
}

// flat reports whether metrics hold a single distinct finite value.
func flat(ms []*Metric) bool {
	first, seen := 0.0, false
	for _, m := range ms {
		for _, v := range m.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			if !seen {
				first, seen = v, true
			} else if v != first {
				return false
			}
		}
	}
	return seen
}

func keyRank(k string, o Objective) int {
	switch {
	case k == o.Metric:
		return 0
	case strings.Contains(strings.ToLower(k), "loss"):
		return 1
	}
	return 2
}

func goalWord(goal string) string {
	if goal == "max" {
		return "higher"
	}
	return "lower"
}

// wantLogY draws a curve on a log scale when it is positive and spans more
// than two decades, as losses often do.
func wantLogY(ms []*Metric) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, m := range ms {
		for _, v := range m.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			if v <= 0 {
				return false
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	return lo > 0 && hi/lo > 100
}

func toSeries(name string, m *Metric) plot.Series {
	s := plot.Series{Name: name, X: make([]float64, len(m.Steps)), Y: m.Values}
	for i, st := range m.Steps {
		s.X[i] = float64(st)
	}
	return s
}

// compareFigures picks a comparison's charts: the objective and the losses
// overlaid for the best runs, then the objective against each numeric
// parameter that differs between runs.
func compareFigures(rep *Report, o Objective, ranked []Ranked) []figure {
	keys := []string{}
	if o.Metric != "" {
		keys = append(keys, o.Metric)
	}
	seen := map[string]bool{o.Metric: true}
	for _, r := range rep.Runs {
		for _, m := range r.Metrics {
			if !seen[m.Key] && strings.Contains(strings.ToLower(m.Key), "loss") {
				seen[m.Key] = true
				keys = append(keys, m.Key)
			}
		}
	}
	if len(keys) > maxOverlayFigures {
		keys = keys[:maxOverlayFigures]
	}
	shown := ranked
	if len(shown) > maxOverlayRuns {
		shown = shown[:maxOverlayRuns]
	}
	var figs []figure
	for _, k := range keys {
		f := figure{Title: k, XLabel: "step", YLabel: k}
		var ms []*Metric
		for _, rk := range shown {
			if m, ok := rk.Run.ObjectiveMetric(Objective{Metric: k}); ok {
				f.Series = append(f.Series, toSeries(shortID(rk.Run.ID), &m))
				ms = append(ms, &m)
			}
		}
		f.LogY = wantLogY(ms)
		f.Tall = len(f.Series) > 4
		if len(ranked) > len(shown) {
			f.Caption = fmt.Sprintf("The %d best runs of %d by %s.", len(shown), len(ranked), o.Metric)
		}
		figs = append(figs, f)
	}
	if o.Metric == "" {
		return figs
	}
	names, _ := rep.ParamDiff()
	for _, n := range names {
		if len(figs) >= maxOverlayFigures+maxScatterFigures {
			break
		}
		var xs, ys []float64
		for _, rk := range ranked {
			v, ok := rk.Run.param(n)
			x, num := toFloat(v)
			if !ok || !num || !rk.HasData {
				continue
			}
			xs, ys = append(xs, x), append(ys, rk.Value)
		}
		if len(xs) < 2 {
			continue
		}
		sortXY(xs, ys)
		figs = append(figs, figure{LogX: xs[0] > 0 && xs[len(xs)-1]/xs[0] >= 100,
			Title: fmt.Sprintf("%s vs %s", o.Metric, n), XLabel: n, YLabel: "best " + o.Metric,
			Series: []plot.Series{{Name: "runs", X: xs, Y: ys}}, Scatter: true,
			Caption: fmt.Sprintf("Each dot is a run: its %s and its best %s.", n, o.Metric),
		})
	}
	return figs
}

func sortXY(xs, ys []float64) {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	x2, y2 := make([]float64, len(xs)), make([]float64, len(ys))
	for i, j := range idx {
		x2[i], y2[i] = xs[j], ys[j]
	}
	copy(xs, x2)
	copy(ys, y2)
}

// shortID drops the date of a run ID (20261129-184303-a1b2c3 →
// 184303-a1b2c3) for legends, where space is short.
func shortID(id string) string {
	if len(id) == 22 && id[8] == '-' {
		return id[9:]
	}
	return id
}

// render draws a figure in the given format, w points wide; h = 0 means
// the figure's own aspect.
func (f figure) render(format string, w, h float64) ([]byte, error) {
	if h == 0 {
		h = w * f.aspect()
	}
	if f.Parallel != nil {
		return f.renderParallel(format, w, h, 0)
	}
	b, err := plot.Render(f.Series, plot.Options{
		Title: f.Title, XLabel: f.XLabel, YLabel: f.YLabel, Width: w, Height: h,
		Scatter: f.Scatter, LogY: f.LogY, LogX: f.LogX, MaxPoints: 1500,
	}, format)
	if err != nil {
		return nil, fmt.Errorf("report: chart %q: %w", f.Title, err)
	}
	return b, nil
}

// renderAll draws figures concurrently: each chart is independent and
// rendering is the slow part of a large comparison.
func renderAll(figs []figure, format string, w, h float64) ([][]byte, error) {
	out := make([][]byte, len(figs))
	errs := make([]error, len(figs))
	done := make(chan struct{}, len(figs))
	for i := range figs {
		go func() {
			out[i], errs[i] = figs[i].render(format, w, h)
			done <- struct{}{}
		}()
	}
	for range figs {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// renderPNG draws a figure as a PNG for print, at twice the screen
// resolution.
func renderPNG(f figure, w, h float64) ([]byte, error) {
	if f.Parallel != nil {
		return f.renderParallel("png", w, h, 200)
	}
	b, err := plot.Render(f.Series, plot.Options{
		Title: f.Title, XLabel: f.XLabel, YLabel: f.YLabel, Width: w, Height: h,
		Scatter: f.Scatter, LogY: f.LogY, LogX: f.LogX, MaxPoints: 1000, DPI: 200,
	}, "png")
	if err != nil {
		return nil, fmt.Errorf("report: chart %q: %w", f.Title, err)
	}
	return b, nil
}
