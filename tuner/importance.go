package tuner

import (
	"math"
	"sort"
)

// Importance is how much one parameter matters to the objective, by the
// model.
type Importance struct {
	Name string
	// Share is the part of the model's variance that the parameter
	// explains on its own (its main effect), as a share of all the main
	// effects: the shares sum to 1 (0 for all when nothing varies).
	Share float64
	// LengthScale is the kernel's length scale for the parameter, in
	// units of its (log-)scaled range: short means the objective changes
	// quickly along it.
	LengthScale float64
}

// Importance ranks the parameters, most important first, by a
// functional-ANOVA split of the model's mean: for each parameter, the
// variance over its values of the mean averaged over the others (drawn at
// random), on the model's normal-score scale. A conditional parameter is
// measured where it applies.
func (m *Model) Importance() []Importance {
	const bases, levels = 64, 12
	rng := m.cfg.rng(m.nObs, 5)
	base := make([][]float64, bases)
	for i := range base {
		base[i] = m.enc.random(rng)
	}
	mean := func(x []float64) float64 {
		s := 0.0
		for i, xi := range m.g.x {
			s += matern(m.g.sf2, m.g.r2(x, xi)) * m.g.alpha[i]
		}
		return s
	}
	out := make([]Importance, len(m.cfg.Space.Params))
	total := 0.0
	for d, p := range m.cfg.Space.Params {
		var vals []float64
		switch p.Kind {
		case Choice:
			for i := range p.Choices {
				vals = append(vals, float64(i))
			}
		case Bool:
			vals = []float64{0, 1}
		default:
			for i := 0; i < levels; i++ {
				vals = append(vals, (float64(i)+0.5)/levels)
			}
		}
		var effects []float64
		for _, u := range vals {
			s, n := 0.0, 0
			for _, b := range base {
				x := append([]float64(nil), b...)
				x[d] = u
				v := m.enc.decode(x)
				if !m.cfg.Space.Active(p.Name, m.enc.merged(v)) {
					continue
				}
				s += mean(x)
				n++
			}
			if n > 0 {
				effects = append(effects, s/float64(n))
			}
		}
		out[d] = Importance{Name: p.Name, Share: variance(effects), LengthScale: m.g.ls[d]}
		total += out[d].Share
	}
	for i := range out {
		if total > 0 {
			out[i].Share /= total
		} else {
			out[i].Share = 0
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Share > out[b].Share })
	return out
}

func variance(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return math.Max(0, v/float64(len(xs)))
}
