package ui

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/report"
)

// ReportExporter renders a report of the given runs in one format ("html",
// "pdf", "md", "csv" or "json"). A Markdown report comes with its figures,
// named under assetDir relative to the document. The app provides it: it
// reads the archive, which the window does not.
type ReportExporter func(ctx context.Context, runIDs []string, format string, opt report.Options, assetDir string) (doc []byte, files []report.File, err error)

// exportFormat is one choice of the export dialog.
type exportFormat struct {
	label, format, ext string
}

var exportFormats = []exportFormat{
	{"PDF (A4 or Letter, to print or send)", "pdf", ".pdf"},
	{"HTML (one self-contained file)", "html", ".html"},
	{"Markdown with PNG figures", "md", ".md"},
	{"CSV of every metric point", "csv", ".csv"},
	{"JSON of runs and metric points", "json", ".json"},
}

// exportForm holds the export dialog's widgets, for tests.
type exportForm struct {
	format  *keySelect
	page    *keySelect
	curves  *keyCheck
	logs    *keyCheck
	compare *checkSet
}

// exportChoice is what the user picked in the export dialog.
type exportChoice struct {
	format exportFormat
	opt    report.Options
}

// SetReportExporter enables the "Export report…" action on the selected
// run; its dialog offers the other runs of the same template to compare
// with (a comparison report). Call it before the window is shown.
func (v *MainView) SetReportExporter(x ReportExporter) {
	v.exporter = x
	v.updateExport()
}

// updateExport enables the export action when a run is selected and an
// exporter is set.
func (v *MainView) updateExport() {
	v.mu.Lock()
	ok := v.selected != "" && v.exporter != nil
	v.mu.Unlock()
	if ok {
		v.export.Enable()
	} else {
		v.export.Disable()
	}
}

// onExport asks what to export, then where, then writes the report.
func (v *MainView) onExport() {
	v.mu.Lock()
	id := v.selected
	var selected engine.RunInfo
	var others []engine.RunInfo // runs of the same template, to compare with
	for _, r := range v.all {
		if r.ID == id {
			selected = r
		}
	}
	for _, r := range v.all {
		if r.ID != id && r.Template == selected.Template && len(others) < report.MaxRuns-1 {
			others = append(others, r)
		}
	}
	v.mu.Unlock()
	if id == "" || v.exporter == nil {
		return
	}
	labels := make([]string, len(exportFormats))
	for i, f := range exportFormats {
		labels[i] = f.label
	}
	format := newKeySelect(labels, nil)
	format.SetSelectedIndex(0)
	page := newKeySelect([]string{"A4", "Letter"}, nil)
	page.SetSelected("A4")
	curves := newKeyCheck("Metric charts", nil)
	curves.SetChecked(true)
	logs := newKeyCheck("Logs of failed stages", nil)
	logs.SetChecked(true)
	format.OnChanged = func(string) {
		if exportFormats[format.SelectedIndex()].format == "pdf" {
			page.Enable()
		} else {
			page.Disable()
		}
	}
	items := []*widget.FormItem{
		widget.NewFormItem("Format", format),
		widget.NewFormItem("Page size", page),
		widget.NewFormItem("Include", container.NewVBox(curves, logs)),
	}
	compareIDs := map[string]string{} // label → run ID
	var labelsOf []string
	for _, r := range others {
		label := fmt.Sprintf("%s · %s", r.ID, r.State)
		compareIDs[label] = r.ID
		labelsOf = append(labelsOf, label)
	}
	compare := newCheckSet(labelsOf, nil)
	compare.box = container.NewVBox(compare.box.Objects...)
	if len(others) > 0 {
		scroll := container.NewVScroll(compare.box)
		scroll.SetMinSize(fyne.NewSize(0, min(float32(len(others)), 5)*36))
		items = append(items, widget.NewFormItem("Compare with", scroll))
	}
	d := dialog.NewForm("Export report of "+id, "Choose file…", "Cancel", items, func(ok bool) {
		if !ok {
			return
		}
		ids := []string{id}
		for _, label := range compare.Selected {
			ids = append(ids, compareIDs[label])
		}
		c := exportChoice{format: exportFormats[format.SelectedIndex()]}
		c.opt = report.Options{Page: strings.ToLower(page.Selected), NoCurves: !curves.Checked, NoLogs: !logs.Checked}
		v.saveDialog("report-"+id+c.format.ext, func(w fyne.URIWriteCloser, err error) {
			if err != nil {
				showError(err, v.win)
				return
			}
			if w == nil {
				return // the user cancelled
			}
			v.exportTo(ids, c, w)
		})
	}, v.win)
	d.Resize(fyne.NewSize(460, 0))
	v.exportDialog = d
	v.exportForm = exportForm{format: format, page: page, curves: curves, logs: logs, compare: compare}
	showWithKeys(d, v.win, d.Submit, d.Hide)
}

// showSaveDialog is the default saveDialog: Fyne's file save dialog.
func (v *MainView) showSaveDialog(name string, cb func(fyne.URIWriteCloser, error)) {
	d := dialog.NewFileSave(cb, v.win)
	d.SetFileName(name)
	d.Show()
}

// exportTo renders the report in the background, behind a progress
// dialog, and writes it (and a Markdown report's figures beside it).
func (v *MainView) exportTo(ids []string, c exportChoice, w fyne.URIWriteCloser) {
	bar := widget.NewProgressBarInfinite()
	msg := widget.NewLabel(fmt.Sprintf("Writing a %s report of %d run(s)…", strings.ToUpper(c.format.format), len(ids)))
	progress := dialog.NewCustomWithoutButtons("Exporting report", container.NewVBox(msg, bar), v.win)
	progress.Show()
	v.tasks.Go(func(context.Context) {
		// The report is written to the end once begun: a closed view
		// must not leave a half-written file.
		err := v.writeReport(context.Background(), ids, c, w)
		onUI(func() {
			bar.Stop()
			progress.Hide()
			if err != nil {
				showError(err, v.win)
			} else {
				v.status.SetText("Exported the report to " + w.URI().Path())
			}
			if v.exported != nil {
				v.exported <- err // buffered by the tests that set it
			}
		})
	})
}

func (v *MainView) writeReport(ctx context.Context, ids []string, c exportChoice, w fyne.URIWriteCloser) (err error) {
	defer func() {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("save the report: %w", cerr)
		}
	}()
	name := w.URI().Name()
	assets := strings.TrimSuffix(name, path.Ext(name)) + "_files"
	doc, files, err := v.exporter(ctx, ids, c.format.format, c.opt, assets)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		if err := writeBeside(w.URI(), files); err != nil {
			return err
		}
	}
	if _, err := w.Write(doc); err != nil {
		return fmt.Errorf("save the report: %w", err)
	}
	return nil
}

// writeBeside writes files named relative to the document at doc.
func writeBeside(doc fyne.URI, files []report.File) error {
	parent, err := storage.Parent(doc)
	if err != nil {
		return fmt.Errorf("find the folder of %s: %w", doc.Name(), err)
	}
	for _, f := range files {
		u := parent
		parts := strings.Split(f.Name, "/")
		for i, p := range parts {
			if u, err = storage.Child(u, p); err != nil {
				return err
			}
			if i < len(parts)-1 {
				if err := storage.CreateListable(u); err != nil {
					if ok, _ := storage.Exists(u); !ok {
						return fmt.Errorf("create the figures folder %s: %w", u.Name(), err)
					}
				}
			}
		}
		fw, err := storage.Writer(u)
		if err != nil {
			return fmt.Errorf("write figure %s: %w", f.Name, err)
		}
		_, werr := fw.Write(f.Data)
		cerr := fw.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return fmt.Errorf("write figure %s: %w", f.Name, err)
		}
	}
	return nil
}
