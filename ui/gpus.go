package ui

import (
	"fmt"
	"math"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// showGPUs shows how the selected run used each of its GPUs, from the
// per-minute GPU records, or hides the section for a run without GPUs.
func (d *runDetail) showGPUs(selected bool, gpus []engine.GPUUsage) {
	d.simulated = map[string]bool{}
	for _, g := range gpus {
		d.simulated[g.UUID] = g.Simulated
	}
	if !selected || len(gpus) == 0 {
		d.gpuBox.Hide()
		return
	}
	var rows []fyne.CanvasObject
	for _, g := range gpus {
		l := widget.NewLabel(gpuSummary(g))
		l.Wrapping = fyne.TextWrapWord
		if g.Throttled > 0 || len(g.XIDs) > 0 {
			l.Importance = widget.WarningImportance
		}
		rows = append(rows, l)
	}
	d.gpus.Objects = rows
	d.gpus.Refresh()
	d.gpuBox.Show()
}

// gpuNames labels the simulated ones among GPU names, given with the
// UUIDs they stand for.
func (d *runDetail) gpuNames(names, uuids []string) []string {
	out := make([]string, len(uuids))
	for i, u := range uuids {
		out[i] = names[i]
		if d.simulated[u] {
			out[i] += " (simulated)"
		}
	}
	return out
}

// gpuSummary is one GPU's line in the run view, e.g. "GPU 0 · NVIDIA
// A100-SXM4-80GB (simulated) · utilisation 93% mean, 99% peak · run's
// memory 12.0 GiB peak of 80.0 GiB · 57 °C mean, 72 °C peak · 375 W mean,
// 398 W peak · not throttled · no XID errors".
func gpuSummary(g engine.GPUUsage) string {
	name := g.Name
	if name == "" {
		name = g.UUID
	}
	if g.Simulated {
		name += " (simulated)"
	}
	parts := []string{fmt.Sprintf("GPU %d", g.Index), name}
	if g.Samples == 0 {
		return strings.Join(append(parts, "no GPU record of the run's time yet (a minute is stored when it ends)"), " · ")
	}
	if s := meanPeak(g.Util, "%.0f%%"); s != "" {
		parts = append(parts, "utilisation "+s)
	}
	if !math.IsNaN(g.RunMem.Peak) {
		mem := "run's memory " + gib(g.RunMem.Peak) + " peak"
		if g.MemTotalMiB > 0 {
			mem += " of " + gib(float64(g.MemTotalMiB))
		}
		parts = append(parts, mem)
	}
	if s := meanPeak(g.Temp, "%.0f °C"); s != "" {
		parts = append(parts, s)
	}
	if s := meanPeak(g.Power, "%.0f W"); s != "" {
		parts = append(parts, s)
	}
	if g.Throttled > 0 {
		t := fmt.Sprintf("throttled in %d of %d readings", g.Throttled, g.Samples)
		if len(g.ThrottleReasons) > 0 {
			t += " (" + strings.Join(g.ThrottleReasons, ", ") + ")"
		}
		parts = append(parts, t)
	} else {
		parts = append(parts, "not throttled")
	}
	if len(g.XIDs) == 0 {
		parts = append(parts, "no XID errors")
	} else {
		codes := make([]string, len(g.XIDs))
		for i, x := range g.XIDs {
			codes[i] = fmt.Sprint(x.Code)
		}
		parts = append(parts, "XID errors "+strings.Join(codes, ", "))
	}
	return strings.Join(parts, " · ")
}

func meanPeak(s engine.Stat, format string) string {
	if math.IsNaN(s.Mean) && math.IsNaN(s.Peak) {
		return ""
	}
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	return f(s.Mean) + " mean, " + f(s.Peak) + " peak"
}

func gib(mib float64) string {
	if mib < 1024 {
		return fmt.Sprintf("%.0f MiB", mib)
	}
	return fmt.Sprintf("%.1f GiB", mib/1024)
}
