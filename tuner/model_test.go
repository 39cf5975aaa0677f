package tuner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCholeskySolvesAndInverts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	n := 7
	b := make([]float64, n*n)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	a := make([]float64, n*n) // a = b bᵀ + I: positive definite
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			for k := 0; k < n; k++ {
				a[i*n+j] += b[i*n+k] * b[j*n+k]
			}
		}
		a[i*n+i]++
	}
	l := append([]float64(nil), a...)
	require.True(t, cholesky(l, n))
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for k := 0; k < n; k++ {
				s += l[i*n+k] * l[j*n+k]
			}
			require.InDelta(t, a[i*n+j], s, 1e-9)
		}
	}
	rhs := []float64{1, 2, 3, 4, 5, 6, 7}
	x := append([]float64(nil), rhs...)
	solveLower(l, n, x)
	solveUpperT(l, n, x)
	inv := invertFromCholesky(l, n)
	for i := 0; i < n; i++ {
		s, s2 := 0.0, 0.0
		for j := 0; j < n; j++ {
			s += a[i*n+j] * x[j]
			s2 += inv[i*n+j] * rhs[j]
		}
		require.InDelta(t, rhs[i], s, 1e-9, "A x = b")
		require.InDelta(t, x[i], s2, 1e-9, "A⁻¹ b = x")
	}
	require.False(t, cholesky([]float64{1, 2, 2, 1}, 2), "not positive definite")
}

func TestMinimizeRosenbrock(t *testing.T) {
	f := func(x, g []float64) float64 {
		a, b := 1-x[0], x[1]-x[0]*x[0]
		g[0] = -2*a - 400*x[0]*b
		g[1] = 200 * b
		return a*a + 100*b*b
	}
	x, v := minimize(f, []float64{-1.2, 1}, 500)
	require.InDelta(t, 1, x[0], 1e-3)
	require.InDelta(t, 1, x[1], 2e-3)
	require.Less(t, v, 1e-6)
}

// The likelihood's gradient matches finite differences.
func TestLikelihoodGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	cat := []bool{false, true, false}
	var x [][]float64
	var y []float64
	for i := 0; i < 15; i++ {
		p := []float64{rng.Float64(), float64(rng.IntN(3)), rng.Float64()}
		x = append(x, p)
		y = append(y, math.Sin(5*p[0])+p[1]*0.3+rng.NormFloat64()*0.1)
	}
	f := newLikelihood(x, y, cat)
	theta := []float64{-1, 0.3, -0.5, 0.2, -4}
	g := make([]float64, len(theta))
	f.both(theta, g)
	for i := range theta {
		h := 1e-5
		up := append([]float64(nil), theta...)
		dn := append([]float64(nil), theta...)
		up[i] += h
		dn[i] -= h
		num := (f.value(up) - f.value(dn)) / (2 * h)
		require.InDelta(t, num, g[i], 1e-4*math.Max(1, math.Abs(num)), "∂/∂θ%d", i)
	}
}

func (f *likelihood) value(theta []float64) float64 {
	f.eval(theta)
	return f.val
}

func TestGPInterpolatesAndIsUnsureFarAway(t *testing.T) {
	var x [][]float64
	var y []float64
	for i := 0; i <= 10; i++ {
		u := float64(i) / 20 // observed on [0, 0.5] only
		x = append(x, []float64{u})
		y = append(y, math.Sin(6*u))
	}
	g := fitGP(x, y, []bool{false}, rand.New(rand.NewPCG(1, 1)))
	kx := make([]float64, len(x))
	for i, xi := range x {
		mu, v := g.predict(xi, kx)
		require.InDelta(t, y[i], mu, 0.02)
		require.Less(t, v, 0.01)
	}
	mu, _ := g.predict([]float64{0.125}, kx)
	require.InDelta(t, math.Sin(0.75), mu, 0.05, "between observations")
	_, near := g.predict([]float64{0.52}, kx)
	_, far := g.predict([]float64{1}, kx)
	require.Greater(t, far, 10*near, "uncertainty grows away from the data")
}

func TestWarpKeepsOrderAndInverts(t *testing.T) {
	y := []float64{0.5, 0.1, 0.9, 0.1, 100}
	z, w := newWarp(y)
	require.Equal(t, z[1], z[3], "ties share a score")
	require.Less(t, z[1], z[0])
	require.Less(t, z[0], z[2])
	require.Less(t, z[2], z[4])
	require.InDelta(t, 0, z[0], 1e-12, "the median scores 0")
	for i := range y {
		require.InDelta(t, y[i], w.inverse(z[i]), 1e-12)
	}
	mid := w.inverse((z[0] + z[2]) / 2)
	require.True(t, mid > 0.5 && mid < 0.9, "between two observations: %g", mid)
	require.Less(t, w.inverse(z[1]-1), 0.1, "beyond the best: the slope goes on")
}

func TestLogEIIsStableInTheTail(t *testing.T) {
	for _, mu := range []float64{0, 1, 5, 10, 30, 100} {
		v := logEI(0, mu, 1)
		require.False(t, math.IsInf(v, 0) || math.IsNaN(v), "mu %g", mu)
		if mu <= 5 {
			u := -mu
			require.InDelta(t, math.Log(u*normCDF(u)+normPDF(u)), v, 1e-6)
		}
	}
	require.Greater(t, logEI(0, 10, 1), logEI(0, 11, 1), "still ordered far in the tail")
	require.Greater(t, logEI(0, 30, 2), logEI(0, 30, 1))
}

func TestSuggestIsSeededAndReproducible(t *testing.T) {
	trials := benchTrials(25)
	cfg := Config{Space: benchSpace, Goal: Maximize, Seed: 3}
	a, err := Suggest(cfg, trials, 3)
	require.NoError(t, err)
	b, err := Suggest(cfg, trials, 3)
	require.NoError(t, err)
	require.Equal(t, a, b)
	cfg.Seed = 4
	c, err := Suggest(cfg, trials, 3)
	require.NoError(t, err)
	require.NotEqual(t, a[0].Values, c[0].Values)
	// After the design the two proposers take turns by trial number: 25
	// trials so far, so the Parzen draw, then the model, then Parzen.
	require.Equal(t, []Method{MethodParzen, MethodBayes, MethodParzen}, []Method{a[0].Method, a[1].Method, a[2].Method})
	for _, s := range a {
		require.NotNil(t, s.Prediction, "every suggestion after the design comes with a prediction")
		for _, p := range benchSpace.Params {
			require.NoError(t, p.check(s.Values[p.Name]))
		}
	}
}

func TestSuggestStartsWithALatinHypercube(t *testing.T) {
	s := Space{Params: []Param{{Name: "x", Kind: Float, Min: 0, Max: 1}, {Name: "c", Kind: Choice, Choices: []string{"a", "b", "c", "d", "e"}}}}
	cfg := Config{Space: s, Goal: Minimize, Seed: 9, Startup: 5}
	var trials []Trial
	for i := 0; i < 5; i++ {
		sg, err := Suggest(cfg, trials, 1)
		require.NoError(t, err)
		require.Equal(t, MethodRandom, sg[0].Method)
		require.Nil(t, sg[0].Prediction)
		trials = append(trials, Trial{Values: sg[0].Values, State: Done, Objective: float64(i)})
	}
	strata := map[int]bool{}
	choices := map[string]bool{}
	for _, tr := range trials {
		strata[int(tr.Values["x"].(float64)*5)] = true
		choices[tr.Values["c"].(string)] = true
	}
	require.Len(t, strata, 5, "one point in each fifth of x")
	require.Len(t, choices, 5, "each choice once")
	sg, err := Suggest(cfg, trials, 2)
	require.NoError(t, err)
	require.Equal(t, MethodParzen, sg[0].Method, "the model-based proposers take over after the design")
	require.Equal(t, MethodBayes, sg[1].Method)
}

// Earlier finished trials (from the archive) warm-start the search: no
// opening design is spent.
func TestSuggestWarmStartsFromEarlierTrials(t *testing.T) {
	sg, err := Suggest(Config{Space: benchSpace, Goal: Maximize, Seed: 1}, benchTrials(12), 1)
	require.NoError(t, err)
	require.Equal(t, MethodBayes, sg[0].Method)
	require.NotNil(t, sg[0].Prediction)
}

// Bayesian search beats random search on a smooth objective, over seeds.
func TestSuggestBeatsRandomSearch(t *testing.T) {
	const budget, seeds = 30, 5
	run := func(bayes bool, seed uint64) float64 {
		cfg := Config{Space: benchSpace, Goal: Maximize, Seed: seed}
		var trials []Trial
		best := math.Inf(-1)
		for i := 0; i < budget; i++ {
			var s []Suggestion
			var err error
			if bayes {
				s, err = Suggest(cfg, trials, 1)
			} else {
				s, err = Random(cfg, trials, 1)
			}
			require.NoError(t, err)
			y := benchObjective(s[0].Values, nil)
			best = math.Max(best, y)
			trials = append(trials, Trial{Values: s[0].Values, State: Done, Objective: y})
		}
		return best
	}
	var gb, gr []float64
	for s := uint64(0); s < seeds; s++ {
		gb = append(gb, run(true, s))
		gr = append(gr, run(false, s))
	}
	slices.Sort(gb)
	slices.Sort(gr)
	require.Greater(t, gb[seeds/2], gr[seeds/2], "median best: bayes %v, random %v", gb, gr)
	require.Greater(t, gb[0], 0.93, "even the worst seed gets close to the optimum (0.96): %v", gb)
}

// Pending trials are believed: a batch of suggestions spreads out, and a
// suggestion never lands on a pending trial.
func TestPendingTrialsSpreadSuggestions(t *testing.T) {
	trials := benchTrials(20)
	cfg := Config{Space: benchSpace, Goal: Maximize, Seed: 5}
	batch, err := Suggest(cfg, trials, 4)
	require.NoError(t, err)
	e := newEncoder(benchSpace, nil)
	for i := range batch {
		for j := 0; j < i; j++ {
			a, b := e.encode(batch[i].Values), e.encode(batch[j].Values)
			dist := 0.0
			for k := range a {
				dist += math.Abs(a[k] - b[k])
			}
			require.Greater(t, dist, 1e-3, "suggestions %d and %d are distinct", i, j)
		}
	}
	// The first of the batch is what a lone suggestion would be; with it
	// pending, the next suggestion is the batch's second.
	one, err := Suggest(cfg, trials, 1)
	require.NoError(t, err)
	require.Equal(t, batch[0].Values, one[0].Values)
	withPending := append(slices.Clone(trials), Trial{ID: "p", Values: batch[0].Values, State: Pending})
	m, err := Fit(cfg, withPending)
	require.NoError(t, err)
	p := m.Predict(batch[0].Values)
	require.Less(t, p.Std, batch[0].Prediction.Std, "believed: less uncertain where a trial is pending")
}

func TestFailedAndPrunedTrialsInformTheModel(t *testing.T) {
	s := Space{Params: []Param{{Name: "x", Kind: Float, Min: 0, Max: 1}}}
	cfg := Config{Space: s, Goal: Maximize, Seed: 1}
	var trials []Trial
	for i := 0; i < 8; i++ {
		x := float64(i) / 10
		trials = append(trials, Trial{ID: string(rune('a' + i)), Values: Values{"x": x}, State: Done, Objective: x})
	}
	_, err := Fit(cfg, trials[:1])
	require.ErrorIs(t, err, ErrTooFewTrials)
	// x = 0.95 failed: the model counts it as the worst result seen.
	trials = append(trials, Trial{ID: "failed", Values: Values{"x": 0.95}, State: Failed},
		Trial{ID: "nan", Values: Values{"x": 0.9}, State: Done, Objective: math.NaN()},
		Trial{ID: "pruned", Values: Values{"x": 0.05}, State: Pruned, Objective: -1})
	m, err := Fit(cfg, trials)
	require.NoError(t, err)
	require.Less(t, m.Predict(Values{"x": 0.95}).Mean, m.Predict(Values{"x": 0.7}).Mean)
	require.Less(t, m.Predict(Values{"x": 0.05}).Mean, m.Predict(Values{"x": 0.2}).Mean)
}

func TestPredictionExplainsItself(t *testing.T) {
	trials := benchTrials(40)
	cfg := Config{Space: benchSpace, Goal: Maximize, Seed: 1}
	m, err := Fit(cfg, trials)
	require.NoError(t, err)
	at := trials[7]
	p := m.Predict(at.Values)
	require.InDelta(t, at.Objective, p.Mean, 0.01, "at an observed trial the model predicts about what it saw")
	require.LessOrEqual(t, p.Low, p.Mean)
	require.LessOrEqual(t, p.Mean, p.High)
	require.Equal(t, 40, p.Trials)
	require.NotEmpty(t, p.Drivers)
	require.Equal(t, at.ID, p.Drivers[0].ID, "the trial itself weighs most")
	total := 0.0
	for i, d := range p.Drivers {
		total += d.Weight
		if i > 0 {
			require.LessOrEqual(t, d.Weight, p.Drivers[i-1].Weight)
		}
	}
	require.LessOrEqual(t, total, 1+1e-9)

	sg, err := Suggest(cfg, trials, 1)
	require.NoError(t, err)
	require.Greater(t, sg[0].Prediction.Chance, 0.0)
	require.Less(t, sg[0].Prediction.Chance, 1.0)
}

func TestImportanceFindsTheParameterThatMatters(t *testing.T) {
	s := Space{Params: []Param{
		{Name: "noise", Kind: Float, Min: 0, Max: 1},
		{Name: "lr", Kind: Float, Min: 1e-5, Max: 1, Log: true},
		{Name: "opt", Kind: Choice, Choices: []string{"a", "b", "c"}},
	}}
	cfg := Config{Space: s, Goal: Minimize, Seed: 2}
	draws, err := Random(cfg, nil, 60)
	require.NoError(t, err)
	var trials []Trial
	for _, d := range draws {
		l := math.Log10(d.Values["lr"].(float64)) + 3
		y := l * l
		if d.Values["opt"] == "c" {
			y += 2
		}
		trials = append(trials, Trial{Values: d.Values, State: Done, Objective: y})
	}
	m, err := Fit(cfg, trials)
	require.NoError(t, err)
	imp := m.Importance()
	require.Equal(t, "lr", imp[0].Name)
	require.Equal(t, "opt", imp[1].Name)
	require.Equal(t, "noise", imp[2].Name)
	require.Less(t, imp[2].Share, 0.05)
	sum := 0.0
	for _, i := range imp {
		sum += i.Share
	}
	require.InDelta(t, 1, sum, 1e-9)
	require.Greater(t, imp[2].LengthScale, imp[0].LengthScale, "the irrelevant parameter gets a long length scale")
}

func TestConditionalParametersKeepTheirDefault(t *testing.T) {
	s := Space{Params: []Param{
		{Name: "opt", Kind: Choice, Choices: []string{"adam", "sgd"}},
		{Name: "momentum", Kind: Float, Min: 0, Max: 0.99, Default: 0.9, When: []Condition{{Param: "opt", Values: []string{"sgd"}}}},
		{Name: "lr", Kind: Float, Min: 1e-4, Max: 1, Log: true},
	}}
	cfg := Config{Space: s, Goal: Maximize, Seed: 4}
	var trials []Trial
	for i := 0; i < 25; i++ {
		sg, err := Suggest(cfg, trials, 1)
		require.NoError(t, err)
		v := sg[0].Values
		if v["opt"] == "adam" {
			require.Equal(t, 0.9, v["momentum"], "trial %d", i)
		}
		y := -math.Abs(math.Log10(v["lr"].(float64)) + 2)
		if v["opt"] == "sgd" {
			y -= math.Abs(v["momentum"].(float64) - 0.5)
		}
		trials = append(trials, Trial{Values: v, State: Done, Objective: y})
	}
	// A condition on a fixed parameter: momentum never applies with adam fixed.
	s2 := Space{Params: s.Params[1:]}
	sg, err := Suggest(Config{Space: s2, Goal: Maximize, Fixed: Values{"opt": "adam"}}, nil, 5)
	require.NoError(t, err)
	for _, x := range sg {
		require.Equal(t, 0.9, x.Values["momentum"])
	}
}

func TestRandomAvoidsRepeats(t *testing.T) {
	s := Space{Params: []Param{{Name: "a", Kind: Bool}, {Name: "b", Kind: Choice, Choices: []string{"x", "y"}}}}
	sg, err := Random(Config{Space: s, Goal: Maximize, Seed: 1}, nil, 4)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, x := range sg {
		seen[FormatValue(x.Values["a"])+FormatValue(x.Values["b"])] = true
	}
	require.Len(t, seen, 4, "all four combinations of a space of four")
	_, err = Random(Config{Space: s, Goal: "up"}, nil, 1)
	require.ErrorContains(t, err, `the goal must be "min" or "max", not "up"`)
}

// Propose is always the model's own point, whatever the number of trials
// (Suggest takes turns with a Parzen draw), seeded, with a prediction and
// inside the space; fewer than two results is an error.
func TestProposeIsTheModelsPoint(t *testing.T) {
	cfg := Config{Space: benchSpace, Goal: Maximize, Seed: 2}
	_, err := Propose(cfg, benchTrials(1))
	require.Error(t, err)
	for n := 2; n <= 6; n++ {
		a, err := Propose(cfg, benchTrials(n))
		require.NoError(t, err)
		require.Equal(t, MethodBayes, a.Method, "%d trials", n)
		require.NotNil(t, a.Prediction)
		require.Equal(t, n, a.Prediction.Trials)
		for _, p := range benchSpace.Params {
			require.NoError(t, p.check(a.Values[p.Name]))
		}
		b, err := Propose(cfg, benchTrials(n))
		require.NoError(t, err)
		require.Equal(t, a, b)
	}
}

// A prediction is written to the digits its spread leaves meaning in.
func TestPredictionSpread(t *testing.T) {
	for _, tt := range []struct {
		mean, std float64
		want      string
	}{
		{0.982757, 0.0064, "0.9828 ± 0.0064"},
		{0.975, 0.004, "0.9750 ± 0.004"},
		{1234.5678, 25, "1235 ± 25"},
		{0.5, 0, "0.5 ± 0"},
		{0.123456789, 1e-20, "0.123457 ± 1e-20"},
		{2.5e6, 3e5, "2.5e+06 ± 3e+05"},
	} {
		require.Equal(t, tt.want, Prediction{Mean: tt.mean, Std: tt.std}.Spread(), "%v ± %v", tt.mean, tt.std)
	}
}
