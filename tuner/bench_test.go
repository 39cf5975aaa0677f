package tuner

import (
	"math"
	"math/rand/v2"
	"testing"
)

// benchSpace is a six-parameter mixed space like a real training job's:
// two log-scaled floats, a linear float, a log-scaled int, a choice and a
// bool.
var benchSpace = Space{Params: []Param{
	{Name: "lr", Kind: Float, Min: 1e-5, Max: 1, Log: true},
	{Name: "weight_decay", Kind: Float, Min: 1e-6, Max: 1e-1, Log: true},
	{Name: "dropout", Kind: Float, Min: 0, Max: 0.6},
	{Name: "hidden", Kind: Int, Min: 16, Max: 1024, Log: true},
	{Name: "optimizer", Kind: Choice, Choices: []string{"adam", "sgd", "rmsprop"}},
	{Name: "batchnorm", Kind: Bool},
}}

// benchObjective is a smooth synthetic validation accuracy over benchSpace
// with interactions, plus a little noise.
func benchObjective(v Values, rng *rand.Rand) float64 {
	lr := math.Log10(v["lr"].(float64))
	wd := math.Log10(v["weight_decay"].(float64))
	h := math.Log2(float64(v["hidden"].(int64)))
	best := -3.0
	if v["optimizer"] == "sgd" {
		best = -1.5
	}
	acc := 0.95 - 0.04*(lr-best)*(lr-best) - 0.01*(wd+4)*(wd+4) - 0.02*math.Abs(v["dropout"].(float64)-0.2) - 0.005*(h-8)*(h-8)/4
	if v["optimizer"] == "rmsprop" {
		acc -= 0.02
	}
	if v["batchnorm"].(bool) {
		acc += 0.01
	}
	if rng != nil {
		acc += 0.002 * rng.NormFloat64()
	}
	return acc
}

func benchTrials(n int) []Trial {
	cfg := Config{Space: benchSpace, Goal: Maximize, Seed: 1}
	draws, _ := Random(cfg, nil, n)
	rng := rand.New(rand.NewPCG(1, 2))
	trials := make([]Trial, n)
	for i, d := range draws {
		trials[i] = Trial{ID: "t" + string(rune('a'+i%26)), Values: d.Values, State: Done, Objective: benchObjective(d.Values, rng)}
	}
	return trials
}

// BenchmarkSuggest200 is one Bayesian suggestion over 200 finished trials
// in a six-parameter mixed space: the model fit, the search for the best
// expected improvement and the prediction that comes with it. Target:
// under 100 ms.
func BenchmarkSuggest200(b *testing.B) {
	trials := benchTrials(200)
	cfg := Config{Space: benchSpace, Goal: Maximize, Seed: 7}
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		cfg.Seed = uint64(i) // a fresh search each time, as each new trial brings
		if _, err := Suggest(cfg, trials, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
}
