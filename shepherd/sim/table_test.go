package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSeedRatio: with several seeds the mean ratio is the median of the
// seeds' geometric means, the worst the worst window of any seed.
func TestSeedRatio(t *testing.T) {
	sl := []Slice{{Cluster: "a#1"}, {Cluster: "b#1"}, {Cluster: "a#2"}, {Cluster: "b#2"}, {Cluster: "a#3"}, {Cluster: "b#3"}}
	groups := seedGroups(sl)
	require.Equal(t, [][]int{{0, 1}, {2, 3}, {4, 5}}, groups)
	rep := func(xs ...float64) Cell {
		c := Cell{}
		for _, x := range xs {
			c.Reports = append(c.Reports, Report{AvgJCT: x})
		}
		return c
	}
	herd, bf := rep(1, 4, 2, 2, 9, 1), rep(1, 1, 1, 1, 1, 1)
	jct := func(r Report) float64 { return r.AvgJCT }
	r := seedRatio(&herd, &bf, jct, groups)
	// Seeds' geometric means: 2, 2, 3; the median is 2; the worst window 9.
	require.InDelta(t, 2, r.Mean, 1e-9)
	require.Equal(t, 9.0, r.Worst)
	require.Equal(t, 1.0, r.Best)
	// One seed: the geometric mean over all windows.
	one := seedRatio(&herd, &bf, jct, seedGroups(sl[:2]))
	require.InDelta(t, math.Pow(1*4*2*2*9*1, 1.0/6), one.Mean, 1e-9)
}
