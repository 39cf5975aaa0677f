package tuner

import (
	"math"
	"sort"
)

// warp turns observed objectives (oriented so that lower is better) into
// normal scores: the i-th smallest of n becomes Φ⁻¹((i − ½) / n), ties
// sharing their mean rank. A Gaussian process fits these far better than
// the raw values, whose scale is often dominated by a few diverged or
// failed trials (an accuracy of 0.1 among 0.95s, a loss of 1e3 among
// 1e-3s), and the ranking, which is all the search needs, is kept. The
// inverse maps a score back by interpolating between the observed pairs
// and continuing the slope of the nearest few beyond them.
type warp struct {
	z, y []float64 // sorted by y, ascending; z non-decreasing
}

func newWarp(y []float64) ([]float64, warp) {
	n := len(y)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return y[idx[a]] < y[idx[b]] })
	z := make([]float64, n)
	for i := 0; i < n; {
		j := i
		for j+1 < n && y[idx[j+1]] == y[idx[i]] {
			j++
		}
		rank := float64(i+j)/2 + 0.5 // mean of ranks i..j, 0-based, plus ½
		s := normQuantile(rank / float64(n))
		for k := i; k <= j; k++ {
			z[idx[k]] = s
		}
		i = j + 1
	}
	w := warp{z: make([]float64, 0, n), y: make([]float64, 0, n)}
	for _, i := range idx {
		if len(w.y) > 0 && w.y[len(w.y)-1] == y[i] {
			continue
		}
		w.z = append(w.z, z[i])
		w.y = append(w.y, y[i])
	}
	return z, w
}

// inverse maps a normal score back to the objective's scale.
func (w warp) inverse(s float64) float64 {
	n := len(w.z)
	switch {
	case n == 0:
		return s
	case n == 1:
		return w.y[0]
	}
	i := sort.SearchFloat64s(w.z, s)
	switch {
	case i == 0:
		return w.y[0] + (s-w.z[0])*w.slope(0, min(n-1, 3))
	case i >= n:
		return w.y[n-1] + (s-w.z[n-1])*w.slope(max(0, n-4), n-1)
	}
	t := (s - w.z[i-1]) / (w.z[i] - w.z[i-1])
	return w.y[i-1] + t*(w.y[i]-w.y[i-1])
}

// slope is the objective's change per unit of score between points a and b.
func (w warp) slope(a, b int) float64 {
	if w.z[b] == w.z[a] {
		return 0
	}
	return (w.y[b] - w.y[a]) / (w.z[b] - w.z[a])
}

// normQuantile is Φ⁻¹(p), the standard normal quantile.
func normQuantile(p float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// normCDF is Φ(x).
func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// normPDF is φ(x).
func normPDF(x float64) float64 { return math.Exp(-0.5*x*x) / math.Sqrt(2*math.Pi) }

// logEI is the logarithm of the expected improvement of a normal
// N(mu, sd²) below best, computed stably far into the tail (where the
// plain formula underflows to 0 and every candidate would tie).
func logEI(best, mu, sd float64) float64 {
	u := (best - mu) / sd
	if u > -6 {
		ei := u*normCDF(u) + normPDF(u)
		if ei > 0 {
			return math.Log(sd) + math.Log(ei)
		}
	}
	// For u → −∞: u·Φ(u) + φ(u) ≈ φ(u)/u² · (1 − 3/u² + 15/u⁴).
	u2 := u * u
	return math.Log(sd) - 0.5*u2 - 0.5*math.Log(2*math.Pi) - math.Log(u2) + math.Log1p(-3/u2+15/(u2*u2))
}
