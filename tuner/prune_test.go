package tuner

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// curve makes a curve reporting vals at steps 1, 2, ….
func curve(id string, vals ...float64) Curve {
	c := Curve{ID: id, Values: vals}
	for i := range vals {
		c.Steps = append(c.Steps, int64(i+1))
	}
	return c
}

func TestMedianRule(t *testing.T) {
	others := []Curve{
		curve("a", 0.5, 0.7, 0.80, 0.90),
		curve("b", 0.5, 0.7, 0.85, 0.92),
		curve("c", 0.4, 0.6, 0.90, 0.95),
		curve("d", 0.3, 0.8, 0.95, 0.96),
		curve("e", 0.2, 0.5), // has not reached step 4
	}
	p := Pruner{Rule: MedianRule, Goal: Maximize, Metric: "val_acc", Warmup: 2}
	cases := []struct {
		name   string
		trial  Curve
		prune  bool
		reason Reason
		text   string
	}{
		// best so far 0.81; others' best up to step 4: 0.9, 0.92, 0.95, 0.96 → median 0.935
		{"below the median", curve("t", 0.3, 0.6, 0.81, 0.7), true, ReasonBelowMedian, "val_acc 0.81 at step 4, median of 4 trials 0.935"},
		{"ahead", curve("t", 0.3, 0.6, 0.81, 0.94), false, ReasonAhead, "val_acc 0.94 at step 4, median of 4 trials 0.935"},
		{"before the warm-up", curve("t", 0.0), false, ReasonWarmup, "step 1 is before the warm-up (step 2)"},
		// step 2: all five others count: 0.7, 0.7, 0.6, 0.8, 0.5 → median 0.7
		{"at the warm-up", curve("t", 0.1, 0.65), true, ReasonBelowMedian, "val_acc 0.65 at step 2, median of 5 trials 0.7"},
		{"too few trials so far", curve("t", 0.1, 0.1, 0.1, 0.1, 0.1), false, ReasonFewTrials, "0 other trials reached step 5; comparing needs more"},
		{"only NaN", curve("t", math.NaN(), math.NaN()), true, ReasonBelowMedian, "val_acc NaN at step 2, median of 5 trials 0.7"},
		{"no curve yet", Curve{ID: "t"}, false, ReasonWarmup, "step 0 is before the warm-up (step 2)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := p.Decide(c.trial, others)
			require.Equal(t, c.prune, d.Prune)
			require.Equal(t, c.reason, d.Reason)
			require.Equal(t, c.text, d.Evidence())
		})
	}
	// The evidence names each other trial's best value up to the step.
	d := p.Decide(curve("t", 0.3, 0.6, 0.81, 0.7), others)
	require.Equal(t, []Compared{{"a", 0.9}, {"b", 0.92}, {"c", 0.95}, {"d", 0.96}}, d.Compared)
	// Minimising: the same numbers the other way round.
	lossOthers := []Curve{curve("a", 2, 1.0), curve("b", 2, 1.2), curve("c", 2, 1.4), curve("d", 2, 1.6)}
	pl := Pruner{Rule: MedianRule, Goal: Minimize, Metric: "loss", Warmup: 2}
	d = pl.Decide(curve("t", 3, 1.5), lossOthers)
	require.True(t, d.Prune, d.Evidence())
	require.Equal(t, "loss 1.5 at step 2, median of 4 trials 1.3", d.Evidence())
	require.False(t, pl.Decide(curve("t", 3, 1.1), lossOthers).Prune)
	require.Equal(t, ReasonNoPruning, Pruner{Rule: NoPruning}.Decide(curve("t", 0), lossOthers).Reason)
}

// With no warm-up given it is a tenth of the longest other curve.
func TestDefaultWarmupScalesWithTheCurves(t *testing.T) {
	long := make([]float64, 100)
	for i := range long {
		long[i] = 0.9
	}
	others := []Curve{curve("a", long...), curve("b", long...), curve("c", long...), curve("d", long...)}
	p := Pruner{Rule: MedianRule, Goal: Maximize}
	low := make([]float64, 9)
	d := p.Decide(curve("t", low...), others)
	require.Equal(t, ReasonWarmup, d.Reason)
	require.Equal(t, int64(10), d.Warmup)
	d = p.Decide(curve("t", append(low, 0)...), others)
	require.True(t, d.Prune)
	require.Equal(t, "objective 0 at step 10, median of 4 trials 0.9", d.Evidence())
}

func TestSuccessiveHalving(t *testing.T) {
	// Rungs at 1, 3, 9 (MinStep 1, reduction 3). Others at step 3 have
	// reached 0.9, 0.8, 0.7, 0.6, 0.5: of six trials the best two stay.
	var others []Curve
	for i, v := range []float64{0.9, 0.8, 0.7, 0.6, 0.5} {
		others = append(others, curve(string(rune('a'+i)), v-0.2, v-0.1, v))
	}
	p := Pruner{Rule: SuccessiveHalving, Goal: Maximize, Metric: "val_acc", Warmup: 1, MinStep: 1}
	d := p.Decide(curve("t", 0.1, 0.2, 0.75), others)
	require.True(t, d.Prune)
	require.Equal(t, ReasonBelowRung, d.Reason)
	require.Equal(t, 1, d.Rung)
	require.Equal(t, "val_acc 0.75 at step 3 (rung 1), outside the best 1/3 of 6 trials (cut-off 0.8)", d.Evidence())

	d = p.Decide(curve("t", 0.1, 0.2, 0.85), others)
	require.False(t, d.Prune)
	require.Equal(t, ReasonAhead, d.Reason)

	// Step 4 is between rungs 3 and 9: no decision, however bad.
	d = p.Decide(curve("t", 0.9, 0.9, 0.9, 0.0), others)
	require.Equal(t, ReasonBetweenRung, d.Reason)

	// A trial reporting every other step decides at the first report past
	// the rung: step 4 crossed rung 3.
	sparse := Curve{ID: "t", Steps: []int64{2, 4}, Values: []float64{0.1, 0.3}}
	d = p.Decide(sparse, others)
	require.True(t, d.Prune)
	require.Equal(t, int64(3), d.RungStep)
	require.Equal(t, 0.1, d.Value, "its best up to the rung")

	// Fewer than MinTrials others at the rung: kept.
	d = p.Decide(curve("t", 0.1, 0.2, 0.3), others[:2])
	require.Equal(t, ReasonFewTrials, d.Reason)
}
