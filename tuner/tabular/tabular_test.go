package tabular

import (
	"bytes"
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/tuner"
)

// tiny is a table of 3 × 3 × 2 configurations: lr grows tenfold each step
// (log), depth 1..3 grows by 1.5 from 2 to 3 (not above 1.5: a linear
// int), act is text (a choice). One cell is empty: that seed was not run.
const tiny = `lr,depth,act,loss_seed0,loss_seed1
0.001,1,relu,0.9,1.1
0.001,1,tanh,0.8,1.0
0.001,2,relu,0.7,0.9
0.001,2,tanh,0.6,0.8
0.001,3,relu,0.5,0.7
0.001,3,tanh,0.4,0.6
0.01,1,relu,0.3,0.5
0.01,1,tanh,0.2,0.4
0.01,2,relu,0.1,0.3
0.01,2,tanh,0.05,0.15
0.01,3,relu,0.3,
0.01,3,tanh,0.35,0.45
0.1,1,relu,1.5,1.7
0.1,1,tanh,1.4,1.6
0.1,2,relu,1.3,1.5
0.1,2,tanh,1.2,1.4
0.1,3,relu,1.1,1.3
0.1,3,tanh,1.0,1.2
`

func writeGz(t *testing.T, body string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(body))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	p := filepath.Join(t.TempDir(), "tiny.csv.gz")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

func TestLoadBuildsTheSpaceFromTheColumns(t *testing.T) {
	tb, err := Load(writeGz(t, tiny))
	require.NoError(t, err)
	require.Equal(t, "tiny.csv.gz", tb.Name)
	require.Equal(t, "loss", tb.Metric)
	require.Equal(t, tuner.Minimize, tb.Goal, "a loss is minimised")
	require.Equal(t, []tuner.Param{
		{Name: "lr", Kind: tuner.Float, Min: 0.001, Max: 0.1, Log: true},
		{Name: "depth", Kind: tuner.Int, Min: 1, Max: 3},
		{Name: "act", Kind: tuner.Choice, Choices: []string{"relu", "tanh"}},
	}, tb.Space.Params)
	require.Equal(t, 18, tb.Configurations())
	require.InDelta(t, 0.1, tb.Best(), 1e-12, "0.01,2,tanh: mean of 0.05 and 0.15")
	m, ok := tb.Mean("0.01|3|relu")
	require.True(t, ok)
	require.Equal(t, 0.3, m, "a missing seed is left out of the mean")

	// Snapping: nearest grid value, in log space for lr (0.004 is nearer
	// 0.01 than 0.001 there, though not on a linear scale).
	v, k := tb.Snap(tuner.Values{"lr": 0.004, "depth": int64(2), "act": "tanh"})
	require.Equal(t, "0.01|2|tanh", k)
	require.Equal(t, tuner.Values{"lr": 0.01, "depth": int64(2), "act": "tanh"}, v)

	_, err = Load(writeGz(t, "a,b\n1,2\n"))
	require.ErrorContains(t, err, "want parameter columns, then value columns named METRIC_seedN")
	_, err = Load(writeGz(t, "a,x_seed0\n1,oops\n"))
	require.ErrorContains(t, err, `x_seed0: "oops" is not a number`)
	_, err = Load(filepath.Join(t.TempDir(), "missing.csv.gz"))
	require.Error(t, err)
}

// The protocol by hand: a sampler that proposes a fixed sequence gives the
// regret of the best observed configuration's mean, at every trial.
func TestRegretFollowsTheIncumbent(t *testing.T) {
	tb, err := Load(writeGz(t, tiny))
	require.NoError(t, err)
	seq := []tuner.Values{
		{"lr": 0.1, "depth": int64(1), "act": "relu"},   // mean 1.6
		{"lr": 0.002, "depth": int64(3), "act": "tanh"}, // snaps to 0.001: mean 0.5
		{"lr": 0.2, "depth": int64(3), "act": "relu"},   // outside: snaps to 0.1, mean 1.2
		{"lr": 0.011, "depth": int64(2), "act": "tanh"}, // the best, 0.1
	}
	sample := func(rep int, _ tuner.Space, _ tuner.Goal, trials []tuner.Trial) (tuner.Values, error) {
		return seq[len(trials)], nil
	}
	med, err := Regret(tb, sample, Protocol{Budget: 4, Reps: 3, Workers: 2})
	require.NoError(t, err)
	want := []float64{1.5, 0.4, 0.4, 0}
	for i := range want {
		require.InDelta(t, want[i], med[i], 1e-12, "trial %d", i+1)
	}
	// Noisy: a trial sees one seed. 0.001,3,tanh is 0.4 or 0.6 and 0.1,3,relu
	// 1.1 or 1.3, so the incumbent after three trials is always the second.
	med, err = Regret(tb, sample, Protocol{Budget: 4, Reps: 5, Noisy: true, Workers: 1})
	require.NoError(t, err)
	require.InDelta(t, 0.4, med[2], 1e-12)
	require.InDelta(t, 0, med[3], 1e-12)
}

func TestSearchersRunUnderTheProtocol(t *testing.T) {
	tb, err := Load(writeGz(t, tiny))
	require.NoError(t, err)
	for name, s := range Samplers {
		a, err := Regret(tb, s, Protocol{Budget: 12, Reps: 4, Workers: 2})
		require.NoError(t, err, name)
		b, err := Regret(tb, s, Protocol{Budget: 12, Reps: 4, Workers: 1})
		require.NoError(t, err, name)
		require.Equal(t, a, b, "%s: repetitions are seeded, whatever runs them", name)
		for i := 1; i < len(a); i++ {
			require.LessOrEqual(t, a[i], a[i-1]+1e-12, "%s: regret never grows", name)
		}
		require.Less(t, a[11], a[0], name)
	}
}

func TestMedianIsPythons(t *testing.T) {
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	require.True(t, math.IsNaN(median(nil)))
}

const curvesCSV = `lr,opt,seed,val_acc,val_loss
0.001,adam,1,0.5 0.7 0.8 0.9,1 0.8 0.6 0.4
0.001,adam,2,0.5 0.6 0.8 0.91,1 0.8 0.6 0.4
0.01,adam,1,0.6 0.8 0.9 0.95,1 0.7 0.5 0.3
0.1,adam,1,0.1 0.1 0.1 0.1,2 2 2 2
0.001,sgd,1,0.1 0.2 0.3 0.4,2 1.8 1.6 1.4
0.01,sgd,1,0.3 0.5 0.6 0.7,1.5 1.2 1 0.9
0.1,sgd,1,0.4 0.6 0.85 0.93,1.2 0.9 0.6 0.35
`

func TestLoadCurves(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.csv")
	require.NoError(t, os.WriteFile(p, []byte(curvesCSV), 0o644))
	c, err := LoadCurves(p, "val_acc", tuner.Maximize)
	require.NoError(t, err)
	require.Equal(t, 6, c.Configurations())
	require.Equal(t, 7, c.Runs())
	require.Equal(t, 4, c.Steps)
	require.Equal(t, []string{"lr", "opt"}, c.Space.Names())
	require.True(t, c.Space.Params[0].Log)
	_, err = LoadCurves(p, "acc", tuner.Maximize)
	require.ErrorContains(t, err, `no column "acc" after "seed"`)
	bad := filepath.Join(t.TempDir(), "b.csv")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(curvesCSV, "0.5 0.7", "0.5 x", 1)), 0o644))
	_, err = LoadCurves(bad, "val_acc", tuner.Maximize)
	require.ErrorContains(t, err, `line 2: val_acc: "x" is not a number`)
}
