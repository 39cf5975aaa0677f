package plot

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLTTBTable(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name      string
		xs, ys    []float64
		threshold int
		wantX     []float64
		wantY     []float64
	}{
		{
			// n=5, threshold=3: one bucket holding indices {1,2,3}; the "next
			// bucket" of the last bucket is the final point c=(4,0); a=(0,0).
			// 2·area(j) = |(ax-cx)(yj-ay) - (ax-xj)(cy-ay)| = |(-4)(yj) - (-xj)(0)| = 4|yj|
			//   j=1: 4·5 = 20   j=2: 4·1 = 4   j=3: 4·3 = 12   → keep j=1.
			name: "peak wins", xs: []float64{0, 1, 2, 3, 4}, ys: []float64{0, 5, 1, -3, 0}, threshold: 3,
			wantX: []float64{0, 1, 4}, wantY: []float64{0, 5, 0},
		},
		{
			// Same geometry, 2·area = 4|yj|: j=1: 8, j=2: 4, j=3: 12 → the
			// trough at j=3 wins; sign does not matter.
			name: "trough wins", xs: []float64{0, 1, 2, 3, 4}, ys: []float64{0, 2, 1, -3, 0}, threshold: 3,
			wantX: []float64{0, 3, 4}, wantY: []float64{0, -3, 0},
		},
		{
			// n=6, threshold=4: buckets=2 over inner=4 points.
			// bucketStart(b) = 1 + b·4/2 → 1, 3, 5: bucket0 = {1,2}, bucket1 = {3,4}.
			// bucket0: a=(0,0); next bucket average c = ((3+4)/2, (2-1)/2) = (3.5, 0.5).
			//   2·area = |(0-3.5)(yj) - (0-xj)(0.5)| = |-3.5·yj + 0.5·xj|
			//   j=1: |-3.5 + 0.5| = 3     j=2: |-10.5 + 1| = 9.5   → keep (2,3).
			// bucket1: a=(2,3); c = final point (5,0).
			//   2·area = |(2-5)(yj-3) - (2-xj)(0-3)| = |-3(yj-3) + 3(2-xj)|
			//   j=3: |-3(-1) + 3(-1)| = 0    j=4: |-3(-4) + 3(-2)| = 6 → keep (4,-1).
			name: "two buckets", xs: []float64{0, 1, 2, 3, 4, 5}, ys: []float64{0, 1, 3, 2, -1, 0}, threshold: 4,
			wantX: []float64{0, 2, 4, 5}, wantY: []float64{0, 3, -1, 0},
		},
		{
			// y = x: every triangle is degenerate (area 0); the first point
			// of the bucket is kept.
			name: "collinear keeps first of bucket", xs: []float64{0, 1, 2, 3, 4}, ys: []float64{0, 1, 2, 3, 4}, threshold: 3,
			wantX: []float64{0, 1, 4}, wantY: []float64{0, 1, 4},
		},
		{
			// The NaN at x=1 is dropped first, leaving (0,0) (2,5) (3,1) (4,-3) (5,0).
			// One bucket {(2,5),(3,1),(4,-3)}, a=(0,0), c=(5,0):
			//   2·area = |(-5)(yj) - (-xj)(0)| = 5|yj| → 25, 5, 15 → keep (2,5).
			name: "NaN dropped before bucketing", xs: []float64{0, 1, 2, 3, 4, 5}, ys: []float64{0, nan, 5, 1, -3, 0}, threshold: 3,
			wantX: []float64{0, 2, 5}, wantY: []float64{0, 5, 0},
		},
		{
			// A non-finite x or y drops the point: only (0,1) and (3,4)
			// remain, and threshold 3 >= 2 returns them as they are.
			name: "Inf dropped, threshold >= n copies", xs: []float64{0, inf, 2, 3, nan}, ys: []float64{1, 2, -inf, 4, 5}, threshold: 3,
			wantX: []float64{0, 3}, wantY: []float64{1, 4},
		},
		{
			name: "threshold above length copies", xs: []float64{0, 1, 2}, ys: []float64{3, 1, 2}, threshold: 10,
			wantX: []float64{0, 1, 2}, wantY: []float64{3, 1, 2},
		},
		{
			name: "threshold equal to length copies", xs: []float64{0, 1, 2, 3}, ys: []float64{3, 1, 2, 0}, threshold: 4,
			wantX: []float64{0, 1, 2, 3}, wantY: []float64{3, 1, 2, 0},
		},
		{
			name: "threshold below 3 copies", xs: []float64{0, 1, 2, 3, 4}, ys: []float64{0, 1, 0, 1, 0}, threshold: 2,
			wantX: []float64{0, 1, 2, 3, 4}, wantY: []float64{0, 1, 0, 1, 0},
		},
		{
			name: "negative threshold copies", xs: []float64{0, 1, 2, 3}, ys: []float64{0, 1, 0, 1}, threshold: -1,
			wantX: []float64{0, 1, 2, 3}, wantY: []float64{0, 1, 0, 1},
		},
		{
			// Only the common prefix of 3 pairs is used.
			name: "mismatched lengths use the common prefix", xs: []float64{0, 1, 2, 3}, ys: []float64{5, 6, 7}, threshold: 100,
			wantX: []float64{0, 1, 2}, wantY: []float64{5, 6, 7},
		},
		{
			name: "empty", xs: nil, ys: nil, threshold: 3,
			wantX: nil, wantY: nil,
		},
		{
			name: "all NaN", xs: []float64{0, 1, 2, 3}, ys: []float64{nan, nan, nan, nan}, threshold: 3,
			wantX: nil, wantY: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inX, inY := slices.Clone(tc.xs), slices.Clone(tc.ys)
			gotX, gotY := LTTB(tc.xs, tc.ys, tc.threshold)
			if !slices.Equal(gotX, tc.wantX) || !slices.Equal(gotY, tc.wantY) {
				t.Fatalf("LTTB = (%v, %v), want (%v, %v)", gotX, gotY, tc.wantX, tc.wantY)
			}
			if !slices.EqualFunc(inX, tc.xs, sameFloat) || !slices.EqualFunc(inY, tc.ys, sameFloat) {
				t.Fatalf("LTTB modified its input")
			}
		})
	}
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func TestLTTBDoesNotAlias(t *testing.T) {
	xs := []float64{0, 1, 2}
	ys := []float64{3, 4, 5}
	ox, oy := LTTB(xs, ys, 10)
	ox[0], oy[0] = 99, 99
	if xs[0] != 0 || ys[0] != 3 {
		t.Fatalf("output aliases input: xs=%v ys=%v", xs, ys)
	}
}

// TestLTTBProperties checks, over random series, that the output has exactly
// threshold points, keeps the first and last point, keeps x strictly
// increasing and is made only of input points.
func TestLTTBProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		n := 4 + rng.IntN(5000)
		xs := make([]float64, n)
		ys := make([]float64, n)
		x := rng.NormFloat64() * 100
		for i := range n {
			x += 0.001 + rng.ExpFloat64() // strictly increasing
			xs[i] = x
			ys[i] = rng.NormFloat64()*10 + math.Sin(x/50)*100
		}
		threshold := 3 + rng.IntN(n-3) // 3 <= threshold < n
		ox, oy := LTTB(xs, ys, threshold)

		if len(ox) != threshold || len(oy) != threshold {
			t.Fatalf("iter %d: n=%d threshold=%d: got %d/%d points", iter, n, threshold, len(ox), len(oy))
		}
		if ox[0] != xs[0] || oy[0] != ys[0] || ox[threshold-1] != xs[n-1] || oy[threshold-1] != ys[n-1] {
			t.Fatalf("iter %d: first/last point not kept", iter)
		}
		byX := make(map[float64]float64, n)
		for i := range xs {
			byX[xs[i]] = ys[i]
		}
		for i := range ox {
			if i > 0 && ox[i] <= ox[i-1] {
				t.Fatalf("iter %d: x not strictly increasing at %d: %v <= %v", iter, i, ox[i], ox[i-1])
			}
			if y, ok := byX[ox[i]]; !ok || y != oy[i] {
				t.Fatalf("iter %d: output point (%v, %v) is not an input point", iter, ox[i], oy[i])
			}
		}
	}
}

// TestLTTBPropertiesWithNonFinite sprinkles NaN and ±Inf into random series:
// the output never contains them and has min(threshold, finite points) points.
func TestLTTBPropertiesWithNonFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for iter := range 300 {
		n := 1 + rng.IntN(2000)
		xs := make([]float64, n)
		ys := make([]float64, n)
		finite := 0
		for i := range n {
			xs[i], ys[i] = float64(i), rng.NormFloat64()
			switch rng.IntN(10) {
			case 0:
				ys[i] = bad[rng.IntN(3)]
			case 1:
				xs[i] = bad[rng.IntN(3)]
			default:
				finite++
			}
		}
		threshold := 3 + rng.IntN(n+3)
		ox, oy := LTTB(xs, ys, threshold)
		if want := min(threshold, finite); len(ox) != want || len(oy) != want {
			t.Fatalf("iter %d: got %d points, want %d (finite=%d threshold=%d)", iter, len(ox), want, finite, threshold)
		}
		for i := range ox {
			if !isFinite(ox[i]) || !isFinite(oy[i]) {
				t.Fatalf("iter %d: non-finite output point (%v, %v)", iter, ox[i], oy[i])
			}
			if i > 0 && ox[i] <= ox[i-1] {
				t.Fatalf("iter %d: x not strictly increasing", iter)
			}
		}
	}
}

// referenceLTTB is a direct transcription of Steinarsson's published
// algorithm (floating-point bucket size "every"). It is used only where
// (n-2) is a multiple of (threshold-2), so the floating bucket edges are exact
// and must agree with LTTB's integer edges.
func referenceLTTB(xs, ys []float64, threshold int) ([]float64, []float64) {
	n := len(xs)
	every := float64(n-2) / float64(threshold-2)
	ox, oy := []float64{xs[0]}, []float64{ys[0]}
	a := 0
	for i := 0; i < threshold-2; i++ {
		avgStart := int(math.Floor(float64(i+1)*every)) + 1
		avgEnd := min(int(math.Floor(float64(i+2)*every))+1, n)
		var avgX, avgY float64
		for j := avgStart; j < avgEnd; j++ {
			avgX += xs[j]
			avgY += ys[j]
		}
		avgX /= float64(avgEnd - avgStart)
		avgY /= float64(avgEnd - avgStart)
		rangeOffs := int(math.Floor(float64(i)*every)) + 1
		rangeTo := int(math.Floor(float64(i+1)*every)) + 1
		maxArea, next := -1.0, rangeOffs
		for j := rangeOffs; j < rangeTo; j++ {
			area := math.Abs((xs[a]-avgX)*(ys[j]-ys[a])-(xs[a]-xs[j])*(avgY-ys[a])) * 0.5
			if area > maxArea {
				maxArea, next = area, j
			}
		}
		ox, oy = append(ox, xs[next]), append(oy, ys[next])
		a = next
	}
	return append(ox, xs[n-1]), append(oy, ys[n-1])
}

func TestLTTBMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 200 {
		buckets := 1 + rng.IntN(200)
		per := 1 + rng.IntN(50)
		n := buckets*per + 2
		xs := make([]float64, n)
		ys := make([]float64, n)
		for i := range n {
			xs[i] = float64(i) * 0.5
			ys[i] = rng.NormFloat64()
		}
		gx, gy := LTTB(xs, ys, buckets+2)
		wx, wy := referenceLTTB(xs, ys, buckets+2)
		if !slices.Equal(gx, wx) || !slices.Equal(gy, wy) {
			t.Fatalf("iter %d (n=%d threshold=%d): LTTB differs from the reference", iter, n, buckets+2)
		}
	}
}

func BenchmarkLTTB1MTo2000(b *testing.B) {
	const n = 1_000_000
	xs, ys := syntheticLoss(n, 1)
	b.ReportAllocs()
	for b.Loop() {
		ox, _ := LTTB(xs, ys, 2000)
		if len(ox) != 2000 {
			b.Fatalf("got %d points", len(ox))
		}
	}
}
