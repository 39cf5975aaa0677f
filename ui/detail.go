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
	content   fyne.CanvasObject

	curve     *canvas.Image
	picker    *widget.Select
	curveBox  *fyne.Container
	onMetric  func(name string) // the user picked another curve
	onDismiss func(id int64)    // the user dismissed an anomaly
	picking   bool              // the picker is being filled, not chosen from
}

func newRunDetail() *runDetail {
	d := &runDetail{
		title:     widget.NewLabelWithStyle("Select a run", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		info:      widget.NewLabel("Its stages, attempts and metrics show here."),
		stages:    container.NewVBox(),
		metrics:   container.NewVBox(),
		anomalies: container.NewVBox(),
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
	d.curveBox = container.NewVBox(container.NewBorder(nil, nil, heading("Curve"), d.picker), d.curve)
	d.curveBox.Hide()
	d.content = container.NewVScroll(container.NewVBox(
		d.title, d.info, d.curveBox,
		widget.NewSeparator(), heading("Anomalies"), d.anomalies,
		widget.NewSeparator(), heading("Stages"), d.stages,
		widget.NewSeparator(), heading("Metrics (last value)"), d.metrics,
	))
	return d
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
	if r.Error != "" {
		lines = append(lines, "Why it failed: "+r.Error)
	}
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
		line := widget.NewLabel(fmt.Sprintf("attempt %d/%d · exit %s · %s", s.Attempts, s.MaxAttempts, exit, took))
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
