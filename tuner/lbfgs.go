package tuner

import "math"

// minimize runs L-BFGS (memory 6) with a backtracking Armijo line search
// on f, which returns the value and writes the gradient, from x0, for at
// most maxEval evaluations. It returns the best point seen and its value.
// Small and deterministic: the hyperparameter fits need nothing more.
func minimize(f func(x, grad []float64) float64, x0 []float64, maxEval int) ([]float64, float64) {
	const m = 6
	n := len(x0)
	x := append([]float64(nil), x0...)
	g := make([]float64, n)
	fx := f(x, g)
	evals := 1
	best, bestF := append([]float64(nil), x...), fx
	if math.IsNaN(fx) || math.IsInf(fx, 0) {
		return best, bestF
	}
	var ss, ys [][]float64
	var rhos []float64
	dir := make([]float64, n)
	alpha := make([]float64, m)
	xn := make([]float64, n)
	gn := make([]float64, n)
	for evals < maxEval {
		// Two-loop recursion: dir = −H g.
		copy(dir, g)
		for i := len(ss) - 1; i >= 0; i-- {
			alpha[i] = rhos[i] * dot(ss[i], dir)
			axpy(-alpha[i], ys[i], dir)
		}
		if k := len(ss) - 1; k >= 0 {
			scale(dot(ss[k], ys[k])/dot(ys[k], ys[k]), dir)
		} else if gn := math.Sqrt(dot(g, g)); gn > 0 {
			scale(1/math.Max(1, gn), dir) // a first step of at most unit length
		}
		for i := range ss {
			b := rhos[i] * dot(ys[i], dir)
			axpy(alpha[i]-b, ss[i], dir)
		}
		scale(-1, dir)
		slope := dot(g, dir)
		if slope >= 0 { // not a descent direction: restart from the gradient
			ss, ys, rhos = nil, nil, nil
			copy(dir, g)
			scale(-1/math.Max(1, math.Sqrt(dot(g, g))), dir)
			slope = dot(g, dir)
			if slope >= 0 {
				break
			}
		}
		step, fn := 1.0, math.Inf(1)
		for evals < maxEval {
			for i := range x {
				xn[i] = x[i] + step*dir[i]
			}
			fn = f(xn, gn)
			evals++
			if fn <= fx+1e-4*step*slope && !math.IsNaN(fn) {
				break
			}
			step *= 0.3
			if step < 1e-8 {
				break
			}
		}
		if !(fn < fx) {
			break
		}
		s := make([]float64, n)
		y := make([]float64, n)
		for i := range x {
			s[i] = xn[i] - x[i]
			y[i] = gn[i] - g[i]
		}
		copy(x, xn)
		copy(g, gn)
		improved := fx - fn
		fx = fn
		if fx < bestF {
			copy(best, x)
			bestF = fx
		}
		if sy := dot(s, y); sy > 1e-12 {
			if len(ss) == m {
				ss, ys, rhos = ss[1:], ys[1:], rhos[1:]
			}
			ss, ys, rhos = append(ss, s), append(ys, y), append(rhos, 1/sy)
		}
		if improved < 1e-7*math.Max(1, math.Abs(fx)) || math.Sqrt(dot(g, g)) < 1e-5 {
			break
		}
	}
	return best, bestF
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func axpy(a float64, x, y []float64) {
	for i, v := range x {
		y[i] += a * v
	}
}

func scale(a float64, x []float64) {
	for i := range x {
		x[i] *= a
	}
}
