package tuner

import (
	"math"
	"math/rand/v2"
	"slices"
)

// encoder maps Values to points of the model's unit cube and back: one
// coordinate per parameter, a position in [0, 1] for a number (in log
// space for a log parameter; an int's range widened by half a step on each
// side so that every whole number gets an equal share) and the index of
// the value for a choice or bool. An inactive parameter, or one a trial
// does not name, sits where its default is.
type encoder struct {
	space Space
	fixed Values
	cat   []bool // per parameter: compared by equality
}

func newEncoder(s Space, fixed Values) *encoder {
	e := &encoder{space: s, fixed: fixed, cat: make([]bool, len(s.Params))}
	for i, p := range s.Params {
		e.cat[i] = p.Kind == Choice || p.Kind == Bool
	}
	return e
}

// bounds returns the range a numeric parameter is scaled from, in the
// space it is scaled in (log or linear).
func bounds(p Param) (lo, hi float64) {
	lo, hi = p.Min, p.Max
	if p.Kind == Int {
		lo, hi = lo-0.5, hi+0.5
	}
	if p.Log {
		lo, hi = math.Log(lo), math.Log(hi)
	}
	return lo, hi
}

// unit returns the coordinate of value x of parameter p.
func unit(p Param, x any) float64 {
	switch p.Kind {
	case Float, Int:
		var f float64
		switch x := x.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		default:
			return 0.5
		}
		lo, hi := bounds(p)
		if p.Log {
			if f <= 0 {
				return 0
			}
			f = math.Log(f)
		}
		if hi <= lo {
			return 0.5
		}
		return (f - lo) / (hi - lo)
	case Choice:
		s, _ := x.(string)
		if i := slices.Index(p.Choices, s); i >= 0 {
			return float64(i)
		}
		return 0
	case Bool:
		if b, _ := x.(bool); b {
			return 1
		}
		return 0
	}
	return 0
}

// value returns the value of parameter p at coordinate u, clamped to the
// parameter's bounds and rounded for an int.
func value(p Param, u float64) any {
	switch p.Kind {
	case Float, Int:
		lo, hi := bounds(p)
		f := lo + math.Max(0, math.Min(1, u))*(hi-lo)
		if p.Log {
			f = math.Exp(f)
		}
		f = math.Max(p.Min, math.Min(p.Max, f))
		if p.Kind == Int {
			return int64(math.Max(p.Min, math.Min(p.Max, math.Round(f))))
		}
		return f
	case Choice:
		i := int(u)
		if i < 0 || i >= len(p.Choices) {
			i = 0
		}
		return p.Choices[i]
	case Bool:
		return u >= 0.5
	}
	return nil
}

// defaultOf is the value an inactive parameter keeps.
func defaultOf(p Param) any {
	if p.Default != nil {
		return p.Default
	}
	switch p.Kind {
	case Float, Int:
		return value(p, 0.5)
	case Choice:
		return p.Choices[0]
	case Bool:
		return false
	}
	return ""
}

// encode returns the point of values v.
func (e *encoder) encode(v Values) []float64 {
	all := e.merged(v)
	x := make([]float64, len(e.space.Params))
	for i, p := range e.space.Params {
		val, ok := v[p.Name]
		if !ok || !e.space.Active(p.Name, all) || p.check(val) != nil {
			val = defaultOf(p)
		}
		x[i] = unit(p, val)
	}
	return x
}

// decode returns the values at point x (inactive parameters at their
// defaults) and rewrites x to the canonical point of those values, so
// that two points giving the same run compare equal.
func (e *encoder) decode(x []float64) Values {
	v := make(Values, len(x))
	all := e.fixed.clone()
	for i, p := range e.space.Params {
		var val any
		if e.space.Active(p.Name, all) {
			val = value(p, x[i])
		} else {
			val = defaultOf(p)
		}
		v[p.Name] = val
		all[p.Name] = val
		x[i] = unit(p, val)
	}
	return v
}

// merged is v on top of the fixed values, for evaluating conditions.
func (e *encoder) merged(v Values) Values {
	all := e.fixed.clone()
	for k, x := range v {
		all[k] = x
	}
	return all
}

// random returns a point drawn uniformly: numbers uniform in their
// (log-)scaled range, choices equally likely; canonical, as decode leaves
// it.
func (e *encoder) random(rng *rand.Rand) []float64 {
	x := make([]float64, len(e.space.Params))
	for i, p := range e.space.Params {
		x[i] = e.draw(i, p, rng)
	}
	e.decode(x)
	return x
}

func (e *encoder) draw(i int, p Param, rng *rand.Rand) float64 {
	switch p.Kind {
	case Choice:
		return float64(rng.IntN(len(p.Choices)))
	case Bool:
		return float64(rng.IntN(2))
	}
	return rng.Float64()
}

// latin returns n points of a Latin hypercube: each number's range cut
// into n strata with one point in each, each choice's values dealt out as
// evenly as n allows, in a random order per parameter.
func (e *encoder) latin(n int, rng *rand.Rand) [][]float64 {
	pts := make([][]float64, n)
	for j := range pts {
		pts[j] = make([]float64, len(e.space.Params))
	}
	for i, p := range e.space.Params {
		perm := rng.Perm(n)
		k := 0
		switch p.Kind {
		case Choice:
			k = len(p.Choices)
		case Bool:
			k = 2
		}
		// The offset deals the choices from a random first one, so that
		// a short design does not always favour the first choices.
		off := 0
		if k > 0 {
			off = rng.IntN(k)
		}
		for j := range pts {
			if k > 0 {
				pts[j][i] = float64((perm[j] + off) % k)
			} else {
				pts[j][i] = (float64(perm[j]) + rng.Float64()) / float64(n)
			}
		}
	}
	for _, x := range pts {
		e.decode(x)
	}
	return pts
}
