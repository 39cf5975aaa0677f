package ui

import (
	"fmt"
	"image"
	"math"
	"sort"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/plot"
)

// Hyperparameters opens the hyperparameter view over the picked runs (two
// or more), else over every run the filters keep: the objective against
// each parameter, and parallel coordinates; a click on a point or a line
// opens its run.
func (v *ArchiveView) Hyperparameters() {
	runs := v.model.pickedRuns()
	if len(runs) < 2 {
		runs = nil
		for _, i := range v.model.rows {
			runs = append(runs, v.model.all[i])
		}
	}
	hv := newHparamView(runs, v.ParamLog)
	hv.onOpen = func(id string) {
		if hv.dialog != nil {
			hv.dialog.Hide()
		}
		if v.OnOpen != nil {
			v.OnOpen(id)
		}
	}
	v.hparamView = hv
	if v.win == nil {
		return
	}
	d := dialog.NewCustom("Hyperparameters", "Close", hv.content, v.win)
	hv.dialog = d
	d.Resize(fyne.NewSize(1040, 760))
	showWithKeys(d, v.win, d.Hide, d.Hide)
}

// hparamView shows how a template's parameters relate to its objective.
type hparamView struct {
	runs     []engine.ArchiveEntry // of one template, with an objective
	template string
	note     string
	params   []string // parameters that vary among the runs
	log      map[string]bool
	choices  map[string][]string // categorical parameters' values, sorted
	paramSel *widget.Select
	scatter  *clickChart
	parallel *clickChart
	content  fyne.CanvasObject
	dialog   dialog.Dialog
	onOpen   func(id string)
}

func newHparamView(all []engine.ArchiveEntry, paramLog func(template, param string) (bool, bool)) *hparamView {
	hv := &hparamView{log: map[string]bool{}, choices: map[string][]string{}}
	hv.pickRuns(all)
	infos := make([]engine.RunInfo, len(hv.runs))
	for i, r := range hv.runs {
		infos[i] = r.RunInfo
	}
	hv.params = differingParams(infos)
	for _, k := range hv.params {
		var nums []float64
		cats := map[string]bool{}
		for _, r := range hv.runs {
			switch x := r.Params[k].(type) {
			case float64:
				nums = append(nums, x)
			case nil:
			default:
				cats[formatParam(x)] = true
			}
		}
		if len(cats) > 0 {
			hv.choices[k] = sortedParamKeys(anyKeys(cats))
			continue
		}
		if paramLog != nil {
			if lg, known := paramLog(hv.template, k); known {
				hv.log[k] = lg
				continue
			}
		}
		hv.log[k] = looksLog(nums)
	}
	hv.scatter = newClickChart(hv.renderScatter)
	hv.parallel = newClickChart(hv.renderParallel)
	hv.scatter.onPick = func(id string) { hv.open(id) }
	hv.parallel.onPick = func(id string) { hv.open(id) }
	hv.paramSel = widget.NewSelect(hv.params, func(string) { hv.scatter.redraw() })
	hv.paramSel.Selected = hv.mostVaried()
	head := widget.NewLabel(hv.note)
	head.Wrapping = fyne.TextWrapWord
	head.Importance = widget.LowImportance
	if len(hv.runs) < 2 || len(hv.params) == 0 {
		msg := "The hyperparameter view needs two or more finished runs of one template with an objective and different parameters."
		if len(hv.runs) >= 2 {
			msg = "These runs have the same parameters: launch a sweep to see how they matter."
		}
		hv.content = container.NewVBox(head, widget.NewLabel(msg))
		return hv
	}
	top := container.NewBorder(nil, nil, widget.NewLabel("objective against"), nil, hv.paramSel)
	split := container.NewVSplit(container.NewBorder(top, nil, nil, nil, hv.scatter),
		container.NewBorder(heading("Parallel coordinates (green is best; click a line to open its run)"), nil, nil, nil, hv.parallel))
	split.Offset = 0.5
	hv.content = container.NewBorder(head, nil, nil, nil, split)
	return hv
}

// mostVaried is the parameter with the most distinct values among the
// runs (the one a sweep went over), first in name order on a tie.
func (hv *hparamView) mostVaried() string {
	best, bestN := "", 0
	for _, k := range hv.params {
		seen := map[string]bool{}
		for _, r := range hv.runs {
			seen[formatParam(r.Params[k])] = true
		}
		if len(seen) > bestN {
			best, bestN = k, len(seen)
		}
	}
	return best
}

func (hv *hparamView) open(id string) {
	if hv.onOpen != nil && id != "" {
		hv.onOpen(id)
	}
}

// pickRuns keeps the runs with an objective value, of the template most of
// them have.
func (hv *hparamView) pickRuns(all []engine.ArchiveEntry) {
	// Runs that ended: a running run's best is only its best so far. A
	// failed run stays (it says where the parameters stop working);
	// cancelled ones did not get to say anything.
	ended := func(r engine.ArchiveEntry) bool {
		return r.HasBest && (r.State == engine.Succeeded || r.State == engine.Failed)
	}
	count := map[string]int{}
	for _, r := range all {
		if ended(r) {
			count[r.Template]++
		}
	}
	best := ""
	for t, n := range count {
		if n > count[best] || (n == count[best] && t < best) {
			best = t
		}
	}
	hv.template = best
	for _, r := range all {
		if ended(r) && r.Template == best {
			hv.runs = append(hv.runs, r)
		}
	}
	if len(hv.runs) > 0 {
		obj := hv.runs[0].Objective
		arrow := "lower is better"
		if hv.runs[0].Goal == "max" {
			arrow = "higher is better"
		}
		hv.note = fmt.Sprintf("%d runs of %s, by their best %s (%s).", len(hv.runs), best, obj, arrow)
		if len(count) > 1 {
			hv.note += " Runs of other templates are left out: filter or pick the runs to see another."
		}
	}
}

// looksLog guesses a log scale for a parameter the schema says nothing
// about: positive values spanning two decades or more.
func looksLog(v []float64) bool {
	if len(v) < 2 {
		return false
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo > 0 && hi/lo >= 100
}

// shade is where a run's objective sits among the runs, 1 = best.
func (hv *hparamView) shade(r engine.ArchiveEntry) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range hv.runs {
		lo, hi = math.Min(lo, x.Best), math.Max(hi, x.Best)
	}
	if !(hi > lo) {
		return 1
	}
	s := (r.Best - lo) / (hi - lo)
	if r.Goal != "max" {
		s = 1 - s
	}
	return s
}

// xOf is where a run sits on parameter k's axis: its value, or its
// choice's index.
func (hv *hparamView) xOf(r engine.ArchiveEntry, k string) (float64, bool) {
	x, ok := r.Params[k]
	if !ok {
		return 0, false
	}
	if cats := hv.choices[k]; cats != nil {
		i := sort.SearchStrings(cats, formatParam(x))
		return float64(i), i < len(cats)
	}
	f, ok := x.(float64)
	return f, ok
}

func (hv *hparamView) renderScatter(w, h int, scale float32, dark bool) (*image.RGBA, func(px, py float64) string, error) {
	k := hv.paramSel.Selected
	if k == "" {
		return nil, nil, fmt.Errorf("no parameter")
	}
	type pt struct {
		x, y float64
		id   string
	}
	var pts []pt
	obj := hv.runs[0].Objective
	dots := plot.Series{Name: obj, Slot: 1} // one series: a scatter ignores order, and no legend
	for _, r := range hv.runs {
		x, ok := hv.xOf(r, k)
		if !ok {
			continue
		}
		pts = append(pts, pt{x, r.Best, r.ID})
		dots.X = append(dots.X, x)
		dots.Y = append(dots.Y, r.Best)
	}
	opt := plot.Options{Title: obj + " against " + k, XLabel: k, YLabel: "best " + obj, Scatter: true,
		LogX: hv.log[k], XCategories: hv.choices[k], Width: float64(w) / float64(scale), Height: float64(h) / float64(scale),
		DPI: 72 * float64(scale), Dark: dark}
	img, fr, err := plot.RenderImage([]plot.Series{dots}, opt)
	if err != nil {
		return nil, nil, err
	}
	hit := func(px, py float64) string {
		best, bestD := "", 10.0*float64(scale)
		for _, p := range pts {
			if hv.log[k] && p.x <= 0 {
				continue
			}
			d := math.Hypot(fr.PixelX(p.x)-px, fr.PixelY(p.y)-py)
			if d < bestD {
				best, bestD = p.id, d
			}
		}
		return best
	}
	return img, hit, nil
}

func (hv *hparamView) renderParallel(w, h int, scale float32, dark bool) (*image.RGBA, func(px, py float64) string, error) {
	var axes []plot.Axis
	for _, k := range hv.params {
		axes = append(axes, plot.Axis{Name: k, Log: hv.log[k], Categories: hv.choices[k]})
	}
	obj := hv.runs[0].Objective
	axes = append(axes, plot.Axis{Name: obj})
	lines := make([]plot.Line, len(hv.runs))
	for i, r := range hv.runs {
		vals := make([]float64, len(axes))
		for j, k := range hv.params {
			vals[j] = math.NaN()
			if x, ok := hv.xOf(r, k); ok {
				vals[j] = x
			}
		}
		vals[len(vals)-1] = r.Best
		lines[i] = plot.Line{Values: vals, Shade: hv.shade(r)}
	}
	img, fr, par, err := plot.RenderParallel(axes, lines, plot.Options{Width: float64(w) / float64(scale),
		Height: float64(h) / float64(scale), DPI: 72 * float64(scale), Dark: dark})
	if err != nil {
		return nil, nil, err
	}
	hit := func(px, py float64) string {
		best, bestD := "", 8.0*float64(scale)
		for i, l := range lines {
			var prev [2]float64
			have := false
			for j, v := range l.Values {
				x, y, ok := par.PositionOf(j, v)
				if !ok {
					have = false
					continue
				}
				cur := [2]float64{fr.PixelX(x), fr.PixelY(y)}
				if have {
					if d := segDist(px, py, prev, cur); d < bestD {
						best, bestD = hv.runs[i].ID, d
					}
				}
				prev, have = cur, true
			}
		}
		return best
	}
	return img, hit, nil
}

// segDist is the distance from (px, py) to the segment a–b.
func segDist(px, py float64, a, b [2]float64) float64 {
	dx, dy := b[0]-a[0], b[1]-a[1]
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = math.Max(0, math.Min(1, ((px-a[0])*dx+(py-a[1])*dy)/l))
	}
	return math.Hypot(px-(a[0]+t*dx), py-(a[1]+t*dy))
}

// clickChart is a chart drawn at its on-screen pixel size whose points
// (or lines) can be clicked: the render function says which run a pixel
// is on.
type clickChart struct {
	widget.BaseWidget
	render func(w, h int, scale float32, dark bool) (*image.RGBA, func(px, py float64) string, error)
	onPick func(id string)
	raster *canvas.Raster

	mu    sync.Mutex
	hit   func(px, py float64) string
	scale float32
}

func newClickChart(render func(w, h int, scale float32, dark bool) (*image.RGBA, func(px, py float64) string, error)) *clickChart {
	c := &clickChart{render: render}
	c.raster = canvas.NewRaster(func(w, h int) image.Image {
		size := c.Size()
		if w < 2 || h < 2 || size.Width < 1 {
			return image.NewRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
		}
		scale := float32(w) / size.Width
		img, hit, err := c.render(w, h, scale, isDark())
		if err != nil {
			return image.NewRGBA(image.Rect(0, 0, w, h))
		}
		c.mu.Lock()
		c.hit, c.scale = hit, scale
		c.mu.Unlock()
		return img
	})
	c.ExtendBaseWidget(c)
	return c
}

func (c *clickChart) redraw() { c.raster.Refresh() }

// pickAt is the run under a widget point, or "".
func (c *clickChart) pickAt(pos fyne.Position) string {
	c.mu.Lock()
	hit, scale := c.hit, c.scale
	c.mu.Unlock()
	if hit == nil {
		return ""
	}
	return hit(float64(pos.X*scale), float64(pos.Y*scale))
}

// Tapped opens the run under the pointer.
func (c *clickChart) Tapped(e *fyne.PointEvent) {
	if id := c.pickAt(e.Position); id != "" && c.onPick != nil {
		c.onPick(id)
	}
}

func (c *clickChart) MinSize() fyne.Size { return fyne.NewSize(300, 180) }

func (c *clickChart) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(c.raster)
}
