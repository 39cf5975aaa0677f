package ui

import (
	"context"
	"fmt"
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
	// processMode: how the stages' processes are found and limited
	// ("" when the backend does not say).
	processMode string
	runErr      error
	cards       []gpuCardModel
	queue       []queueItem
	recent      []finishedItem
	procs       []procRow
	counts      string // "3 running · 2 waiting"
	// machine is who shares this machine, from the machine service
	// (machineModel.shared false: a single user's).
	machine machineModel
	others  []otherRow // other users' stages on the machine and in its queue
}

// gpuCardModel is one GPU card's content.
type gpuCardModel struct {
	uuid      string
	title     string // "GPU 0 · NVIDIA A100-SXM4-80GB"
	util      float64
	utilText  string
	mem       float64 // 0..1
	memText   string
	memUsed   int64 // MiB
	memTotal  int64 // MiB
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
	detail       string  // the shepherd's reason for a waiting run; elapsed and objective for a running one
	waits        bool    // a running run whose next stage waits for GPUs
	idle         bool    // and none of its stages runs: it waits, to the user
	params       string  // the parameters that tell it apart (within its sweep)
	progress     float64 // 0..1 when the workload reports its total steps, else -1
	anomalies    int
	critical     bool
}

// finishedItem is a recently finished run on the board's strip.
type finishedItem struct {
	id, template string
	state        engine.State
	result       string // "val_acc 0.973", or why it failed
	at           time.Time
}

// buildBoard turns a GPU snapshot and the runs into what the board draws.
// Only queued and running runs are on the board (the archive holds the
// rest); running first, then waiting, oldest first.
func buildBoard(snap gpumon.Snapshot, runs []engine.RunInfo, last map[string][]engine.Point, anomalies map[string][]engine.AnomalyInfo, now time.Time) boardModel {
	m := boardModel{snap: snap}
	for _, g := range snap.GPUs {
		m.cards = append(m.cards, gpuCard(g, snap.Simulated))
	}
	differ := sweepDiffers(runs)
	var running, waiting int
	for _, r := range runs {
		if r.State.Done() {
			continue
		}
		it := queueItem{id: r.ID, template: r.Template, state: r.State, stages: r.Stages, progress: -1}
		keep, inSweep := differ[r.ID]
		if !inSweep {
			keep = nil
		}
		it.params = strings.Join(paramPairs(r.Params, keep), " · ")
		if r.State == engine.Queued {
			waiting++
			it.detail = waitReason(r, now)
		} else {
			parts := []string{"running " + elapsedText(r, now)}
			if p, text, ok := progressOf(last[r.ID]); ok {
				it.progress = p
				parts = append(parts, text)
			}
			if v, ok := latestObjective(last[r.ID]); ok {
				parts = append(parts, v)
			}
			if w := waitReason(r, now); w != "" && w != "queued" {
				parts = append(parts, "waits: "+w)
				it.waits = true
			}
			it.detail = strings.Join(parts, " · ")
			// The engine calls a run running from its first stage on;
			// one with no stage running and the next waiting for a GPU
			// is waiting to the user, and the count says so.
			if it.waits && !stageRunning(r) {
				it.idle = true
				waiting++
			} else {
				running++
			}
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
	// Running first, then waiting (a run between stages waiting for a
	// GPU too, as the count says).
	active := func(it queueItem) bool { return it.state == engine.Running && !it.idle }
	sort.SliceStable(m.queue, func(i, j int) bool {
		if active(m.queue[i]) != active(m.queue[j]) {
			return active(m.queue[i])
		}
		return false
	})
	m.counts = fmt.Sprintf("%d running · %d waiting", running, waiting)
	return m
}

// stageRunning reports whether any of a run's stages is running now.
func stageRunning(r engine.RunInfo) bool {
	for _, s := range r.Stages {
		if s.State == engine.Running {
			return true
		}
	}
	return false
}

// progressOf is how far a run is, from the stage that reports its total:
// "train step 12/30".
func progressOf(last []engine.Point) (float64, string, bool) {
	for _, p := range last {
		if p.Key != engine.TotalStepsKey || !(p.Value > 0) {
			continue
		}
		step := p.Step
		for _, q := range last {
			if q.Stage == p.Stage && q.Attempt == p.Attempt && q.Step > step {
				step = q.Step
			}
		}
		total := int64(p.Value)
		return clamp01(float64(step) / float64(total)), fmt.Sprintf("%s step %d/%d", p.Stage, step, total), true
	}
	return 0, "", false
}

// recentWindow is how long a finished run stays on the board's strip.
const recentWindow = 6 * time.Hour

// maxRecent is how many finished runs the strip shows.
const maxRecent = 8

// recentRuns are the runs that finished in the last hours, newest first.
func recentRuns(runs []engine.RunInfo, now time.Time) []engine.RunInfo {
	var out []engine.RunInfo
	for _, r := range runs {
		if r.State.Done() && !r.FinishedAt.IsZero() && now.Sub(r.FinishedAt) < recentWindow {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].FinishedAt.After(out[j].FinishedAt) })
	if len(out) > maxRecent {
		out = out[:maxRecent]
	}
	return out
}

// waitReason is why a run (or its next stage) waits, in the shepherd's
// words when it gave one (a reason with a code; waiting for an earlier
// stage has none).
func waitReason(r engine.RunInfo, now time.Time) string {
	for _, s := range r.Stages {
		if s.State == engine.Queued && s.Reason != "" && s.ReasonCode != "" {
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
	c.memUsed, c.memTotal = g.MemUsedMiB, g.MemTotalMiB
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

// Board is the home screen, nvitop's view with the runs: a card per GPU
// (utilisation and memory now and over the last minutes, on a time axis),
// the processes on the GPUs and whose they are, the active runs with
// their progress and why they wait, and the runs that finished lately.
type Board struct {
	backend Backend
	content fyne.CanvasObject

	source      *widget.Label
	window      *widget.Select // history: 5, 15 or 60 minutes
	cards       *fyne.Container
	empty       *fyne.Container
	emptyT      *widget.Label
	procs       *procTable
	counts      *widget.Label
	list        *widget.List
	noRuns      *widget.Label
	recent      *fyne.Container
	recentT     *widget.Label
	gpuBox      *fyne.Container // the cards, the note without GPUs, the processes
	cardsLayout *cardsLayout
	queueBox    *fyne.Container // the queue's heading, list and strip
	machineT    *widget.Label   // single user, or who shares the machine
	others      *fyne.Container // other users' stages (a shared machine)
	othersRows  *fyne.Container
	shape       string // what gpuBox showed last: laid out again when it changes

	mu      sync.Mutex // guards queue and the caches, read by list callbacks and reloads
	queue   []queueItem
	views   []*gpuCardView
	hist    map[string][]gpumon.Point // the board's own history per GPU, when the sampler's is not given
	span    time.Duration             // the history window
	results map[string]string         // a finished run's result line, read once

	// OnOpen, when set, is called with a run's ID when the user picks it.
	OnOpen func(id string)
	// History, when set, is the sampler's history of a GPU (oldest first).
	History func(uuid string) []gpumon.Point
	// ProcessInfo, when set, names a GPU process' user and command.
	ProcessInfo func(pid int) (user, command string)
	// Objective, when set, is a template's objective, for the results of
	// finished runs.
	Objective func(template string) (metric, goal string)
}

// historySpans are the history windows to choose from.
var historySpans = []struct {
	name string
	d    time.Duration
}{{"last 5 min", 5 * time.Minute}, {"last 15 min", 15 * time.Minute}, {"last 60 min", time.Hour}}

// NewBoard builds the board; call Reload (from any goroutine) to fill it.
func NewBoard(b Backend) *Board {
	v := &Board{backend: b, hist: map[string][]gpumon.Point{}, span: historySpans[0].d, results: map[string]string{}}
	v.source = widget.NewLabel("")
	v.source.Importance = widget.LowImportance
	names := make([]string, len(historySpans))
	for i, h := range historySpans {
		names[i] = h.name
	}
	v.window = widget.NewSelect(names, func(s string) {
		for _, h := range historySpans {
			if h.name == s {
				v.mu.Lock()
				v.span = h.d
				v.mu.Unlock()
			}
		}
		for _, c := range v.views {
			c.setSpan(v.span)
		}
	})
	v.window.Selected = names[0]
	v.cardsLayout = &cardsLayout{min: 340, height: 262}
	v.cards = container.New(v.cardsLayout)
	v.emptyT = widget.NewLabel("")
	v.emptyT.Wrapping = fyne.TextWrapWord
	hint := widget.NewLabel(simulateHint)
	hint.Wrapping = fyne.TextWrapWord
	hint.Importance = widget.LowImportance
	v.empty = container.NewVBox(
		widget.NewLabelWithStyle("No GPUs on this machine", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		v.emptyT, hint)
	v.empty.Hide()
	v.procs = newProcTable()
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
	v.recent = container.NewHBox()
	v.recentT = widget.NewLabel("Recently finished")
	v.recentT.TextStyle = fyne.TextStyle{Bold: true}
	v.machineT = widget.NewLabel(singleUser)
	v.machineT.Wrapping = fyne.TextWrapWord
	v.machineT.Importance = widget.LowImportance
	v.othersRows = container.NewVBox()
	v.others = container.NewVBox(widget.NewLabelWithStyle("Other users' runs", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		container.New(&widthsLayout{widths: otherColumns}, boldLabels("user", "run", "name", "stage", "GPUs", "state")...),
		widget.NewSeparator(), v.othersRows)
	v.others.Hide()
	gpus := container.NewVBox(
		container.NewHBox(title("GPUs"), layout.NewSpacer(), v.source, v.window),
		v.machineT, v.cards, v.empty, v.procs.content, v.procs.mode,
	)
	v.gpuBox = gpus
	v.queueBox = container.NewBorder(
		container.NewVBox(container.NewHBox(title("Queue"), layout.NewSpacer(), v.counts), v.noRuns),
		container.NewVBox(v.others, widget.NewSeparator(), container.NewBorder(nil, nil, v.recentT, nil, container.NewHScroll(v.recent))),
		nil, nil, v.list)
	split := container.NewVSplit(container.NewVScroll(gpus), v.queueBox)
	header := gpus.Objects[0]
	queueTop, queueBottom := v.queueBox.Objects[0], v.queueBox.Objects[1]
	row := newQueueRow().MinSize().Height
	fit := &boardSplit{split: split, set: split.Offset, top: func(height float32) float32 {
		pad := theme.Padding()
		first := header.MinSize().Height + 3*pad + v.cardsLayout.height // the title and a row of cards
		if v.empty.Visible() {
			first = header.MinSize().Height + 3*pad + v.empty.MinSize().Height
		}
		queue := queueTop.MinSize().Height + queueBottom.MinSize().Height + 3*row + 2*pad // three runs
		return max(min(gpus.MinSize().Height+pad, height-queue), first)
	}}
	v.content = container.NewPadded(container.New(fit, split))
	return v
}

// boardSplit sizes the board's split: the GPU pane gets all it shows
// (cards and process table) while the queue, which a researcher watches
// all day, keeps room for three runs; when the window is too small for
// both, the title and first row of cards, and the queue the rest. Within
// bounds, and until the user drags the divider.
type boardSplit struct {
	split *container.Split
	top   func(height float32) float32 // the height the GPU pane wants, of height
	set   float64                      // the offset it last set: another is the user's
}

func (l *boardSplit) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	if l.split.Offset == l.set && size.Height > 0 {
		want := float64(min(max(l.top(size.Height)/size.Height, 0.2), 0.75))
		if want != l.set {
			l.set, l.split.Offset = want, want
			defer l.split.Refresh()
		}
	}
	for _, o := range objs {
		o.Move(fyne.NewPos(0, 0))
		o.Resize(size)
	}
}

func (l *boardSplit) MinSize(objs []fyne.CanvasObject) fyne.Size { return objs[0].MinSize() }

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
	onUI(func() { v.apply(m) })
}

// read asks the engine for everything one refresh shows. Metrics and
// anomalies are read for running runs only: waiting runs have none. A
// finished run's result is read once.
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
	now := time.Now()
	m := buildBoard(snap, runs, last, anomalies, now)
	addETAs(&m, readETAs(ctx, v.backend, &m))
	m.gpuErr, m.runErr = gerr, rerr
	for _, r := range recentRuns(runs, now) {
		m.recent = append(m.recent, finishedItem{id: r.ID, template: r.Template, state: r.State, result: v.result(ctx, r), at: r.FinishedAt})
	}
	var usage map[[2]string]engine.StageUsage
	if hu, ok := v.backend.(hostUsage); ok {
		usage = map[[2]string]engine.StageUsage{}
		for _, u := range hu.Usage() {
			usage[[2]string{u.RunID, u.Stage}] = u
		}
	}
	m.procs = processRows(snap, v.ProcessInfo, usage)
	m.machine = readMachine(ctx, v.backend)
	if m.machine.shared && m.machine.err == nil {
		m.procs = otherProcRows(m.machine.status, m.procs)
		m.others = otherRows(m.machine.status)
		shareCards(m.cards, m.machine.status, snap.Simulated)
	}
	if pm, ok := v.backend.(processMode); ok {
		m.processMode = pm.ProcessMode()
	}
	return m
}

// result is a finished run's line on the strip: its objective's best
// value, or its first error.
func (v *Board) result(ctx context.Context, r engine.RunInfo) string {
	v.mu.Lock()
	res, ok := v.results[r.ID]
	v.mu.Unlock()
	if ok {
		return res
	}
	metric, goal := "", ""
	if v.Objective != nil {
		metric, goal = v.Objective(r.Template)
	}
	last, _ := v.backend.LastMetrics(ctx, r.ID)
	for _, p := range last {
		if p.Key != metric || metric == "" {
			continue
		}
		best, has := p.Value, false
		if pts, err := v.backend.Series(ctx, r.ID, p.Stage, p.Key); err == nil {
			for _, q := range pts {
				if math.IsNaN(q.Value) || math.IsInf(q.Value, 0) {
					continue
				}
				if !has || (goal == "max" && q.Value > best) || (goal != "max" && q.Value < best) {
					best, has = q.Value, true
				}
			}
		}
		res = fmt.Sprintf("%s %s", metric, formatValue(best))
	}
	if res == "" {
		if s, ok := latestObjective(last); ok {
			res = s
		}
	}
	if r.State == engine.Failed && r.Error != "" {
		res = joinNonEmpty(" · ", res, firstLine(r.Error))
	}
	v.mu.Lock()
	v.results[r.ID] = res
	v.mu.Unlock()
	return res
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
		v.window.Hide()
	} else {
		v.empty.Hide()
		v.cards.Show()
		v.window.Show()
	}
	// Cards are kept and updated in place so a refresh allocates little.
	for len(v.views) < len(m.cards) {
		c := newGPUCardView()
		c.setSpan(v.span)
		v.views = append(v.views, c)
	}
	if len(v.cards.Objects) != len(m.cards) {
		objs := make([]fyne.CanvasObject, len(m.cards))
		for i := range m.cards {
			objs[i] = v.views[i].root
		}
		v.cards.Objects = objs
		v.cards.Refresh()
	}
	at := m.snap.At
	if at.IsZero() {
		at = time.Now()
	}
	for i, c := range m.cards {
		var h []gpumon.Point
		if v.History != nil {
			h = v.History(c.uuid)
		} else {
			// No sampler: keep what the board has seen.
			h = append(v.hist[c.uuid], gpumon.Point{At: at, Util: float32(c.util * 100), MemUsedMiB: c.memUsed})
			if cut := len(h) - int(time.Hour/time.Second); cut > 0 {
				h = h[cut:]
			}
			v.hist[c.uuid] = h
		}
		v.views[i].set(c, h, at)
	}
	v.procs.set(m.procs, len(m.cards) > 0)
	v.procs.setMode(m.processMode)
	v.machineT.SetText(machineLine(m.machine))
	v.showOthers(m.others)
	cols := v.cardsLayout.columns(max(1, len(m.cards)), v.cards.Size().Width)
	if shape := fmt.Sprint(len(m.cards), len(m.procs), m.gpuErr != nil, cols, len(m.others)); shape != v.shape {
		v.shape = shape
		v.gpuBox.Refresh() // what is shown changed: lay it out again
	}

	v.mu.Lock()
	v.queue = m.queue
	v.mu.Unlock()
	if m.runErr != nil {
		v.counts.SetText("Could not read runs: " + m.runErr.Error())
	} else {
		v.counts.SetText(m.counts)
	}
	if empty := len(m.queue) == 0; empty != v.noRuns.Visible() {
		if empty {
			v.noRuns.Show()
		} else {
			v.noRuns.Hide()
		}
		v.queueBox.Refresh() // the list moves up or down
	}
	v.list.Refresh()
	v.showRecent(m.recent)
}

// showRecent fills the strip of recently finished runs.
func (v *Board) showRecent(items []finishedItem) {
	var objs []fyne.CanvasObject
	for _, it := range items {
		id := it.id
		text := it.template + " · " + shortID(it.id)
		if it.result != "" {
			text += " · " + it.result
		}
		btn := widget.NewButton(text, func() {
			if v.OnOpen != nil {
				v.OnOpen(id)
			}
		})
		btn.Importance = widget.LowImportance
		objs = append(objs, container.NewHBox(container.NewCenter(chip(string(it.state), it.state)), btn))
	}
	if len(objs) == 0 {
		hint := widget.NewLabel("none in the last 6 hours")
		hint.Importance = widget.LowImportance
		objs = append(objs, hint)
	}
	v.recent.Objects = objs
	v.recent.Refresh()
}

// shortID drops a run ID's date ("194640-5e1879" of "20261129-194640-5e1879").
func shortID(id string) string {
	if _, rest, ok := strings.Cut(id, "-"); ok && strings.Contains(rest, "-") {
		return rest
	}
	return id
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

// cardsLayout puts the GPU cards in as many columns of at least min points
// as the width takes (no more than there are cards), filling the width;
// a lone card stays at most 1.6 × min wide.
type cardsLayout struct {
	min, height float32
	width       float32 // the width last laid out at, for MinSize's rows
}

func (l *cardsLayout) columns(n int, width float32) int {
	gap := theme.Padding()
	return max(1, min(n, int((width+gap)/(l.min+gap))))
}

func (l *cardsLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	if len(objs) == 0 {
		return
	}
	gap := theme.Padding()
	l.width = size.Width
	cols := l.columns(len(objs), size.Width)
	w := (size.Width - gap*float32(cols-1)) / float32(cols)
	if len(objs) == 1 {
		w = min(w, l.min*1.6) // a lone card does not stretch across a wide screen
	}
	// Several fill the width (on a wide screen they half-filled it,
	// leaving their history charts small beside an empty half).
	for i, o := range objs {
		o.Move(fyne.NewPos(float32(i%cols)*(w+gap), float32(i/cols)*(l.height+gap)))
		o.Resize(fyne.NewSize(w, l.height))
	}
}

func (l *cardsLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	if len(objs) == 0 {
		return fyne.NewSize(0, 0)
	}
	// As many rows as the last width needed (the board lays itself out
	// again when that changes; see Board.apply).
	cols := l.columns(len(objs), max(l.width, l.min))
	rows := (len(objs) + cols - 1) / cols
	return fyne.NewSize(l.min, float32(rows)*l.height+float32(rows-1)*theme.Padding())
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
	hist   *historyChart
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
	c.hist = newHistoryChart()
	c.runs = widget.NewLabel("")
	c.runs.Truncation = fyne.TextTruncateEllipsis
	c.health = widget.NewLabel("")
	c.health.Importance = widget.DangerImportance
	c.health.Hide()
	body := container.NewBorder(
		container.NewVBox(
			container.NewBorder(nil, nil, nil, container.NewCenter(c.sim), c.title),
			c.util, c.mem,
			container.NewHBox(c.stats, layout.NewSpacer(), c.health)),
		c.runs, nil, nil,
		c.hist,
	)
	c.root = container.NewStack(c.bg, container.NewPadded(body))
	return c
}

func (c *gpuCardView) setSpan(d time.Duration) { c.hist.setSpan(d) }

func (c *gpuCardView) set(m gpuCardModel, hist []gpumon.Point, now time.Time) {
	c.hist.set(hist, m.memTotal, now)
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

// queueRow is one active run on the board: its template and ID, the
// parameters that tell it apart, its stages, a progress bar when the
// workload reports its total, and what it is doing or why it waits.
type queueRow struct {
	widget.BaseWidget
	title    *widget.Label
	id       *widget.Label
	chips    *stageStrip
	badge    *fyne.Container
	detail   *widget.Label
	params   *widget.Label
	progress *widget.ProgressBar
	head     *fyne.Container
	box      fyne.CanvasObject
}

func newQueueRow() fyne.CanvasObject {
	r := &queueRow{
		title:    widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		id:       widget.NewLabel(""),
		chips:    newStageStrip(),
		badge:    container.NewHBox(),
		detail:   widget.NewLabel(""),
		params:   widget.NewLabel(""),
		progress: widget.NewProgressBar(),
	}
	r.id.Importance = widget.LowImportance
	r.detail.Truncation = fyne.TextTruncateEllipsis
	r.params.Truncation = fyne.TextTruncateEllipsis
	r.params.Importance = widget.LowImportance
	r.params.SizeName = theme.SizeNameCaptionText
	r.progress.TextFormatter = func() string { return "" }
	r.head = container.New(&headLayout{strip: r.chips}, container.NewHBox(r.badge), container.NewHBox(r.title, r.id), r.chips)
	bar := container.NewGridWrap(fyne.NewSize(140, 12), r.progress)
	r.box = container.NewVBox(r.head, container.NewBorder(nil, nil, container.NewCenter(bar), nil, r.detail), r.params)
	r.ExtendBaseWidget(r)
	return r
}

func (r *queueRow) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(r.box) }

func (r *queueRow) set(it queueItem) {
	r.title.SetText(it.template)
	r.id.SetText(it.id)
	r.chips.set(it.stages)
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
	switch {
	case it.state == engine.Queued:
		r.detail.Importance = widget.WarningImportance
		r.detail.SetText("waiting — " + it.detail)
	case it.waits:
		r.detail.Importance = widget.WarningImportance
		r.detail.SetText(it.detail)
	default:
		r.detail.Importance = widget.MediumImportance
		r.detail.SetText(it.detail)
	}
	if it.progress >= 0 {
		r.progress.SetValue(it.progress)
		r.progress.Show()
	} else {
		r.progress.Hide()
	}
	r.params.SetText(it.params)
	if it.params == "" {
		r.params.Hide()
	} else {
		r.params.Show()
	}
	r.head.Refresh()
}
