package sim

import (
	"fmt"
	"math"
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

// PhillyMarkdown is the Philly evaluation as docs/BENCHMARKS.md shows it:
// the windows replayed, a row per load and setup, the targets checked, and
// herd against bestfit per virtual cluster.
func PhillyMarkdown(slices []Slice, cells []Cell, seeds []uint64) string {
	var b strings.Builder
	groups := seedGroups(slices)
	clusters := map[string]int{}
	jobs := 0
	for _, s := range slices {
		clusters[strings.SplitN(s.Cluster, "#", 2)[0]]++
		jobs += len(s.Jobs)
	}
	fmt.Fprintf(&b, "\n### Philly: %d windows of 14 days from %d virtual clusters on 8×80 GiB\n\n", len(slices), len(clusters))
	fmt.Fprintf(&b, "Every virtual cluster's 14-day windows (tiling the trace from its first job) with at least 200 jobs of ≤ 8 GPUs: %d jobs in all", jobs)
	fmt.Fprintf(&b, " (%s); seeds %v for what the trace lacks. Arrival gaps are rescaled per window to the load. ", clusterList(clusters), seeds)
	if len(groups) > 1 {
		b.WriteString("Ratios are the median over the seeds of the geometric mean over the windows of herd's figure over the reference's in the same window, with the worst window of any seed in brackets; averages are over every window of every seed; ")
	} else {
		b.WriteString("Ratios are the geometric mean over the windows of herd's figure over the reference's in the same window, with the worst window in brackets; ")
	}
	b.WriteString("\"lowest class max wait\" is the largest queueing delay of a spot (priority 0) job over max(its run time, 10 min), the worst window's.\n\n")
	b.WriteString("| load | setup | avg JCT (h) | p95 wait (h) | JCT vs bestfit | p95 wait vs bestfit | JCT vs las | windows worse than bestfit | lowest class max wait / run time | preemptions per window | GPU busy |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := range cells {
		c := &cells[i]
		bf, las := find(cells, c.Load, "bestfit"), find(cells, c.Load, "las")
		jct := func(r Report) float64 { return r.AvgJCT }
		p95 := func(r Report) float64 { return r.P95Wait }
		mj, _, _ := stat(c.Reports, jct)
		mw, _, _ := stat(c.Reports, p95)
		_, _, starve := stat(c.Reports, func(r Report) float64 { return r.StarvationRatio })
		pre, _, _ := stat(c.Reports, func(r Report) float64 { return float64(r.Preemptions) })
		util, _, _ := stat(c.Reports, func(r Report) float64 { return r.GPUUtil })
		fmt.Fprintf(&b, "| %.1f | %s | %.1f | %.0f | %s | %s | %s | %s | %.0f | %.0f | %.0f%% |\n", c.Load, c.Setup.Name(), mj/3600, mw/3600,
			ratioText(c, bf, jct, groups), ratioText(c, bf, p95, groups), ratioText(c, las, jct, groups), worse(c, bf), starve, pre, 100*util)
	}
	b.WriteString(targets(cells, groups))
	b.WriteString(perCluster(slices, cells))
	return b.String()
}

// seedGroups is the slices of each seed (a cluster named "c#seed" when
// several seeds were replayed), in order of first appearance.
func seedGroups(slices []Slice) [][]int {
	idx := map[string]int{}
	var out [][]int
	for i, s := range slices {
		_, seed, _ := strings.Cut(s.Cluster, "#")
		k, ok := idx[seed]
		if !ok {
			k = len(out)
			idx[seed] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	return out
}

func clusterList(m map[string]int) string {
	var parts []string
	for _, c := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s: %d", c, m[c]))
	}
	return "windows per cluster " + strings.Join(parts, ", ")
}

func ratioText(c, ref *Cell, f func(Report) float64, groups [][]int) string {
	if ref == nil || ref == c {
		return "–"
	}
	r := seedRatio(c, ref, f, groups)
	return fmt.Sprintf("%.2f× (%.2f×)", r.Mean, r.Worst)
}

// worse counts the windows where c's average JCT is above ref's.
func worse(c, ref *Cell) string {
	if ref == nil || ref == c {
		return "–"
	}
	n := 0
	for i := range c.Reports {
		if c.Reports[i].AvgJCT > ref.Reports[i].AvgJCT {
			n++
		}
	}
	return fmt.Sprintf("%d of %d", n, len(c.Reports))
}

// targets checks the shepherd's targets at loads of 0.8 and more.
func targets(cells []Cell, groups [][]int) string {
	var b strings.Builder
	b.WriteString("\n**Targets at load ≥ 0.8** (checked by the command that wrote this table):\n\n")
	b.WriteString("| load | target | herd | verdict |\n|---|---|---|---|\n")
	jct := func(r Report) float64 { return r.AvgJCT }
	p95 := func(r Report) float64 { return r.P95Wait }
	row := func(load float64, what, got string, ok bool) {
		v := "✔"
		if !ok {
			v = "✘"
		}
		fmt.Fprintf(&b, "| %.1f | %s | %s | %s |\n", load, what, got, v)
	}
	for i := range cells {
		c := &cells[i]
		if c.Load < 0.8 || c.Setup.Policy != "herd" {
			continue
		}
		bf, las := find(cells, c.Load, "bestfit"), find(cells, c.Load, "las")
		if bf == nil {
			continue
		}
		rb, rw := seedRatio(c, bf, jct, groups), seedRatio(c, bf, p95, groups)
		name := c.Setup.Estimates.String()
		switch name {
		case "predicted", "noisy:0.5":
			row(c.Load, "avg JCT ≤ 0.70× bestfit's, "+name, fmt.Sprintf("%.2f×", rb.Mean), rb.Mean <= 0.70)
			if las != nil {
				rl := seedRatio(c, las, jct, groups)
				row(c.Load, "avg JCT ≤ las's, "+name, fmt.Sprintf("%.2f×", rl.Mean), rl.Mean <= 1)
			}
		case "none":
			row(c.Load, "avg JCT ≤ 0.85× bestfit's, none", fmt.Sprintf("%.2f×", rb.Mean), rb.Mean <= 0.85)
		}
		row(c.Load, "p95 wait ≤ bestfit's, "+name, fmt.Sprintf("%.2f× (worst window %.2f×)", rw.Mean, rw.Worst), rw.Mean <= 1)
		row(c.Load, "no window worse than bestfit, "+name, fmt.Sprintf("worst window %.2f×, %s windows worse", rb.Worst, worse(c, bf)), rb.Worst <= 1)
	}
	return b.String()
}

// perCluster is herd's average JCT against bestfit's per virtual cluster
// (its windows pooled), at loads of 0.8 and more.
func perCluster(slices []Slice, cells []Cell) string {
	var b strings.Builder
	byCluster := map[string][]int{}
	for i, s := range slices {
		c := strings.SplitN(s.Cluster, "#", 2)[0]
		byCluster[c] = append(byCluster[c], i)
	}
	var herd []*Cell
	var loads []float64
	for i := range cells {
		if cells[i].Setup.Policy == "herd" && cells[i].Load >= 0.8 {
			herd = append(herd, &cells[i])
		}
		if cells[i].Load >= 0.8 && !containsF(loads, cells[i].Load) {
			loads = append(loads, cells[i].Load)
		}
	}
	if len(herd) == 0 {
		return ""
	}
	b.WriteString("\n**Per virtual cluster**: herd's average JCT over bestfit's, geometric mean over the cluster's windows and loads ≥ 0.8 (worst window and load in brackets).\n\n| cluster | windows |")
	var regimes []string
	for _, c := range herd {
		if r := c.Setup.Estimates.String(); !containsS(regimes, r) {
			regimes = append(regimes, r)
		}
	}
	for _, r := range regimes {
		b.WriteString(" " + r + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(regimes)) + "\n")
	for _, cl := range sortedKeys(byCluster) {
		idx := byCluster[cl]
		fmt.Fprintf(&b, "| %s | %d |", cl, len(idx))
		for _, reg := range regimes {
			var logs float64
			worst, n := 0.0, 0
			for _, c := range herd {
				if c.Setup.Estimates.String() != reg {
					continue
				}
				bf := find(cells, c.Load, "bestfit")
				for _, i := range idx {
					x, y := c.Reports[i].AvgJCT, bf.Reports[i].AvgJCT
					if x <= 0 || y <= 0 {
						continue
					}
					logs += math.Log(x / y)
					worst = max(worst, x/y)
					n++
				}
			}
			if n == 0 {
				b.WriteString(" – |")
				continue
			}
			fmt.Fprintf(&b, " %.2f× (%.2f×) |", math.Exp(logs/float64(n)), worst)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func containsF(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func containsS(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// PackMarkdown is the PAI packing table: per target machine, each policy's
// pods placed before the first refusal and the memory stranded then, with
// herd's against bestfit's.
func PackMarkdown(targets []string, reps [][]PackReport, pods int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### PAI 2023: packing before the first refusal\n\n")
	fmt.Fprintf(&b, "The %d pods of pai2023_pods.csv in creation order (CPU-only pods included; GPU share gpu_milli × 80 GiB of a GPU; on PAI's nodes also the pods' CPUs and memory against each node's), nothing ever ending (PAI durations are censored), one pass per pod, no estimates. ", pods)
	b.WriteString("\"Stranded\" is free memory on partly used GPUs with too little of it for the refused pod.\n\n")
	b.WriteString("| machine | policy | pods placed before the first refusal | GPU memory held (GiB) | free at refusal (GiB) | stranded (GiB) | stranded (GPUs' worth) | placed vs bestfit | stranded vs bestfit |\n|---|---|---|---|---|---|---|---|---|\n")
	for i, row := range reps {
		var bf *PackReport
		for k := range row {
			if row[k].Policy == "bestfit" {
				bf = &row[k]
			}
		}
		for _, r := range row {
			placed, stranded := "–", "–"
			if bf != nil && r.Policy != "bestfit" {
				placed = fmt.Sprintf("%.2f×", float64(r.Placed)/float64(max(bf.Placed, 1)))
				if bf.StrandedGiB > 0 {
					stranded = fmt.Sprintf("%.2f×", r.StrandedGiB/bf.StrandedGiB)
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %.0f | %.0f | %.1f | %s | %s |\n", targets[i], r.Policy, r.Placed, r.UsedGiB, r.FreeGiB,
				r.StrandedGiB, r.StrandedGPUs, placed, stranded)
		}
	}
	return b.String()
}
