package ui

import (
	"context"
	"fmt"
	"image"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/gpumon"
)

// simulateHint tells a user without GPUs how to try the board anyway.
const simulateHint = "To try Niuma's GPU scheduling without a GPU, start it with simulated GPUs, e.g.\n" +
	"NIUMA_SIMULATE_GPUS=2xA100-80GB niuma"

// boardModel is what one board refresh shows, computed off Fyne's thread
// from the engine's answers.
type boardModel struct {
	snap   gpumon.Snapshot
	gpuErr error
	runErr error
	cards  []gpuCardModel
	queue  []queueItem
	counts string // "3 running · 2 waiting"
}

// gpuCardModel is one GPU card's content.
type gpuCardModel struct {
	uuid      string
	title     string // "GPU 0 · NVIDIA A100-SXM4-80GB"
	util      float64
	utilText  string
	mem       float64 // 0..1
	memText   string
	temp      string
	power     string
	runs      string // the runs sitting on it
	simulated bool
	health    string // empty when healthy
}

// queueItem is one active run on the board.
type queueItem struct {
	id, template string
	state        engine.State
	stages       []engine.StageInfo
	detail       string // the shepherd's reason for a waiting run; elapsed and objective for a running one
	anomalies    int
	critical     bool
}

// buildBoard turns a GPU snapshot and the runs into what the board draws.
// Only queued and running runs are on the board (the archive holds the
// rest); running first, then waiting, oldest first.
func buildBoard(snap gpumon.Snapshot, runs []engine.RunInfo, last map[string][]engine.Point, anomalies map[string][]engine.AnomalyInfo, now time.Time) boardModel {
	m := boardModel{snap: snap}
	for _, g := range snap.GPUs {
		m.cards = append(m.cards, gpuCard(g, snap.Simulated))
	}
	var running, waiting int
	for _, r := range runs {
		if r.State.Done() {
			continue
		}
		it := queueItem{id: r.ID, template: r.Template, state: r.State, stages: r.Stages}
		if r.State == engine.Queued {
			waiting++
			it.detail = waitReason(r, now)
		} else {
			running++
			parts := []string{"running " + elapsedText(r, now)}
			if v, ok := latestObjective(last[r.ID]); ok {
				parts = append(parts, v)
			}
			if w := waitReason(r, now); w != "" && w != "queued" {
				parts = append(parts, w)
			}
			it.detail = strings.Join(parts, " · ")
		}
		for _, a := range anomalies[r.ID] {
			if strings.HasPrefix(a.Kind, "action_") {
				continue // the engine's own notes, not trouble
			}
			it.anomalies++
			if a.Severity == "critical" {
				it.critical = true
			}
		}
		m.queue = append(m.queue, it)
	}
	sort.SliceStable(m.queue, func(i, j int) bool {
		if (m.queue[i].state == engine.Running) != (m.queue[j].state == engine.Running) {
			return m.queue[i].state == engine.Running
		}
		return false
	})
	m.counts = fmt.Sprintf("%d running · %d waiting", running, waiting)
	return m
}

// waitReason is why a run (or its next stage) waits, in the shepherd's
// words when it gave one.
func waitReason(r engine.RunInfo, now time.Time) string {
	for _, s := range r.Stages {
		if s.State == engine.Queued && s.Reason != "" && !strings.HasPrefix(s.Reason, "waiting for ") {
			return s.Name + ": " + s.Reason
		}
	}
	for _, s := range r.Stages {
		if s.State == engine.Queued && s.Reason != "" && r.State == engine.Queued {
			return s.Name + ": " + s.Reason
		}
	}
	if r.State == engine.Queued {
		return "queued " + since(now.Sub(r.CreatedAt)) + " ago"
	}
	return ""
}

// latestObjective picks the value to show for a running run: a loss, else
// an accuracy; a run reporting neither (yet) shows none.
func latestObjective(pts []engine.Point) (string, bool) {
	for _, want := range []string{"loss", "acc"} {
		for _, p := range pts {
			if strings.Contains(p.Key, want) {
				return fmt.Sprintf("%s %.4g", p.Key, p.Value), true
			}
		}
	}
	return "", false
}

func gpuCard(g gpumon.GPU, simulated bool) gpuCardModel {
	c := gpuCardModel{uuid: g.UUID, title: fmt.Sprintf("GPU %d · %s", g.Index, g.Name), simulated: simulated, temp: "– °C", power: "– W", utilText: "util –"}
	if g.UtilPercent != nil {
		c.util = *g.UtilPercent / 100
		c.utilText = fmt.Sprintf("util %.0f %%", *g.UtilPercent)
	}
	if g.MemTotalMiB > 0 {
		c.mem = float64(g.MemUsedMiB) / float64(g.MemTotalMiB)
	}
	c.memText = fmt.Sprintf("mem %.1f / %.0f GiB", float64(g.MemUsedMiB)/1024, float64(g.MemTotalMiB)/1024)
	if g.TempC != nil {
		c.temp = fmt.Sprintf("%.0f °C", *g.TempC)
	}
	if g.PowerW != nil {
		c.power = fmt.Sprintf("%.0f W", *g.PowerW)
		if g.PowerLimitW != nil {
			c.power += fmt.Sprintf(" / %.0f W", *g.PowerLimitW)
		}
	}
	var owners []string
	seen := map[string]bool{}
	for _, p := range g.Processes {
		name := "another process"
		if p.Owner != nil {
			name = p.Owner.String()
		}
		if !seen[name] {
			seen[name] = true
			owners = append(owners, name)
		}
	}
	if len(owners) == 0 {
		c.runs = "idle"
	} else {
		c.runs = "on it: " + strings.Join(owners, ", ")
	}
	if !g.Healthy && g.HealthReason != "" {
		c.health = g.HealthReason
	}
	return c
}

// Board is the home screen: a card per GPU and the active runs, live.
type Board struct {
	backend Backend
	content fyne.CanvasObject

	source *widget.Label
	cards  *fyne.Container
	empty  *fyne.Container
	emptyT *widget.Label
	counts *widget.Label
	list   *widget.List
	noRuns *widget.Label

	mu    sync.Mutex // guards queue, read by list callbacks
	queue []queueItem
	views []*gpuCardView
	hist  map[string][]float64 // utilisation history per GPU UUID, for the sparklines

	// OnOpen, when set, is called with a run's ID when the user picks it.
	OnOpen func(id string)
}

// NewBoard builds the board; call Reload (from any goroutine) to fill it.
func NewBoard(b Backend) *Board {
	v := &Board{backend: b, hist: map[string][]float64{}}
	v.source = widget.NewLabel("")
	v.source.Importance = widget.LowImportance
	v.cards = container.NewGridWrap(fyne.NewSize(360, 224))
	v.emptyT = widget.NewLabel("")
	v.emptyT.Wrapping = fyne.TextWrapWord
	hint := widget.NewLabel(simulateHint)
	hint.Wrapping = fyne.TextWrapWord
	hint.Importance = widget.LowImportance
	v.empty = container.NewVBox(
		widget.NewLabelWithStyle("No GPUs on this machine", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		v.emptyT, hint)
	v.empty.Hide()
	v.counts = widget.NewLabel("")
	v.counts.Importance = widget.LowImportance
	v.noRuns = widget.NewLabel("Nothing running or waiting. Launch a run with New run (Ctrl+N).")
	v.list = widget.NewList(v.queueLen, newQueueRow, v.updateQueueRow)
	v.list.OnSelected = func(i widget.ListItemID) {
		v.mu.Lock()
		var id string
		if i < len(v.queue) {
			id = v.queue[i].id
		}
		v.mu.Unlock()
		v.list.UnselectAll()
		if id != "" && v.OnOpen != nil {
			v.OnOpen(id)
		}
	}
	top := container.NewVBox(
		container.NewHBox(title("GPUs"), layout.NewSpacer(), v.source),
		v.cards, v.empty,
		container.NewHBox(title("Queue"), layout.NewSpacer(), v.counts),
		v.noRuns,
	)
	v.content = container.NewPadded(container.NewBorder(top, nil, nil, nil, v.list))
	return v
}

// Content is the board's root object.
func (v *Board) Content() fyne.CanvasObject { return v.content }

func title(s string) fyne.CanvasObject {
	t := canvas.NewText(s, theme.Color(theme.ColorNameForeground))
	t.TextSize = theme.TextSubHeadingSize()
	t.TextStyle = fyne.TextStyle{Bold: true}
	return t
}

// Reload reads the GPUs and the runs and shows them; it blocks while
// reading and updates the widgets on Fyne's thread.
func (v *Board) Reload(ctx context.Context) {
	m := v.read(ctx)
	fyne.Do(func() { v.apply(m) })
}

// read asks the engine for everything one refresh shows. Metrics and
// anomalies are read for running runs only: waiting runs have none.
func (v *Board) read(ctx context.Context) boardModel {
	snap, gerr := v.backend.GPUs(ctx)
	runs, rerr := v.backend.Runs(ctx, listLimit)
	last := map[string][]engine.Point{}
	anomalies := map[string][]engine.AnomalyInfo{}
	for _, r := range runs {
		if r.State != engine.Running {
			continue
		}
		last[r.ID], _ = v.backend.LastMetrics(ctx, r.ID)
		anomalies[r.ID], _ = v.backend.Anomalies(ctx, r.ID)
	}
	m := buildBoard(snap, runs, last, anomalies, time.Now())
	m.gpuErr, m.runErr = gerr, rerr
	return m
}

func (v *Board) apply(m boardModel) {
	switch {
	case m.gpuErr != nil:
		v.source.SetText("GPU telemetry failed")
	case m.snap.Simulated:
		v.source.SetText(m.snap.Driver)
	case m.snap.Driver != "":
		v.source.SetText("NVIDIA driver " + m.snap.Driver)
	default:
		v.source.SetText("")
	}
	if len(m.cards) == 0 {
		reason := m.snap.Reason
		if m.gpuErr != nil {
			reason = "Reading the GPUs failed: " + m.gpuErr.Error()
		}
		if reason == "" {
			reason = "No GPU was found."
		}
		v.emptyT.SetText(reason)
		v.empty.Show()
		v.cards.Hide()
	} else {
		v.empty.Hide()
		v.cards.Show()
	}
	// Cards are kept and updated in place so a refresh allocates little.
	for len(v.views) < len(m.cards) {
		v.views = append(v.views, newGPUCardView())
	}
	if len(v.cards.Objects) != len(m.cards) {
		objs := make([]fyne.CanvasObject, len(m.cards))
		for i := range m.cards {
			objs[i] = v.views[i].root
		}
		v.cards.Objects = objs
		v.cards.Refresh()
	}
	for i, c := range m.cards {
		h := append(v.hist[c.uuid], c.util)
		if len(h) > sparkSamples {
			h = h[len(h)-sparkSamples:]
		}
		v.hist[c.uuid] = h
		v.views[i].set(c, h)
	}

	v.mu.Lock()
	v.queue = m.queue
	v.mu.Unlock()
	if m.runErr != nil {
		v.counts.SetText("Could not read runs: " + m.runErr.Error())
	} else {
		v.counts.SetText(m.counts)
	}
	if len(m.queue) == 0 {
		v.noRuns.Show()
	} else {
		v.noRuns.Hide()
	}
	v.list.Refresh()
}

func (v *Board) queueLen() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.queue)
}

func (v *Board) updateQueueRow(i widget.ListItemID, o fyne.CanvasObject) {
	v.mu.Lock()
	if i >= len(v.queue) {
		v.mu.Unlock()
		return
	}
	it := v.queue[i]
	v.mu.Unlock()
	o.(*queueRow).set(it)
}

// gpuCardView draws one GPU.
type gpuCardView struct {
	root   fyne.CanvasObject
	bg     *canvas.Rectangle
	title  *widget.Label
	sim    fyne.CanvasObject
	util   *meter
	mem    *meter
	stats  *widget.Label
	spark  *canvas.Raster
	hist   []float64 // drawn by spark
	runs   *widget.Label
	health *widget.Label
	utilT  string
	memT   string
}

func newGPUCardView() *gpuCardView {
	c := &gpuCardView{}
	c.bg = canvas.NewRectangle(themeColor(colorNameCard))
	c.bg.CornerRadius = 10
	c.bg.StrokeColor = themeColor(colorNameTrack)
	c.bg.StrokeWidth = 1
	c.title = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	c.title.Truncation = fyne.TextTruncateEllipsis
	c.sim = tag("simulated", accent)
	c.util = newMeter()
	c.mem = newMeter()
	c.stats = widget.NewLabel("")
	c.spark = canvas.NewRaster(func(w, h int) image.Image { return sparkline(c.hist, w, h, accent) })
	c.spark.SetMinSize(fyne.NewSize(100, 26))
	c.runs = widget.NewLabel("")
	c.runs.Truncation = fyne.TextTruncateEllipsis
	c.health = widget.NewLabel("")
	c.health.Importance = widget.DangerImportance
	c.health.Hide()
	body := container.NewVBox(
		container.NewBorder(nil, nil, nil, container.NewCenter(c.sim), c.title),
		c.util, c.mem,
		container.NewHBox(c.stats, layout.NewSpacer(), c.health),
		c.spark,
		c.runs,
	)
	c.root = container.NewStack(c.bg, container.NewPadded(body))
	return c
}

func (c *gpuCardView) set(m gpuCardModel, hist []float64) {
	c.hist = hist
	c.spark.Refresh()
	c.title.SetText(m.title)
	if m.simulated {
		c.sim.Show()
	} else {
		c.sim.Hide()
	}
	c.utilT, c.memT = m.utilText, m.memText
	c.util.Set(m.util, m.utilText)
	c.mem.Set(m.mem, m.memText)
	c.stats.SetText(m.temp + " · " + m.power)
	c.runs.SetText(m.runs)
	if m.health != "" {
		c.health.SetText(m.health)
		c.health.Show()
	} else {
		c.health.Hide()
	}
}

func clamp01(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return math.Max(0, math.Min(1, x))
}

// queueRow is one active run on the board: its template and ID, its
// stages as chips, and what it is doing or why it waits.
type queueRow struct {
	widget.BaseWidget
	title  *widget.Label
	id     *widget.Label
	chips  *fyne.Container
	badge  *fyne.Container
	detail *widget.Label
	box    fyne.CanvasObject
}

func newQueueRow() fyne.CanvasObject {
	r := &queueRow{
		title:  widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		id:     widget.NewLabel(""),
		chips:  container.NewHBox(),
		badge:  container.NewHBox(),
		detail: widget.NewLabel(""),
	}
	r.id.Importance = widget.LowImportance
	r.detail.Truncation = fyne.TextTruncateEllipsis
	head := container.NewBorder(nil, nil, container.NewHBox(r.title, r.id), container.NewHBox(r.badge, r.chips))
	r.box = container.NewVBox(head, r.detail)
	r.ExtendBaseWidget(r)
	return r
}

func (r *queueRow) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(r.box) }

func (r *queueRow) set(it queueItem) {
	r.title.SetText(it.template)
	r.id.SetText(it.id)
	r.chips.Objects = stageChips(it.stages)
	r.chips.Refresh()
	var badges []fyne.CanvasObject
	if it.anomalies > 0 {
		col := stateColor(engine.Cancelled)
		if it.critical {
			col = stateColor(engine.Failed)
		}
		noun := "anomaly"
		if it.anomalies > 1 {
			noun = "anomalies"
		}
		badges = append(badges, container.NewCenter(tag(fmt.Sprintf("⚠ %d %s", it.anomalies, noun), col)))
	}
	r.badge.Objects = badges
	r.badge.Refresh()
	if it.state == engine.Queued {
		r.detail.Importance = widget.WarningImportance
		r.detail.SetText("waiting — " + it.detail)
	} else {
		r.detail.Importance = widget.MediumImportance
		r.detail.SetText(it.detail)
	}
}
