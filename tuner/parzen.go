package tuner

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Parzen estimators over the model's points, one parameter at a time (as
// the tree-structured Parzen estimator does): a mixture of normals, one
// around each point's coordinate with a width of its distance to the
// nearest other, plus one wide normal over the whole range as a prior;
// for a choice, each value's share of the points plus an even prior.
type mixture struct {
	mus, sigmas []float64 // numbers: centres and widths on [0, 1]
	probs       []float64 // choices: probability of each value
}

// parzenDraws is how many values one Parzen proposal draws per parameter
// from the good trials' mixture before keeping the most promising.
const parzenDraws = 24

func newMixture(p Param, d int, xs [][]float64, pts []int) mixture {
	if p.Kind == Choice || p.Kind == Bool {
		k := 2
		if p.Kind == Choice {
			k = len(p.Choices)
		}
		probs := make([]float64, k)
		for i := range probs {
			probs[i] = 1 / float64(k)
		}
		for _, i := range pts {
			if c := int(xs[i][d]); c >= 0 && c < k {
				probs[c]++
			}
		}
		total := 1 + float64(len(pts))
		for i := range probs {
			probs[i] /= total
		}
		return mixture{probs: probs}
	}
	mus := []float64{0.5}
	for _, i := range pts {
		mus = append(mus, clamp(xs[i][d], 0, 1))
	}
	order := make([]int, len(mus))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return mus[order[a]] < mus[order[b]] })
	sigmas := make([]float64, len(mus))
	// The narrowest allowed width shrinks as points accumulate.
	narrowest := 1 / math.Min(100, 1+float64(len(mus)))
	for k, i := range order {
		w := 0.0
		if k > 0 {
			w = mus[i] - mus[order[k-1]]
		}
		if k < len(order)-1 {
			w = math.Max(w, mus[order[k+1]]-mus[i])
		}
		sigmas[i] = clamp(w, narrowest, 1)
	}
	sigmas[0] = 1 // the prior
	return mixture{mus: mus, sigmas: sigmas}
}

func (z mixture) sample(rng *rand.Rand) float64 {
	if z.probs != nil {
		r := rng.Float64()
		for i, p := range z.probs {
			if r -= p; r <= 0 {
				return float64(i)
			}
		}
		return float64(len(z.probs) - 1)
	}
	i := rng.IntN(len(z.mus))
	for try := 0; try < 20; try++ { // truncated to [0, 1]
		if v := z.mus[i] + z.sigmas[i]*rng.NormFloat64(); v >= 0 && v <= 1 {
			return v
		}
	}
	return z.mus[i]
}

func (z mixture) logDensity(x float64) float64 {
	if z.probs != nil {
		return math.Log(z.probs[int(x)])
	}
	s := 0.0
	for i, mu := range z.mus {
		sg := z.sigmas[i]
		mass := normCDF((1-mu)/sg) - normCDF(-mu/sg)
		s += normPDF((x-mu)/sg) / sg / math.Max(mass, 1e-12)
	}
	return math.Log(s / float64(len(z.mus)))
}

// split returns the modelled points in two groups: the best tenth (at
// least one, at most 25) of the points with results, and the rest, the
// believed (pending) points among the rest, so that parallel draws avoid
// them.
func (m *Model) split() (good, rest []int) {
	var obs []int
	for _, i := range m.ranked() {
		if i < m.nObs {
			obs = append(obs, i)
		} else {
			rest = append(rest, i)
		}
	}
	n := min(25, max(1, int(math.Ceil(0.1*float64(len(obs))))))
	return obs[:n], append(rest, obs[n:]...)
}

// goodParzen is the mixture of the good group, per parameter.
func (m *Model) goodParzen() []mixture {
	good, _ := m.split()
	out := make([]mixture, len(m.cfg.Space.Params))
	for d, p := range m.cfg.Space.Params {
		out[d] = newMixture(p, d, m.g.x, good)
	}
	return out
}

// draw samples one point from per-parameter mixtures, canonical.
func (m *Model) draw(ms []mixture, rng *rand.Rand) []float64 {
	x := make([]float64, len(ms))
	for d := range ms {
		x[d] = ms[d].sample(rng)
	}
	m.enc.decode(x)
	return x
}

// parzen is a Parzen-estimator proposal: for each parameter, of
// parzenDraws values drawn from the good group's mixture, the one where
// the good group is densest relative to the rest.
func (m *Model) parzen(rng *rand.Rand) []float64 {
	good, rest := m.split()
	x := make([]float64, len(m.cfg.Space.Params))
	for d, p := range m.cfg.Space.Params {
		l, g := newMixture(p, d, m.g.x, good), newMixture(p, d, m.g.x, rest)
		bestS := math.Inf(-1)
		for i := 0; i < parzenDraws; i++ {
			v := l.sample(rng)
			if s := l.logDensity(v) - g.logDensity(v); s > bestS {
				x[d], bestS = v, s
			}
		}
	}
	m.enc.decode(x)
	return x
}
