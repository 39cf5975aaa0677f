package tabular

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"niuma/tuner"
)

// Curves is a recorded grid of learning curves: for each configuration,
// the objective after every step of a few real runs (one per seed).
type Curves struct {
	Name   string
	Metric string
	Goal   tuner.Goal
	Space  tuner.Space
	grid   map[string][]float64
	runs   map[string][][]float64 // configuration key -> one curve per seed
	keys   []string               // configuration keys, sorted
	Steps  int                    // the longest curve
}

// LoadCurves reads recorded curves: a CSV whose columns are the
// parameters, then "seed", then one column per metric holding the values
// of steps 1, 2, … separated by spaces (as bench/tuner/record-digits-grid.sh
// writes them). metric picks the column; goal says which way is better.
func LoadCurves(path, metric string, goal tuner.Goal) (*Curves, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := readCurves(f, metric, goal)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Name = filepath.Base(path)
	return c, nil
}

func readCurves(r io.Reader, metric string, goal tuner.Goal) (*Curves, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("no header line: %w", err)
	}
	if err := checkHeader(head); err != nil {
		return nil, err
	}
	seedCol := slices.Index(head, "seed")
	mcol := slices.Index(head, metric)
	switch {
	case seedCol < 1:
		return nil, errors.New(`want the parameters' columns, then "seed", then the metrics' columns`)
	case mcol <= seedCol:
		return nil, fmt.Errorf("no column %q after \"seed\" (columns: %s)", metric, strings.Join(head, ", "))
	}
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("no runs")
	}
	c := &Curves{Metric: metric, Goal: goal, grid: map[string][]float64{}, runs: map[string][][]float64{}}
	for i := 0; i < seedCol; i++ {
		distinct := map[string]bool{}
		for _, rec := range recs {
			distinct[rec[i]] = true
		}
		c.Space.Params = append(c.Space.Params, column(head[i], distinct, c.grid))
	}
	t := &Table{Space: c.Space}
	for n, rec := range recs {
		var curve []float64
		for _, s := range strings.Fields(rec[mcol]) {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %q is not a number", n+2, metric, s)
			}
			curve = append(curve, v)
		}
		if len(curve) == 0 {
			return nil, fmt.Errorf("line %d: %s has no values", n+2, metric)
		}
		k := t.rowKey(rec, seq(seedCol))
		c.runs[k] = append(c.runs[k], curve)
		c.Steps = max(c.Steps, len(curve))
	}
	for k := range c.runs {
		c.keys = append(c.keys, k)
	}
	sort.Strings(c.keys)
	return c, nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Configurations is the number of recorded configurations.
func (c *Curves) Configurations() int { return len(c.keys) }

// Runs is the number of recorded curves.
func (c *Curves) Runs() int {
	n := 0
	for _, r := range c.runs {
		n += len(r)
	}
	return n
}

func (c *Curves) better(a, b float64) bool {
	if c.Goal == tuner.Minimize {
		return a < b
	}
	return a > b
}

// best is a curve's objective as the archive counts it: its best value.
func (c *Curves) best(curve []float64) float64 {
	b := math.NaN()
	for _, v := range curve {
		if !math.IsNaN(v) && (math.IsNaN(b) || c.better(v, b)) {
			b = v
		}
	}
	return b
}

// PruneReport is the outcome of replaying studies with and without a
// pruner, each a median (or share) over repetitions.
type PruneReport struct {
	Trials, Workers, Reps int
	// StepsRatio: training steps with pruning / without, for the same
	// number of trials.
	StepsRatio float64
	// SameBest: the share of repetitions whose best objective with
	// pruning equals the best without (same number of trials).
	SameBest float64
	// ReachRatio: steps until a study with pruning has finished a trial
	// at least as good as the best of the study without / the steps of
	// the study without. Studies that never get there count as +Inf.
	ReachRatio float64
	// Reached: the share of repetitions that got there (within four
	// times as many trials).
	Reached float64
	// ReachVsFirst: the same steps / the steps the study without pruning
	// had run when it first finished a trial that good (its time to the
	// best, the stricter comparison).
	ReachVsFirst float64
	// Pruned: the share of trials stopped early.
	Pruned float64
	// BestWithout, BestWith: median best objective of the same number of
	// trials without and with pruning.
	BestWithout, BestWith float64
}

// ReplayPruning runs reps pairs of studies of trials trials on workers
// parallel slots, one without pruning and one with p. Trials are chosen
// by sampler ("random": the grid's configurations in a random order;
// "bayes": the tuner's suggestions, snapped to the grid, with running
// trials pending and stopped ones pruned) and each runs one recorded
// seed's curve drawn at random, revealed step by step; after every step
// the pruner decides on each running trial, looking at every other
// trial's curve so far.
func (c *Curves) ReplayPruning(p tuner.Pruner, sampler string, trials, workers, reps int) (PruneReport, error) {
	rep := PruneReport{Trials: trials, Workers: workers, Reps: reps}
	var ratio, reach, first, pruned, bw, bp []float64
	same, reached := 0, 0
	for r := 0; r < reps; r++ {
		base, err := c.study(tuner.Pruner{Rule: tuner.NoPruning}, sampler, r, trials, workers, math.NaN())
		if err != nil {
			return rep, err
		}
		with, err := c.study(p, sampler, r, trials, workers, math.NaN())
		if err != nil {
			return rep, err
		}
		ratio = append(ratio, float64(with.steps)/float64(base.steps))
		pruned = append(pruned, float64(with.pruned)/float64(trials))
		bw, bp = append(bw, base.best), append(bp, with.best)
		if with.best == base.best {
			same++
		}
		goal, err := c.study(p, sampler, r, 4*trials, workers, base.best)
		if err != nil {
			return rep, err
		}
		if goal.reached {
			reached++
			reach = append(reach, float64(goal.steps)/float64(base.steps))
			first = append(first, float64(goal.steps)/float64(base.stepsAtBest))
		} else {
			reach = append(reach, math.Inf(1))
			first = append(first, math.Inf(1))
		}
	}
	rep.StepsRatio, rep.Pruned = median(ratio), median(pruned)
	rep.ReachRatio, rep.ReachVsFirst = median(reach), median(first)
	rep.SameBest, rep.Reached = float64(same)/float64(reps), float64(reached)/float64(reps)
	rep.BestWithout, rep.BestWith = median(bw), median(bp)
	return rep, nil
}

type studyResult struct {
	steps       int     // training steps run, over all trials
	best        float64 // the best objective of a trial that ran to its end
	stepsAtBest int     // steps run when that best was first finished
	pruned      int
	reached     bool // a finished trial got to the target
}

// study simulates one study: up to n trials on workers slots, stopping
// early once a finished trial's objective reaches target (unless target
// is NaN).
func (c *Curves) study(p tuner.Pruner, sampler string, rep, n, workers int, target float64) (studyResult, error) {
	p.Goal, p.Metric = c.Goal, c.Metric
	type trial struct {
		key   string
		vals  tuner.Values
		curve []float64
		at    int // steps revealed
		state tuner.State
	}
	var ts []*trial
	rng := rand.New(rand.NewPCG(uint64(rep), 0x6375727665))
	order := rng.Perm(len(c.keys))
	res := studyResult{best: math.NaN()}
	running := 0
	next := func() error {
		var key string
		var vals tuner.Values
		switch sampler {
		case "random":
			key = c.keys[order[len(ts)%len(order)]]
		case "bayes":
			var hist []tuner.Trial
			for i, t := range ts {
				h := tuner.Trial{ID: strconv.Itoa(i), Values: t.vals, State: t.state}
				if t.state != tuner.Pending {
					h.Objective = c.best(t.curve[:t.at])
				}
				hist = append(hist, h)
			}
			s, err := tuner.Suggest(tuner.Config{Space: c.Space, Goal: c.Goal, Seed: uint64(rep)}, hist, 1)
			if err != nil {
				return err
			}
			vals = s[0].Values
			_, key = (&Table{Space: c.Space, grid: c.grid}).Snap(vals)
		default:
			return fmt.Errorf("unknown sampler %q (random or bayes)", sampler)
		}
		seeds := c.runs[key]
		ts = append(ts, &trial{key: key, vals: vals, curve: seeds[rng.IntN(len(seeds))], state: tuner.Pending})
		running++
		return nil
	}
	for {
		for running < workers && len(ts) < n && !res.reached {
			if err := next(); err != nil {
				return res, err
			}
		}
		if running == 0 {
			return res, nil
		}
		for _, t := range ts {
			if t.state == tuner.Pending {
				t.at++
				res.steps++
			}
		}
		curves := make([]tuner.Curve, len(ts))
		for i, t := range ts {
			curves[i] = tuner.Curve{ID: strconv.Itoa(i), Steps: steps(t.at), Values: t.curve[:t.at]}
		}
		for i, t := range ts {
			if t.state != tuner.Pending {
				continue
			}
			if t.at >= len(t.curve) {
				t.state = tuner.Done
				running--
				b := c.best(t.curve)
				if math.IsNaN(res.best) || c.better(b, res.best) {
					res.best, res.stepsAtBest = b, res.steps
				}
				if !math.IsNaN(target) && !c.better(target, b) {
					res.reached = true // counted up to this step: the study has what it was after
					return res, nil
				}
				continue
			}
			others := append(append([]tuner.Curve(nil), curves[:i]...), curves[i+1:]...)
			if p.Decide(curves[i], others).Prune {
				t.state = tuner.Pruned
				running--
				res.pruned++
			}
		}
	}
}

func steps(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}
