package tuner

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Curve is what one trial has reported of the objective so far, step by
// step (steps increasing).
type Curve struct {
	ID     string
	Steps  []int64
	Values []float64
}

// Rule is a way to stop losing trials early.
type Rule string

// The pruning rules.
const (
	// NoPruning lets every trial run to its end.
	NoPruning Rule = "none"
	// MedianRule stops a trial whose best value so far is worse than the
	// median of the other trials' best values up to the same step.
	MedianRule Rule = "median"
	// SuccessiveHalving (asynchronous, ASHA) stops a trial that reaches a
	// rung (steps MinStep·Reduction^k) outside the best 1/Reduction of
	// the trials that reached that rung.
	SuccessiveHalving Rule = "asha"
)

// Pruner decides whether a running trial should stop early.
type Pruner struct {
	Rule   Rule
	Goal   Goal
	Metric string // the objective's name, for the evidence
	// Warmup is the first step at which a trial may be stopped; 0 means
	// a tenth of the longest curve among the others (at least step 1),
	// so that the default scales with however a workload counts steps.
	Warmup int64
	// MinTrials is how many other trials must have reached the step (or
	// rung) before the trial is compared with them; 0 means 4.
	MinTrials int
	// Reduction is successive halving's factor: a rung keeps the best
	// 1/Reduction; 0 means 3.
	Reduction float64
	// MinStep is successive halving's first rung; 0 means the warm-up.
	MinStep int64
}

// Reason is why a trial was stopped or kept, as a code.
type Reason string

// The reasons of a Decision.
const (
	ReasonWarmup      Reason = "warmup"        // kept: before the warm-up step
	ReasonFewTrials   Reason = "few_trials"    // kept: too few others to compare with
	ReasonAhead       Reason = "ahead"         // kept: at least as good as the reference
	ReasonBetweenRung Reason = "between_rungs" // kept: successive halving decides at rungs only
	ReasonNoPruning   Reason = "no_pruning"    // kept: the rule is none
	ReasonBelowMedian Reason = "below_median"  // stopped: worse than the median
	ReasonBelowRung   Reason = "below_rung"    // stopped: outside the best 1/Reduction at a rung
)

// Decision is a pruner's verdict on a trial at its latest step, with the
// numbers behind it.
type Decision struct {
	Prune  bool
	Reason Reason
	Metric string
	Step   int64   // the trial's latest step
	Value  float64 // the trial's best value up to Step (at the rung, for successive halving)
	// Reference is what Value was compared with: the median, or the
	// rung's cut-off (the worst value still kept).
	Reference float64
	Trials    int   // how many other trials it was compared with
	Rung      int   // successive halving: the rung's number, 0 first
	RungStep  int64 // successive halving: the rung's step
	Warmup    int64 // the warm-up step in force
	Reduction float64
	// Compared is each other trial's value that Value was compared with,
	// in the order the others were given (the evidence a stored pruning
	// decision keeps).
	Compared []Compared
}

// Compared is one other trial's value at the step of a decision.
type Compared struct {
	ID    string
	Value float64
}

// Evidence says the decision in a sentence, e.g. "val_acc 0.81 at step
// 10, median of 12 trials 0.9".
func (d Decision) Evidence() string {
	m := d.Metric
	if m == "" {
		m = "objective"
	}
	switch d.Reason {
	case ReasonWarmup:
		return fmt.Sprintf("step %d is before the warm-up (step %d)", d.Step, d.Warmup)
	case ReasonFewTrials:
		return fmt.Sprintf("%d other trials reached step %d; comparing needs more", d.Trials, d.Step)
	case ReasonBetweenRung:
		return fmt.Sprintf("step %d is between rungs", d.Step)
	case ReasonNoPruning:
		return "no pruning"
	case ReasonBelowMedian, ReasonAhead:
		return fmt.Sprintf("%s %s at step %d, median of %d trials %s", m, num(d.Value), d.Step, d.Trials, num(d.Reference))
	case ReasonBelowRung:
		return fmt.Sprintf("%s %s at step %d (rung %d), outside the best 1/%s of %d trials (cut-off %s)",
			m, num(d.Value), d.RungStep, d.Rung, num(d.Reduction), d.Trials+1, num(d.Reference))
	}
	return string(d.Reason)
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

func (p Pruner) defaults(others []Curve) Pruner {
	if p.MinTrials <= 0 {
		p.MinTrials = 4
	}
	if p.Reduction <= 1 {
		p.Reduction = 3
	}
	if p.Warmup <= 0 {
		longest := int64(0)
		for _, c := range others {
			if n := len(c.Steps); n > 0 {
				longest = max(longest, c.Steps[n-1])
			}
		}
		p.Warmup = max(1, longest/10)
	}
	if p.MinStep <= 0 {
		p.MinStep = p.Warmup
	}
	return p
}

// better reports whether a is better than b for the goal.
func (p Pruner) better(a, b float64) bool {
	if p.Goal == Minimize {
		return a < b
	}
	return a > b
}

// bestUpTo is the best value a curve reported at steps ≤ step; ok is
// false when it has not reached step yet or reported nothing finite.
func (p Pruner) bestUpTo(c Curve, step int64) (float64, bool) {
	n := len(c.Steps)
	if n == 0 || c.Steps[n-1] < step {
		return 0, false
	}
	best, ok := 0.0, false
	for i, s := range c.Steps {
		if s > step {
			break
		}
		v := c.Values[i]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if !ok || p.better(v, best) {
			best, ok = v, true
		}
	}
	return best, ok
}

// Decide says whether trial should stop now, given the curves of the other
// trials of the study (running, finished or stopped). A trial that has
// reported only NaN or infinite values is worse than any other.
func (p Pruner) Decide(trial Curve, others []Curve) Decision {
	p = p.defaults(others)
	n := len(trial.Steps)
	d := Decision{Metric: p.Metric, Warmup: p.Warmup, Reduction: p.Reduction}
	if n == 0 {
		d.Reason = ReasonWarmup
		return d
	}
	d.Step = trial.Steps[n-1]
	switch {
	case p.Rule == "" || p.Rule == NoPruning:
		d.Reason = ReasonNoPruning
		return d
	case d.Step < p.Warmup:
		d.Reason = ReasonWarmup
		return d
	}
	if p.Rule == SuccessiveHalving {
		return p.halving(trial, others, d)
	}
	v, ok := p.bestUpTo(trial, d.Step)
	var vals []float64
	for _, c := range others {
		if x, ok := p.bestUpTo(c, d.Step); ok {
			vals = append(vals, x)
			d.Compared = append(d.Compared, Compared{ID: c.ID, Value: x})
		}
	}
	d.Trials = len(vals)
	if len(vals) < p.MinTrials {
		d.Reason = ReasonFewTrials
		return d
	}
	d.Reference = medianOf(vals)
	d.Value = v
	if !ok {
		d.Value = math.NaN()
	}
	if !ok || p.better(d.Reference, v) {
		d.Prune, d.Reason = true, ReasonBelowMedian
	} else {
		d.Reason = ReasonAhead
	}
	return d
}

// halving decides at the first report at or past a rung.
func (p Pruner) halving(trial Curve, others []Curve, d Decision) Decision {
	n := len(trial.Steps)
	prev := int64(math.MinInt64)
	if n > 1 {
		prev = trial.Steps[n-2]
	}
	// The highest rung the latest report crossed.
	rung, step := -1, int64(0)
	for k, r := 0, float64(p.MinStep); r <= float64(d.Step); k, r = k+1, r*p.Reduction {
		if rs := int64(math.Ceil(r)); rs > prev {
			rung, step = k, rs
			break
		}
	}
	if rung < 0 {
		d.Reason = ReasonBetweenRung
		return d
	}
	d.Rung, d.RungStep = rung, step
	v, ok := p.bestUpTo(trial, step)
	var vals []float64
	for _, c := range others {
		if x, ok := p.bestUpTo(c, step); ok {
			vals = append(vals, x)
			d.Compared = append(d.Compared, Compared{ID: c.ID, Value: x})
		}
	}
	d.Trials = len(vals)
	if len(vals) < p.MinTrials {
		d.Reason = ReasonFewTrials
		return d
	}
	// Keep the best max(1, ⌊(m+1)/η⌋) of the m others and this trial.
	keep := max(1, int(float64(len(vals)+1)/p.Reduction))
	sort.Slice(vals, func(a, b int) bool { return p.better(vals[a], vals[b]) })
	d.Value = v
	if !ok {
		d.Value = math.NaN()
	}
	if keep > len(vals) {
		d.Reason, d.Reference = ReasonAhead, vals[len(vals)-1]
		return d
	}
	// Better than the keep-th best of the others: among the best keep.
	d.Reference = vals[keep-1]
	if ok && !p.better(d.Reference, v) {
		d.Reason = ReasonAhead
		return d
	}
	d.Prune, d.Reason = true, ReasonBelowRung
	return d
}

// medianOf is the median of xs (the mean of the middle two for an even
// count).
func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
