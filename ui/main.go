package ui

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/gpumon"
)

// Backend is what the window needs from the engine. *engine.Engine
// satisfies it; tests may too.
type Backend interface {
	Runs(ctx context.Context, limit int) ([]engine.RunInfo, error)
	Run(ctx context.Context, id string) (engine.RunInfo, error)
	LastMetrics(ctx context.Context, runID string) ([]engine.Point, error)
	Anomalies(ctx context.Context, runID string) ([]engine.AnomalyInfo, error)
	Subscribe(buf int) *engine.Subscription
	Submit(ctx context.Context, spec engine.RunSpec) (engine.RunInfo, error)
	Cancel(ctx context.Context, id string) error
	// Series is one metric's points of a run from its latest attempt,
	// and AttemptSeries the same from every attempt (ordered by attempt,
	// then step), for the run view's curves.
	Series(ctx context.Context, runID, stage, key string) ([]engine.Point, error)
	AttemptSeries(ctx context.Context, runID, stage, key string) ([]engine.Point, error)
	// GPUs is the machine's GPUs now, for the board.
	GPUs(ctx context.Context) (gpumon.Snapshot, error)
	// Executors names the executors a run can be launched on.
	Executors() []string
	// Dismiss marks one of a run's anomalies as seen.
	Dismiss(ctx context.Context, runID string, anomalyID int64) error
	// Provenance is the fingerprint a run of spec would have, and
	// FindDuplicate the succeeded run that already has it, if any: the
	// wizard warns before launching a run that was already done.
	Provenance(ctx context.Context, spec engine.RunSpec) (engine.Provenance, error)
	FindDuplicate(ctx context.Context, fingerprint string) (engine.RunInfo, bool, error)
	// Archive is every run with the best value of its objective, for the
	// archive table.
	Archive(ctx context.Context) ([]engine.ArchiveEntry, error)
	// DeleteRun removes a finished run and its folder.
	DeleteRun(ctx context.Context, id string) error
	// LogTail is the last lines of one attempt's stdout and stderr, for
	// the run view's log pane.
	LogTail(ctx context.Context, runID, stage string, attempt, lines int) (string, error)
}

// gpuHistory is how the run view learns how a run used its GPUs; the
// engine has it. A Backend without it shows no GPU summary.
type gpuHistory interface {
	GPUUsage(ctx context.Context, runID string) ([]engine.GPUUsage, error)
}

// listLimit bounds the runs the window lists; the archive view will page.
const listLimit = 500

// MainView is the Runs page: the runs, live, grouped by sweep, and the
// selected run's view.
type MainView struct {
	backend Backend
	win     fyne.Window
	// tasks are the view's goroutines (its refresher, a cancel's or a
	// dismissal's call, a report's export); Close ends them.
	tasks tasks

	list    *widget.List
	detail  *runDetail
	status  *widget.Label
	newRun  *widget.Button
	cancel  *widget.Button
	export  *widget.Button
	clone   *widget.Button
	cols    *widget.Button  // Columns…: the parameter columns
	colHead *fyne.Container // the columns' titles over the list
	content fyne.CanvasObject
	selInfo *engine.RunInfo // the selected run as last read, for Clone

	// OnClone, when set, opens the wizard prefilled from a run; the
	// "Clone…" button shows only then.
	OnClone func(engine.RunInfo)
	// OnNewRun opens the launch wizard ("New run…"); without it the
	// button is disabled.
	OnNewRun func()
	mu       sync.Mutex       // guards rows, runs and selected, read by list callbacks
	runs     []engine.RunInfo // the runs listed: all of them, filtered
	rows     []runsItem       // what the list shows: sweep headers and runs
	all      []engine.RunInfo // every run read
	folded   map[string]bool  // sweeps whose runs are hidden under their header
	selected string
	// syncing is set while keepHighlight moves the list's highlight to
	// the open run's row (on Fyne's thread), so that is not taken for a
	// click.
	syncing  bool
	query    *keyEntry      // search: template, ID or parameter text
	stateSel *widget.Select // filter by state
	metric   string         // the curve the user picked, "stage/key"
	curves   curveCache
	logStage string   // the stage whose log the user picked
	logs     logCache // the last log tail read
	fails    failCache
	sentinel sentinelCache
	changes  map[string]sentinelChange // the runs the sentinel changed, by ID
	columns  []string                  // the parameter columns chosen (none: what differs)

	reloads chan struct{}

	// Export: set by SetReportExporter; saveDialog is a seam for tests,
	// exported (when set) receives the outcome of each export.
	exporter     ReportExporter
	saveDialog   func(name string, cb func(fyne.URIWriteCloser, error))
	exportDialog *dialog.FormDialog
	exportForm   exportForm
	exported     chan error
}

// NewMainView builds the Runs page. Call Start to make it live.
func NewMainView(b Backend, win fyne.Window) *MainView {
	v := &MainView{backend: b, win: win, reloads: make(chan struct{}, 1), folded: map[string]bool{}}
	v.status = widget.NewLabel("")
	v.status.Truncation = fyne.TextTruncateEllipsis
	v.newRun = widget.NewButtonWithIcon("New run…", theme.ContentAddIcon(), func() {
		if v.OnNewRun != nil {
			v.OnNewRun()
		}
	})
	v.newRun.Importance = widget.HighImportance
	v.cancel = widget.NewButtonWithIcon("Cancel run", theme.CancelIcon(), v.onCancel)
	v.cancel.Disable()
	v.export = widget.NewButtonWithIcon("Export report…", theme.DocumentSaveIcon(), v.onExport)
	v.export.Disable()
	v.saveDialog = v.showSaveDialog
	v.clone = widget.NewButtonWithIcon("Clone…", theme.ContentCopyIcon(), func() {
		if v.selInfo != nil && v.OnClone != nil {
			v.OnClone(*v.selInfo)
		}
	})
	v.clone.Disable()
	v.detail = newRunDetail()
	v.detail.onDismiss = v.onDismiss
	v.detail.onMetric = func(name string) {
		v.mu.Lock()
		v.metric = name
		v.mu.Unlock()
		v.requestReload()
	}
	v.detail.onLogStage = func(stage string) {
		v.mu.Lock()
		v.logStage = stage
		v.mu.Unlock()
		v.requestReload()
	}
	v.list = widget.NewList(v.listLen, newRunRow, v.updateRow)
	v.list.OnSelected = func(i widget.ListItemID) {
		if v.syncing {
			return // keepHighlight moving the highlight, not a click
		}
		v.mu.Lock()
		var it runsItem
		if i < len(v.rows) {
			it = v.rows[i]
		}
		v.mu.Unlock()
		switch {
		case it.group != nil:
			// A sweep's header folds or unfolds its runs.
			v.list.Unselect(i)
			v.mu.Lock()
			v.folded[it.group.id] = !v.folded[it.group.id]
			v.mu.Unlock()
			v.refilter()
			return
		case it.run != nil:
			v.pick(it.run.ID)
		}
		v.updateExport()
		v.requestReload()
	}
	v.cols = widget.NewButtonWithIcon("Columns…", theme.ListIcon(), v.chooseColumns)
	v.colHead = container.New(&widthsLayout{})
	v.colHead.Hide()
	toolbar := container.NewHBox(v.newRun, v.cancel, v.export, v.clone, layout.NewSpacer(), v.cols)
	v.query = newKeyEntry()
	v.query.SetPlaceHolder("Search runs: template, ID, lr=0.01…")
	v.query.OnChanged = func(string) { v.refilter() }
	v.stateSel = widget.NewSelect(stateFilters, func(string) { v.refilter() })
	v.stateSel.Selected = stateFilters[0]
	filters := container.NewVBox(container.NewBorder(nil, nil, nil, v.stateSel, v.query), v.colHead)
	split := container.NewHSplit(container.NewBorder(filters, nil, nil, nil, v.list), container.NewPadded(v.detail.content))
	split.Offset = 0.55
	v.content = container.NewBorder(container.NewVBox(toolbar, widget.NewSeparator()), v.status, nil, nil, split)
	v.loadColumns()
	return v
}

// Content is the view's root object.
func (v *MainView) Content() fyne.CanvasObject { return v.content }

// Start keeps the view live until ctx ends: it re-reads on engine events
// (at most a few times a second) and once a second for elapsed times and
// runs driven by other processes.
func (v *MainView) Start(ctx context.Context) {
	sub := v.backend.Subscribe(1024)
	v.tasks.Follow(ctx, func(ctx context.Context) {
		defer sub.Close()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		const minGap = 250 * time.Millisecond
		var last time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-sub.C:
				if !ok {
					return
				}
				if wait := minGap - time.Since(last); wait > 0 {
					select {
					case <-time.After(wait):
					case <-ctx.Done():
						return
					}
				}
			case <-v.reloads:
			case <-tick.C:
			}
			last = time.Now()
			v.Reload(ctx)
		}
	})
}

// Close stops the view's refresher (Start's) and its other goroutines;
// a cancel or a dismissal already sent still reaches the engine.
func (v *MainView) Close() { v.tasks.Close() }

// SelectRun shows the run with this ID in the detail pane.
func (v *MainView) SelectRun(id string) {
	v.pick(id)
	v.mu.Lock()
	idx := -1
	for i, r := range v.runs {
		if r.ID == id {
			idx = i
		}
	}
	v.mu.Unlock()
	if idx >= 0 {
		v.mu.Lock()
		if sw := v.runs[idx].Sweep; sw != "" {
			delete(v.folded, sw) // a run asked for is shown, not folded away
		}
		v.mu.Unlock()
		v.refilter()
		if row := v.rowOf(id); row >= 0 {
			v.list.Select(row)
			v.list.ScrollTo(row)
		}
	}
	v.updateExport()
	v.requestReload()
}

// pick makes id the selected run. Until it is read, the actions that
// work on the selected run (Clone, Cancel) wait: they must never act on
// the run shown before.
func (v *MainView) pick(id string) {
	v.mu.Lock()
	changed := v.selected != id
	v.selected = id
	v.mu.Unlock()
	if changed {
		v.selInfo = nil
		v.clone.Disable()
		v.cancel.Disable()
		if id != "" {
			v.detail.opening(id)
		}
	}
}

// rowOf is the list row showing run id, or -1.
func (v *MainView) rowOf(id string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, it := range v.rows {
		if it.run != nil && it.run.ID == id {
			return i
		}
	}
	return -1
}

func (v *MainView) requestReload() {
	select {
	case v.reloads <- struct{}{}:
	default:
	}
}

// snapshot is what one reload read.
type snapshot struct {
	runs      []engine.RunInfo
	changes   map[string]sentinelChange // what the sentinel did to the runs it changed
	sel       *engine.RunInfo
	metrics   []engine.Point
	curve     curveData // the chosen metric of the selected run, every attempt
	anomalies []engine.AnomalyInfo
	gpus      []engine.GPUUsage
	host      []engine.HostUsage
	log       logView // the log pane's stage and text
	failLine  string  // the failed stage's last error line
	readID    string  // the run selected when the reload began
	selErr    error   // why it could not be read
	err       error
}

// Reload reads the runs and the selected run from the engine and shows
// them. It blocks while reading, and updates widgets on Fyne's thread.
func (v *MainView) Reload(ctx context.Context) {
	var s snapshot
	s.runs, s.err = v.backend.Runs(ctx, listLimit)
	if s.err == nil {
		s.changes = v.sentinel.all(ctx, v.backend, s.runs)
	}
	v.mu.Lock()
	sel := v.selected
	v.mu.Unlock()
	if sel != "" && s.err == nil {
		s.readID = sel
		r, err := v.backend.Run(ctx, sel)
		s.selErr = err
		if err == nil {
			s.sel = &r
			s.metrics, _ = v.backend.LastMetrics(ctx, sel)
			s.anomalies, _ = v.backend.Anomalies(ctx, sel)
			if gh, ok := v.backend.(gpuHistory); ok {
				s.gpus, _ = gh.GPUUsage(ctx, sel)
			}
			if hr, ok := v.backend.(hostRecords); ok {
				s.host, _ = hr.HostUsage(ctx, sel)
			}
			v.mu.Lock()
			chosen, logStage := v.metric, v.logStage
			v.mu.Unlock()
			if st, key := pickMetric(s.metrics, chosen); key != "" {
				s.curve, _ = v.curves.read(ctx, v.backend, r, st, key, s.metrics)
			}
			s.log = v.logs.read(ctx, v.backend, r, logStage)
			s.failLine = v.fails.line(ctx, v.backend, r)
		}
	}
	onUI(func() { v.apply(s) })
}

func (v *MainView) apply(s snapshot) {
	if s.err != nil {
		v.status.SetText("Could not read runs: " + s.err.Error())
		return
	}
	v.mu.Lock()
	v.all = s.runs
	v.changes = s.changes
	// Only the run this reload tried to read, and could not, is gone: the
	// user may have picked another one while it read.
	gone := s.readID != "" && s.readID == v.selected && s.selErr != nil && !listed(s.runs, s.readID)
	if gone {
		// The run was deleted (or cannot be read): nothing stays selected.
		v.selected = ""
	}
	stale := !gone && s.readID != v.selected // another run was picked meanwhile
	v.mu.Unlock()
	if gone {
		v.list.UnselectAll()
		v.updateExport()
	}
	v.refilter()
	v.status.SetText(summary(s.runs))
	if stale {
		v.requestReload() // the next reload reads the run now picked
		return
	}
	v.selInfo = s.sel
	if s.sel != nil {
		v.clone.Enable()
	} else {
		v.clone.Disable()
	}
	v.detail.onRetryFix = nil // no wizard to open: no button
	if v.OnClone != nil {
		v.detail.onRetryFix = v.onRetryFix
	}
	v.detail.showGPUs(s.sel != nil, s.gpus) // before show: it labels simulated GPUs
	v.detail.showHost(s.sel != nil, s.host)
	var launched map[string]any
	if s.sel != nil {
		launched = s.changes[s.sel.ID].launched
	}
	v.detail.show(s.sel, s.metrics, s.anomalies, s.failLine, launched)
	if gone {
		// Say why the run asked for is not shown (a job on the Cluster
		// page may be another archive's run).
		v.detail.title.SetText("Run " + s.readID + " is not in this archive")
		v.detail.idLine.SetText("It was deleted, or it belongs to another data directory (NIUMA_HOME).")
	}
	v.detail.showCurve(s.sel != nil, s.metrics, s.curve)
	if s.sel != nil {
		v.detail.showLog(true, s.log, s.sel.ID)
	}
	if s.sel != nil && !s.sel.State.Done() && !s.sel.CancelRequested {
		v.cancel.Enable()
	} else {
		v.cancel.Disable()
	}
	v.status.SetText(summary(s.runs))
}

// listed reports whether a run is among runs.
func listed(runs []engine.RunInfo, id string) bool {
	for _, r := range runs {
		if r.ID == id {
			return true
		}
	}
	return false
}

// stateFilters are the runs list's state choices; the first shows all.
var stateFilters = func() []string {
	out := []string{"all states"}
	for _, s := range engine.States {
		out = append(out, string(s))
	}
	return out
}()

// refilter lists the runs that match the search and the state filter.
func (v *MainView) refilter() {
	q := strings.ToLower(strings.TrimSpace(v.query.Text))
	state := v.stateSel.Selected
	v.mu.Lock()
	v.runs = filterRuns(v.all, q, state)
	v.rows = groupRuns(v.runs, v.folded)
	v.mu.Unlock()
	v.list.Refresh()
	v.keepHighlight()
}

// keepHighlight puts the list's highlight on the open run's row. The list
// remembers a row, not a run: when a new run comes on top or a sweep
// above folds, the rows shift, and the highlight would sit on another run
// than the one shown, and a click on that row would do nothing (the list
// takes it for the row already picked).
func (v *MainView) keepHighlight() {
	v.mu.Lock()
	id := v.selected
	v.mu.Unlock()
	row := -1
	if id != "" {
		row = v.rowOf(id)
	}
	if row < 0 {
		v.list.UnselectAll() // folded away or filtered out: the detail stays
		return
	}
	off := v.list.GetScrollOffset() // Select scrolls to the row; the user's place is kept
	v.syncing = true
	v.list.Select(row)
	v.syncing = false
	v.list.ScrollToOffset(off)
}

// filterRuns keeps the runs whose template, ID or "name=value" parameters
// contain every word of q, in state (unless state is the first filter).
func filterRuns(all []engine.RunInfo, q, state string) []engine.RunInfo {
	words := strings.Fields(q)
	if len(words) == 0 && (state == "" || state == stateFilters[0]) {
		return all
	}
	out := make([]engine.RunInfo, 0, len(all))
	for _, r := range all {
		if state != "" && state != stateFilters[0] && string(r.State) != state {
			continue
		}
		hay := strings.ToLower(r.Template + " " + r.ID + " " + strings.Join(r.ParamPairs(), " "))
		ok := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// summary counts runs by state for the status line.
func summary(runs []engine.RunInfo) string {
	if len(runs) == 0 {
		return "No runs yet. Launch one with New run."
	}
	counts := map[engine.State]int{}
	for _, r := range runs {
		counts[r.State]++
	}
	var parts []string
	for _, s := range engine.States {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	noun := "runs"
	if len(runs) == 1 {
		noun = "run"
	}
	return fmt.Sprintf("%d %s: %s", len(runs), noun, strings.Join(parts, ", "))
}

func (v *MainView) listLen() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.rows)
}

func (v *MainView) updateRow(i widget.ListItemID, o fyne.CanvasObject) {
	v.mu.Lock()
	if i >= len(v.rows) {
		v.mu.Unlock()
		return
	}
	it := v.rows[i]
	folded := it.group != nil && v.folded[it.group.id]
	var ch sentinelChange
	if it.run != nil {
		ch = v.changes[it.run.ID]
	}
	cols := v.columns
	v.mu.Unlock()
	row := o.(*runRow)
	if it.group != nil {
		row.setGroup(*it.group, folded)
		return
	}
	row.set(*it.run, time.Now(), it.differ, ch)
	row.setColumns(*it.run, cols, ch)
}

// onRetryFix opens the wizard on a run with an anomaly's fix applied, for
// the user to check and launch.
func (v *MainView) onRetryFix(fixed engine.RunInfo, changes []string) {
	v.OnClone(fixed)
	v.status.SetText(retryNote(changes))
}

// onDismiss marks an anomaly of the selected run as seen.
func (v *MainView) onDismiss(anomalyID int64) {
	v.mu.Lock()
	id := v.selected
	v.mu.Unlock()
	v.tasks.Go(func(context.Context) {
		if err := v.backend.Dismiss(context.Background(), id, anomalyID); err != nil {
			onUI(func() { showError(fmt.Errorf("dismiss the anomaly: %w", err), v.win) })
		}
		v.requestReload()
	})
}

func (v *MainView) onCancel() {
	v.mu.Lock()
	id := v.selected
	v.mu.Unlock()
	if id == "" {
		return
	}
	showConfirm(v.win, "Cancel run?", "Stop run "+id+"? Running stages get SIGTERM, then SIGKILL after a grace period.", "Stop it", "Keep it running", func(ok bool) {
		if !ok {
			return
		}
		v.cancel.Disable()
		v.tasks.Go(func(context.Context) {
			err := v.backend.Cancel(context.Background(), id)
			var ended *engine.EndedError
			switch {
			case errors.As(err, &ended):
				// It ended while the user confirmed: no failure, nothing to do.
				onUI(func() {
					showNotice(v.win, "Nothing to stop", fmt.Sprintf("Run %s had already %s before the cancel reached it.", ended.ID, ended.State))
				})
			case err != nil:
				onUI(func() { showError(err, v.win) })
			}
			v.requestReload()
		})
	})
}

// runRow is one line of the runs list: a run (its state, template, the
// parameters that tell it apart, its stages) or a sweep's header.
type runRow struct {
	widget.BaseWidget
	title   *widget.Label
	sub     *widget.Label
	state   *fyne.Container
	chips   *stageStrip
	elapsed *widget.Label
	head    *fyne.Container
	line    *fyne.Container // the second line: sub, or the cells
	cells   *fyne.Container // the parameter columns, when chosen
	box     fyne.CanvasObject
}

func newRunRow() fyne.CanvasObject {
	r := &runRow{
		title:   widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		sub:     widget.NewLabel(""),
		state:   container.NewHBox(),
		chips:   newStageStrip(),
		elapsed: widget.NewLabel(""),
	}
	r.title.Truncation = fyne.TextTruncateEllipsis
	r.sub.Importance = widget.LowImportance
	r.sub.SizeName = theme.SizeNameCaptionText
	r.sub.Truncation = fyne.TextTruncateEllipsis
	// The state comes first and the stages take what width is left (as
	// dots when their names do not fit), so nothing covers anything; the
	// second line (ID and parameters) takes the row's whole width.
	r.head = container.New(&headLayout{title: r.title, strip: r.chips}, container.NewCenter(r.state), r.title, r.chips)
	r.cells = container.New(&widthsLayout{})
	r.cells.Hide()
	r.line = container.NewStack(r.sub, r.cells)
	r.box = container.NewVBox(r.head, container.NewBorder(nil, nil, nil, r.elapsed, r.line))
	r.ExtendBaseWidget(r)
	return r
}

func (r *runRow) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(r.box) }

// set shows a run; differ names the parameters that set it apart from the
// other runs of its sweep (nil: show all of them); ch is what the sentinel
// did to it (its changed parameters read "lr 1 → 0.1").
func (r *runRow) set(info engine.RunInfo, now time.Time, differ []string, ch sentinelChange) {
	title := info.Template
	if info.Sweep != "" {
		title = "    " + title // under its sweep's header
	}
	r.title.SetText(title)
	r.title.TextStyle = fyne.TextStyle{Bold: true}
	head := []string{info.ID}
	if ch.retried {
		head = append(head, sentinelMark)
	}
	r.sub.SetText(strings.Join(append(head, changedPairs(info.Params, differ, ch)...), " · "))
	r.state.Objects = []fyne.CanvasObject{chip(string(info.State), info.State)}
	r.state.Refresh()
	r.chips.set(info.Stages)
	r.chips.Show()
	r.elapsed.SetText(elapsedText(info, now))
	r.head.Refresh() // the widths depend on the texts just set
}

// setColumns shows a run's chosen parameter columns in place of its line
// of what differs (none chosen: that line).
func (r *runRow) setColumns(info engine.RunInfo, cols []string, ch sentinelChange) {
	if len(cols) == 0 {
		r.cells.Hide()
		r.sub.Show()
		return
	}
	cells := columnCells(info, cols, ch)
	objs := make([]fyne.CanvasObject, len(cells))
	for i, c := range cells {
		l := widget.NewLabel(c)
		l.Truncation = fyne.TextTruncateEllipsis
		l.SizeName = theme.SizeNameCaptionText
		if i == 0 {
			l.Importance = widget.LowImportance
		}
		objs[i] = l
	}
	r.cells.Objects = objs
	r.cells.Layout = &widthsLayout{widths: columnWidths(len(cols))}
	r.sub.Hide()
	r.cells.Show()
	r.cells.Refresh()
}

// setGroup shows a sweep's header: how many runs, over what, and how they
// stand; folded says whether its runs are hidden.
func (r *runRow) setGroup(g sweepGroup, folded bool) {
	arrow := "▾ "
	if folded {
		arrow = "▸ "
	}
	if engine.StudySweep(g.id) {
		r.title.SetText(fmt.Sprintf("%sStudy %s: %d trials · %s", arrow, g.id, len(g.runs), g.template))
	} else {
		r.title.SetText(fmt.Sprintf("%sSweep of %d runs · %s", arrow, len(g.runs), g.template))
	}
	r.title.TextStyle = fyne.TextStyle{Bold: true}
	over := "the same values"
	switch {
	case len(g.differ) > 0 && engine.StudySweep(g.id):
		over = strings.Join(g.differ, ", ") // a search, not a grid
	case len(g.differ) > 0:
		over = strings.Join(g.differ, " × ")
	}
	r.sub.SetText("over " + over + " · " + stateCounts(g.runs))
	r.state.Objects = nil
	r.state.Refresh()
	r.chips.Hide()
	r.cells.Hide()
	r.sub.Show()
	r.elapsed.SetText(g.started)
	r.head.Refresh()
}

// paramPairs writes params as "name=value", sorted by name; only the names
// in keep when keep is not nil.
func paramPairs(params map[string]any, keep []string) []string {
	var out []string
	if keep == nil {
		for _, k := range sortedParamKeys(params) {
			out = append(out, k+"="+formatParam(params[k]))
		}
		return out
	}
	for _, k := range keep {
		if x, ok := params[k]; ok {
			out = append(out, k+"="+formatParam(x))
		}
	}
	return out
}

func elapsedText(info engine.RunInfo, now time.Time) string {
	d := info.Elapsed(now)
	switch {
	case info.State == engine.Queued:
		return "queued " + since(now.Sub(info.CreatedAt)) + " ago"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

func since(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// sortedPoints orders metrics by stage order of appearance, then key.
func sortedPoints(pts []engine.Point, stages []engine.StageInfo) []engine.Point {
	pos := map[string]int{}
	for i, s := range stages {
		pos[s.Name] = i
	}
	out := append([]engine.Point(nil), pts...)
	sort.SliceStable(out, func(i, j int) bool {
		if pos[out[i].Stage] != pos[out[j].Stage] {
			return pos[out[i].Stage] < pos[out[j].Stage]
		}
		return out[i].Key < out[j].Key
	})
	return out
}
