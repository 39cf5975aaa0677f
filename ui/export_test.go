package ui

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/report"
)

// recordingExporter stands in for the app's exporter and remembers calls.
type recordingExporter struct {
	mu    sync.Mutex
	calls []exportCall
	err   error
}

type exportCall struct {
	ids              []string
	format, assetDir string
	opt              report.Options
}

func (r *recordingExporter) export(_ context.Context, ids []string, format string, opt report.Options, assetDir string) ([]byte, []report.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, exportCall{ids: ids, format: format, opt: opt, assetDir: assetDir})
	if r.err != nil {
		return nil, nil, r.err
	}
	var files []report.File
	if format == "md" {
		files = []report.File{{Name: assetDir + "/fig01-loss.png", Data: []byte("png")}}
	}
	return []byte("report as " + format), files, nil
}

// exportView is a view with one finished run selected, an exporter, and a
// save "dialog" that answers with a file in dir.
func exportView(t *testing.T, rec *recordingExporter, dir string) *MainView {
	t.Helper()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Succeeded, CreatedAt: time.Now(),
		Stages: stages(engine.Succeeded)}}}
	v, _ := newTestView(t, b)
	v.exported = make(chan error, 1)
	v.saveDialog = func(name string, cb func(fyne.URIWriteCloser, error)) {
		w, err := storage.Writer(storage.NewFileURI(filepath.Join(dir, name)))
		cb(w, err)
	}
	v.Reload(context.Background())
	require.True(t, v.export.Disabled(), "no exporter yet")
	v.SetReportExporter(rec.export)
	require.True(t, v.export.Disabled(), "no run selected")
	v.list.Select(0)
	require.False(t, v.export.Disabled(), "a selected run can be exported")
	return v
}

func waitExport(t *testing.T, v *MainView) error {
	t.Helper()
	select {
	case err := <-v.exported:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the export did not finish")
		return nil
	}
}

func TestExportWritesTheChosenFormat(t *testing.T) {
	cases := []struct {
		name    string
		format  int // index into exportFormats
		page    string
		noLogs  bool
		file    string
		content string
		figure  string // a file expected beside the report, if any
	}{
		{"PDF on Letter", 0, "Letter", false, "report-r1.pdf", "report as pdf", ""},
		{"HTML without logs", 1, "A4", true, "report-r1.html", "report as html", ""},
		{"Markdown with its figures", 2, "A4", false, "report-r1.md", "report as md", "report-r1_files/fig01-loss.png"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rec := &recordingExporter{}
			v := exportView(t, rec, dir)
			tap(v.export)
			require.NotNil(t, v.exportDialog, "the export dialog is shown")
			v.exportForm.format.SetSelectedIndex(tc.format)
			v.exportForm.page.SetSelected(tc.page)
			v.exportForm.logs.SetChecked(!tc.noLogs)
			v.exportDialog.Submit()
			require.NoError(t, waitExport(t, v))

			got, err := os.ReadFile(filepath.Join(dir, tc.file))
			require.NoError(t, err)
			require.Equal(t, tc.content, string(got))
			if tc.figure != "" {
				require.FileExists(t, filepath.Join(dir, tc.figure))
			}
			require.Len(t, rec.calls, 1)
			c := rec.calls[0]
			require.Equal(t, []string{"r1"}, c.ids)
			require.Equal(t, exportFormats[tc.format].format, c.format)
			require.Equal(t, tc.noLogs, c.opt.NoLogs)
			if c.format == "pdf" {
				require.Equal(t, "letter", c.opt.Page)
			}
			require.Equal(t, "report-r1_files", c.assetDir)
			require.Contains(t, v.status.Text, "Exported the report to ")
		})
	}
}

func TestExportShowsErrors(t *testing.T) {
	dir := t.TempDir()
	rec := &recordingExporter{err: errors.New("run r1 has no metrics to chart")}
	v := exportView(t, rec, dir)
	tap(v.export)
	v.exportDialog.Submit()
	require.EqualError(t, waitExport(t, v), "run r1 has no metrics to chart")
	require.NotContains(t, v.status.Text, "Exported")
	require.NotNil(t, v.win.Canvas().Overlays().Top(), "an error dialog is shown")
}

func TestExportPageSizeOnlyForPDF(t *testing.T) {
	v := exportView(t, &recordingExporter{}, t.TempDir())
	tap(v.export)
	require.False(t, v.exportForm.page.Disabled(), "PDF is the default: page size applies")
	v.exportForm.format.SetSelectedIndex(3) // CSV
	require.True(t, v.exportForm.page.Disabled(), "a CSV has no pages")
}

func TestExportComparesWithChosenRuns(t *testing.T) {
	dir := t.TempDir()
	rec := &recordingExporter{}
	v := exportView(t, rec, dir)
	b := v.backend.(*fakeBackend)
	b.mu.Lock()
	now := time.Now()
	b.runs = append(b.runs,
		engine.RunInfo{ID: "r2", Template: "t", State: engine.Failed, CreatedAt: now},
		engine.RunInfo{ID: "r3", Template: "t", State: engine.Succeeded, CreatedAt: now},
		engine.RunInfo{ID: "o1", Template: "other", State: engine.Succeeded, CreatedAt: now})
	b.mu.Unlock()
	v.Reload(context.Background())
	tap(v.export)
	require.Equal(t, []string{"r2 · failed", "r3 · succeeded"}, v.exportForm.compare.choices, "runs of the same template only")
	v.exportForm.compare.SetSelected([]string{"r3 · succeeded"})
	v.exportDialog.Submit()
	require.NoError(t, waitExport(t, v))
	require.Equal(t, []string{"r1", "r3"}, rec.calls[0].ids)
}
