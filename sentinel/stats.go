package sentinel

import (
	"math"
	"slices"
)

// ring is a fixed-size window of the most recent float64 values.
type ring struct {
	buf  []float64
	next int
	full bool
}

func newRing(n int) ring { return ring{buf: make([]float64, max(n, 1))} }

func (r *ring) push(v float64) {
	r.buf[r.next] = v
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

func (r *ring) len() int {
	if r.full {
		return len(r.buf)
	}
	return r.next
}

// values appends the window, oldest first, to dst.
func (r *ring) values(dst []float64) []float64 {
	if r.full {
		dst = append(dst, r.buf[r.next:]...)
	}
	return append(dst, r.buf[:r.next]...)
}

// medianMAD returns the median of v and its median absolute deviation; v is
// reordered (scratch is used for the deviations).
func medianMAD(v, scratch []float64) (med, mad float64, _ []float64) {
	med = median(v)
	scratch = scratch[:0]
	for _, x := range v {
		scratch = append(scratch, math.Abs(x-med))
	}
	return med, median(scratch), scratch
}

// median sorts v in place and returns its median (NaN when empty).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// slope fits y = a + b·x by least squares and returns b and its standard
// error (Inf when it cannot be estimated).
func slope(x, y []float64) (b, se float64) {
	n := float64(len(x))
	if len(x) < 3 {
		return 0, math.Inf(1)
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= n
	my /= n
	var sxx, sxy float64
	for i := range x {
		dx := x[i] - mx
		sxx += dx * dx
		sxy += dx * (y[i] - my)
	}
	if sxx == 0 {
		return 0, math.Inf(1)
	}
	b = sxy / sxx
	a := my - b*mx
	var sse float64
	for i := range x {
		r := y[i] - a - b*x[i]
		sse += r * r
	}
	return b, math.Sqrt(sse / (n - 2) / sxx)
}

// periodicity returns the autocorrelation of v at its strongest repeat: a
// local peak at lag 2..len(v)/3 that rises at least dip above the lowest
// autocorrelation at a shorter lag. A single block (a run that went idle)
// has an autocorrelation that only falls with the lag and no such peak;
// a repeating pattern dips at half its period and peaks at the period.
// It returns 0, 0 when there is none.
func periodicity(v []float64, dip float64) (best float64, lag int) {
	n := len(v)
	var m float64
	for _, x := range v {
		m += x
	}
	m /= float64(n)
	var den float64
	for _, x := range v {
		den += (x - m) * (x - m)
	}
	if den == 0 {
		return 0, 0
	}
	maxLag := n / 3
	acf := make([]float64, maxLag+2)
	for k := 1; k <= maxLag+1 && k < n; k++ {
		var num float64
		for i := k; i < n; i++ {
			num += (v[i] - m) * (v[i-k] - m)
		}
		acf[k] = num / den
	}
	lowest := acf[1]
	for k := 2; k <= maxLag; k++ {
		lowest = min(lowest, acf[k-1])
		if acf[k] >= acf[k-1] && acf[k] >= acf[k+1] && acf[k]-lowest >= dip && acf[k] > best {
			best, lag = acf[k], k
		}
	}
	return best, lag
}
