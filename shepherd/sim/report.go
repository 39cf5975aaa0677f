package sim

import (
	"fmt"
	"slices"
	"strings"
)

// Report is what a replay measured. Times are seconds of simulated time.
type Report struct {
	Policy  string  `json:"policy"`
	Jobs    int     `json:"jobs"`
	Refused int     `json:"refused"` // could never fit this machine
	AvgJCT  float64 `json:"avg_jct_s"`
	P50JCT  float64 `json:"p50_jct_s"`
	P95JCT  float64 `json:"p95_jct_s"`
	P99JCT  float64 `json:"p99_jct_s"`
	AvgWait float64 `json:"avg_wait_s"` // queueing delay: first start − submit
	P95Wait float64 `json:"p95_wait_s"`
	// BoundedSlowdown is the mean of max(1, JCT / max(run time, 10 s)).
	BoundedSlowdown float64 `json:"bounded_slowdown"`
	Makespan        float64 `json:"makespan_s"`
	GPUUtil         float64 `json:"gpu_util"` // share of GPU-time with at least one run
	MemUtil         float64 `json:"mem_util"` // share of memory-time held by runs
	// BusyWhileWaiting is the share of GPU-time with a run on it while
	// some job waits: what a policy leaves idle when there is work.
	BusyWhileWaiting float64 `json:"busy_while_waiting"`
	// StrandedGiB is the average, over the time some run waits, of free
	// memory that no waiting run could use (on GPUs whose free memory is
	// below the smallest waiting need).
	StrandedGiB float64 `json:"stranded_gib"`
	Preemptions int     `json:"preemptions"`
	Passes      int     `json:"passes"` // scheduling passes run
	// Starvation is the longest queueing delay of the lowest priority
	// class; StarvationRatio the largest delay / max(run time, 10 min) in it.
	Starvation      float64      `json:"starvation_s"`
	StarvationRatio float64      `json:"starvation_ratio"`
	Classes         []ClassStats `json:"classes"`
}

// ClassStats are one priority class's figures.
type ClassStats struct {
	Priority int     `json:"priority"`
	Jobs     int     `json:"jobs"`
	AvgJCT   float64 `json:"avg_jct_s"`
	AvgWait  float64 `json:"avg_wait_s"`
	P95Wait  float64 `json:"p95_wait_s"`
	MaxWait  float64 `json:"max_wait_s"`
}

func (s *state) report() Report {
	r := s.rep
	r.Policy = s.cfg.Policy.Name
	r.Jobs = len(s.done)
	if r.Jobs == 0 {
		return r
	}
	var jct, wait []float64
	first, last := s.done[0].Submit, 0.0
	byClass := map[int][]*sjob{}
	var bsd float64
	for _, j := range s.done {
		jct = append(jct, j.end-j.Submit)
		wait = append(wait, j.first-j.Submit)
		first, last = min(first, j.Submit), max(last, j.end)
		bsd += max(1, (j.end-j.Submit)/max(j.Duration, 10))
		byClass[j.Priority] = append(byClass[j.Priority], j)
	}
	r.AvgJCT, r.AvgWait = mean(jct), mean(wait)
	r.P50JCT, r.P95JCT, r.P99JCT = pct(jct, 50), pct(jct, 95), pct(jct, 99)
	r.P95Wait = pct(wait, 95)
	r.BoundedSlowdown = bsd / float64(r.Jobs)
	r.Makespan = last - first
	if r.Makespan > 0 {
		r.GPUUtil = s.busyGPU / (float64(s.cfg.GPUs) * r.Makespan)
		r.MemUtil = s.usedMem / (float64(s.cfg.GPUs) * float64(s.cfg.GPUMiB) * r.Makespan)
	}
	if s.waitingTime > 0 {
		r.StrandedGiB = s.stranded / s.waitingTime / 1024
		r.BusyWhileWaiting = s.busyWaiting / (float64(s.cfg.GPUs) * s.waitingTime)
	}
	classes := make([]int, 0, len(byClass))
	for p := range byClass {
		classes = append(classes, p)
	}
	slices.Sort(classes)
	for _, p := range classes {
		var cj, cw []float64
		c := ClassStats{Priority: p, Jobs: len(byClass[p])}
		for _, j := range byClass[p] {
			w := j.first - j.Submit
			cj, cw = append(cj, j.end-j.Submit), append(cw, w)
			c.MaxWait = max(c.MaxWait, w)
			if p == classes[0] {
				r.StarvationRatio = max(r.StarvationRatio, w/max(j.Duration, 600))
			}
		}
		c.AvgJCT, c.AvgWait, c.P95Wait = mean(cj), mean(cw), pct(cw, 95)
		r.Classes = append(r.Classes, c)
	}
	r.Starvation = r.Classes[0].MaxWait
	return r
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// pct is the nearest-rank percentile.
func pct(x []float64, p float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	k := int(p/100*float64(len(y))+0.5) - 1
	return y[min(max(k, 0), len(y)-1)]
}

// Hours formats seconds as hours with two decimals.
func Hours(s float64) string { return fmt.Sprintf("%.2f h", s/3600) }

// String is the report as a user reads it.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %s: %d jobs replayed", r.Policy, r.Jobs)
	if r.Refused > 0 {
		fmt.Fprintf(&b, " (%d refused: they can never fit this machine)", r.Refused)
	}
	fmt.Fprintf(&b, "\n  JCT          avg %s  p50 %s  p95 %s  p99 %s\n", Hours(r.AvgJCT), Hours(r.P50JCT), Hours(r.P95JCT), Hours(r.P99JCT))
	fmt.Fprintf(&b, "  queueing     avg %s  p95 %s\n", Hours(r.AvgWait), Hours(r.P95Wait))
	fmt.Fprintf(&b, "  bounded slowdown %.2f   makespan %s\n", r.BoundedSlowdown, Hours(r.Makespan))
	fmt.Fprintf(&b, "  utilisation  GPU-time %.1f%%  memory %.1f%%  stranded by fragmentation %.1f GiB (while runs wait)\n",
		100*r.GPUUtil, 100*r.MemUtil, r.StrandedGiB)
	fmt.Fprintf(&b, "  preemptions  %d   starvation: lowest class waited at most %s (%.1f× its run time)\n",
		r.Preemptions, Hours(r.Starvation), r.StarvationRatio)
	b.WriteString("  per priority class:\n")
	for _, c := range r.Classes {
		fmt.Fprintf(&b, "    %d: %6d jobs  JCT avg %s  wait avg %s  p95 %s  max %s\n", c.Priority, c.Jobs,
			Hours(c.AvgJCT), Hours(c.AvgWait), Hours(c.P95Wait), Hours(c.MaxWait))
	}
	return b.String()
}
