package ui

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// metricName is how the run view names a metric: "stage/key".
func metricName(p engine.Point) string { return p.Stage + "/" + p.Key }

// pickMetric chooses the curve to draw: the user's choice when the run has
// it, else a loss, else an accuracy, else the first metric.
func pickMetric(pts []engine.Point, chosen string) (stage, key string) {
	for _, p := range pts {
		if metricName(p) == chosen {
			return p.Stage, p.Key
		}
	}
	for _, want := range []string{"loss", "acc"} {
		for _, p := range pts {
			if strings.Contains(p.Key, want) {
				return p.Stage, p.Key
			}
		}
	}
	if len(pts) > 0 {
		return pts[0].Stage, pts[0].Key
	}
	return "", ""
}

// curveData is one metric of one run, every attempt, as the chart draws it.
type curveData struct {
	name   string // "stage/key"
	title  string
	series []chartSeries
	id     string // what was read: a new id means new points
}

// attemptSeries splits a metric's points (every attempt, ordered by
// attempt and step) into one chart series per attempt. With one attempt
// the series is named by the metric; with several, each by its attempt
// ("attempt 1: lr=1" when the attempt's parameters are known and differ),
// earlier attempts dashed in colours of their own.
func attemptSeries(key string, pts []engine.Point, params map[int]map[string]any) []chartSeries {
	var order []int
	by := map[int]*chartSeries{}
	for _, p := range pts {
		s, ok := by[p.Attempt]
		if !ok {
			cs := newChartSeries("", 0)
			s = &cs
			by[p.Attempt] = s
			order = append(order, p.Attempt)
		}
		s.add(p.Step, p.Wall, p.Value)
	}
	sort.Ints(order)
	out := make([]chartSeries, 0, len(order))
	for i, a := range order {
		s := *by[a]
		s.slot = i + 1
		switch {
		case len(order) == 1:
			s.name = key
		default:
			s.name = attemptLabel(a, params[a], params)
			s.dashed = i < len(order)-1
		}
		out = append(out, s)
	}
	return out
}

// attemptLabel names an attempt in a legend: "attempt 1", or with the
// parameters that set it apart from the other attempts, "attempt 1:
// lr=1". all holds every attempt's parameters (nil when the read model
// does not give them).
func attemptLabel(n int, mine map[string]any, all map[int]map[string]any) string {
	label := fmt.Sprintf("attempt %d", n)
	if len(mine) == 0 || len(all) < 2 {
		return label
	}
	var differ []string
	for _, k := range sortedParamKeys(mine) {
		v := formatParam(mine[k])
		for other, ps := range all {
			if other != n && formatParam(ps[k]) != v {
				differ = append(differ, k+"="+v)
				break
			}
		}
	}
	if len(differ) == 0 {
		return label
	}
	return label + ": " + strings.Join(differ, " ")
}

func sortedParamKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// curveCache keeps the last metric read, so that a reload that finds no
// new point (most of them, at several a second) reads no series again.
type curveCache struct {
	mu   sync.Mutex
	data curveData
}

// read returns the chosen metric of run r, every attempt; last is the run's
// latest point of each metric, which says whether anything new arrived.
func (c *curveCache) read(ctx context.Context, b Backend, r engine.RunInfo, stage, key string, last []engine.Point) (curveData, error) {
	id := r.ID + "|" + stage + "|" + key
	for _, p := range last {
		if p.Stage == stage && p.Key == key {
			id += fmt.Sprintf("|%d|%d|%g", p.Attempt, p.Step, p.Value)
		}
	}
	c.mu.Lock()
	if c.data.id == id {
		d := c.data
		c.mu.Unlock()
		return d, nil
	}
	c.mu.Unlock()
	pts, err := b.AttemptSeries(ctx, r.ID, stage, key)
	if err != nil {
		return curveData{}, fmt.Errorf("read %s/%s: %w", stage, key, err)
	}
	var params map[int]map[string]any
	if lr, ok := b.(launchRecords); ok && maybeRetried(r) {
		params, _ = lr.AttemptParams(ctx, r.ID, stage) // without them the legend says "attempt N"
	}
	d := curveData{name: stage + "/" + key, title: stage + " · " + key, series: attemptSeries(key, pts, params), id: id}
	c.mu.Lock()
	c.data = d
	c.mu.Unlock()
	return d, nil
}

// curvePanel is a chart with its controls: which metric, what X shows,
// smoothing, log Y, and a way back from a zoom.
type curvePanel struct {
	chart   *chart
	picker  *widget.Select
	xSel    *widget.Select
	smooth  *widget.Slider
	smoothV *widget.Label
	logY    *widget.Check
	reset   *widget.Button
	hint    *widget.Label
	content fyne.CanvasObject

	picking   bool              // options are being filled, not chosen from
	onMetric  func(name string) // the user picked another metric
	shownID   string            // the data the chart has
	shownName string            // the metric it is
}

func newCurvePanel() *curvePanel {
	p := &curvePanel{chart: newChart()}
	p.picker = widget.NewSelect(nil, func(name string) {
		if !p.picking && p.onMetric != nil {
			p.onMetric(name)
		}
	})
	p.xSel = widget.NewSelect(xModeNames, func(s string) {
		for i, n := range xModeNames {
			if n == s {
				p.chart.SetMode(xMode(i))
			}
		}
		p.updateReset()
	})
	p.xSel.Selected = xModeNames[0]
	p.smoothV = widget.NewLabel("off")
	p.smooth = widget.NewSlider(0, 0.99)
	p.smooth.Step = 0.01
	p.smooth.OnChanged = func(w float64) {
		p.chart.SetSmoothing(w)
		if w == 0 {
			p.smoothV.SetText("off")
		} else {
			p.smoothV.SetText(fmt.Sprintf("%.2f", w))
		}
	}
	p.logY = widget.NewCheck("log y", func(on bool) { p.chart.SetLogY(on) })
	p.reset = widget.NewButtonWithIcon("Reset zoom", theme.ZoomFitIcon(), func() { p.chart.ResetZoom() })
	p.reset.Disable()
	p.chart.OnZoom = func(bool) { p.updateReset() }
	p.hint = widget.NewLabel("Drag to zoom, double-click to reset; hover for values.")
	p.hint.Importance = widget.LowImportance
	p.hint.SizeName = theme.SizeNameCaptionText
	p.hint.Truncation = fyne.TextTruncateEllipsis

	smoothing := container.NewBorder(nil, nil, widget.NewLabel("smoothing"), p.smoothV, p.smooth)
	row1 := container.NewBorder(nil, nil, nil, p.logY, p.picker)
	row2 := container.NewBorder(nil, nil, p.xSel, p.reset, smoothing)
	p.content = container.NewBorder(container.NewVBox(row1, row2), p.hint, nil, nil, p.chart)
	return p
}

func (p *curvePanel) updateReset() {
	if p.chart.Zoomed() {
		p.reset.Enable()
	} else {
		p.reset.Disable()
	}
}

// show puts a metric's curves in the chart and the run's metrics in the
// picker.
func (p *curvePanel) show(names []string, d curveData) {
	p.picking = true
	p.picker.SetOptions(names)
	p.picker.SetSelected(d.name)
	p.picking = false
	if d.id != p.shownID {
		if d.name != p.shownName {
			// A new metric: a loss that blew up spans many decades, where
			// only a log scale shows every attempt; the check says so.
			p.shownName = d.name
			p.logY.SetChecked(wideRange(d.series))
		}
		p.shownID = d.id
		p.chart.SetSeries(d.title, d.series)
		p.updateReset()
	}
}

// wideRange reports whether the series are all positive and span more than
// four decades.
func wideRange(series []chartSeries) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, y := range s.ys {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			if y <= 0 {
				return false
			}
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
	}
	return lo > 0 && hi/lo > 1e4
}

// metricNames lists a run's metrics, "stage/key", in the order given.
func metricNames(pts []engine.Point) []string {
	var names []string
	seen := map[string]bool{}
	for _, p := range pts {
		if n := metricName(p); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}
