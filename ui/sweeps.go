package ui

import (
	"fmt"
	"sort"
	"strings"

	"niuma/engine"
)

// sweepGroup is the runs one sweep launched, as the runs list and the
// board show them: under one header, each run with only the parameters
// that set it apart.
type sweepGroup struct {
	id       string
	template string
	runs     []engine.RunInfo
	differ   []string // the parameters whose values differ between the runs
	started  string   // when the sweep was launched, for its header
}

// runsItem is one row of the runs list: a sweep's header or a run (with
// the parameters to show for it; nil: all).
type runsItem struct {
	group  *sweepGroup
	run    *engine.RunInfo
	differ []string
}

// differingParams names the parameters whose values are not the same in
// every run, sorted. A parameter that some runs lack counts as differing.
func differingParams(runs []engine.RunInfo) []string {
	if len(runs) < 2 {
		return nil
	}
	names := map[string]bool{}
	for _, r := range runs {
		for k := range r.Params {
			names[k] = true
		}
	}
	var out []string
	for k := range names {
		first, firstOK := runs[0].Params[k]
		for _, r := range runs[1:] {
			x, ok := r.Params[k]
			if ok != firstOK || formatParam(x) != formatParam(first) {
				out = append(out, k)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// groupRuns puts the runs of each sweep (two or more of them among runs)
// under a header where the sweep's newest run is, in the given order;
// the runs of a folded sweep are left out under their header. A run on its
// own shows all its parameters; a sweep's runs, those that differ.
func groupRuns(runs []engine.RunInfo, folded map[string]bool) []runsItem {
	groups := map[string]*sweepGroup{}
	for _, r := range runs {
		if r.Sweep == "" {
			continue
		}
		g := groups[r.Sweep]
		if g == nil {
			g = &sweepGroup{id: r.Sweep, template: r.Template}
			groups[r.Sweep] = g
		}
		g.runs = append(g.runs, r)
	}
	for _, g := range groups {
		g.differ = differingParams(g.runs)
		oldest := g.runs[0].CreatedAt
		for _, r := range g.runs {
			if r.CreatedAt.Before(oldest) {
				oldest = r.CreatedAt
			}
		}
		if !oldest.IsZero() {
			g.started = "launched " + oldest.Local().Format("Jan 2 15:04")
		}
	}
	out := make([]runsItem, 0, len(runs)+len(groups))
	done := map[string]bool{}
	for i := range runs {
		r := &runs[i]
		g := groups[r.Sweep]
		if g == nil || len(g.runs) < 2 {
			out = append(out, runsItem{run: r})
			continue
		}
		if done[g.id] {
			continue
		}
		done[g.id] = true
		out = append(out, runsItem{group: g})
		if folded[g.id] {
			continue
		}
		for j := range g.runs {
			out = append(out, runsItem{run: &g.runs[j], differ: nonNil(g.differ)})
		}
	}
	return out
}

// nonNil keeps an empty list from meaning "all parameters".
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// stateCounts is "3 succeeded, 1 running" over runs, in the states' order.
func stateCounts(runs []engine.RunInfo) string {
	counts := map[engine.State]int{}
	for _, r := range runs {
		counts[r.State]++
	}
	var parts []string
	for _, s := range engine.States {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

// sweepDiffers maps each run of a sweep (two or more runs among runs) to
// the parameters that differ within its sweep; runs alone are absent.
func sweepDiffers(runs []engine.RunInfo) map[string][]string {
	by := map[string][]engine.RunInfo{}
	for _, r := range runs {
		if r.Sweep != "" {
			by[r.Sweep] = append(by[r.Sweep], r)
		}
	}
	out := map[string][]string{}
	for _, rs := range by {
		if len(rs) < 2 {
			continue
		}
		d := nonNil(differingParams(rs))
		for _, r := range rs {
			out[r.ID] = d
		}
	}
	return out
}
