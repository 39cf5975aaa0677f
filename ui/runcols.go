package ui

import (
	"errors"
	"sort"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// The Runs page's parameter columns: by default a run's second line says
// the parameters that set it apart within its sweep; with columns chosen
// (Columns…), it is a row of cells, one per chosen parameter, under a
// header, so that runs compare at a glance.

// runColumnWidths are the ID cell's and each parameter cell's widths.
const (
	runIDWidth    = 210
	runParamWidth = 110
)

// prefRunColumns keeps the Runs page's chosen columns, comma-separated.
const prefRunColumns = "runs.columns"

// columnWidths are the widths of the ID cell and n parameter cells.
func columnWidths(n int) []float32 {
	w := []float32{runIDWidth}
	for range n {
		w = append(w, runParamWidth)
	}
	return w
}

// runParams lists every parameter the runs have, sorted.
func runParams(runs []engine.RunInfo) []string {
	seen := map[string]bool{}
	for _, r := range runs {
		for k := range r.Params {
			seen[k] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// columnCells are a run's cells under the chosen columns: its ID (marked
// when the sentinel changed it), then each parameter's value, "1 → 0.1"
// for one the sentinel changed, "—" for one it has not.
func columnCells(r engine.RunInfo, cols []string, ch sentinelChange) []string {
	id := r.ID
	if ch.retried {
		id += " ⚑"
	}
	changed := ch.changedParams(r.Params)
	out := []string{id}
	for _, k := range cols {
		x, ok := r.Params[k]
		switch {
		case !ok:
			out = append(out, "—")
		case contains(changed, k):
			out = append(out, formatParam(ch.launched[k])+" → "+formatParam(x))
		default:
			out = append(out, formatParam(x))
		}
	}
	return out
}

// setColumns shows the chosen parameter columns (none: each row's line of
// what differs) and keeps the choice for next time.
func (v *MainView) setColumns(cols []string) {
	v.mu.Lock()
	v.columns = append([]string(nil), cols...)
	v.mu.Unlock()
	if app := fyne.CurrentApp(); app != nil {
		app.Preferences().SetString(prefRunColumns, strings.Join(cols, ","))
	}
	objs := []fyne.CanvasObject{widget.NewLabelWithStyle("run", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})}
	for _, k := range cols {
		l := widget.NewLabelWithStyle(k, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		l.Truncation = fyne.TextTruncateEllipsis
		objs = append(objs, l)
	}
	v.colHead.Objects = objs
	v.colHead.Layout = &widthsLayout{widths: columnWidths(len(cols))}
	if len(cols) == 0 {
		v.colHead.Hide()
	} else {
		v.colHead.Show()
	}
	v.colHead.Refresh()
	v.list.Refresh()
}

// loadColumns restores the columns chosen last time.
func (v *MainView) loadColumns() {
	app := fyne.CurrentApp()
	if app == nil {
		return
	}
	if s := app.Preferences().String(prefRunColumns); s != "" {
		v.setColumns(strings.Split(s, ","))
	}
}

// chooseColumns lets the user pick the parameter columns; Enter keeps the
// choice, Escape drops it.
func (v *MainView) chooseColumns() {
	v.mu.Lock()
	params := runParams(v.all)
	chosen := map[string]bool{}
	for _, k := range v.columns {
		chosen[k] = true
	}
	v.mu.Unlock()
	if v.win == nil {
		return
	}
	if len(params) == 0 {
		showError(errNoParams, v.win)
		return
	}
	checks := make([]*keyCheck, len(params))
	box := container.NewVBox()
	hint := widget.NewLabel("None ticked: each run says what sets it apart in its sweep.")
	hint.Importance = widget.LowImportance
	box.Add(hint)
	for i, k := range params {
		checks[i] = newKeyCheck(k, nil)
		checks[i].Checked = chosen[k]
		box.Add(checks[i])
	}
	apply := func() {
		var cols []string
		for i, k := range params {
			if checks[i].Checked {
				cols = append(cols, k)
			}
		}
		v.setColumns(cols)
	}
	scroll := container.NewVScroll(box)
	scroll.SetMinSize(fyne.NewSize(300, min(float32(len(checks)+1)*38, 360)))
	var d dialog.Dialog
	d = dialog.NewCustomConfirm("Parameter columns", "Show", "Cancel", scroll, func(ok bool) {
		if ok {
			apply()
		}
	}, v.win)
	showWithKeys(d, v.win, func() { apply(); d.Hide() }, d.Hide)
}

var errNoParams = errors.New("no run has parameters yet: launch one first")
