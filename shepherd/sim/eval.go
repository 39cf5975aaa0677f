package sim

import (
	"fmt"
	"math"
	"strings"

	"niuma/shepherd"
)

// Cell is one (load, policy) point of an evaluation: a report per window.
type Cell struct {
	Load    float64
	Policy  string
	Reports []Report
}

// Evaluate replays each window of days days starting at startDays of jobs
// (sorted, with Submit from the trace start), rescaled to each load, under
// each policy, on cfg's machine.
func Evaluate(jobs []Job, startDays []float64, days float64, loads []float64, policies []string, cfg Config) ([]Cell, error) {
	var out []Cell
	for _, load := range loads {
		for _, name := range policies {
			p, err := shepherd.ByName(name)
			if err != nil {
				return nil, err
			}
			c := Cell{Load: load, Policy: name}
			for _, s := range startDays {
				w := Rescale(Window(jobs, s, days), load, cfg.GPUs)
				cc := cfg
				cc.Policy = p
				c.Reports = append(c.Reports, Replay(w, cc))
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// stat is the mean, minimum and maximum of one figure over a cell's windows.
func stat(rs []Report, f func(Report) float64) (mean, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range rs {
		v := f(r)
		mean += v
		lo, hi = min(lo, v), max(hi, v)
	}
	return mean / float64(len(rs)), lo, hi
}

// Markdown is the evaluation as a table: means over windows with their
// range, and each policy's average JCT and p95 queueing delay against
// bestfit's at the same load (mean of per-window ratios).
func Markdown(cells []Cell) string {
	var b strings.Builder
	b.WriteString("| load | policy | avg JCT (h) | p95 JCT (h) | avg wait (h) | p95 wait (h) | bounded slowdown | GPU util | stranded (GiB) | preemptions | lowest class max wait / run time | JCT vs bestfit | p95 wait vs bestfit |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		var ref *Cell
		for k := range cells {
			if cells[k].Load == c.Load && cells[k].Policy == "bestfit" {
				ref = &cells[k]
			}
		}
		col := func(f func(Report) float64, scale float64, digits int) string {
			m, lo, hi := stat(c.Reports, f)
			return fmt.Sprintf("%.*f (%.*f–%.*f)", digits, m/scale, digits, lo/scale, digits, hi/scale)
		}
		ratio := func(f func(Report) float64) string {
			if ref == nil || len(ref.Reports) != len(c.Reports) {
				return "–"
			}
			var s float64
			lo, hi := math.Inf(1), math.Inf(-1)
			for i := range c.Reports {
				x := f(c.Reports[i]) / f(ref.Reports[i])
				s += x
				lo, hi = min(lo, x), max(hi, x)
			}
			m := s / float64(len(c.Reports))
			return fmt.Sprintf("%+.0f%% (%+.0f…%+.0f)", 100*(m-1), 100*(lo-1), 100*(hi-1))
		}
		fmt.Fprintf(&b, "| %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Load, c.Policy,
			col(func(r Report) float64 { return r.AvgJCT }, 3600, 1),
			col(func(r Report) float64 { return r.P95JCT }, 3600, 0),
			col(func(r Report) float64 { return r.AvgWait }, 3600, 1),
			col(func(r Report) float64 { return r.P95Wait }, 3600, 0),
			col(func(r Report) float64 { return r.BoundedSlowdown }, 1, 0),
			col(func(r Report) float64 { return 100 * r.GPUUtil }, 1, 0),
			col(func(r Report) float64 { return r.StrandedGiB }, 1, 1),
			col(func(r Report) float64 { return float64(r.Preemptions) }, 1, 0),
			col(func(r Report) float64 { return r.StarvationRatio }, 1, 0),
			ratio(func(r Report) float64 { return r.AvgJCT }),
			ratio(func(r Report) float64 { return r.P95Wait }))
	}
	return b.String()
}
