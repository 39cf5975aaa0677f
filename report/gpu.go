package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"niuma/plot"
)

// simulatedNote is what a report says wherever simulated GPUs appear.
const simulatedNote = "Simulated GPUs (NIUMA_SIMULATE_GPUS): these figures are pretend telemetry that follows " +
	"what Niuma placed on them, not measurements of real hardware."

// gpuOutline is a run report's GPU section: a table of every GPU the run
// used, its events, and curves of utilisation, the run's memory,
// temperature and power over the run's time.
func gpuOutline(o *outline, r *Run, opt Options) {
	o.h(2, "GPU usage")
	if len(r.GPUs) == 0 {
		o.p("The run used no GPU.")
		return
	}
	if anySimulated(r.GPUs) {
		o.p("%s", simulatedNote)
	}
	var rows [][]string
	var missing []string
	var facts []Item
	for _, g := range r.GPUs {
		if g.Samples == 0 && len(g.Curve) == 0 {
			missing = append(missing, g.Label())
		}
		mem := meanPeak(g.MeanMemMiB, g.PeakMemMiB, "%.0f", " MiB")
		if g.TotalMemMiB > 0 && mem != "–" {
			mem += " of " + formatNum(math.Round(g.TotalMemMiB))
		}
		power := meanPeak(g.MeanPowerW, g.PeakPowerW, "%.0f", " W")
		if g.PowerLimitW > 0 && power != "–" {
			power += fmt.Sprintf(" (limit %.0f)", g.PowerLimitW)
		}
		rows = append(rows, []string{g.Label(), meanPeak(g.MeanUtil, g.PeakUtil, "%.0f", "%"), mem,
			meanPeak(g.MeanTempC, g.PeakTempC, "%.0f", " °C"), power, throttleText(g), xidText(g.XIDs)})
		v := g.Model
		if g.Simulated {
			v += " (simulated)"
		}
		v += " · " + g.UUID
		if len(g.Stages) > 0 {
			v += " · stages " + strings.Join(g.Stages, ", ")
		}
		if !g.From.IsZero() {
			v += fmt.Sprintf(" · held %s – %s", fmtTime(g.From), fmtTime(g.To))
		}
		facts = append(facts, Item{g.Label(), v})
	}
	o.facts(facts...)
	o.table([]string{"GPU", "utilisation mean / peak", "run's memory mean / peak", "temperature mean / peak",
		"power mean / peak", "throttled", "XID errors"}, []bool{false, true, true, true, true, false, false}, rows)
	if len(missing) > 0 {
		o.p("No GPU record covers the time the run held %s: records are kept for 30 days, and a minute is "+
			"stored when it ends (or when the process driving the runs stops).", strings.Join(missing, ", "))
	}
	if evs := gpuEvents(r.GPUs); len(evs) > 0 {
		o.h(3, "GPU events while the run held them")
		o.table([]string{"when", "GPU", "what"}, nil, evs)
	}
	if !opt.NoCurves {
		for _, f := range gpuFigures(r) {
			o.figure(f)
		}
	}
}

func anySimulated(gs []GPUUsage) bool {
	for _, g := range gs {
		if g.Simulated {
			return true
		}
	}
	return false
}

// meanPeak prints "71% / 98%", or "–" when neither was reported.
func meanPeak(mean, peak float64, format, unit string) string {
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf(format, v) + unit
	}
	if math.IsNaN(mean) && math.IsNaN(peak) {
		return "–"
	}
	return f(mean) + " / " + f(peak)
}

func throttleText(g GPUUsage) string {
	if g.Samples == 0 {
		return "–"
	}
	if g.ThrottledSamples == 0 {
		return "no"
	}
	t := fmt.Sprintf("%d of %d readings", g.ThrottledSamples, g.Samples)
	if len(g.ThrottleReasons) > 0 {
		t += " (" + strings.Join(g.ThrottleReasons, ", ") + ")"
	}
	return t
}

func xidText(xs []XIDEvent) string {
	if len(xs) == 0 {
		return "none"
	}
	codes := make([]string, len(xs))
	for i, x := range xs {
		codes[i] = fmt.Sprint(x.Code)
	}
	return strings.Join(codes, ", ")
}

// gpuEvents lists the XIDs, throttled minutes and GPU anomalies, oldest
// first.
func gpuEvents(gs []GPUUsage) [][]string {
	type ev struct {
		at   time.Time
		row  []string
		sort int
	}
	var evs []ev
	for _, g := range gs {
		for _, x := range g.XIDs {
			evs = append(evs, ev{x.At, []string{fmtTime(x.At), g.Label(), fmt.Sprintf("XID %d", x.Code)}, 0})
		}
		for _, a := range g.Events {
			evs = append(evs, ev{a.At, []string{fmtTime(a.At), g.Label(), a.Kind + ": " + a.Message}, 1})
		}
	}
	for i := 1; i < len(evs); i++ { // few events: insertion sort keeps equal times in order
		for j := i; j > 0 && evs[j].at.Before(evs[j-1].at); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	rows := make([][]string, len(evs))
	for i, e := range evs {
		rows[i] = e.row
	}
	return rows
}

// gpuStart is the time a run's GPU curves count minutes from: its start,
// else its first GPU minute.
func gpuStart(r *Run) time.Time {
	start := r.Started
	for _, g := range r.GPUs {
		if len(g.Curve) > 0 && start.IsZero() {
			start = g.Curve[0].At
		}
	}
	return start
}

// minuteX places a per-minute figure at the middle of its minute, in
// minutes since start.
func minuteX(at, start time.Time) float64 { return at.Add(30 * time.Second).Sub(start).Minutes() }

// gpuFigures draws utilisation, the run's memory, temperature and power
// against the minutes since the run started, a line per GPU.
func gpuFigures(r *Run) []figure {
	start := gpuStart(r)
	suffix := ""
	if anySimulated(r.GPUs) {
		suffix = " (simulated)"
	}
	specs := []struct {
		title, unit string
		val         func(GPUPoint) float64
	}{
		{"GPU utilisation", "%", func(p GPUPoint) float64 { return p.UtilPct }},
		{"GPU memory held by the run", "MiB", func(p GPUPoint) float64 { return p.MemMiB }},
		{"GPU temperature", "°C", func(p GPUPoint) float64 { return p.TempC }},
		{"GPU power", "W", func(p GPUPoint) float64 { return p.Power }},
	}
	var figs []figure
	for _, sp := range specs {
		f := figure{Title: sp.title + suffix, XLabel: "minutes since the run started", YLabel: sp.unit}
		points := 0
		for _, g := range r.GPUs {
			s := plot.Series{Name: g.Label()}
			for _, p := range g.Curve {
				if v := sp.val(p); !math.IsNaN(v) {
					s.X = append(s.X, minuteX(p.At, start))
					s.Y = append(s.Y, v)
				}
			}
			if len(s.X) > 0 {
				points += len(s.X)
				f.Series = append(f.Series, s)
			}
		}
		if points == 0 {
			continue
		}
		f.Scatter = points == len(f.Series) // one minute per GPU: dots, there is no line to draw
		f.Caption = "Per-minute means of the GPU record."
		if suffix != "" {
			f.Caption = "Per-minute means of the GPU record. " + simulatedNote
		}
		figs = append(figs, f)
	}
	return figs
}

// compareGPUOutline is a comparison's GPU section: per run, the GPUs it
// used and their figures, and the utilisation of the best runs over time.
func compareGPUOutline(o *outline, rep *Report, ranked []Ranked, opt Options) {
	used := false
	for _, r := range rep.Runs {
		used = used || len(r.GPUs) > 0
	}
	if !used {
		return
	}
	o.h(2, "GPU usage")
	var all []GPUUsage
	for _, r := range rep.Runs {
		all = append(all, r.GPUs...)
	}
	if anySimulated(all) {
		o.p("%s", simulatedNote)
	}
	var rows [][]string
	for _, rk := range ranked {
		r := rk.Run
		if len(r.GPUs) == 0 {
			rows = append(rows, []string{r.ID, "none", "–", "–", "–", "–", "–", "–"})
			continue
		}
		for _, g := range r.GPUs {
			rows = append(rows, []string{r.ID, g.Label() + " " + g.Model,
				meanPeak(g.MeanUtil, g.PeakUtil, "%.0f", "%"), meanPeak(g.MeanMemMiB, g.PeakMemMiB, "%.0f", " MiB"),
				meanPeak(g.MeanTempC, g.PeakTempC, "%.0f", " °C"), meanPeak(g.MeanPowerW, g.PeakPowerW, "%.0f", " W"),
				throttleText(g), xidText(g.XIDs)})
		}
	}
	o.table([]string{"run", "GPU", "utilisation mean / peak", "run's memory mean / peak", "temperature mean / peak",
		"power mean / peak", "throttled", "XID errors"}, []bool{false, false, true, true, true, true, false, false}, rows)
	if opt.NoCurves {
		return
	}
	shown := ranked
	if len(shown) > maxOverlayRuns {
		shown = shown[:maxOverlayRuns]
	}
	f := figure{Title: "GPU utilisation", XLabel: "minutes since the run started", YLabel: "%"}
	if anySimulated(all) {
		f.Title += " (simulated)"
	}
	for _, rk := range shown {
		r := rk.Run
		start := gpuStart(r)
		byMinute := map[time.Time][]float64{}
		var order []time.Time
		for _, g := range r.GPUs {
			for _, p := range g.Curve {
				if math.IsNaN(p.UtilPct) {
					continue
				}
				if _, ok := byMinute[p.At]; !ok {
					order = append(order, p.At)
				}
				byMinute[p.At] = append(byMinute[p.At], p.UtilPct)
			}
		}
		if len(order) == 0 {
			continue
		}
		for i := 1; i < len(order); i++ {
			for j := i; j > 0 && order[j].Before(order[j-1]); j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
		s := plot.Series{Name: shortID(r.ID)}
		for _, at := range order {
			vs := byMinute[at]
			sum := 0.0
			for _, v := range vs {
				sum += v
			}
			s.X = append(s.X, minuteX(at, start))
			s.Y = append(s.Y, sum/float64(len(vs)))
		}
		f.Series = append(f.Series, s)
	}
	if len(f.Series) == 0 {
		return
	}
	f.Tall = len(f.Series) > 4
	f.Caption = "Mean utilisation over each run's GPUs, minute by minute."
	if len(ranked) > len(shown) {
		f.Caption = fmt.Sprintf("Mean utilisation over each run's GPUs, minute by minute; the %d best runs of %d.", len(shown), len(ranked))
	}
	o.figure(f)
}
