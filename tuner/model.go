package tuner

import (
	"errors"
	"math"
	"sort"
)

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
