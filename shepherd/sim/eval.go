package sim

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"niuma/shepherd"
)

// Slice is one replayed piece of a trace: a virtual cluster's jobs over
// one window of days, submit times from the window's start.
type Slice struct {
	Cluster  string
	StartDay float64
	Jobs     []Job
}

// Name is "cluster@day", e.g. "6214e9@28".
func (s Slice) Name() string { return fmt.Sprintf("%s@%g", s.Cluster, s.StartDay) }

// Slices cuts jobs (sorted, Submit from the trace start) into windows of
// days, tiling the trace from its start, per virtual cluster, and keeps
// those with at least minJobs jobs — every cluster with enough jobs, not a
// chosen few. Ordered by cluster, then window.
func Slices(jobs []Job, days float64, minJobs int) []Slice {
	by := map[string]map[int][]Job{}
	for _, j := range jobs {
		w := int(j.Submit / (days * 86400))
		if by[j.Cluster] == nil {
			by[j.Cluster] = map[int][]Job{}
		}
		by[j.Cluster][w] = append(by[j.Cluster][w], j)
	}
	var out []Slice
	for _, c := range sortedKeys(by) {
		for _, w := range sortedKeys(by[c]) {
			js := by[c][w]
			if len(js) < minJobs {
				continue
			}
			start := float64(w) * days
			for i := range js {
				js[i].Submit -= start * 86400
			}
			out = append(out, Slice{Cluster: c, StartDay: start, Jobs: js})
		}
	}
	return out
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Setup is one policy under one estimate regime.
type Setup struct {
	Policy    string
	Estimates Estimates
	// Make, when set, builds the policy instead of shepherd.ByName (a
	// variant under study).
	Make func() shepherd.Policy
}

func (s Setup) policy() shepherd.Policy {
	if s.Make != nil {
		return s.Make()
	}
	p, _ := shepherd.ByName(s.Policy)
	return p
}

// Name is "herd (noisy:0.5)", or the policy alone for one that uses no
// estimates.
func (s Setup) Name() string {
	if s.Make != nil || usesEstimates(s.Policy) {
		return s.Policy + " (" + s.Estimates.String() + ")"
	}
	return s.Policy
}

// usesEstimates says whether a policy looks at estimates at all: those
// that do not are replayed once, under no estimates.
func usesEstimates(policy string) bool {
	p, err := shepherd.ByName(policy)
	return err == nil && (p.ShortestFirst || p.Reserve || p.AgingFactor > 0)
}

// Cell is one (load, setup) point of an evaluation: a report per slice.
type Cell struct {
	Load    float64
	Setup   Setup
	Reports []Report
}

// Evaluate replays every slice, rescaled to each load, under each setup,
// on cfg's machine, with workers replays at a time. Progress, when set, is
// told of each replay done.
func Evaluate(slices []Slice, loads []float64, setups []Setup, cfg Config, workers int, progress func(done, total int)) ([]Cell, error) {
	type task struct{ cell, slice int }
	var cells []Cell
	var tasks []task
	for _, load := range loads {
		for _, s := range setups {
			if _, err := shepherd.ByName(s.Policy); err != nil && s.Make == nil {
				return nil, err
			}
			if !usesEstimates(s.Policy) && s.Make == nil {
				s.Estimates = NoEstimates
			}
			cells = append(cells, Cell{Load: load, Setup: s, Reports: make([]Report, len(slices))})
			for i := range slices {
				tasks = append(tasks, task{len(cells) - 1, i})
			}
		}
	}
	ch := make(chan task)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				c := &cells[t.cell]
				cc := cfg
				cc.Policy = c.Setup.policy()
				cc.Estimates = c.Setup.Estimates
				r := Replay(Rescale(slices[t.slice].Jobs, c.Load, cfg.GPUs), cc)
				mu.Lock()
				c.Reports[t.slice] = r
				done++
				if progress != nil {
					progress(done, len(tasks))
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range tasks {
		ch <- t
	}
	close(ch)
	wg.Wait()
	return cells, nil
}

// stat is the mean, minimum and maximum of one figure over a cell's slices.
func stat(rs []Report, f func(Report) float64) (mean, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range rs {
		v := f(r)
		mean += v
		lo, hi = min(lo, v), max(hi, v)
	}
	return mean / float64(len(rs)), lo, hi
}

// Ratio is a figure of one cell against another's, slice by slice: the
// geometric mean of the per-slice ratios, the worst (largest) and the best.
type Ratio struct{ Mean, Worst, Best float64 }

// ratio compares f of cell a to cell b over their slices.
func ratio(a, b *Cell, f func(Report) float64) Ratio { return ratioOver(a, b, f, nil) }

// seedRatio is ratio with its mean the median over seeds of each seed's
// geometric mean (groups: the slices of each seed); worst and best are
// over every slice of every seed.
func seedRatio(a, b *Cell, f func(Report) float64, groups [][]int) Ratio {
	all := ratio(a, b, f)
	if len(groups) < 2 {
		return all
	}
	var means []float64
	for _, g := range groups {
		means = append(means, ratioOver(a, b, f, g).Mean)
	}
	slices.Sort(means)
	m := means[len(means)/2]
	if len(means)%2 == 0 {
		m = math.Sqrt(means[len(means)/2-1] * m)
	}
	all.Mean = m
	return all
}

// ratioOver is ratio over the slices idx (nil: all).
func ratioOver(a, b *Cell, f func(Report) float64, idx []int) Ratio {
	r := Ratio{Worst: math.Inf(-1), Best: math.Inf(1)}
	var logs float64
	n := 0
	count := len(a.Reports)
	if idx != nil {
		count = len(idx)
	}
	for k := range count {
		i := k
		if idx != nil {
			i = idx[k]
		}
		x, y := f(a.Reports[i]), f(b.Reports[i])
		if y <= 0 || x <= 0 {
			continue
		}
		q := x / y
		logs += math.Log(q)
		r.Worst, r.Best = max(r.Worst, q), min(r.Best, q)
		n++
	}
	if n == 0 {
		return Ratio{Mean: 1, Worst: 1, Best: 1}
	}
	r.Mean = math.Exp(logs / float64(n))
	return r
}
