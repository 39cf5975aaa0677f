package ui

import (
	"fmt"
	"image"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// runDetail shows the selected run: its parameters, its stages with
// attempts, exit codes and timings, and the last value of each metric.
type runDetail struct {
	title     *widget.Label
	info      *widget.Label
	stages    *fyne.Container
	metrics   *fyne.Container
	anomalies *fyne.Container
	gpus      *fyne.Container // how the run used its GPUs, one line each
	gpuBox    *fyne.Container
	simulated map[string]bool // GPU UUIDs of the shown run that are simulated
	content   fyne.CanvasObject

	curve     *canvas.Image
	picker    *widget.Select
	curveBox  *fyne.Container
	onMetric  func(name string) // the user picked another curve
	onDismiss func(id int64)    // the user dismissed an anomaly
	// onRetryFix, when set, opens the wizard on the run with an anomaly's
	// fix applied; run-scope anomalies get a button for it.
	onRetryFix func(fixed engine.RunInfo, changes []string)
	picking    bool          // the picker is being filled, not chosen from
	logY       *widget.Check // the curve's Y axis on a log scale
	onLogY     func(on bool)

	// The log pane: a stage picker, a search that keeps matching lines,
	// and the tail of the stage's latest attempt.
	logBox     *fyne.Container
	logStage   *widget.Select
	logSearch  *widget.Entry
	logText    *widget.Label
	logNote    *widget.Label
	logRaw     string // the tail as read, before the search
	onLogStage func(stage string)
}

func newRunDetail() *runDetail {
	d := &runDetail{
		title:     widget.NewLabelWithStyle("Select a run", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		info:      widget.NewLabel("Its stages, attempts and metrics show here."),
		stages:    container.NewVBox(),
		metrics:   container.NewVBox(),
		anomalies: container.NewVBox(),
		gpus:      container.NewVBox(),
	}
	d.info.Wrapping = fyne.TextWrapWord
	d.curve = canvas.NewImageFromImage(nil)
	d.curve.FillMode = canvas.ImageFillContain
	d.curve.SetMinSize(fyne.NewSize(curveWidth, curveHeight))
	d.picker = widget.NewSelect(nil, func(name string) {
		if !d.picking && d.onMetric != nil {
			d.onMetric(name)
		}
	})
	d.logY = widget.NewCheck("log y", func(on bool) {
		if d.onLogY != nil {
			d.onLogY(on)
		}
	})
	d.curveBox = container.NewVBox(container.NewBorder(nil, nil, heading("Curve"), container.NewHBox(d.logY, d.picker)), d.curve)
	d.curveBox.Hide()
	d.logStage = widget.NewSelect(nil, func(stage string) {
		if !d.picking && d.onLogStage != nil {
			d.onLogStage(stage)
		}
	})
	d.logSearch = widget.NewEntry()
	d.logSearch.SetPlaceHolder("Show lines containing…")
	d.logSearch.OnChanged = func(string) { d.refreshLog() }
	d.logText = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	d.logNote = widget.NewLabel("")
	d.logNote.Importance = widget.LowImportance
	logScroll := container.NewScroll(d.logText)
	logScroll.SetMinSize(fyne.NewSize(curveWidth, logHeight))
	d.logBox = container.NewVBox(
		container.NewBorder(nil, nil, heading("Log"), d.logStage, d.logSearch),
		d.logNote, logScroll)
	d.logBox.Hide()
	d.gpuBox = container.NewVBox(widget.NewSeparator(), heading("GPUs"), d.gpus)
	d.gpuBox.Hide()
	d.content = container.NewVScroll(container.NewVBox(
		d.title, d.info, d.curveBox, d.logBox,
		widget.NewSeparator(), heading("Anomalies"), d.anomalies,
		widget.NewSeparator(), heading("Stages"), d.stages, d.gpuBox,
		widget.NewSeparator(), heading("Metrics (last value)"), d.metrics,
	))
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

// logHeight is the log pane's height, in points: about 15 lines show at
// once, the rest scroll.
const logHeight = 240

// showLog shows the log pane's stage choices and tail.
func (d *runDetail) showLog(selected bool, l logView) {
	if !selected {
		d.logBox.Hide()
		return
	}
	d.picking = true
	d.logStage.SetOptions(l.stages)
	d.logStage.SetSelected(l.stage)
	d.picking = false
	d.logRaw = l.text
	d.logNote.SetText(l.note)
	d.refreshLog()
	d.logBox.Show()
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
}

func heading(s string) *widget.Label {
	return widget.NewLabelWithStyle(s, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
}

func (d *runDetail) show(r *engine.RunInfo, pts []engine.Point, anomalies []engine.AnomalyInfo) {
	if r == nil {
		d.title.SetText("Select a run")
		d.info.SetText("Its stages, attempts and metrics show here.")
		d.stages.Objects, d.metrics.Objects, d.anomalies.Objects = nil, nil, nil
		d.stages.Refresh()
		d.metrics.Refresh()
		d.anomalies.Refresh()
		return
	}
	d.title.SetText(fmt.Sprintf("%s %s — %s", r.Template, r.TemplateVersion, r.State))
	lines := []string{
		"Run " + r.ID,
		"Parameters: " + strings.Join(r.ParamPairs(), ", "),
		fmt.Sprintf("Seed %d · priority %d · executor %s", r.Seed, r.Priority, r.Executor),
	}
	if gpus := runGPUs(r.Stages); len(gpus) > 0 {
		lines = append(lines, "GPUs: "+strings.Join(d.gpuNames(gpus), ", "))
	}
	if r.Error != "" {
		why := "Why it failed: "
		if r.State != engine.Failed {
			why = "Note: "
		}
		lines = append(lines, why+r.Error)
	}
	lines = append(lines, runNotes(*r)...)
	d.info.SetText(strings.Join(lines, "\n"))

	rows := []fyne.CanvasObject{}
	now := time.Now()
	for _, s := range r.Stages {
		exit := "–"
		if s.ExitCode != nil {
			exit = strconv.Itoa(*s.ExitCode)
		}
		took := "–"
		if !s.StartedAt.IsZero() {
			end := s.FinishedAt
			if end.IsZero() {
				end = now
			}
			took = end.Sub(s.StartedAt).Round(100 * time.Millisecond).String()
		}
		text := fmt.Sprintf("attempt %d/%d · exit %s · %s", s.Attempts, s.MaxAttempts, exit, took)
		if gpus := latestGPUs(s); len(gpus) > 0 {
			text += " · GPU " + strings.Join(d.gpuNames(gpus), ",")
		}
		line := widget.NewLabel(text)
		row := container.NewHBox(container.NewCenter(chip(s.Name, s.State)), line)
		rows = append(rows, row)
		if s.Reason != "" {
			note := widget.NewLabel("    " + s.Reason)
			note.Wrapping = fyne.TextWrapWord
			note.Importance = widget.LowImportance
			rows = append(rows, note)
		}
	}
	d.stages.Objects = rows
	d.stages.Refresh()

	var mrows []fyne.CanvasObject
	for _, p := range sortedPoints(pts, r.Stages) {
		mrows = append(mrows, widget.NewLabel(fmt.Sprintf("%s · %s = %.4g (step %d)", p.Stage, p.Key, p.Value, p.Step)))
	}
	if len(mrows) == 0 {
		mrows = append(mrows, widget.NewLabel("No metrics yet."))
	}
	d.metrics.Objects = mrows
	d.metrics.Refresh()

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
		if fixed, changes, ok := retryFix(*r, a.Kind); ok && !dismissed && d.onRetryFix != nil {
			retry := widget.NewButtonWithIcon("Retry with the fix", theme.ViewRefreshIcon(), func() { d.onRetryFix(fixed, changes) })
			arows = append(arows, container.NewHBox(layout.NewSpacer(), retry))
		}
	}
	if len(arows) == 0 {
		arows = append(arows, widget.NewLabel("None."))
	}
	d.anomalies.Objects = arows
	d.anomalies.Refresh()
}

// showCurve shows the chosen metric's curve and the metrics to choose from.
func (d *runDetail) showCurve(selected bool, pts []engine.Point, chosen string, img image.Image) {
	if !selected || img == nil {
		d.curveBox.Hide()
		return
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range pts {
		if n := metricName(p); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	d.picking = true
	d.picker.SetOptions(names)
	d.picker.SetSelected(chosen)
	d.picking = false
	d.curve.Image = img
	d.curve.Refresh()
	d.curveBox.Show()
}

// runNotes are the lines the run view adds under a run's summary: why a
// stage failed (the recognised cause, its fix, the end of its stderr),
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
	if r.MetricsWaiting != "" {
		out = append(out, "Metrics: "+r.MetricsWaiting)
	}
	if r.ObjectiveMissing != "" {
		out = append(out, "Objective: "+r.ObjectiveMissing)
	}
	return out
}
