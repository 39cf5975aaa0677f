package plot

import (
	"fmt"
	"math"
	"time"

	gplot "gonum.org/v1/plot"
)

// timeSteps are the tick steps of a time axis, in seconds: the ones a
// clock reader expects (never 20 s or 50 min).
var timeSteps = []float64{
	1, 2, 5, 10, 15, 30,
	60, 2 * 60, 5 * 60, 10 * 60, 15 * 60, 30 * 60,
	3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600,
	86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400,
}

// timeStep is the step from timeSteps whose tick count over span is
// closest to target; spans under a few seconds fall back to nice numbers.
func timeStep(span float64, target int) float64 {
	best, bestDiff := timeSteps[0], math.Inf(1)
	for _, s := range timeSteps {
		d := math.Abs(span/s - float64(target))
		if d < bestDiff {
			best, bestDiff = s, d
		}
	}
	if span/best < 2 && best == timeSteps[0] {
		return niceStep(span / float64(max(target, 2)))
	}
	return best
}

// durationTicks labels seconds since a start as durations: 0s, 30s,
// 1m30s, 2h, 1d6h.
type durationTicks struct{ target int }

func (t durationTicks) Ticks(lo, hi float64) []gplot.Tick {
	if !(hi > lo) || !isFinite(lo) || !isFinite(hi) {
		return nil
	}
	step := timeStep(hi-lo, max(t.target, 2))
	var ticks []gplot.Tick
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+1e-9 && len(ticks) <= 100; k++ {
		v := k * step
		ticks = append(ticks, gplot.Tick{Value: v, Label: DurationLabel(v)})
	}
	return ticks
}

// DurationLabel writes seconds briefly: "0s", "45s", "1m30s", "2h", "1d6h";
// under ten seconds with a fraction, "2.5s".
func DurationLabel(sec float64) string {
	neg := ""
	if sec < 0 {
		neg, sec = "-", -sec
	}
	if sec < 10 && sec != math.Trunc(sec) {
		return fmt.Sprintf("%s%.3gs", neg, sec)
	}
	s := int64(math.Round(sec))
	d, s := s/86400, s%86400
	h, s := s/3600, s%3600
	m, s := s/60, s%60
	out := neg
	parts := 0
	for _, u := range []struct {
		n    int64
		unit string
	}{{d, "d"}, {h, "h"}, {m, "m"}, {s, "s"}} {
		if u.n == 0 || parts == 2 {
			if parts > 0 {
				parts = 2 // stop at the first zero after a unit: "1h" not "1h0m5s"
			}
			continue
		}
		out += fmt.Sprintf("%d%s", u.n, u.unit)
		parts++
	}
	if out == neg {
		return "0s"
	}
	return out
}

// clockTicks labels Unix seconds as clock times in loc (UTC when nil):
// "14:05:30" for steps under a minute, "14:05" under a day, "Jan 2" above.
type clockTicks struct {
	target int
	loc    *time.Location
}

func (t clockTicks) Ticks(lo, hi float64) []gplot.Tick {
	if !(hi > lo) || !isFinite(lo) || !isFinite(hi) {
		return nil
	}
	loc := t.loc
	if loc == nil {
		loc = time.UTC
	}
	step := timeStep(hi-lo, max(t.target, 2))
	layout := "15:04"
	switch {
	case step < 60:
		layout = "15:04:05"
	case step >= 86400:
		layout = "Jan 2"
	case hi-lo > 86400:
		layout = "Jan 2 15:04"
	}
	// Align ticks to the local clock: a 15-minute step falls on :00, :15…
	_, off := time.Unix(int64(lo), 0).In(loc).Zone()
	var ticks []gplot.Tick
	for k := math.Ceil((lo+float64(off))/step - 1e-9); len(ticks) <= 100; k++ {
		v := k*step - float64(off)
		if v > hi+1e-9 {
			break
		}
		sec, frac := math.Modf(v)
		ticks = append(ticks, gplot.Tick{Value: v, Label: time.Unix(int64(sec), int64(frac*1e9)).In(loc).Format(layout)})
	}
	return ticks
}
