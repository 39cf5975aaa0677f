package plot

import "math"

// LTTB downsamples the polyline (xs[i], ys[i]) to at most threshold points
// with the Largest-Triangle-Three-Buckets algorithm (Sveinn Steinarsson,
// "Downsampling Time Series for Visual Representation", 2013). The shape a
// reader sees — peaks, troughs, the overall trend — survives, while the
// number of points a renderer has to stroke becomes fixed.
//
// Rules, in the order they apply:
//
//   - Only the first min(len(xs), len(ys)) pairs are considered.
//   - A point whose x or y is NaN or ±Inf is dropped before anything else.
//     A gap in a metric stream is therefore bridged by a straight segment
//     rather than breaking the line or poisoning the triangle areas.
//   - If threshold < 3 or threshold >= the number of remaining points, the
//     remaining points are returned as a fresh copy (no downsampling).
//   - Otherwise exactly threshold points are returned. The first and the last
//     remaining point are always kept; the other threshold-2 points are one
//     per bucket, chosen to maximise the triangle formed with the point kept
//     in the previous bucket and the average of the next bucket.
//
// The output is always made of input points, in input order, so strictly
// increasing x stays strictly increasing. The inputs are never modified and
// the outputs never alias them. LTTB assumes the points are ordered by x (a
// time series); with unordered x it still returns threshold input points, but
// they are not a meaningful summary.
func LTTB(xs, ys []float64, threshold int) (outX, outY []float64) {
	xs, ys = finitePoints(xs, ys)
	n := len(xs)
	if threshold < 3 || threshold >= n {
		return append([]float64(nil), xs...), append([]float64(nil), ys...)
	}

	outX = make([]float64, 0, threshold)
	outY = make([]float64, 0, threshold)
	outX = append(outX, xs[0])
	outY = append(outY, ys[0])

	// The n-2 inner points are split into threshold-2 buckets. Bucket b covers
	// the indices [bucketStart(b), bucketStart(b+1)). Integer arithmetic keeps
	// the edges exact: bucketStart(0) = 1, bucketStart(buckets) = n-1, and as
	// buckets < n-2 every bucket holds at least one point.
	buckets := threshold - 2
	inner := n - 2
	bucketStart := func(b int) int { return 1 + b*inner/buckets }

	a := 0 // index of the point kept in the previous bucket
	for b := 0; b < buckets; b++ {
		lo, hi := bucketStart(b), bucketStart(b+1)

		// Average of the next bucket; for the last bucket that "bucket" is
		// just the final point, which is always kept.
		nlo, nhi := hi, bucketStart(b+2)
		if b == buckets-1 {
			nlo, nhi = n-1, n
		}
		var cx, cy float64
		for j := nlo; j < nhi; j++ {
			cx += xs[j]
			cy += ys[j]
		}
		cnt := float64(nhi - nlo)
		cx /= cnt
		cy /= cnt

		ax, ay := xs[a], ys[a]
		best, bestArea := lo, -1.0
		for j := lo; j < hi; j++ {
			// Twice the triangle's area; the factor ½ does not change the
			// arg-max. The first of equal areas wins, so collinear runs keep
			// the bucket's first point.
			area := math.Abs((ax-cx)*(ys[j]-ay) - (ax-xs[j])*(cy-ay))
			if area > bestArea {
				best, bestArea = j, area
			}
		}
		outX = append(outX, xs[best])
		outY = append(outY, ys[best])
		a = best
	}

	outX = append(outX, xs[n-1])
	outY = append(outY, ys[n-1])
	return outX, outY
}

// finitePoints returns the pairs of the common prefix of xs and ys whose
// coordinates are both finite. When every pair is finite it returns the
// (truncated) inputs themselves without copying.
func finitePoints(xs, ys []float64) ([]float64, []float64) {
	return keepPoints(xs, ys, func(x, y float64) bool { return isFinite(x) && isFinite(y) })
}

// keepPoints returns the pairs of the common prefix of xs and ys for which
// keep is true. If keep accepts every pair it returns the (truncated) inputs
// without copying; otherwise it returns new slices.
func keepPoints(xs, ys []float64, keep func(x, y float64) bool) ([]float64, []float64) {
	n := min(len(xs), len(ys))
	xs, ys = xs[:n], ys[:n]
	first := -1
	for i := range n {
		if !keep(xs[i], ys[i]) {
			first = i
			break
		}
	}
	if first < 0 {
		return xs, ys
	}
	fx := make([]float64, first, n)
	fy := make([]float64, first, n)
	copy(fx, xs[:first])
	copy(fy, ys[:first])
	for i := first + 1; i < n; i++ {
		if keep(xs[i], ys[i]) {
			fx = append(fx, xs[i])
			fy = append(fy, ys[i])
		}
	}
	return fx, fy
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
