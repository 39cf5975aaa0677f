package tabular

import (
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/tuner"
)

// digitsGrid is a real grid of the bundled digits-mlp demo: 96
// configurations × 3 seeds, 30 epochs each, recorded by
// bench/tuner/record-digits-grid.sh through `niuma run --wait`.
const digitsGrid = "testdata/digits-mlp-grid.csv"

// Early stopping on real learning curves: with the product's default
// pruners, studies reach the best objective that studies without pruning
// reach, in at most half the training steps (docs/BENCHMARKS.md).
func TestPruningHalvesTrainingOnRecordedDemoCurves(t *testing.T) {
	c, err := LoadCurves(digitsGrid, "val_acc", tuner.Maximize)
	require.NoError(t, err)
	require.Equal(t, 96, c.Configurations())
	require.Equal(t, 288, c.Runs())
	require.Equal(t, 30, c.Steps)
	for _, rule := range []tuner.Rule{tuner.MedianRule, tuner.SuccessiveHalving} {
		r, err := c.ReplayPruning(tuner.Pruner{Rule: rule}, "random", 40, 4, 20)
		require.NoError(t, err)
		require.LessOrEqual(t, r.StepsRatio, 0.5, "%s: %+v", rule, r)
		require.LessOrEqual(t, r.ReachRatio, 0.5, "%s: %+v", rule, r)
		require.Equal(t, 1.0, r.Reached, "%s: %+v", rule, r)
		require.GreaterOrEqual(t, r.SameBest, 0.9, "%s: %+v", rule, r)
	}
	// With the tuner choosing the trials (pruned ones informing it): in
	// the 20 repetitions of docs/BENCHMARKS.md one study in 20 never gets
	// there; here at most one in 8.
	r, err := c.ReplayPruning(tuner.Pruner{Rule: tuner.MedianRule}, "bayes", 40, 4, 8)
	require.NoError(t, err)
	require.LessOrEqual(t, r.ReachRatio, 0.5, "%+v", r)
	require.GreaterOrEqual(t, r.Reached, 7.0/8, "%+v", r)
	// No pruning is no saving.
	r, err = c.ReplayPruning(tuner.Pruner{Rule: tuner.NoPruning}, "random", 10, 2, 3)
	require.NoError(t, err)
	require.Equal(t, 1.0, r.StepsRatio)
	require.Equal(t, 0.0, r.Pruned)
}
