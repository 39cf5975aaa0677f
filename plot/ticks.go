package plot

import (
	"math"
	"strconv"

	gplot "gonum.org/v1/plot"
)

// linearTicks places labelled ticks at "nice" values (1, 2 or 5 times a power
// of ten), choosing the step whose tick count is closest to target (the
// coarser step on a tie), with compact labels: 20k, 1.5M. gonum's DefaultTicks
// aims at three labels, too few for a wide chart.
type linearTicks struct{ target int }

func (t linearTicks) Ticks(lo, hi float64) []gplot.Tick {
	if !(hi > lo) || !isFinite(lo) || !isFinite(hi) {
		return nil
	}
	target := max(t.target, 2)
	step := niceStep((hi - lo) / float64(target))
	count := func(step float64) int {
		return int(math.Floor(hi/step+1e-9) - math.Ceil(lo/step-1e-9) + 1)
	}
	// niceStep rounded up; the next finer nice step may fit target better.
	if finer := prevNiceStep(step); abs(count(finer)-target) < abs(count(step)-target) {
		step = finer
	}
	first := math.Ceil(lo/step - 1e-9)
	last := math.Floor(hi/step + 1e-9)
	if last-first > 100 { // cannot happen with a sane step; guard anyway
		return nil
	}
	f := newTickFormat(math.Max(math.Abs(lo), math.Abs(hi)), step)
	ticks := make([]gplot.Tick, 0, int(last-first)+1)
	for k := first; k <= last; k++ {
		v := k * step
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ticks = append(ticks, gplot.Tick{Value: v, Label: f.format(v)})
	}
	return ticks
}

func abs(v int) int { return max(v, -v) }

// logTicks labels powers of ten on a logarithmic axis (thinned out when the
// range spans many decades) with unlabelled minor ticks at 2..9 × 10ⁿ. When
// the range spans less than a decade it falls back to 1-2-5 values, then to
// linear nice values, so an axis always carries at least two labels.
type logTicks struct{ target int }

func (t logTicks) Ticks(lo, hi float64) []gplot.Tick {
	if !(lo > 0) || !(hi > lo) || !isFinite(hi) {
		return nil
	}
	target := max(t.target, 2)
	within := func(v float64) bool { return v >= lo*(1-1e-9) && v <= hi*(1+1e-9) }
	elo, ehi := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))

	stride := max(1, int(math.Ceil(float64(ehi-elo)/float64(target))))
	var ticks []gplot.Tick
	for e := elo; e <= ehi; e++ {
		p := math.Pow10(e)
		if within(p) && e%stride == 0 {
			ticks = append(ticks, gplot.Tick{Value: p, Label: logLabel(p)})
		}
	}
	if len(ticks) >= 2 {
		if stride == 1 {
			for e := elo; e <= ehi; e++ {
				for m := 2.0; m <= 9; m++ {
					if v := m * math.Pow10(e); within(v) {
						ticks = append(ticks, gplot.Tick{Value: v}) // minor: no label
					}
				}
			}
		}
		return ticks
	}

	ticks = ticks[:0]
	for e := elo - 1; e <= ehi; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow10(e); within(v) {
				ticks = append(ticks, gplot.Tick{Value: v, Label: logLabel(v)})
			}
		}
	}
	if len(ticks) >= 3 {
		return ticks
	}
	return linearTicks{target: target}.Ticks(lo, hi)
}

// niceStep rounds raw up to the next 1, 2 or 5 × 10ⁿ, so that a range split
// by raw = span/target gets at most target+1 ticks.
func niceStep(raw float64) float64 {
	if !(raw > 0) || !isFinite(raw) {
		return 1
	}
	p := math.Pow10(int(math.Floor(math.Log10(raw))))
	const tol = 1 + 1e-9 // 0.2/0.1 is 2.0000000000000004
	switch f := raw / p; {
	case f <= 1*tol:
		return p
	case f <= 2*tol:
		return 2 * p
	case f <= 5*tol:
		return 5 * p
	default:
		return 10 * p
	}
}

// prevNiceStep returns the nice step just below step (a nice step itself):
// 1 → 0.5, 2 → 1, 5 → 2, all times the same power of ten.
func prevNiceStep(step float64) float64 {
	p := math.Pow10(int(math.Floor(math.Log10(step) + 1e-9)))
	switch m := math.Round(step / p); m {
	case 1:
		return p / 2
	case 2:
		return p
	default:
		return 2 * p
	}
}

// tickFormat formats the labels of one axis consistently: same unit suffix
// and same number of decimals for every label.
type tickFormat struct {
	unit     float64
	suffix   string
	decimals int
	general  bool // very small or very large magnitudes: %g
}

func newTickFormat(maxAbs, step float64) tickFormat {
	switch {
	case maxAbs >= 1e12 || (maxAbs > 0 && maxAbs < 1e-3):
		return tickFormat{general: true}
	case maxAbs >= 1e9:
		return tickFormat{unit: 1e9, suffix: "G", decimals: decimalsFor(step / 1e9)}
	case maxAbs >= 1e6:
		return tickFormat{unit: 1e6, suffix: "M", decimals: decimalsFor(step / 1e6)}
	case maxAbs >= 1e4:
		return tickFormat{unit: 1e3, suffix: "k", decimals: decimalsFor(step / 1e3)}
	default:
		return tickFormat{unit: 1, decimals: decimalsFor(step)}
	}
}

func (f tickFormat) format(v float64) string {
	if v == 0 {
		return "0"
	}
	if f.general {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v/f.unit, 'f', f.decimals, 64) + f.suffix
}

// decimalsFor returns the fewest decimals that print multiples of step exactly.
func decimalsFor(step float64) int {
	for d := 0; d < 10; d++ {
		r := step * math.Pow10(d)
		if math.Abs(r-math.Round(r)) < 1e-6*math.Max(1, math.Abs(r)) {
			return d
		}
	}
	return 10
}

// logLabel formats a tick value on a log axis: 0.001, 0.5, 10, 20k, 1M, 1e-05.
func logLabel(v float64) string {
	switch {
	case v >= 1e12 || v < 1e-4:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 3, 64) + "G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
}
