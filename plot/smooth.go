package plot

import (
	"math"
	"sort"
)

// EMA smooths ys the way TensorBoard's smoothing slider does: an
// exponential moving average with weight w in [0, 1) on the previous
// value, de-biased so that the first values are not pulled towards zero.
// w = 0 returns a copy of ys; a NaN or ±Inf value is passed through and
// does not poison what follows (the average skips it). The result has the
// length of ys.
func EMA(ys []float64, w float64) []float64 {
	out := make([]float64, len(ys))
	if !(w > 0) {
		copy(out, ys)
		return out
	}
	w = math.Min(w, 0.999)
	last, n := 0.0, 0
	for i, y := range ys {
		if !isFinite(y) {
			out[i] = y
			continue
		}
		last = last*w + (1-w)*y
		n++
		out[i] = last / (1 - math.Pow(w, float64(n)))
	}
	return out
}

// Nearest is the index of the value of xs (sorted ascending) closest to
// x, or -1 for an empty xs. It is a binary search: a hover over a million
// points costs about twenty comparisons.
func Nearest(xs []float64, x float64) int {
	n := len(xs)
	if n == 0 {
		return -1
	}
	i := sort.SearchFloat64s(xs, x)
	switch {
	case i == 0:
		return 0
	case i == n:
		return n - 1
	case x-xs[i-1] <= xs[i]-x:
		return i - 1
	default:
		return i
	}
}
