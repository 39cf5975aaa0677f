package ui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/engine/template"
)

// The archive table's columns, in order.
const (
	colPick = iota // the compare / delete checkbox
	colID
	colTemplate
	colState
	colCreated
	colDuration
	colBest
	archiveCols
)

// archiveHeaders are the column titles; colPick has none.
var archiveHeaders = [archiveCols]string{"", "ID", "Template", "State", "Created", "Duration", "Best objective"}

// archiveWidths are the columns' widths, in points.
var archiveWidths = [archiveCols]float32{36, 215, 140, 110, 150, 90, 250}

// idColumnWidth fits a whole run ID ("20261202-171933-ccccef"), indented
// under its sweep's header, in the monospace font: the runs of a sweep
// share the ID's start and differ only in its end, so a truncated ID
// tells them apart no more.
func idColumnWidth() float32 {
	text := fyne.MeasureText("  00000000-000000-000000", theme.TextSize(), fyne.TextStyle{Monospace: true})
	return float32(math.Ceil(float64(text.Width + 2*theme.InnerPadding() + theme.Padding())))
}

// allTemplates is the template filter's "no filter" choice.
const allTemplates = "all templates"

// dateFilters are the created-date choices, with how far back each
// reaches; the first shows all.
var dateFilters = []struct {
	name string
	back time.Duration
}{
	{"any date", 0},
	{"last 24 hours", 24 * time.Hour},
	{"last 7 days", 7 * 24 * time.Hour},
	{"last 30 days", 30 * 24 * time.Hour},
}

func dateFilterNames() []string {
	out := make([]string, len(dateFilters))
	for i, d := range dateFilters {
		out[i] = d.name
	}
	return out
}

// archiveModel is the archive's data without widgets: every run read, the
// rows the filters keep in the chosen order, and the runs picked to
// compare or delete. Its methods are not safe for concurrent use; the
// view calls them on Fyne's thread.
type archiveModel struct {
	all    []engine.ArchiveEntry
	rows   []int    // indexes into all, filtered and sorted
	hay    []string // per run, the text searched; built on the first search
	picked map[string]bool

	// The table's rows: rows grouped by sweep, each sweep under a header
	// that folds it; and the parameter columns after the fixed ones.
	view    []archiveRow
	folded  map[string]bool
	params  []string        // every parameter the runs have, sorted
	hidden  map[string]bool // parameter columns the user turned off
	columns []string        // the parameter columns shown, in order

	// changes are the runs the sentinel changed, by ID: their best is
	// marked, and a changed parameter says what it was launched with.
	changes map[string]sentinelChange

	query, state, tmpl string        // the filters, as the user set them
	back               time.Duration // only runs created this recently; 0: all
	sortCol            int
	desc               bool
	now                time.Time // for running runs' durations
}

func newArchiveModel() *archiveModel {
	return &archiveModel{picked: map[string]bool{}, folded: map[string]bool{}, sortCol: colCreated, desc: true,
		state: stateFilters[0], tmpl: allTemplates}
}

// archiveRow is one table row: a run (an index into all) or the header of
// a sweep (a group).
type archiveRow struct {
	entry int
	group *archiveGroup
}

// archiveGroup is a sweep as the archive shows it: its runs in the
// table's order, what they vary and the best objective among them.
type archiveGroup struct {
	id      string
	runs    []int
	differ  map[string]bool
	best    *engine.ArchiveEntry
	created time.Time
}

// set replaces the runs and reapplies the filters and the order; picked
// runs that are gone are forgotten.
func (m *archiveModel) set(all []engine.ArchiveEntry, now time.Time) {
	m.all, m.now, m.hay = all, now, nil
	names := map[string]bool{}
	for i := range all {
		for k := range all[i].Params {
			names[k] = true
		}
	}
	m.params = sortedParamKeys(map[string]any(anyKeys(names)))
	if len(m.picked) > 0 {
		ids := make(map[string]bool, len(all))
		for i := range all {
			ids[all[i].ID] = true
		}
		for id := range m.picked {
			if !ids[id] {
				delete(m.picked, id)
			}
		}
	}
	m.apply()
}

// templates lists the templates the runs use, for the template filter.
func (m *archiveModel) templates() []string {
	seen := map[string]bool{}
	var out []string
	for i := range m.all {
		if t := m.all[i].Template; !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return append([]string{allTemplates}, out...)
}

// apply filters and sorts the rows.
func (m *archiveModel) apply() {
	words := strings.Fields(strings.ToLower(m.query))
	if len(words) > 0 && len(m.hay) != len(m.all) {
		m.buildHay()
	}
	m.rows = m.rows[:0]
	for i := range m.all {
		e := &m.all[i]
		if m.state != "" && m.state != stateFilters[0] && string(e.State) != m.state {
			continue
		}
		if m.tmpl != "" && m.tmpl != allTemplates && e.Template != m.tmpl {
			continue
		}
		if m.back > 0 && e.CreatedAt.Before(m.now.Add(-m.back)) {
			continue
		}
		if len(words) > 0 && !containsAll(m.hay[i], words) {
			continue
		}
		m.rows = append(m.rows, i)
	}
	cmp := m.compare(m.sortCol)
	// Ties keep the engine's order (newest first), so the order is the
	// same after every refresh.
	slices.SortFunc(m.rows, func(a, b int) int {
		c := cmp(&m.all[a], &m.all[b])
		if m.desc {
			c = -c
		}
		if c == 0 {
			return a - b
		}
		return c
	})
	m.group()
	m.columns = m.columns[:0]
	for _, k := range m.params {
		if !m.hidden[k] {
			m.columns = append(m.columns, k)
		}
	}
}

// group builds the table's rows: the sweeps among the rows (two runs or
// more) under a header where their first run is, in the table's order.
func (m *archiveModel) group() {
	groups := map[string]*archiveGroup{}
	for _, i := range m.rows {
		e := &m.all[i]
		if e.Sweep == "" {
			continue
		}
		g := groups[e.Sweep]
		if g == nil {
			g = &archiveGroup{id: e.Sweep, created: e.CreatedAt}
			groups[e.Sweep] = g
		}
		g.runs = append(g.runs, i)
		if e.CreatedAt.Before(g.created) {
			g.created = e.CreatedAt
		}
		if e.HasBest && (g.best == nil || (e.Goal == "max") == (e.Best > g.best.Best)) {
			g.best = e
		}
	}
	for _, g := range groups {
		infos := make([]engine.RunInfo, len(g.runs))
		for k, i := range g.runs {
			infos[k] = m.all[i].RunInfo
		}
		g.differ = map[string]bool{}
		for _, k := range differingParams(infos) {
			g.differ[k] = true
		}
	}
	m.view = m.view[:0]
	done := map[string]bool{}
	for _, i := range m.rows {
		g := groups[m.all[i].Sweep]
		if g == nil || len(g.runs) < 2 {
			m.view = append(m.view, archiveRow{entry: i})
			continue
		}
		if done[g.id] {
			continue
		}
		done[g.id] = true
		m.view = append(m.view, archiveRow{entry: -1, group: g})
		if m.folded[g.id] {
			continue
		}
		for _, j := range g.runs {
			m.view = append(m.view, archiveRow{entry: j})
		}
	}
}

func anyKeys(m map[string]bool) map[string]any {
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// columnCount is how many columns the table has: the fixed ones and a
// column per shown parameter.
func (m *archiveModel) columnCount() int { return archiveCols + len(m.columns) }

// paramColumn is the parameter a column shows, if it shows one.
func (m *archiveModel) paramColumn(col int) (string, bool) {
	if col < archiveCols || col-archiveCols >= len(m.columns) {
		return "", false
	}
	return m.columns[col-archiveCols], true
}

// buildHay writes, once per set of runs, the lower-case text the search
// looks in: template, ID and "name=value" parameters. It waits for the
// first search so that opening the archive does not pay for it.
func (m *archiveModel) buildHay() {
	m.hay = make([]string, len(m.all))
	var sb strings.Builder
	for i := range m.all {
		e := &m.all[i]
		sb.Reset()
		sb.WriteString(e.Template)
		sb.WriteByte(' ')
		sb.WriteString(e.ID)
		for k, x := range e.Params {
			sb.WriteByte(' ')
			sb.WriteString(k)
			sb.WriteByte('=')
			switch x := x.(type) {
			case string:
				sb.WriteString(x)
			case float64:
				sb.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
			default:
				fmt.Fprint(&sb, x)
			}
		}
		m.hay[i] = strings.ToLower(sb.String())
	}
}

// containsAll reports whether hay contains every word.
func containsAll(hay string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

// compare orders two runs by a column. Runs without a best objective sort
// after those with one whatever the direction, so the best runs are on
// top when sorting by it either way.
func (m *archiveModel) compare(col int) func(a, b *engine.ArchiveEntry) int {
	switch col {
	case colID:
		return func(a, b *engine.ArchiveEntry) int { return strings.Compare(a.ID, b.ID) }
	case colTemplate:
		return func(a, b *engine.ArchiveEntry) int { return strings.Compare(a.Template, b.Template) }
	case colState:
		return func(a, b *engine.ArchiveEntry) int { return strings.Compare(string(a.State), string(b.State)) }
	case colDuration:
		return func(a, b *engine.ArchiveEntry) int { return cmp.Compare(a.Elapsed(m.now), b.Elapsed(m.now)) }
	case colBest:
		return func(a, b *engine.ArchiveEntry) int {
			if a.HasBest != b.HasBest {
				// Missing values last in both directions: the caller
				// negates for descending, so pre-negate here.
				if a.HasBest != m.desc {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.Best, b.Best)
		}
	case colCreated:
		return func(a, b *engine.ArchiveEntry) int { return a.CreatedAt.Compare(b.CreatedAt) }
	}
	if k, ok := m.paramColumn(col); ok {
		return func(a, b *engine.ArchiveEntry) int { return compareParams(a.Params[k], b.Params[k]) }
	}
	return func(a, b *engine.ArchiveEntry) int { return a.CreatedAt.Compare(b.CreatedAt) }
}

// compareParams orders parameter values: numbers by value, before text,
// and a missing value last.
func compareParams(a, b any) int {
	if (a == nil) != (b == nil) {
		if a == nil {
			return 1
		}
		return -1
	}
	fa, aNum := a.(float64)
	fb, bNum := b.(float64)
	switch {
	case aNum && bNum:
		return cmp.Compare(fa, fb)
	case aNum != bNum:
		if aNum {
			return -1
		}
		return 1
	}
	return strings.Compare(formatParam(a), formatParam(b))
}

// sortBy sorts by a column; the same column again flips the direction.
func (m *archiveModel) sortBy(col int) {
	if col == colPick {
		return
	}
	if m.sortCol == col {
		m.desc = !m.desc
	} else {
		m.sortCol, m.desc = col, col == colCreated // newest first, the rest ascending
	}
	m.apply()
}

// entry is the run shown on a row (false for a sweep's header).
func (m *archiveModel) entry(row int) (*engine.ArchiveEntry, bool) {
	if row < 0 || row >= len(m.view) || m.view[row].group != nil {
		return nil, false
	}
	return &m.all[m.view[row].entry], true
}

// groupAt is the sweep whose header is on a row.
func (m *archiveModel) groupAt(row int) (*archiveGroup, bool) {
	if row < 0 || row >= len(m.view) || m.view[row].group == nil {
		return nil, false
	}
	return m.view[row].group, true
}

// groupText is what a sweep's header says in a column.
func (m *archiveModel) groupText(g *archiveGroup, col int) string {
	switch col {
	case colID:
		arrow := "▾"
		if m.folded[g.id] {
			arrow = "▸"
		}
		if engine.StudySweep(g.id) {
			return fmt.Sprintf("%s study %s · %d trials", arrow, g.id, len(g.runs))
		}
		return fmt.Sprintf("%s sweep · %d runs", arrow, len(g.runs))
	case colTemplate:
		return m.all[g.runs[0]].Template
	case colState:
		infos := make([]engine.RunInfo, len(g.runs))
		for k, i := range g.runs {
			infos[k] = m.all[i].RunInfo
		}
		return stateCounts(infos)
	case colCreated:
		return g.created.Local().Format("2006-01-02 15:04")
	case colBest:
		if g.best == nil {
			return "—"
		}
		return "best: " + m.cellText(g.best, colBest)
	}
	if k, ok := m.paramColumn(col); ok {
		if !g.differ[k] {
			return formatParam(m.all[g.runs[0]].Params[k])
		}
		return paramSpread(m.all, g.runs, k)
	}
	return ""
}

// paramSpread is what values a sweep tried: "0.001 … 0.1" for numbers,
// "adam, sgd" for the rest.
func paramSpread(all []engine.ArchiveEntry, runs []int, k string) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	var texts []string
	seen := map[string]bool{}
	numeric := true
	for _, i := range runs {
		x := all[i].Params[k]
		if f, ok := x.(float64); ok {
			lo, hi = math.Min(lo, f), math.Max(hi, f)
		} else {
			numeric = false
		}
		if t := formatParam(x); !seen[t] {
			seen[t] = true
			texts = append(texts, t)
		}
	}
	if numeric && len(texts) > 2 {
		return formatParam(lo) + " … " + formatParam(hi)
	}
	sort.Strings(texts)
	return strings.Join(texts, ", ")
}

// pickedRuns are the picked runs, in the table's order.
func (m *archiveModel) pickedRuns() []engine.ArchiveEntry {
	var out []engine.ArchiveEntry
	for _, i := range m.rows {
		if m.picked[m.all[i].ID] {
			out = append(out, m.all[i])
		}
	}
	return out
}

// cellText is what a cell says.
func (m *archiveModel) cellText(e *engine.ArchiveEntry, col int) string {
	switch col {
	case colID:
		return e.ID
	case colTemplate:
		return e.Template
	case colState:
		return string(e.State)
	case colCreated:
		if e.CreatedAt.IsZero() {
			return ""
		}
		return e.CreatedAt.Local().Format("2006-01-02 15:04")
	case colDuration:
		if e.StartedAt.IsZero() {
			return "—"
		}
		d := e.Elapsed(m.now)
		if d < time.Minute {
			return d.Round(100 * time.Millisecond).String()
		}
		return d.Round(time.Second).String()
	case colBest:
		if !e.HasBest {
			if e.Objective == "" {
				return "—"
			}
			return e.Objective + " —"
		}
		arrow := "↓"
		if e.Goal == "max" {
			arrow = "↑"
		}
		best := fmt.Sprintf("%s %s %.4g", e.Objective, arrow, e.Best)
		if m.changes[e.ID].retried {
			// Not the run that was launched: the sentinel changed it.
			best += " " + sentinelMark
		}
		return best
	}
	if k, ok := m.paramColumn(col); ok {
		if x, has := e.Params[k]; has {
			if ch := m.changes[e.ID]; ch.launched != nil && contains(ch.changedParams(e.Params), k) {
				return fmt.Sprintf("%s (was %s)", formatParam(x), formatParam(ch.launched[k]))
			}
			return formatParam(x)
		}
		return "—"
	}
	return ""
}

// header is a column title with the sort direction when it is the sort
// column.
func (m *archiveModel) header(col int) string {
	h := ""
	if col < archiveCols {
		h = archiveHeaders[col]
	} else if k, ok := m.paramColumn(col); ok {
		h = k
	}
	if col == m.sortCol {
		if m.desc {
			return h + " ▼"
		}
		return h + " ▲"
	}
	return h
}

// ArchiveView is the Runs archive: a table of every run, searchable,
// filterable and sortable by any column, with several runs picked to
// compare (overlaid curves and a parameter diff) or delete.
type ArchiveView struct {
	backend  Backend
	win      fyne.Window
	model    *archiveModel
	sentinel sentinelCache
	mu       sync.Mutex  // serialises reloads
	pending  atomic.Bool // a reloadSoon is waiting for its turn

	table    *widget.Table
	query    *keyEntry
	stateSel *widget.Select
	tmplSel  *widget.Select
	dateSel  *widget.Select
	compare  *widget.Button
	hparams  *widget.Button
	columns  *widget.Button
	studies  *widget.Button // shown when the engine keeps studies
	delete   *widget.Button
	status   *widget.Label
	content  fyne.CanvasObject

	// OnOpen, when set, opens a run in the run view (a tap on its ID).
	OnOpen func(id string)
	// OnLaunch, when set, opens the wizard on a template prefilled with a
	// study's suggested values (its "Launch suggested…" button).
	OnLaunch func(template string, values map[string]any)
	// ParamLog, when set, says whether a template's parameter is on a
	// log scale (its schema's log: true), for the hyperparameter view.
	ParamLog func(template, param string) (log, known bool)
	// hparamView is the last hyperparameter view's content, for tests.
	hparamView *hparamView
	// studiesBox is the last study view's content, studiesDlg its dialog;
	// studiesOpen is set while it is on screen (it is then refreshed with
	// the archive).
	studiesBox  *fyne.Container
	studiesDlg  dialog.Dialog
	studiesOpen atomic.Bool
	// studiesRead numbers the reads of the studies as they start, and
	// studiesFilled is the one on screen (Fyne's thread only).
	studiesRead   atomic.Int64
	studiesFilled int64
	// tasks are the view's goroutines (reloads, deletes, the study
	// view's ticker, a comparison's reads); Close ends them.
	tasks     tasks
	studiesMu sync.Mutex // held while the box is filled
	shownCols int        // columns the table was last sized for
	// confirm asks before deleting; a seam for tests.
	confirm func(title, msg string, cb func(bool))
	// compareView is the last compare window's content, for tests.
	compareView *compareView
	// deleted, when set, receives the outcome of each delete.
	deleted chan error
	// read is set once a read of the archive came back: until then the
	// status says it is reading, not "0 of 0 runs".
	read bool
	// reloaded, when set, is signalled after each Reload (for tests).
	reloaded chan struct{}
	// loadCompare reads and draws a compare view's curves; in the
	// background, except in tests.
	loadCompare func(*compareView)
}

// NewArchiveView builds the archive page. Call Reload to fill it.
func NewArchiveView(b Backend, win fyne.Window) *ArchiveView {
	v := &ArchiveView{backend: b, win: win, model: newArchiveModel()}
	v.confirm = func(title, msg string, cb func(bool)) { showConfirm(v.win, title, msg, "Delete", "Keep them", cb) }
	if app := fyne.CurrentApp(); app != nil {
		v.model.hidden = map[string]bool{}
		for _, k := range app.Preferences().StringList(prefHiddenColumns) {
			v.model.hidden[k] = true
		}
	}
	v.loadCompare = func(cv *compareView) { v.tasks.Go(cv.load) }
	v.table = widget.NewTableWithHeaders(v.tableSize, newArchiveCell, v.updateCell)
	v.table.ShowHeaderColumn = false
	v.table.CreateHeader = func() fyne.CanvasObject {
		b := widget.NewButton("", nil)
		b.Importance = widget.LowImportance
		b.Alignment = widget.ButtonAlignLeading
		return b
	}
	v.table.UpdateHeader = func(id widget.TableCellID, o fyne.CanvasObject) {
		b := o.(*widget.Button)
		b.SetText(v.model.header(id.Col))
		col := id.Col
		b.OnTapped = func() { v.SortBy(col) }
	}
	for c, w := range archiveWidths {
		v.table.SetColumnWidth(c, w)
	}
	v.table.SetColumnWidth(colID, idColumnWidth())
	v.table.OnSelected = func(id widget.TableCellID) {
		v.table.UnselectAll()
		if g, ok := v.model.groupAt(id.Row); ok {
			if id.Col == colPick {
				v.pickGroup(g)
				return
			}
			v.model.folded[g.id] = !v.model.folded[g.id]
			v.refresh()
			return
		}
		e, ok := v.model.entry(id.Row)
		if !ok {
			return
		}
		if id.Col == colPick {
			v.Pick(e.ID, !v.model.picked[e.ID])
			return
		}
		if v.OnOpen != nil {
			v.OnOpen(e.ID)
		}
	}

	v.query = newKeyEntry()
	v.query.SetPlaceHolder("Search: template, ID, lr=0.01…")
	v.query.OnChanged = func(s string) { v.model.query = s; v.refresh() }
	v.stateSel = widget.NewSelect(stateFilters, func(s string) { v.model.state = s; v.refresh() })
	v.stateSel.Selected = stateFilters[0]
	v.tmplSel = widget.NewSelect([]string{allTemplates}, func(s string) { v.model.tmpl = s; v.refresh() })
	v.tmplSel.Selected = allTemplates
	v.dateSel = widget.NewSelect(dateFilterNames(), func(s string) {
		v.model.back = 0
		for _, d := range dateFilters {
			if d.name == s {
				v.model.back = d.back
			}
		}
		v.refresh()
	})
	v.dateSel.Selected = dateFilters[0].name
	v.compare = widget.NewButtonWithIcon("Compare", theme.ViewRefreshIcon(), v.Compare)
	v.compare.Importance = widget.HighImportance
	v.hparams = widget.NewButtonWithIcon("Hyperparameters", theme.GridIcon(), v.Hyperparameters)
	v.columns = widget.NewButtonWithIcon("Columns…", theme.ListIcon(), v.chooseColumns)
	v.studies = widget.NewButtonWithIcon("Studies", theme.SearchIcon(), v.Studies)
	if _, ok := b.(studyBackend); !ok {
		v.studies.Hide() // the engine keeps no studies
	}
	v.delete = widget.NewButtonWithIcon("Delete…", theme.DeleteIcon(), v.onDelete)
	v.delete.Importance = widget.DangerImportance
	reload := widget.NewButtonWithIcon("", theme.ViewRefreshIcon(), func() { v.tasks.Go(v.Reload) })
	v.status = widget.NewLabel("")
	v.status.Truncation = fyne.TextTruncateEllipsis
	v.updateButtons()

	filters := container.NewBorder(nil, nil, nil, container.NewHBox(v.tmplSel, v.stateSel, v.dateSel, reload), v.query)
	actions := container.NewBorder(nil, nil, nil, container.NewHBox(v.studies, v.columns, v.hparams, v.compare, v.delete), v.status)
	v.content = container.NewBorder(container.NewVBox(filters, actions), nil, nil, nil, v.table)
	return v
}

// Content is the page's root object.
func (v *ArchiveView) Content() fyne.CanvasObject { return v.content }

// Close stops the page's goroutines: the study view's refresher, and the
// reloads and reads under way give up at their next step.
func (v *ArchiveView) Close() { v.tasks.Close() }

// Reload reads every run from the engine and shows them; it blocks while
// reading and updates the widgets on Fyne's thread.
func (v *ArchiveView) Reload(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	all, err := v.backend.Archive(ctx)
	changes := map[string]sentinelChange{}
	for i := range all {
		if ch := v.sentinel.get(ctx, v.backend, all[i].RunInfo); ch.retried {
			changes[all[i].ID] = ch
		}
	}
	fillStudies := v.refreshStudies(ctx)
	onUIWait(func() {
		if fillStudies != nil {
			fillStudies()
		}
		if err != nil {
			v.status.SetText("Could not read the archive: " + err.Error() + ". Check the data directory, then press reload.")
			return
		}
		v.model.changes = changes
		v.show(all, time.Now())
	})
	if v.reloaded != nil {
		v.reloaded <- struct{}{}
	}
}

// reloadSoon reloads in the background; a burst of calls while a reload
// is waiting makes one reload, not one each.
func (v *ArchiveView) reloadSoon(ctx context.Context) {
	if !v.pending.CompareAndSwap(false, true) {
		return // the waiting reload will see this change too
	}
	v.tasks.GoUnder(ctx, func(ctx context.Context) {
		v.mu.Lock() // wait for the reload in progress
		v.pending.Store(false)
		v.mu.Unlock()
		v.Reload(ctx)
	})
}

// show puts runs in the table (on Fyne's thread).
func (v *ArchiveView) show(all []engine.ArchiveEntry, now time.Time) {
	v.read = true
	v.model.set(all, now)
	v.tmplSel.Options = v.model.templates()
	v.tmplSel.Refresh()
	v.refresh()
}

// refresh reapplies the filters and redraws the table.
func (v *ArchiveView) refresh() {
	v.model.apply()
	v.sizeColumns()
	v.table.Refresh()
	v.updateButtons()
}

// paramWidth is a parameter column's width, in points.
const paramWidth = 110

// sizeColumns gives each parameter column its width when the columns
// change.
func (v *ArchiveView) sizeColumns() {
	n := v.model.columnCount()
	if n == v.shownCols {
		return
	}
	v.shownCols = n
	for c := archiveCols; c < n; c++ {
		v.table.SetColumnWidth(c, paramWidth)
	}
}

// pickGroup picks every run of a sweep, or unpicks them all when all are
// picked already.
func (v *ArchiveView) pickGroup(g *archiveGroup) {
	all := true
	for _, i := range g.runs {
		all = all && v.model.picked[v.model.all[i].ID]
	}
	for _, i := range g.runs {
		if all {
			delete(v.model.picked, v.model.all[i].ID)
		} else {
			v.model.picked[v.model.all[i].ID] = true
		}
	}
	v.table.Refresh()
	v.updateButtons()
}

// chooseColumns lets the user choose the parameter columns; Enter keeps
// the choice, Escape drops it.
func (v *ArchiveView) chooseColumns() {
	if v.win == nil || len(v.model.params) == 0 {
		return
	}
	checks := make([]*keyCheck, len(v.model.params))
	box := container.NewVBox()
	for i, k := range v.model.params {
		checks[i] = newKeyCheck(k, nil)
		checks[i].Checked = !v.model.hidden[k]
		box.Add(checks[i])
	}
	apply := func() {
		hidden := map[string]bool{}
		for i, k := range v.model.params {
			if !checks[i].Checked {
				hidden[k] = true
			}
		}
		v.setHidden(hidden)
	}
	scroll := container.NewVScroll(box)
	scroll.SetMinSize(fyne.NewSize(260, min(float32(len(checks))*38, 360)))
	var d dialog.Dialog
	d = dialog.NewCustomConfirm("Parameter columns", "Show", "Cancel", scroll, func(ok bool) {
		if ok {
			apply()
		}
	}, v.win)
	showWithKeys(d, v.win, func() { apply(); d.Hide() }, d.Hide)
}

// prefHiddenColumns keeps the parameter columns the user turned off.
const prefHiddenColumns = "archive.hidden_columns"

// setHidden hides these parameter columns, and remembers the choice.
func (v *ArchiveView) setHidden(hidden map[string]bool) {
	v.model.hidden = hidden
	if app := fyne.CurrentApp(); app != nil {
		app.Preferences().SetStringList(prefHiddenColumns, sortedParamKeys(anyKeys(hidden)))
	}
	v.refresh()
}

// SortBy sorts by a column, as a tap on its header does.
func (v *ArchiveView) SortBy(col int) {
	v.model.sortBy(col)
	v.table.Refresh()
}

// Pick adds a run to, or removes it from, the runs to compare or delete.
func (v *ArchiveView) Pick(id string, on bool) {
	if on {
		v.model.picked[id] = true
	} else {
		delete(v.model.picked, id)
	}
	v.table.Refresh()
	v.updateButtons()
}

func (v *ArchiveView) updateButtons() {
	n := len(v.model.pickedRuns())
	if n >= 2 {
		v.compare.Enable()
	} else {
		v.compare.Disable()
	}
	if n >= 1 {
		v.delete.Enable()
	} else {
		v.delete.Disable()
	}
	if !v.read {
		v.status.SetText("Reading the archive…")
		return
	}
	msg := fmt.Sprintf("%d of %d runs", len(v.model.rows), len(v.model.all))
	if n > 0 {
		msg += fmt.Sprintf(" · %d picked", n)
	} else if len(v.model.all) > 0 {
		msg += " · tick two or more to compare"
	}
	v.status.SetText(msg)
}

func (v *ArchiveView) tableSize() (int, int) { return len(v.model.view), v.model.columnCount() }

// archiveCell is one table cell: a checkbox in the first column, text in
// the others.
type archiveCell struct {
	widget.BaseWidget
	check *widget.Check
	text  *widget.Label
	box   *fyne.Container
}

func newArchiveCell() fyne.CanvasObject {
	c := &archiveCell{check: widget.NewCheck("", nil), text: widget.NewLabel("")}
	c.text.Truncation = fyne.TextTruncateEllipsis
	c.box = container.NewStack(c.check, c.text)
	c.ExtendBaseWidget(c)
	return c
}

func (c *archiveCell) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(c.box) }

func (v *ArchiveView) updateCell(id widget.TableCellID, o fyne.CanvasObject) {
	c := o.(*archiveCell)
	if g, ok := v.model.groupAt(id.Row); ok {
		c.check.Hide()
		c.text.Show()
		c.text.Importance = widget.HighImportance
		c.text.TextStyle = fyne.TextStyle{Bold: id.Col == colID}
		c.text.SetText(v.model.groupText(g, id.Col))
		return
	}
	e, ok := v.model.entry(id.Row)
	if !ok {
		return
	}
	if id.Col == colPick {
		c.text.Hide()
		c.check.Show()
		runID := e.ID
		c.check.OnChanged = nil
		c.check.SetChecked(v.model.picked[runID])
		c.check.OnChanged = func(on bool) { v.Pick(runID, on) }
		return
	}
	c.check.Hide()
	c.text.Show()
	c.text.Importance = widget.MediumImportance
	if id.Col == colState {
		c.text.Importance = stateImportance(e.State)
	}
	c.text.TextStyle = fyne.TextStyle{Monospace: id.Col == colID}
	text := v.model.cellText(e, id.Col)
	if id.Col == colID && e.Sweep != "" && len(v.model.view) > 0 {
		text = "  " + text // under its sweep's header
	}
	c.text.SetText(text) // refreshes with the style above
}

// stateImportance colours a state's text like its chip.
func stateImportance(s engine.State) widget.Importance {
	switch s {
	case engine.Succeeded:
		return widget.SuccessImportance
	case engine.Failed:
		return widget.DangerImportance
	case engine.Running:
		return widget.HighImportance
	case engine.Cancelled, engine.Pruned:
		return widget.LowImportance
	}
	return widget.MediumImportance
}

// onDelete asks, then deletes the picked runs.
func (v *ArchiveView) onDelete() {
	runs := v.model.pickedRuns()
	if len(runs) == 0 {
		return
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	msg := fmt.Sprintf("Delete %d runs with their metrics, logs and outputs? This cannot be undone.", len(ids))
	if len(ids) == 1 {
		msg = "Delete run " + ids[0] + " with its metrics, logs and outputs? This cannot be undone."
	}
	v.confirm("Delete runs?", msg, func(ok bool) {
		if !ok {
			return
		}
		v.delete.Disable()
		// The deletes go on if the view closes meanwhile: a half-done
		// delete would surprise more than a late one.
		v.tasks.Go(func(context.Context) {
			var errs []error
			for _, id := range ids {
				if err := v.backend.DeleteRun(context.Background(), id); err != nil {
					errs = append(errs, err)
				}
			}
			err := errors.Join(errs...)
			if err != nil && v.win != nil {
				onUI(func() { showError(fmt.Errorf("some runs were not deleted: %w", err), v.win) })
			}
			v.Reload(context.Background())
			if v.deleted != nil {
				v.deleted <- err
			}
		})
	})
}

// Compare opens the picked runs side by side: their curves of one metric
// overlaid, and the parameters that differ between them.
func (v *ArchiveView) Compare() {
	runs := v.model.pickedRuns()
	if len(runs) < 2 {
		return
	}
	cv := newCompareView(v.backend, runs, &v.tasks)
	v.compareView = cv
	if v.win == nil {
		v.loadCompare(cv)
		return
	}
	d := dialog.NewCustom(fmt.Sprintf("Compare %d runs", len(runs)), "Close", cv.content, v.win)
	d.Resize(fyne.NewSize(1000, 740))
	showWithKeys(d, v.win, d.Hide, d.Hide)
	v.loadCompare(cv)
}

// compareView overlays several runs' curves of one metric (legends say
// the parameters that tell them apart) and lists the parameters that
// differ.
type compareView struct {
	backend Backend
	runs    []engine.ArchiveEntry
	curves  *curvePanel
	diff    *widget.Table
	rows    [][]string // the diff table: a header row, then one row per parameter
	content fyne.CanvasObject
	names   []string
}

func newCompareView(b Backend, runs []engine.ArchiveEntry, t *tasks) *compareView {
	c := &compareView{backend: b, runs: runs}
	c.rows = paramDiff(runs)
	c.curves = newCurvePanel()
	c.curves.onMetric = func(name string) { t.Go(func(ctx context.Context) { c.draw(ctx, name) }) }
	c.diff = widget.NewTableWithHeaders(func() (int, int) {
		if len(c.rows) == 0 {
			return 0, 0
		}
		return len(c.rows) - 1, len(c.rows[0])
	}, func() fyne.CanvasObject {
		l := widget.NewLabel("")
		l.Truncation = fyne.TextTruncateEllipsis
		return l
	}, func(id widget.TableCellID, o fyne.CanvasObject) {
		o.(*widget.Label).SetText(c.rows[id.Row+1][id.Col])
	})
	c.diff.ShowHeaderColumn = false
	c.diff.UpdateHeader = func(id widget.TableCellID, o fyne.CanvasObject) {
		if len(c.rows) > 0 && id.Col >= 0 && id.Col < len(c.rows[0]) {
			o.(*widget.Label).SetText(c.rows[0][id.Col])
		}
	}
	for col := range len(runs) + 1 {
		c.diff.SetColumnWidth(col, 150)
	}
	diffTitle := heading("Parameters that differ")
	var diffBody fyne.CanvasObject = c.diff
	if len(c.rows) <= 1 {
		diffBody = widget.NewLabel("The runs have the same parameters.")
	}
	split := container.NewVSplit(c.curves.content, container.NewBorder(diffTitle, nil, nil, nil, diffBody))
	split.Offset = 0.65
	c.content = split
	return c
}

// load finds the metrics the runs share and draws the objective's (else
// a loss, else the first).
func (c *compareView) load(ctx context.Context) {
	seen := map[string]bool{}
	var names []string
	for _, r := range c.runs {
		pts, err := c.backend.LastMetrics(ctx, r.ID)
		if err != nil {
			continue
		}
		for _, p := range pts {
			if n := metricName(p); !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	choice := ""
	if obj := c.runs[0].Objective; obj != "" {
		for _, n := range names {
			if strings.HasSuffix(n, "/"+obj) {
				choice = n
				break
			}
		}
	}
	if choice == "" && len(names) > 0 {
		var pts []engine.Point
		for _, n := range names {
			st, key, _ := strings.Cut(n, "/")
			pts = append(pts, engine.Point{Stage: st, Key: key})
		}
		st, key := pickMetric(pts, "")
		choice = st + "/" + key
	}
	c.names = names
	c.draw(ctx, choice)
}

// draw puts the chosen metric of every run on the chart.
func (c *compareView) draw(ctx context.Context, name string) {
	d, err := compareData(ctx, c.backend, c.runs, name)
	if err != nil {
		return
	}
	onUIWait(func() { c.curves.show(c.names, d) })
}

// compareData reads one metric ("stage/key") of several runs, each named
// by the parameters that set it apart from the others.
func compareData(ctx context.Context, b Backend, runs []engine.ArchiveEntry, name string) (curveData, error) {
	stage, key, ok := strings.Cut(name, "/")
	if !ok {
		return curveData{}, fmt.Errorf("no metric chosen")
	}
	infos := make([]engine.RunInfo, len(runs))
	for i, r := range runs {
		infos[i] = r.RunInfo
	}
	differ := differingParams(infos)
	d := curveData{name: name, title: stage + " · " + key, id: name}
	for i, r := range runs {
		pts, err := b.Series(ctx, r.ID, stage, key)
		if err != nil {
			return curveData{}, fmt.Errorf("read %s of run %s: %w", name, r.ID, err)
		}
		s := newChartSeries(legendName(r, differ), len(pts))
		for _, p := range pts {
			s.add(p.Step, p.Wall, p.Value)
		}
		s.slot = i + 1
		d.series = append(d.series, s)
		d.id += fmt.Sprintf("|%s:%d", r.ID, len(pts))
	}
	return d, nil
}

// legendName names a run by the parameters that differ between the runs
// shown ("lr=0.1 hidden=128"), or by its short ID when none do.
func legendName(r engine.ArchiveEntry, differ []string) string {
	if pairs := paramPairs(r.Params, nonNil(differ)); len(pairs) > 0 {
		return strings.Join(pairs, " ")
	}
	return seriesLabel(r)
}

// seriesLabel names a run in a compare chart's legend and the diff
// table's header: its ID without the date ("194640-5e1879" for
// "20261129-194640-5e1879"), which the runs compared mostly share.
func seriesLabel(r engine.ArchiveEntry) string {
	if _, rest, ok := strings.Cut(r.ID, "-"); ok && strings.Contains(rest, "-") {
		return rest
	}
	return r.ID
}

// paramDiff is the parameters that differ between runs, as table rows: a
// header ("parameter", then each run's short ID), then one row per
// parameter, sorted by name. A parameter one run lacks shows as "—".
func paramDiff(runs []engine.ArchiveEntry) [][]string {
	head := []string{"parameter"}
	names := map[string]bool{}
	for _, r := range runs {
		head = append(head, seriesLabel(r))
		for k := range r.Params {
			names[k] = true
		}
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := [][]string{head}
	for _, k := range keys {
		row := []string{k}
		differ := false
		for i, r := range runs {
			val := "—"
			if x, ok := r.Params[k]; ok {
				val = formatParam(x)
			}
			row = append(row, val)
			if i > 0 && val != row[1] {
				differ = true
			}
		}
		if differ {
			rows = append(rows, row)
		}
	}
	return rows
}

// formatParam writes a parameter value the way templates do, with floats
// that JSON decoded from integers kept short.
func formatParam(x any) string {
	if f, ok := x.(float64); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return template.FormatValue(x)
}
