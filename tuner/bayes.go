package tuner

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
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
	MethodBayes  Method = "bayes"  // the model's best expected improvement
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
// parameters: enough points to fit one length scale per parameter
// roughly, few enough to leave most of a small budget to the model.
func DefaultStartup(d int) int {
	if v := envFloat("XP_STARTUP", 0); v > 0 {
		return int(v)
	}
	return min(10, max(5, d+2))
}

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
	// Prediction is the model's expectation for these values; nil for
	// random and grid suggestions.
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

// Suggest returns the next n values to try: points of a Latin-hypercube
// design while fewer than Startup trials have results, then the points of
// highest expected improvement under the Gaussian-process model, each
// believed (at the model's prediction) before the next is chosen, as are
// the trials still pending.
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
	for len(out) < n {
		x, pred := m.next(rng)
		out = append(out, Suggestion{Values: m.enc.decode(x), Method: MethodBayes, Prediction: pred})
		m.believe(x)
	}
	return out, nil
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

// Model is the Gaussian-process model of a study's objective.
type Model struct {
	cfg   Config
	enc   *encoder
	g     *gp
	w     warp
	sign  float64   // the model sees sign·objective, lower better
	ids   []string  // per modelled point (pending ones too)
	obj   []float64 // per modelled point: the objective; NaN when pending
	nObs  int       // points with results (the first nObs)
	best  float64   // the incumbent's modelled score
	taken map[string]bool
}

// ErrTooFewTrials is returned by Fit when fewer than two trials have a
// result: there is nothing to model yet.
var ErrTooFewTrials = errors.New("the model needs at least two trials with a result")

// Fit models the objective from the trials with a result (done and
// pruned ones; failed ones count as the worst result seen) and believes
// the pending ones.
func Fit(cfg Config, trials []Trial) (*Model, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, enc: newEncoder(cfg.Space, cfg.Fixed), sign: 1}
	if cfg.Goal == Maximize {
		m.sign = -1
	}
	m.taken = takenSet(m.enc, trials)
	var xs [][]float64
	var ys []float64
	worst := math.Inf(-1)
	for _, t := range trials {
		if (t.State == Done || t.State == Pruned) && !math.IsNaN(t.Objective) && !math.IsInf(t.Objective, 0) {
			xs = append(xs, m.point(t.Values))
			ys = append(ys, m.sign*t.Objective)
			m.ids = append(m.ids, t.ID)
			m.obj = append(m.obj, t.Objective)
			worst = math.Max(worst, m.sign*t.Objective)
		}
	}
	if len(xs) < 2 {
		return nil, ErrTooFewTrials
	}
	for _, t := range trials {
		if t.State == Failed || ((t.State == Done || t.State == Pruned) && (math.IsNaN(t.Objective) || math.IsInf(t.Objective, 0))) {
			xs = append(xs, m.point(t.Values))
			ys = append(ys, worst)
			m.ids = append(m.ids, t.ID)
			m.obj = append(m.obj, m.sign*worst)
		}
	}
	m.nObs = len(xs)
	z, w := newWarp(ys)
	m.w = w
	m.g = fitGP(xs, z, m.enc.cat, cfg.rng(len(trials), 4))
	m.best = math.Inf(1)
	kx := make([]float64, len(xs))
	for _, x := range xs {
		mu, _ := m.g.predict(x, kx)
		m.best = math.Min(m.best, mu)
	}
	for _, t := range trials {
		if t.State == Pending {
			m.believe(m.point(t.Values))
			m.ids[len(m.ids)-1] = t.ID
		}
	}
	return m, nil
}

func (m *Model) point(v Values) []float64 {
	x := m.enc.encode(v)
	m.enc.decode(x)
	return x
}

// believe adds x as a pending point whose result is the model's current
// mean there: the mean stays, the uncertainty around x collapses.
func (m *Model) believe(x []float64) {
	g := m.g
	n := len(g.x)
	kx := make([]float64, n)
	mu, v := g.predict(x, kx) // kx = L⁻¹ k(X, x)
	l := make([]float64, (n+1)*(n+1))
	for i := 0; i < n; i++ {
		copy(l[i*(n+1):i*(n+1)+i+1], g.l[i*n:i*n+i+1])
	}
	copy(l[n*(n+1):], kx)
	l[n*(n+1)+n] = math.Sqrt(v + g.sn2 + jitter*g.sf2)
	g.l = l
	g.x = append(g.x, x)
	g.y = append(g.y, mu)
	g.alpha = append([]float64(nil), g.y...)
	solveLower(g.l, n+1, g.alpha)
	solveUpperT(g.l, n+1, g.alpha)
	m.ids = append(m.ids, "")
	m.obj = append(m.obj, math.NaN())
	m.taken[key(x)] = true
}

// Predict returns what the model expects of values v.
func (m *Model) Predict(v Values) Prediction {
	return m.prediction(m.point(v))
}

func (m *Model) prediction(x []float64) Prediction {
	kx := make([]float64, len(m.g.x))
	mu, v := m.g.predict(x, kx)
	sd := math.Sqrt(v)
	lo, hi := m.sign*m.w.inverse(mu-sd), m.sign*m.w.inverse(mu+sd)
	if lo > hi {
		lo, hi = hi, lo
	}
	p := Prediction{
		Mean:   m.sign * m.w.inverse(mu),
		Low:    lo,
		High:   hi,
		Std:    (hi - lo) / 2,
		Chance: normCDF((m.best - mu) / sd),
		Trials: m.nObs,
	}
	w := m.g.weights(x)
	total := 0.0
	for i := 0; i < m.nObs; i++ {
		total += math.Abs(w[i])
	}
	idx := make([]int, m.nObs)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return math.Abs(w[idx[a]]) > math.Abs(w[idx[b]]) })
	for _, i := range idx[:min(3, len(idx))] {
		if total == 0 || w[i] == 0 {
			break
		}
		p.Drivers = append(p.Drivers, Driver{ID: m.ids[i], Objective: m.obj[i], Weight: math.Abs(w[i]) / total})
	}
	return p
}

// Acquisition search sizes: random candidates, neighbours of the best
// trials, and hill-climbing from the best candidates.
const (
	randomCandidates = 256
	localParents     = 5
	localChildren    = 24
	climbStarts      = 4
	climbRounds      = 12
)

var xpAcq = os.Getenv("XP_ACQ")

// next returns the untried point of highest expected improvement.
func (m *Model) next(rng *rand.Rand) ([]float64, *Prediction) {
	if xpAcq == "mace" {
		return m.nextMACE(rng)
	}
	kx := make([]float64, len(m.g.x))
	score := func(x []float64) float64 {
		if m.taken[key(x)] || m.near(x) {
			return math.Inf(-1)
		}
		mu, v := m.g.predict(x, kx)
		return logEI(m.best-xpXi, mu, math.Sqrt(v))
	}
	type cand struct {
		x []float64
		s float64
	}
	var cands []cand
	add := func(x []float64) { cands = append(cands, cand{x, score(x)}) }
	for i := 0; i < randomCandidates; i++ {
		add(m.enc.random(rng))
	}
	// Neighbours of the best points seen (observed or believed).
	order := make([]int, len(m.g.x))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return m.g.y[order[a]] < m.g.y[order[b]] })
	for _, i := range order[:min(localParents, len(order))] {
		for j := 0; j < localChildren; j++ {
			add(m.mutate(m.g.x[i], 0.1, rng))
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].s > cands[b].s })
	best := cands[0]
	for _, c := range cands[:min(climbStarts, len(cands))] {
		if math.IsInf(c.s, -1) {
			break
		}
		cur := c
		step := 0.1
		for r := 0; r < climbRounds && step > 1e-3; r++ {
			improved := false
			for _, y := range m.neighbours(cur.x, step, rng) {
				if s := score(y); s > cur.s {
					cur, improved = cand{y, s}, true
				}
			}
			if !improved {
				step /= 3
			}
		}
		if cur.s > best.s {
			best = cur
		}
	}
	if math.IsInf(best.s, -1) {
		// Every candidate was tried already (a small discrete space):
		// repeat the most promising point rather than stall.
		best = cands[0]
	}
	p := m.prediction(best.x)
	return best.x, &p
}

// nextMACE picks at random from the Pareto front of EI, PI and UCB.
func (m *Model) nextMACE(rng *rand.Rand) ([]float64, *Prediction) {
	kx := make([]float64, len(m.g.x))
	d := float64(len(m.cfg.Space.Params))
	t := float64(m.nObs)
	kappa := math.Sqrt(0.5 * 2 * math.Log(math.Pow(t, d/2+2)*math.Pi*math.Pi/(3*0.05)))
	type cand struct {
		x []float64
		a [3]float64
	}
	var cands []cand
	seen := map[string]bool{}
	eval := func(x []float64) (cand, bool) {
		k := key(x)
		if m.taken[k] {
			return cand{}, false
		}
		mu, v := m.g.predict(x, kx)
		sd := math.Sqrt(v)
		u := (m.best - xpXi - mu) / sd
		c := cand{x: x, a: [3]float64{logEI(m.best-xpXi, mu, sd), logPhi(u), kappa*sd - mu}}
		if !seen[k] {
			seen[k] = true
			cands = append(cands, c)
		}
		return c, true
	}
	for i := 0; i < randomCandidates; i++ {
		eval(m.enc.random(rng))
	}
	order := make([]int, len(m.g.x))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return m.g.y[order[a]] < m.g.y[order[b]] })
	for _, i := range order[:min(localParents, len(order))] {
		for j := 0; j < localChildren; j++ {
			eval(m.mutate(m.g.x[i], 0.1, rng))
		}
	}
	if len(cands) == 0 {
		x := m.enc.random(rng)
		p := m.prediction(x)
		return x, &p
	}
	for a := 0; a < 3; a++ {
		idx := make([]int, len(cands))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(i, j int) bool { return cands[idx[i]].a[a] > cands[idx[j]].a[a] })
		for _, i := range idx[:min(2, len(idx))] {
			cur := cands[i]
			step := 0.1
			for r := 0; r < climbRounds && step > 1e-3; r++ {
				improved := false
				for _, y := range m.neighbours(cur.x, step, rng) {
					if c, ok := eval(y); ok && c.a[a] > cur.a[a] {
						cur, improved = c, true
					}
				}
				if !improved {
					step /= 3
				}
			}
		}
	}
	var front []int
	for i, c := range cands {
		dominated := false
		for j, o := range cands {
			if j != i && o.a[0] >= c.a[0] && o.a[1] >= c.a[1] && o.a[2] >= c.a[2] && (o.a[0] > c.a[0] || o.a[1] > c.a[1] || o.a[2] > c.a[2]) {
				dominated = true
				break
			}
		}
		if !dominated {
			front = append(front, i)
		}
	}
	best := cands[front[rng.IntN(len(front))]]
	p := m.prediction(best.x)
	return best.x, &p
}

// logPhi is log Φ(u), stable for very negative u.
func logPhi(u float64) float64 {
	if u > -5 {
		return math.Log(normCDF(u))
	}
	return -0.5*u*u - math.Log(-u) - 0.5*math.Log(2*math.Pi)
}

var xpRadius = envFloat("XP_RADIUS", 0)
var xpXi = envFloat("XP_XI", 0)

func envFloat(k string, d float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil {
		return v
	}
	return d
}

// near reports whether x is within the resolution of a modelled point in
// every coordinate.
func (m *Model) near(x []float64) bool {
	if xpRadius == 0 {
		return false
	}
	for _, y := range m.g.x {
		close := true
		for i, v := range y {
			if m.enc.cat[i] {
				if v != x[i] {
					close = false
					break
				}
			} else if math.Abs(v-x[i]) >= xpRadius {
				close = false
				break
			}
		}
		if close {
			return true
		}
	}
	return false
}

// mutate changes each coordinate of x with probability 1/d (at least one):
// a number by a normal step of size sd in its unit range, a choice to
// another value.
func (m *Model) mutate(x []float64, sd float64, rng *rand.Rand) []float64 {
	y := append([]float64(nil), x...)
	d := len(y)
	forced := rng.IntN(d)
	for i, p := range m.cfg.Space.Params {
		if i != forced && rng.Float64() >= 1/float64(d) {
			continue
		}
		switch p.Kind {
		case Choice, Bool:
			k := 2
			if p.Kind == Choice {
				k = len(p.Choices)
			}
			if k > 1 {
				y[i] = float64((int(y[i]) + 1 + rng.IntN(k-1)) % k)
			}
		default:
			y[i] = clamp(y[i]+sd*rng.NormFloat64(), 0, 1)
		}
	}
	m.enc.decode(y)
	return y
}

// neighbours are the points one move from x: each number up and down by
// step (at least to the next whole number for an int), each choice to
// every other value (at most eight, drawn at random beyond that).
func (m *Model) neighbours(x []float64, step float64, rng *rand.Rand) [][]float64 {
	var out [][]float64
	for i, p := range m.cfg.Space.Params {
		switch p.Kind {
		case Choice, Bool:
			k := 2
			if p.Kind == Choice {
				k = len(p.Choices)
			}
			for _, j := range rng.Perm(k)[:min(k, 8)] {
				if float64(j) == x[i] {
					continue
				}
				y := append([]float64(nil), x...)
				y[i] = float64(j)
				m.enc.decode(y)
				out = append(out, y)
			}
		default:
			for _, dir := range []float64{-1, 1} {
				y := append([]float64(nil), x...)
				y[i] = clamp(x[i]+dir*step, 0, 1)
				m.enc.decode(y)
				if p.Kind == Int && y[i] == x[i] {
					// Too small a step for an int: move to the next one.
					v := value(p, x[i]).(int64) + int64(dir)
					if float64(v) < p.Min || float64(v) > p.Max {
						continue
					}
					y[i] = unit(p, v)
					m.enc.decode(y)
				}
				if !equal(y, x) {
					out = append(out, y)
				}
			}
		}
	}
	return out
}

func (m *Model) Debug() string {
	return fmt.Sprintf("ls %.3g sf2 %.3g sn2 %.3g best %.3f", m.g.ls, m.g.sf2, m.g.sn2, m.best)
}
