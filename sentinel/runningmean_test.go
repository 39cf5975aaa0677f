package sentinel

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// kerasRunningMean is what Keras logs per batch: the mean of the batch
// losses over the epoch so far, restarting every epoch. Batch losses are
// lognormal around a level that changes by factor per epoch.
func kerasRunningMean(seed uint64, epochs, batches int, start, factor float64) []Point {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []Point
	t0 := time.Unix(1_700_000_000, 0)
	step := int64(0)
	for e := 0; e < epochs; e++ {
		sum := 0.0
		for b := 1; b <= batches; b++ {
			g := float64(e*batches + b)
			level := (start + 1.5*math.Exp(-g/300)) * math.Pow(factor, float64(e)+float64(b)/float64(batches))
			x := level * math.Exp(0.35*rng.NormFloat64())
			sum += x
			step++
			out = append(out, Point{Run: "r", Stage: "train", Attempt: 1, Key: "batch_loss", Step: step,
				Value: sum / float64(b), Wall: t0.Add(time.Duration(step) * 50 * time.Millisecond)})
		}
	}
	return out
}

// A per-epoch running mean restarts at every epoch boundary with a jump
// that is no spike, and its first points swing widely: a healthy run of
// them raises nothing. (Real TF2 Keras batch_loss logs showed a loss_spike
// and a divergence at epoch boundaries before this was recognised.)
func TestRunningMeanRestartsAreNoAnomaly(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		s := New(Config{})
		got := s.ObserveAll(kerasRunningMean(seed, 10, 1500, 0.5, 0.8))
		assert.Empty(t, got, "seed %d: %v", seed, got)
	}
}

// A running mean whose epochs really get worse is still divergence.
func TestRunningMeanThatDivergesIsFlagged(t *testing.T) {
	s := New(Config{})
	var kinds []Kind
	for _, a := range s.ObserveAll(kerasRunningMean(3, 12, 400, 0.5, 1.6)) {
		kinds = append(kinds, a.Kind)
	}
	assert.Contains(t, kinds, Divergence)
}

// An ordinary noisy loss keeps its spikes: they are not taken for
// restarts of a running mean.
func TestSpikesOfAnOrdinaryLossAreStillSpikes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	s := New(Config{})
	var kinds []Kind
	for i := range 400 {
		v := (0.3 + 2*math.Exp(-float64(i)/100)) * math.Exp(0.05*rng.NormFloat64())
		if i == 300 {
			v *= 4
		}
		kinds = append(kinds, kindsOf(s.Observe(Point{Run: "r", Stage: "train", Attempt: 1, Key: "train_loss", Step: int64(i), Value: v}))...)
	}
	assert.Equal(t, []Kind{LossSpike}, kinds, "%v", kinds)
}

func kindsOf(as []Anomaly) []Kind {
	var out []Kind
	for _, a := range as {
		out = append(out, a.Kind)
	}
	return out
}
