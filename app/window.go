//go:build !nowindow

package app

import (
	"context"
	"io"
	"os"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"niuma/assets"
	"niuma/engine/executor/docker"
	"niuma/engine/template"
	"niuma/ui"
)

// runWindow opens the desktop window over the same engine the CLI uses.
// Closing it leaves running attempts alone and hands unfinished runs to a
// background engine.
func runWindow(stderr io.Writer) int {
	s, err := open(stderr)
	if err != nil {
		say(stderr, err.Error())
		return 1
	}
	defer s.close()
	a := fyneapp.NewWithID("io.niuma.app")
	a.SetIcon(fyne.NewStaticResource("icon.png", assets.Icon()))
	a.Settings().SetTheme(ui.NewTheme())
	w := a.NewWindow("Niuma")
	ctx, stop := context.WithCancel(context.Background())
	studies := &studyDrivers{ctx: ctx, eng: s.engine, db: s.store, home: s.home}
	backend := windowBackend{Engine: s.engine, store: s.store, home: s.home, studies: studies, processes: s.processes}
	view := ui.NewMainView(backend, w)
	view.SetReportExporter(s.reportExporter())
	shell := ui.NewShell(backend, view, ui.Options{
		Templates:            func() ([]ui.TemplateEntry, error) { return templateEntries(s.home), nil },
		TemplateDir:          userTemplateDir(s.home),
		DesktopNotifications: sessionBus,
		GPUHistory:           s.sampler.History,
		ProcessInfo:          processInfo,
		// Prometheus metrics from the window: $NIUMA_METRICS_ADDR, else
		// the address chosen on the Settings page last time.
		Metrics:     &windowMetrics{parent: ctx, s: s},
		MetricsAddr: os.Getenv(envMetricsAddr),
		Cluster:     s.clusterReader(),
	}, w)
	w.SetContent(shell.Content())
	w.Resize(windowSize(a))

	if s.docker != nil {
		// Image pulls show on the board instead of the terminal.
		var tally docker.PullTally
		s.docker.OnPull = func(p docker.PullProgress) {
			cur, total, finished := tally.Add(p)
			shell.Pull.Update(p.Image, cur, total, finished)
		}
	}
	done := s.drive(ctx)
	// Studies a window or a driver left running carry on here.
	go func() {
		if _, err := studies.resume(); err != nil {
			say(stderr, "resume the studies: "+err.Error())
		}
	}()
	shell.Start(ctx)
	go view.Reload(ctx)
	w.SetOnClosed(func() {
		sz := w.Canvas().Size()
		a.Preferences().SetFloat("window.width", float64(sz.Width))
		a.Preferences().SetFloat("window.height", float64(sz.Height))
		stop()
		shell.Close() // the goroutines a tap started, which stop() does not reach
	})
	w.ShowAndRun()
	stop()
	studies.wait()
	<-done
	if err := s.handOver(&cli{out: stderr, err: stderr}); err != nil {
		say(stderr, err.Error())
	}
	return 0
}

// windowSize is the size the window had when it was last closed, or a
// size that fits the board and the wizard.
func windowSize(a fyne.App) fyne.Size {
	w := a.Preferences().FloatWithFallback("window.width", 1200)
	h := a.Preferences().FloatWithFallback("window.height", 780)
	return fyne.NewSize(float32(max(w, 800)), float32(max(h, 560)))
}

// templateEntries lists the templates for the window's wizard: the bundled
// ones and those in the user's template folder.
func templateEntries(home string) []ui.TemplateEntry {
	var out []ui.TemplateEntry
	for _, ti := range listTemplates(home) {
		ref := ti.Name
		if ti.Source != "bundled" {
			ref = ti.Source // a user template: its template.yaml
		}
		out = append(out, ui.TemplateEntry{
			Name: ti.Name, Version: ti.Version, Description: ti.Description, Source: ti.Source, Err: ti.Err,
			Load: func() (*template.Template, error) { return loadTemplate(home, ref) },
		})
	}
	return out
}
