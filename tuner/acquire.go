package tuner

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Acquisition: candidates are drawn from the Parzen mixture of the best
// trials (where the good region is), as neighbours of the best trials and
// uniformly (to explore); the one of highest expected improvement, over
// the incumbent less a margin, is suggested.
const (
	parzenCandidates  = 300
	randomCandidates  = 32
	localParents      = 5
	localChildren     = 24
	localStep         = 0.1
	improvementMargin = 0.2 // in normal scores: improve on the incumbent by a little more than nothing
)

// next returns the untried point of highest expected improvement.
func (m *Model) next(rng *rand.Rand) []float64 {
	kx := make([]float64, len(m.g.x))
	target := m.best - improvementMargin
	var best []float64
	bestS := math.Inf(-1)
	consider := func(x []float64) {
		if m.taken[key(x)] {
			return
		}
		mu, v := m.g.predict(x, kx)
		if s := logEI(target, mu, math.Sqrt(v)); s > bestS || best == nil {
			best, bestS = x, s
		}
	}
	good := m.goodParzen()
	for i := 0; i < parzenCandidates; i++ {
		consider(m.draw(good, rng))
	}
	for i := 0; i < randomCandidates; i++ {
		consider(m.enc.random(rng))
	}
	order := m.ranked()
	for _, i := range order[:min(localParents, len(order))] {
		for j := 0; j < localChildren; j++ {
			consider(m.mutate(m.g.x[i], localStep, rng))
		}
	}
	if best == nil {
		// Every candidate was tried already (a small discrete space):
		// repeat a random point rather than stall.
		best = m.enc.random(rng)
	}
	return best
}

// ranked returns the modelled points (observed and believed), best first.
func (m *Model) ranked() []int {
	order := make([]int, len(m.g.x))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return m.g.y[order[a]] < m.g.y[order[b]] })
	return order
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
