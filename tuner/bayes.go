package tuner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
)

// Goal says which way the objective is better.
type Goal string

// The goals, as a template's objective writes them.
const (
	Minimize Goal = "min"
	Maximize Goal = "max"
)

// State is where a trial stands, as far as a search is concerned.
type State string

// The trial states a search distinguishes.
const (
	Done    State = "done"    // finished; Objective is its result
	Pruned  State = "pruned"  // stopped early; Objective is the last value it reported
	Failed  State = "failed"  // the workload failed; it counts as the worst result seen
	Pending State = "pending" // queued or running; believed to land on the model's prediction
)

// Trial is one evaluated (or running) set of values.
type Trial struct {
	ID        string
	Values    Values
	State     State
	Objective float64
}

// Method names how a suggestion was made.
type Method string

// The methods.
const (
	MethodGrid   Method = "grid"   // a combination of a sweep
	MethodRandom Method = "random" // drawn at random (or from the opening design)
	MethodBayes  Method = "bayes"  // the Gaussian process's best expected improvement
	MethodParzen Method = "parzen" // drawn where the best trials are dense and the others sparse
)

// Config is what a search needs besides its trials.
type Config struct {
	Space Space
	Goal  Goal
	// Fixed holds the values of parameters outside the space that
	// conditions may refer to.
	Fixed Values
	// Seed makes the search reproducible: the same seed and trials give
	// the same suggestions.
	Seed uint64
	// Startup is how many trials are drawn from a space-filling design
	// before the model takes over; 0 means DefaultStartup.
	Startup int
}

// DefaultStartup is the opening design's size for a space of d
// parameters: two points per parameter, at least 5 and at most 10, enough
// to fit a length scale per parameter roughly and few enough to leave
// most of a small budget to the model.
func DefaultStartup(d int) int { return min(10, max(5, 2*d)) }

func (c Config) startup() int {
	if c.Startup > 0 {
		return c.Startup
	}
	return DefaultStartup(len(c.Space.Params))
}

func (c Config) check() error {
	if err := c.Space.Searchable(); err != nil {
		return err
	}
	if c.Goal != Minimize && c.Goal != Maximize {
		return fmt.Errorf("the goal must be %q or %q, not %q", Minimize, Maximize, c.Goal)
	}
	return nil
}

// rng is the random stream for a suggestion made after n trials: seeded
// by the study's seed and n, so a restarted search repeats itself.
func (c Config) rng(n int, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(c.Seed^0x6e69756d61, uint64(n)<<8|stream))
}

// Suggestion is the values to try next, with how they were chosen.
type Suggestion struct {
	Values Values
	Method Method
	// Prediction is the Gaussian process's expectation for these values;
	// nil for random and grid suggestions.
	Prediction *Prediction
}

// Prediction is what the model expects of a set of values.
type Prediction struct {
	Mean      float64 // the expected objective
	Low, High float64 // one standard deviation either side, on the objective's scale
	// Std is half the width of [Low, High]: the "±" of the prediction.
	Std float64
	// Chance is the probability that the objective beats the best so far.
	Chance float64
	// Drivers are the earlier trials that weigh most in the prediction,
	// heaviest first.
	Drivers []Driver
	// Trials is how many finished trials the model learnt from.
	Trials int
}

// Spread writes the prediction as people read it, "0.9828 ± 0.0064":
// the mean to the digits its spread leaves meaning in, the spread to two.
func (p Prediction) Spread() string {
	return meanText(p.Mean, p.Std) + " ± " + strconv.FormatFloat(p.Std, 'g', 2, 64)
}

// meanText writes an expected value to the digits its spread leaves
// meaning in: 0.9828 ± 0.0064, not 0.982757 ± 0.0064.
func meanText(mean, std float64) string {
	whole := strconv.FormatFloat(mean, 'g', 6, 64)
	if !(std > 0) || math.IsInf(std, 0) || math.IsNaN(mean) {
		return whole
	}
	places := int(-math.Floor(math.Log10(std))) + 1
	if places < 0 || places > 12 {
		return whole
	}
	return strconv.FormatFloat(mean, 'f', places, 64)
}

// Driver is an earlier trial and its weight in a prediction: the mean is
// a weighted sum of the observed (normal-scored) objectives.
type Driver struct {
	ID        string
	Objective float64
	Weight    float64 // share of the absolute weights, in (0, 1]
}

// Random returns n values drawn uniformly from the space (numbers
// uniformly on their scale, log where the schema says log), avoiding
// values already tried where it can.
func Random(cfg Config, trials []Trial, n int) ([]Suggestion, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	enc := newEncoder(cfg.Space, cfg.Fixed)
	rng := cfg.rng(len(trials), 1)
	taken := takenSet(enc, trials)
	out := make([]Suggestion, 0, n)
	for len(out) < n {
		var x []float64
		for try := 0; try < 100; try++ {
			x = enc.random(rng)
			if !taken[key(x)] {
				break
			}
		}
		taken[key(x)] = true
		out = append(out, Suggestion{Values: enc.decode(x), Method: MethodRandom})
	}
	return out, nil
}

// Suggest returns the next n values to try. While fewer than Startup
// trials have a result they come from a Latin-hypercube design. Then two
// proposers take turns, by trial number: even trials take the point of
// highest expected improvement under the Gaussian-process model (among
// candidates drawn around the best trials, their neighbours and a few
// uniform draws), odd trials a Parzen-estimator draw (each parameter's
// value drawn where the best tenth of the trials are dense and the rest
// sparse). The model is sample-efficient where the objective is smooth;
// the Parzen draws keep sampling the whole good region where it is a
// plateau of near-ties, where expected improvement alone circles the
// incumbent (see docs/BENCHMARKS.md). Trials still pending, and each
// suggestion once made, count as believed at the model's prediction for
// the model and as losers for the Parzen draws, so a batch spreads out.
// Every suggestion after the design carries the model's prediction.
func Suggest(cfg Config, trials []Trial, n int) ([]Suggestion, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	enc := newEncoder(cfg.Space, cfg.Fixed)
	taken := takenSet(enc, trials)
	results := 0
	for _, t := range trials {
		if t.State == Done || t.State == Pruned {
			results++
		}
	}
	var out []Suggestion
	if results < cfg.startup() {
		design := enc.latin(cfg.startup(), cfg.rng(0, 2))
		rng := cfg.rng(len(trials), 1)
		for len(out) < n {
			k := len(trials) + len(out)
			if k >= len(design) && results >= 2 {
				break // the design is spent: the model places the rest
			}
			var x []float64
			if k < len(design) && !taken[key(design[k])] {
				x = design[k]
			} else {
				x = enc.random(rng)
				for try := 0; taken[key(x)] && try < 100; try++ {
					x = enc.random(rng)
				}
			}
			taken[key(x)] = true
			out = append(out, Suggestion{Values: enc.decode(x), Method: MethodRandom})
		}
		if len(out) == n {
			return out, nil
		}
		trials = append(slices.Clone(trials), asPending(out)...)
	}
	m, err := Fit(cfg, trials)
	if err != nil {
		return nil, err
	}
	rng := cfg.rng(len(trials), 3)
	for k := len(trials); len(out) < n; k++ {
		x, method := m.parzen(rng), MethodParzen
		if k%2 == 0 {
			x, method = m.next(rng), MethodBayes
		}
		p := m.prediction(x)
		out = append(out, Suggestion{Values: m.enc.decode(x), Method: method, Prediction: &p})
		m.believe(x)
	}
	return out, nil
}

// Propose is the model's own next point, with no opening design and no
// alternation: the Gaussian process's best expected improvement over
// trials, with its prediction. It needs two results (Done or Pruned).
// Seeded as Suggest is: the same trials give the same point. It is the
// advice for a template outside any study.
func Propose(cfg Config, trials []Trial) (Suggestion, error) {
	m, err := Fit(cfg, trials)
	if err != nil {
		return Suggestion{}, err
	}
	x := m.next(cfg.rng(len(trials), 3))
	p := m.prediction(x)
	return Suggestion{Values: m.enc.decode(x), Method: MethodBayes, Prediction: &p}, nil
}

func asPending(s []Suggestion) []Trial {
	out := make([]Trial, len(s))
	for i, x := range s {
		out[i] = Trial{Values: x.Values, State: Pending}
	}
	return out
}

// key identifies a canonical point.
func key(x []float64) string {
	b := make([]byte, 0, 8*len(x))
	for _, v := range x {
		u := math.Float64bits(v)
		for i := 0; i < 8; i++ {
			b = append(b, byte(u>>(8*i)))
		}
	}
	return string(b)
}

func takenSet(enc *encoder, trials []Trial) map[string]bool {
	taken := make(map[string]bool, len(trials))
	for _, t := range trials {
		x := enc.encode(t.Values)
		enc.decode(x)
		taken[key(x)] = true
	}
	return taken
}
