package sentinel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/sentinel"
)

// A template may answer no_progress like any run-scope kind.
func TestPolicyAnswersNoProgress(t *testing.T) {
	p, err := sentinel.ParsePolicy(map[string]sentinel.Action{"no_progress": {Do: sentinel.Stop}})
	require.NoError(t, err)
	d := p.Decide(sentinel.Anomaly{Kind: sentinel.NoProgress, Run: "r", Stage: "train", Attempt: 1}, 1, nil)
	assert.Equal(t, sentinel.Stop, d.Do)
	assert.Equal(t, sentinel.ScopeRun, sentinel.NoProgress.Scope())
}

func points(key string, vals ...float64) []sentinel.Point {
	out := make([]sentinel.Point, len(vals))
	for i, v := range vals {
		out[i] = sentinel.Point{Run: "r", Stage: "train", Attempt: 1, Key: key, Step: int64(i + 1), Value: v}
	}
	return out
}

func kinds(as []sentinel.Anomaly) []sentinel.Kind {
	var out []sentinel.Kind
	for _, a := range as {
		out = append(out, a.Kind)
	}
	return out
}

// A loss that blows up at its second point is divergence at once, with
// where it started and the worst point as evidence.
func TestBlowUpBeforeTheSpikeWindowIsDivergence(t *testing.T) {
	as := sentinel.New(sentinel.Config{}).ObserveAll(points("loss", 2.3, 46, 5100, 9.7e4))
	require.Len(t, as, 1, "%v", kinds(as))
	a := as[0]
	assert.Equal(t, sentinel.Divergence, a.Kind)
	assert.Equal(t, int64(2), a.Step)
	assert.InDelta(t, 2.3, float64(a.Evidence.Stats["first_level"]), 1e-9)
	assert.Contains(t, a.Message, "blew up at step 2")
}

// A flat loss (a learning rate far too low) makes no progress, once; a
// falling one does; a loss that never goes below where it started after a
// blow-up gets the fix for a learning rate too high.
func TestNoProgress(t *testing.T) {
	flat := []float64{2.302, 2.299, 2.303, 2.301, 2.298, 2.302, 2.300, 2.303, 2.301, 2.299, 2.302, 2.300}
	as := sentinel.New(sentinel.Config{}).ObserveAll(points("loss", flat...))
	require.Equal(t, []sentinel.Kind{sentinel.NoProgress}, kinds(as))
	assert.Contains(t, as[0].Message, "not below where it started")
	assert.Contains(t, as[0].Fix, "far too low")

	var falling []float64
	for i := range 60 {
		falling = append(falling, 2.3*(1-0.01*float64(i))*(1+0.01*float64(i%3-1)))
	}
	assert.Empty(t, sentinel.New(sentinel.Config{}).ObserveAll(points("loss", falling...)))

	blown := append([]float64{2.3, 4e5, 3e4}, flat...)
	as = sentinel.New(sentinel.Config{}).ObserveAll(points("loss", blown...))
	assert.Equal(t, []sentinel.Kind{sentinel.Divergence, sentinel.NoProgress}, kinds(as))
	if len(as) == 2 {
		assert.Contains(t, as[1].Fix, "learning rate is too high")
	}
}

// A validation accuracy at chance is no progress; one that learns is not,
// nor is a training accuracy (memorising random labels raises it).
func TestAccuracyAtChance(t *testing.T) {
	chance := []float64{0.10, 0.11, 0.09, 0.10, 0.12, 0.10, 0.11, 0.10, 0.10}
	assert.Equal(t, []sentinel.Kind{sentinel.NoProgress}, kinds(sentinel.New(sentinel.Config{}).ObserveAll(points("val_acc", chance...))))
	assert.Empty(t, sentinel.New(sentinel.Config{}).ObserveAll(points("train_acc", chance...)))
	learns := []float64{0.10, 0.25, 0.41, 0.55, 0.66, 0.74, 0.80, 0.84, 0.87}
	assert.Empty(t, sentinel.New(sentinel.Config{}).ObserveAll(points("val_acc", learns...)))
	frozen := []float64{0.68, 0.68, 0.68, 0.68, 0.68, 0.68, 0.68, 0.68, 0.68}
	assert.Equal(t, []sentinel.Kind{sentinel.NoProgress}, kinds(sentinel.New(sentinel.Config{}).ObserveAll(points("val_acc", frozen...))))
	perfect := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1}
	assert.Empty(t, sentinel.New(sentinel.Config{}).ObserveAll(points("val_acc", perfect...)))
	percent := []float64{10, 11, 9, 10, 12, 10, 11, 10, 10}
	assert.Equal(t, []sentinel.Kind{sentinel.NoProgress}, kinds(sentinel.New(sentinel.Config{}).ObserveAll(points("val_accuracy", percent...))))
}

// Warm-ups shorter than the blocks they compare are no panic.
func TestProgressWithShortWarmups(t *testing.T) {
	s := sentinel.New(sentinel.Config{ProgressWarmup: 2, AccWarmup: 1})
	for i := range 20 {
		s.Observe(sentinel.Point{Run: "r", Stage: "train", Attempt: 1, Key: "loss", Step: int64(i), Value: 1})
		s.Observe(sentinel.Point{Run: "r", Stage: "train", Attempt: 1, Key: "val_acc", Step: int64(i), Value: 0.1})
	}
}
