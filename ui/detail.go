package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// runDetail shows the selected run: a header (what it is, its parameters,
// why it failed and the error line that says so), its curves, and tabs for
// the stages (a DAG picture and every attempt), the anomalies, the log and
// the last value of each metric. Nothing here is a scroll inside a
// scroll: each tab scrolls on its own, so the wheel always moves what is
// under the pointer.
type runDetail struct {
	title   *widget.Label
	badges  *fyne.Container
	idLine  *widget.Label
	params  *widget.Label
	why     *widget.Label // why it failed, or a note (cancelled by request)
	errLine *widget.Label // the last error line of the failed stage's stderr
	notes   *widget.Label // the recognised cause and fix, waiting points, a missing objective
	header  *fyne.Container
	content fyne.CanvasObject
	body    *fyne.Container // the split under the header, hidden with no run

	curves *curvePanel
	tabs   *container.AppTabs

	dag        *dagView
	stages     *fyne.Container
	stagesTab  *container.Scroll
	anomalies  *fyne.Container
	anomTab    *container.Scroll
	anomItem   *container.TabItem
	metrics    *fyne.Container
	metricsTab *container.Scroll

	gpus      *fyne.Container // how the run used its GPUs, one line each
	gpuBox    *fyne.Container
	simulated map[string]bool // GPU UUIDs of the shown run that are simulated

	host    *fyne.Container // what each stage used of the host, one line each
	hostBox *fyne.Container

	onMetric  func(name string) // the user picked another curve
	onDismiss func(id int64)    // the user dismissed an anomaly
	// onRetryFix, when set, opens the wizard on the run with an anomaly's
	// fix applied; run-scope anomalies get a button for it.
	onRetryFix func(fixed engine.RunInfo, changes []string)
	picking    bool // the pickers are being filled, not chosen from

	// The log pane: a stage picker, a search that keeps matching lines,
	// and the tail of the stage's latest attempt.
	logBox     *fyne.Container
	logStage   *widget.Select
	logSearch  *keyEntry
	logText    *widget.Label
	logNote    *widget.Label
	logScroll  *container.Scroll
	logRaw     string // the tail as read, before the search
	logShown   string // the run/stage/attempt whose tail is shown
	onLogStage func(stage string)

	shown string // the run shown: another one starts every pane at its top
}

func newRunDetail() *runDetail {
	d := &runDetail{
		title:     widget.NewLabelWithStyle("Select a run", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		badges:    container.NewHBox(),
		idLine:    widget.NewLabel("Its stages, attempts, curves and log show here."),
		params:    widget.NewLabel(""),
		why:       widget.NewLabel(""),
		errLine:   widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Monospace: true}),
		notes:     widget.NewLabel(""),
		stages:    container.NewVBox(),
		anomalies: container.NewVBox(),
		metrics:   container.NewVBox(),
		dag:       newDAGView(),
		gpus:      container.NewVBox(),
		host:      container.NewVBox(),
	}
	d.title.Truncation = fyne.TextTruncateEllipsis
	d.idLine.Importance = widget.LowImportance
	d.idLine.Truncation = fyne.TextTruncateEllipsis
	d.params.Wrapping = fyne.TextWrapWord
	d.why.Wrapping = fyne.TextWrapWord
	d.errLine.Importance = widget.DangerImportance
	d.errLine.Wrapping = fyne.TextWrapBreak
	d.why.Hide()
	d.errLine.Hide()
	d.notes.Wrapping = fyne.TextWrapWord
	d.notes.Hide()
	d.params.Hide()

	d.curves = newCurvePanel()
	d.curves.onMetric = func(name string) {
		if d.onMetric != nil {
			d.onMetric(name)
		}
	}

	d.logStage = widget.NewSelect(nil, func(stage string) {
		if !d.picking && d.onLogStage != nil {
			d.onLogStage(stage)
		}
	})
	d.logSearch = newKeyEntry()
	d.logSearch.SetPlaceHolder("Show lines containing…")
	d.logSearch.OnChanged = func(string) { d.refreshLog() }
	d.logText = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	d.logText.Wrapping = fyne.TextWrapBreak // long lines wrap: the log never scrolls sideways
	d.logNote = widget.NewLabel("")
	d.logNote.Importance = widget.LowImportance
	d.logScroll = container.NewVScroll(d.logText)
	d.logBox = container.NewBorder(container.NewVBox(
		container.NewBorder(nil, nil, heading("Log"), d.logStage, d.logSearch), d.logNote), nil, nil, nil, d.logScroll)

	d.gpuBox = container.NewVBox(widget.NewSeparator(), heading("GPUs"), d.gpus)
	d.gpuBox.Hide()
	d.hostBox = container.NewVBox(widget.NewSeparator(), heading("Memory and CPU"), d.host)
	d.hostBox.Hide()
	d.stagesTab = container.NewVScroll(container.NewPadded(container.NewVBox(d.dag, widget.NewSeparator(), d.stages, d.gpuBox, d.hostBox)))
	d.anomTab = container.NewVScroll(d.anomalies)
	d.metricsTab = container.NewVScroll(d.metrics)
	d.anomItem = container.NewTabItem("Anomalies", d.anomTab)
	d.tabs = container.NewAppTabs(
		container.NewTabItem("Stages", d.stagesTab),
		d.anomItem,
		container.NewTabItem("Log", d.logBox),
		container.NewTabItem("Metrics", d.metricsTab),
	)
	split := container.NewVSplit(d.curves.content, d.tabs)
	split.Offset = 0.52
	d.body = container.NewStack(split)
	d.body.Hide()
	titleRow := container.NewBorder(nil, nil, nil, d.badges, d.title)
	d.header = container.NewVBox(titleRow, d.idLine, d.params, d.why, d.errLine, d.notes)
	d.content = container.NewBorder(d.header, nil, nil, nil, d.body)
	return d
}

// latestGPUs is the GPUs the stage's latest attempt ran on.
func latestGPUs(s engine.StageInfo) []string {
	if len(s.History) == 0 {
		return nil
	}
	latest := s.History[0]
	for _, a := range s.History[1:] {
		if a.Number > latest.Number {
			latest = a
		}
	}
	return latest.GPUs
}

// runGPUs is every GPU the run's stages last ran on, each once, in the
// order the stages first used them.
func runGPUs(stages []engine.StageInfo) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range stages {
		for _, g := range latestGPUs(s) {
			if !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	return out
}

// shortGPUs cuts GPU UUIDs to what tells them apart on a machine
// ("GPU-51a1a7ed…"); indexes stay as they are.
func shortGPUs(gpus []string) []string {
	out := make([]string, len(gpus))
	for i, g := range gpus {
		if len(g) > 16 && strings.HasPrefix(g, "GPU-") {
			g = g[:12] + "…"
		}
		out[i] = g
	}
	return out
}

// showLog shows the log pane's stage choices and tail. A failed stage's
// tail opens at its end, where the error is.
func (d *runDetail) showLog(selected bool, l logView, runID string) {
	if !selected {
		return
	}
	d.picking = true
	d.logStage.SetOptions(l.stages)
	d.logStage.SetSelected(l.stage)
	d.picking = false
	d.logRaw = l.text
	d.logNote.SetText(l.note)
	d.refreshLog()
	key := fmt.Sprintf("%s|%s|%d", runID, l.stage, l.attempt)
	if key != d.logShown {
		d.logShown = key
		if l.failed {
			d.logScroll.ScrollToBottom()
		} else {
			d.logScroll.ScrollToTop()
		}
	}
}

// refreshLog shows the tail through the search.
func (d *runDetail) refreshLog() {
	shown := filterLog(d.logRaw, d.logSearch.Text)
	switch {
	case d.logRaw != "" && shown == "":
		d.logNote.SetText("No line contains " + strconv.Quote(d.logSearch.Text) + ".")
	case d.logRaw != "":
		d.logNote.SetText("")
	}
	d.logText.SetText(strings.TrimSuffix(shown, "\n"))
	d.logScroll.Refresh()
}

func heading(s string) *widget.Label {
	return widget.NewLabelWithStyle(s, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
}

// setLine shows a header line with text, or hides it when there is none.
func setLine(l *widget.Label, text string) {
	l.SetText(text)
	if text == "" {
		l.Hide()
	} else {
		l.Show()
	}
}

// sentinelRetries counts, per stage, the attempts the sentinel started
// (its "action_retry" records).
func sentinelRetries(anomalies []engine.AnomalyInfo) map[string]int {
	out := map[string]int{}
	for _, a := range anomalies {
		if a.Kind == "action_retry" {
			out[a.Stage]++
		}
	}
	return out
}

// paramsText is the header's parameter line. With the values the run was
// launched with (when the read model gives them), a parameter the
// sentinel changed reads "lr 1 → 0.1".
func paramsText(r engine.RunInfo, launched map[string]any) string {
	var parts []string
	for _, k := range sortedParamKeys(r.Params) {
		now := formatParam(r.Params[k])
		if was, ok := launched[k]; ok && formatParam(was) != now {
			parts = append(parts, fmt.Sprintf("%s %s → %s", k, formatParam(was), now))
			continue
		}
		parts = append(parts, k+"="+now)
	}
	if len(parts) == 0 {
		return ""
	}
	return "Parameters: " + strings.Join(parts, " · ")
}

// opening says a run is being read: a click shows at once that it took,
// whatever the read costs (the previous run's panes are not left up as if
// they were the new one's).
func (d *runDetail) opening(id string) {
	if id == d.shown {
		return
	}
	d.title.SetText("Opening run " + id + "…")
	d.idLine.SetText("Reading its stages, curves and log.")
	setLine(d.params, "")
	setLine(d.why, "")
	setLine(d.errLine, "")
	setLine(d.notes, "")
	d.badges.Objects = nil
	d.badges.Refresh()
	d.body.Hide()
	d.header.Refresh()
}

// show fills the header and the tabs. failLine is the failed stage's last
// error line ("" when none).
// launched is what the run was launched with when the sentinel changed it
// and the engine says (nil otherwise).
func (d *runDetail) show(r *engine.RunInfo, pts []engine.Point, anomalies []engine.AnomalyInfo, failLine string, launched map[string]any) {
	if r == nil {
		d.shown = ""
		d.title.SetText("Select a run")
		d.idLine.SetText("Its stages, attempts, curves and log show here.")
		setLine(d.params, "")
		setLine(d.why, "")
		setLine(d.errLine, "")
		d.badges.Objects = nil
		d.badges.Refresh()
		d.body.Hide()
		d.header.Refresh()
		return
	}
	if r.ID != d.shown {
		// Another run: every pane starts at its top.
		d.shown = r.ID
		d.stagesTab.ScrollToTop()
		d.anomTab.ScrollToTop()
		d.metricsTab.ScrollToTop()
		d.logScroll.ScrollToTop()
	}
	d.body.Show()
	d.title.SetText(fmt.Sprintf("%s %s — %s", r.Template, r.TemplateVersion, r.State))
	id := fmt.Sprintf("Run %s · seed %d · priority %d · %s", r.ID, r.Seed, r.Priority, r.Executor)
	if gpus := runGPUs(r.Stages); len(gpus) > 0 {
		id += " · GPU " + strings.Join(d.gpuNames(shortGPUs(gpus), gpus), ", ")
	}
	d.idLine.SetText(id)
	setLine(d.params, paramsText(*r, launched))
	why := ""
	if r.Error != "" {
		why = "Why it failed: " + r.Error
		if r.State != engine.Failed {
			why = "Note: " + r.Error
		}
	}
	setLine(d.why, why)
	d.why.Importance = widget.MediumImportance
	if r.State == engine.Failed {
		d.why.Importance = widget.DangerImportance
	}
	setLine(d.errLine, failLine)
	setLine(d.notes, strings.Join(runNotes(*r), "\n"))

	retries := sentinelRetries(anomalies)
	var badges []fyne.CanvasObject
	if len(retries) > 0 {
		badges = append(badges, container.NewCenter(tag("changed by the sentinel", stateColor(engine.Cancelled))))
	}
	badges = append(badges, container.NewCenter(chip(string(r.State), r.State)))
	d.badges.Objects = badges
	d.badges.Refresh()
	// The header's lines wrap: lay it out again now that they changed, so
	// that nothing below starts where a shorter header ended.
	d.header.Refresh()

	now := time.Now()
	d.dag.set(r.Stages, retries, now)
	d.stages.Objects = stageRows(r.Stages, retries, now)
	d.stages.Refresh()

	var mrows []fyne.CanvasObject
	for _, p := range sortedPoints(pts, r.Stages) {
		mrows = append(mrows, widget.NewLabel(fmt.Sprintf("%s · %s = %s (step %d)", p.Stage, p.Key, formatValue(p.Value), p.Step)))
	}
	if len(mrows) == 0 {
		mrows = append(mrows, widget.NewLabel("No metrics yet."))
	}
	d.metrics.Objects = mrows
	d.metrics.Refresh()

	d.anomalies.Objects = d.anomalyRows(*r, anomalies)
	d.anomalies.Refresh()
	n := 0
	for _, a := range anomalies {
		if !strings.HasPrefix(a.Kind, "action_") && a.DismissedAt.IsZero() {
			n++
		}
	}
	title := "Anomalies"
	if n > 0 {
		title = fmt.Sprintf("Anomalies (%d)", n)
	}
	if d.anomItem.Text != title {
		d.anomItem.Text = title
		d.tabs.Refresh()
	}
}

// stageRows are the Stages tab's lines: per stage its attempts, exit,
// time and GPUs, then each attempt's outcome, so that an attempt the
// sentinel retried is seen with what happened to it.
func stageRows(stages []engine.StageInfo, retries map[string]int, now time.Time) []fyne.CanvasObject {
	var rows []fyne.CanvasObject
	for _, s := range stages {
		exit := "–"
		if s.ExitCode != nil {
			exit = strconv.Itoa(*s.ExitCode)
		}
		took := "–"
		if d := stageDuration(s, now); d > 0 {
			took = shortDuration(d)
		}
		text := fmt.Sprintf("%s · exit %s · %s", attemptsText(s, retries[s.Name]), exit, took)
		if gpus := latestGPUs(s); len(gpus) > 0 {
			text += " · GPU " + strings.Join(shortGPUs(gpus), ",")
		}
		if u := usageText(s); u != "" {
			text += " · " + u
		}
		line := widget.NewLabel(text)
		line.Wrapping = fyne.TextWrapWord
		rows = append(rows, container.NewBorder(nil, nil, container.NewCenter(chip(s.Name, s.State)), nil, line))
		if s.Reason != "" {
			note := widget.NewLabel("    " + s.Reason)
			note.Wrapping = fyne.TextWrapWord
			note.Importance = widget.LowImportance
			rows = append(rows, note)
		}
		if len(s.History) > 1 {
			for _, a := range s.History {
				t := fmt.Sprintf("    attempt %d: %s", a.Number, a.State)
				if a.Reason != "" {
					t += " — " + a.Reason
				}
				if !a.StartedAt.IsZero() && !a.FinishedAt.IsZero() {
					t += " · " + shortDuration(a.FinishedAt.Sub(a.StartedAt))
				}
				l := widget.NewLabel(t)
				l.Wrapping = fyne.TextWrapWord
				l.Importance = widget.LowImportance
				rows = append(rows, l)
			}
		}
	}
	return rows
}

func (d *runDetail) anomalyRows(r engine.RunInfo, anomalies []engine.AnomalyInfo) []fyne.CanvasObject {
	var arows []fyne.CanvasObject
	for _, a := range anomalies {
		head := widget.NewLabel(fmt.Sprintf("%s · %s · %s: %s", a.At.Local().Format(time.TimeOnly), a.Kind, a.Stage, a.Message))
		head.Wrapping = fyne.TextWrapWord
		dismissed := !a.DismissedAt.IsZero()
		switch {
		case dismissed:
			head.Importance = widget.LowImportance
			head.SetText(head.Text + " (dismissed)")
		case a.Severity == "critical":
			head.Importance = widget.DangerImportance
		case a.Severity == "warning":
			head.Importance = widget.WarningImportance
		}
		var row fyne.CanvasObject = head
		if !dismissed && a.Severity != "info" && d.onDismiss != nil {
			id := a.ID
			btn := widget.NewButton("Dismiss", func() { d.onDismiss(id) })
			btn.Importance = widget.LowImportance
			row = container.NewBorder(nil, nil, nil, container.NewVBox(btn), head)
		}
		arows = append(arows, row)
		if a.Fix != "" {
			fix := widget.NewLabel("    Fix: " + a.Fix)
			fix.Wrapping = fyne.TextWrapWord
			fix.Importance = widget.LowImportance
			arows = append(arows, fix)
		}
		if fixed, changes, ok := retryFix(r, a.Kind); ok && !dismissed && d.onRetryFix != nil {
			retry := widget.NewButtonWithIcon("Retry with the fix", theme.ViewRefreshIcon(), func() { d.onRetryFix(fixed, changes) })
			arows = append(arows, container.NewHBox(layout.NewSpacer(), retry))
		}
	}
	if len(arows) == 0 {
		arows = append(arows, widget.NewLabel("None."))
	}
	return arows
}

// showCurve shows the chosen metric's curves and the metrics to choose
// from.
func (d *runDetail) showCurve(selected bool, pts []engine.Point, data curveData) {
	if !selected {
		return
	}
	d.curves.show(metricNames(pts), data)
}

// runNotes are the lines the run view adds under a run's summary: why a
// stage failed (the recognised cause, its fix, the end of its stderr),
// how each stage's metrics were read (the presets found in its output),
// metric points that wait for the database, an objective that never
// appeared.
func runNotes(r engine.RunInfo) []string {
	var out []string
	for _, st := range r.Stages {
		if f := st.Failure; f != nil {
			if f.Summary != "" {
				out = append(out, fmt.Sprintf("Stage %s, attempt %d: %s", st.Name, f.Attempt, f.Summary))
			}
			if f.Fix != "" {
				out = append(out, "Fix: "+f.Fix)
			}
			if len(f.Tail) > 0 {
				tail := f.Tail
				if len(tail) > 5 {
					tail = tail[len(tail)-5:]
				}
				out = append(out, "Last lines of its stderr:")
				for _, l := range tail {
					out = append(out, "    "+l)
				}
			}
		}
	}
	for _, st := range r.Stages {
		for _, m := range st.MetricsRead {
			out = append(out, fmt.Sprintf("Stage %s: %s", st.Name, m))
		}
	}
	if r.MetricsWaiting != "" {
		out = append(out, "Metrics: "+r.MetricsWaiting)
	}
	if r.ObjectiveMissing != "" {
		out = append(out, "Objective: "+r.ObjectiveMissing)
	}
	return out
}
