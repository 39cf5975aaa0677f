package tabular

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"

	"niuma/tuner"
)

// Sampler proposes the next values of repetition rep, given its trials so
// far (each recorded with the values it proposed; the result is that of
// the configuration they snap to).
type Sampler func(rep int, space tuner.Space, goal tuner.Goal, trials []tuner.Trial) (tuner.Values, error)

// Samplers are the tuner's search methods by name.
var Samplers = map[string]Sampler{
	"bayes": func(rep int, space tuner.Space, goal tuner.Goal, trials []tuner.Trial) (tuner.Values, error) {
		s, err := tuner.Suggest(tuner.Config{Space: space, Goal: goal, Seed: uint64(rep)}, trials, 1)
		if err != nil {
			return nil, err
		}
		return s[0].Values, nil
	},
	"random": func(rep int, space tuner.Space, goal tuner.Goal, trials []tuner.Trial) (tuner.Values, error) {
		s, err := tuner.Random(tuner.Config{Space: space, Goal: goal, Seed: uint64(rep)}, trials, 1)
		if err != nil {
			return nil, err
		}
		return s[0].Values, nil
	},
}

// Protocol is how a search is scored on a table.
type Protocol struct {
	Budget int // trials per search
	Reps   int // repetitions, seeded FirstSeed, FirstSeed+1, …
	// FirstSeed is the first repetition's seed (0 in the reference
	// script; another value scores the tuner on other seeds).
	FirstSeed int
	Noisy     bool
	Workers   int            // repetitions run at once
	Progress  func(done int) // called after each repetition, if not nil
}

// Regret runs p.Reps repetitions of p.Budget trials each (repetition r
// seeds the sampler with r) and returns, for t = 1..Budget, the median over
// repetitions of the incumbent's simple regret after t trials: |best mean
// in the table − the incumbent's mean|, the incumbent being the
// configuration with the best observed result so far. A trial's result is
// the configuration's mean over seeds, or with noisy one seed's value
// drawn at random.
func Regret(t *Table, sample Sampler, p Protocol) ([]float64, error) {
	budget, reps, noisy, workers, progress := p.Budget, p.Reps, p.Noisy, p.Workers, p.Progress
	curves := make([][]float64, reps)
	errs := make([]error, reps)
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rep := range jobs {
				curves[rep], errs[rep] = t.repetition(sample, p.FirstSeed+rep, budget, noisy)
				mu.Lock()
				done++
				if progress != nil {
					progress(done)
				}
				mu.Unlock()
			}
		}()
	}
	for rep := 0; rep < reps; rep++ {
		jobs <- rep
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	out := make([]float64, budget)
	col := make([]float64, reps)
	for i := range out {
		for r := range curves {
			col[r] = curves[r][i]
		}
		out[i] = median(col)
	}
	return out, nil
}

func (t *Table) repetition(sample Sampler, rep, budget int, noisy bool) ([]float64, error) {
	rng := rand.New(rand.NewPCG(uint64(rep), 0x6e6f697379))
	var trials []tuner.Trial
	curve := make([]float64, budget)
	incObs, incKey := math.NaN(), ""
	for i := 0; i < budget; i++ {
		v, err := sample(rep, t.Space, t.Goal, trials)
		if err != nil {
			return nil, fmt.Errorf("repetition %d, trial %d: %w", rep, i+1, err)
		}
		// The trial records what the tuner proposed, as Optuna's trials do
		// in the reference script; its result is the snapped row's.
		_, k := t.Snap(v)
		seeds, ok := t.rows[k]
		if !ok {
			return nil, fmt.Errorf("repetition %d, trial %d: the table has no row %s", rep, i+1, k)
		}
		y := t.mean[k]
		if noisy {
			y = seeds[rng.IntN(len(seeds))]
		}
		trials = append(trials, tuner.Trial{ID: strconv.Itoa(i + 1), Values: v, State: tuner.Done, Objective: y})
		if math.IsNaN(incObs) || t.better(y, incObs) {
			incObs, incKey = y, k
		}
		curve[i] = math.Abs(t.best - t.mean[incKey])
	}
	return curve, nil
}

// median is the median of xs (the mean of the middle two for an even
// count), as Python's statistics.median computes it.
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
