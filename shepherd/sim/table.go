package sim

import (
	"fmt"
	"strings"
)

// ParseSetups reads "herd/none,herd/noisy:0.5,bestfit": policies, each
// with the estimate regime it is measured under (none when not given).
func ParseSetups(s string) ([]Setup, error) {
	var out []Setup
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		pol, est, _ := strings.Cut(term, "/")
		e, err := ParseEstimates(est)
		if err != nil {
			return nil, err
		}
		out = append(out, Setup{Policy: pol, Estimates: e})
	}
	return out, nil
}

func fmtSscan(s string, v *float64) (int, error) { return fmt.Sscan(strings.TrimSpace(s), v) }

// find is the cell of a policy (any regime) at a load.
func find(cells []Cell, load float64, policy string) *Cell {
	for i := range cells {
		if cells[i].Load == load && cells[i].Setup.Policy == policy {
			return &cells[i]
		}
	}
	return nil
}

// Summary is one line per cell: average JCT and p95 queueing delay against
// bestfit's (geometric mean over the slices, and the worst slice), average
// JCT against las's, the lowest class's worst wait as a multiple of its run
// time, and preemptions.
func Summary(cells []Cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-5s %-24s %8s %8s %8s %8s %8s %8s %9s %7s\n", "load", "setup", "JCT/bf", "worst", "p95w/bf", "worst", "JCT/las", "worst", "starve", "preempt")
	for i := range cells {
		c := &cells[i]
		bf, las := find(cells, c.Load, "bestfit"), find(cells, c.Load, "las")
		jct := func(r Report) float64 { return r.AvgJCT }
		p95 := func(r Report) float64 { return r.P95Wait }
		var rb, rw, rl Ratio
		if bf != nil {
			rb, rw = ratio(c, bf, jct), ratio(c, bf, p95)
		}
		if las != nil {
			rl = ratio(c, las, jct)
		}
		_, _, starve := stat(c.Reports, func(r Report) float64 { return r.StarvationRatio })
		pre, _, _ := stat(c.Reports, func(r Report) float64 { return float64(r.Preemptions) })
		fmt.Fprintf(&b, "%-5.1f %-24s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %9.0f %7.0f\n", c.Load, c.Setup.Name(),
			rb.Mean, rb.Worst, rw.Mean, rw.Worst, rl.Mean, rl.Worst, starve, pre)
	}
	return b.String()
}
