package app

import (
	"context"
	"fmt"
	"io"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"niuma/assets"
	"niuma/engine"
	"niuma/ui"
)

// demoTemplate is what the window's "New run" launches until the wizard
// lands.
const demoTemplate = "digits-mlp"

// runWindow opens the desktop window over the same engine the CLI uses.
// Closing it leaves running attempts alone and hands unfinished runs to a
// background engine.
func runWindow(stderr io.Writer) int {
	s, err := open(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "niuma:", err)
		return 1
	}
	defer s.close()
	a := fyneapp.NewWithID("io.niuma.app")
	a.SetIcon(fyne.NewStaticResource("icon.png", assets.Icon()))
	w := a.NewWindow("Niuma")
	launch := ui.Launcher{Name: demoTemplate, Spec: func() (engine.RunSpec, error) {
		t, err := loadTemplate(s.home, demoTemplate)
		if err != nil {
			return engine.RunSpec{}, err
		}
		return engine.RunSpec{Template: t}, nil
	}}
	view := ui.NewMainView(s.engine, launch, w)
	view.SetReportExporter(s.reportExporter())
	w.SetContent(view.Content())
	w.Resize(fyne.NewSize(1100, 700))

	ctx, stop := context.WithCancel(context.Background())
	done := s.drive(ctx)
	view.Start(ctx)
	go view.Reload(ctx)
	w.SetOnClosed(func() { stop() })
	w.ShowAndRun()
	stop()
	<-done
	if err := s.handOver(&cli{out: stderr, err: stderr}); err != nil {
		fmt.Fprintln(stderr, "niuma:", err)
	}
	return 0
}
