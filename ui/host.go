package ui

import (
	"context"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// hostRecords is how the run view learns what each stage of a run used of
// the host (memory, CPU time), from the per-minute records the owner
// stores: after the run ended, and in a window that owns nothing. The
// engine has it; a Backend without it shows no such section.
type hostRecords interface {
	HostUsage(ctx context.Context, runID string) ([]engine.HostUsage, error)
}

// showHost shows the selected run's stages' memory and CPU time, one line
// each ("train · peak memory 1.2 GiB of 4 GiB (mean 900 MiB) · CPU time
// 3m12s (limit 2 CPUs)"), or hides the section for a run without
// records.
func (d *runDetail) showHost(selected bool, host []engine.HostUsage) {
	if !selected || len(host) == 0 {
		d.hostBox.Hide()
		return
	}
	rows := make([]fyne.CanvasObject, len(host))
	for i, u := range host {
		l := widget.NewLabel(u.Stage + " · " + u.Summary())
		l.Wrapping = fyne.TextWrapWord
		rows[i] = l
	}
	d.host.Objects = rows
	d.host.Refresh()
	d.hostBox.Show()
}
