package predict

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func TestNoHistoryIsUnknown(t *testing.T) {
	p := New(Options{})
	e := p.Predict(Query{Key: "digits-mlp/train"})
	require.False(t, e.Known())
	require.Equal(t, "unknown (no earlier runs)", e.String())
	p.Observe(Run{Key: "other/train", Duration: time.Minute})
	require.False(t, p.Predict(Query{Key: "digits-mlp/train"}).Known(), "another key says nothing")
}

func TestMedianOfFewRuns(t *testing.T) {
	p := New(Options{})
	for _, s := range []float64{100, 400, 200} {
		p.Observe(Run{Key: "k", Duration: sec(s)})
	}
	e := p.Predict(Query{Key: "k"})
	// The median of 100, 200, 400 s is 200 s; with fewer than 10 runs the
	// bounds are at least a factor 2 either way: 100 s and 400 s or wider.
	require.Equal(t, sec(200), e.Median.Round(time.Second))
	require.LessOrEqual(t, e.Low, sec(100)+time.Millisecond)
	require.GreaterOrEqual(t, e.High, sec(400)-time.Millisecond)
	require.Equal(t, 3, e.N)
	require.Empty(t, e.Params)
	require.Equal(t, "3 min, from 3 earlier runs", e.String())
	require.Equal(t, "2.0 h, from the estimates given", Estimate{Median: 2 * time.Hour}.String(), "no history: the user's estimate")
}

// TestFitsTheParameterThatDrivesTheWork: training time is 12 s per epoch
// (±5 %), batch size barely matters and the learning rate not at all. The
// fit uses epochs, predicts a new epoch count from it, and says so.
func TestFitsTheParameterThatDrivesTheWork(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := New(Options{})
	for i := range 30 {
		epochs := float64(5 + rng.IntN(60))
		params := map[string]float64{"epochs": epochs, "lr": math.Pow(10, -1-3*rng.Float64()), "seed": float64(i + 1)}
		p.Observe(Run{Key: "mlp/train", Params: params, Duration: sec(12 * epochs * (0.95 + 0.1*rng.Float64()))})
	}
	e := p.Predict(Query{Key: "mlp/train", Params: map[string]float64{"epochs": 40, "lr": 0.01, "seed": 99}})
	require.Equal(t, []string{"epochs"}, e.Params)
	require.InDelta(t, 480, e.Median.Seconds(), 480*0.06, "12 s × 40 epochs")
	require.Less(t, e.Low, e.Median)
	require.Greater(t, e.High, e.Median)
	require.Less(t, e.High.Seconds()/e.Low.Seconds(), 1.3, "a tight fit claims a tight interval")

	// The median alone would be off by far for a short run.
	short := p.Predict(Query{Key: "mlp/train", Params: map[string]float64{"epochs": 5}})
	require.InDelta(t, 60, short.Median.Seconds(), 60*0.1)
}

// TestTwoParameters: time ∝ epochs × dataset size / batch size^0.5.
func TestTwoParameters(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := New(Options{})
	for range 40 {
		ep, n, bs := float64(1+rng.IntN(20)), float64(1000*(1+rng.IntN(50))), float64(int(8)<<rng.IntN(6))
		p.Observe(Run{Key: "k", Params: map[string]float64{"epochs": ep, "n": n, "batch_size": bs},
			Duration: sec(0.01 * ep * n / math.Sqrt(bs) * math.Exp(0.05*rng.NormFloat64()))})
	}
	e := p.Predict(Query{Key: "k", Params: map[string]float64{"epochs": 10, "n": 20000, "batch_size": 64}})
	want := 0.01 * 10 * 20000 / 8
	require.InDelta(t, want, e.Median.Seconds(), want*0.1)
	require.ElementsMatch(t, []string{"epochs", "n", "batch_size"}, e.Params)
}

// TestNoiseIsNotFitted: a parameter unrelated to the time is not used, and
// the interval reflects the spread of the runs.
func TestNoiseIsNotFitted(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	p := New(Options{})
	for range 40 {
		p.Observe(Run{Key: "k", Params: map[string]float64{"hidden": float64(int(8) << rng.IntN(7))},
			Duration: sec(300 * math.Exp(0.4*rng.NormFloat64()))})
	}
	e := p.Predict(Query{Key: "k", Params: map[string]float64{"hidden": 64}})
	require.Empty(t, e.Params)
	require.InDelta(t, 300, e.Median.Seconds(), 60)
	// 80% of e^(0.4·N(0,1)) lies within e^(±0.51): about 180–500 s.
	require.InDelta(t, 300*math.Exp(-0.51), e.Low.Seconds(), 60)
	require.InDelta(t, 300*math.Exp(0.51), e.High.Seconds(), 120)
}

func TestWindowKeepsTheRecentRuns(t *testing.T) {
	p := New(Options{Window: 10})
	for range 20 {
		p.Observe(Run{Key: "k", Duration: time.Hour})
	}
	for range 10 {
		p.Observe(Run{Key: "k", Duration: time.Minute})
	}
	e := p.Predict(Query{Key: "k"})
	require.Equal(t, time.Minute, e.Median.Round(time.Second), "the code got faster: only the last 10 runs count")
	require.Equal(t, 10, e.N)
}

func TestExtrapolationIsClamped(t *testing.T) {
	p := New(Options{})
	for i := range 20 {
		ep := float64(10 + i)
		p.Observe(Run{Key: "k", Params: map[string]float64{"epochs": ep}, Duration: sec(10 * ep)})
	}
	e := p.Predict(Query{Key: "k", Params: map[string]float64{"epochs": 10000}})
	require.InDelta(t, 290, e.Median.Seconds(), 5, "no further than the most epochs seen (29)")
}

func TestIgnoresBadRuns(t *testing.T) {
	p := New(Options{})
	p.Observe(Run{Key: "k", Duration: 0})
	p.Observe(Run{Key: "k", Duration: -time.Second})
	require.False(t, p.Predict(Query{Key: "k"}).Known())
}

func TestWords(t *testing.T) {
	for d, want := range map[time.Duration]string{40 * time.Second: "40 s", 14 * time.Minute: "14 min",
		150 * time.Minute: "2.5 h", 30 * time.Hour: "30 h"} {
		require.Equal(t, want, Words(d), fmt.Sprint(d))
	}
}

func BenchmarkObservePredict(b *testing.B) {
	p := New(Options{})
	q := Query{Key: "k", Params: map[string]float64{"epochs": 10, "batch_size": 64}}
	for i := 0; b.Loop(); i++ {
		p.Observe(Run{Key: "k", Params: map[string]float64{"epochs": float64(1 + i%30), "batch_size": float64(int(8) << (i % 5))},
			Duration: sec(float64(10 * (1 + i%30)))})
		p.Predict(q)
	}
}

// A count the earlier runs never came near (epochs 500 after runs of 30)
// is named with their range: the estimate is theirs. Floats (a learning
// rate) and values within twice the range are not.
func TestPredictNamesWhatIsBeyondTheHistory(t *testing.T) {
	p := New(Options{})
	for _, e := range []float64{20, 30, 30} {
		p.Observe(Run{Key: "k", Params: map[string]float64{"epochs": e, "lr": 0.01, "hidden": 64}, Duration: sec(5)})
	}
	e := p.Predict(Query{Key: "k", Params: map[string]float64{"epochs": 500, "lr": 0.9, "hidden": 100}})
	require.Equal(t, []Beyond{{Param: "epochs", Value: 500, Min: 20, Max: 30}}, e.Beyond)
	e = p.Predict(Query{Key: "k", Params: map[string]float64{"epochs": 8, "hidden": 16}})
	require.Equal(t, []Beyond{{Param: "epochs", Value: 8, Min: 20, Max: 30}, {Param: "hidden", Value: 16, Min: 64, Max: 64}}, e.Beyond)
	require.Empty(t, p.Predict(Query{Key: "k", Params: map[string]float64{"epochs": 60}}).Beyond, "within twice the range")
}
