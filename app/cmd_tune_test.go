package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tuneTable = `lr,depth,act,loss_seed0,loss_seed1
0.001,1,relu,0.9,1.1
0.001,2,tanh,0.6,0.8
0.01,1,relu,0.3,0.5
0.01,2,tanh,0.05,0.15
0.1,1,relu,1.5,1.7
0.1,2,tanh,1.2,1.4
0.001,1,tanh,0.8,1.0
0.001,2,relu,0.7,0.9
0.01,1,tanh,0.2,0.4
0.01,2,relu,0.1,0.3
0.1,1,tanh,1.4,1.6
0.1,2,relu,1.3,1.5
`

func TestTuneTablePrintsTheMedianRegretPerBudget(t *testing.T) {
	tempHome(t)
	p := filepath.Join(t.TempDir(), "t.csv")
	require.NoError(t, os.WriteFile(p, []byte(tuneTable), 0o644))
	code, out, errOut := niuma(t, "tune", "--table", p, "--budget", "12", "--reps", "3", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "tune: t.csv: 12 configurations of lr (log float), depth (int), act (2 choices); min loss (best 0.1)")
	var res struct {
		Table  string             `json:"table"`
		Median map[string]float64 `json:"median_regret"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, "t.csv", res.Table)
	require.Len(t, res.Median, 12)
	assert.Less(t, res.Median["12"], res.Median["1"]+1e-12)
	assert.True(t, strings.HasPrefix(strings.SplitN(out, `"median_regret":{`, 2)[1], `"1":`), "budgets in order: %s", out)

	code, out, _ = niuma(t, "tune", "--table", p, "--budget", "10", "--reps", "2", "--sampler", "random")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "random budget 10: median regret ")

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"tune"}, "tune needs a TEMPLATE (a study: niuma tune TEMPLATE --budget N --wait), --table FILE"},
		{[]string{"tune", "--table", p, "--curves", p}, "tune needs a TEMPLATE"},
		{[]string{"tune", "digits-mlp", "--table", p}, "tune TEMPLATE runs a study; --table and --curves replay benchmarks instead"},
		{[]string{"tune", "--table", p, "--sampler", "grid"}, `--sampler "grid": use bayes or random`},
		{[]string{"tune", "--table", p, "--budget", "0"}, "--budget 0: give 1 to 10000 trials"},
		{[]string{"tune", "--curves", p, "--pruner", "hyperband"}, `--pruner "hyperband": use none, median or asha`},
	} {
		code, _, errOut := niuma(t, c.args...)
		assert.Equal(t, 2, code, "%v", c.args)
		assert.Contains(t, errOut, c.msg, "%v", c.args)
	}
	code, _, errOut = niuma(t, "tune", "--table", filepath.Join(t.TempDir(), "none.csv.gz"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "read the table:")
}

func TestTuneCurvesReplaysEarlyStopping(t *testing.T) {
	tempHome(t)
	code, out, errOut := niuma(t, "tune", "--curves", filepath.Join("..", "tuner", "tabular", "testdata", "digits-mlp-grid.csv"),
		"--pruner", "median", "--sampler", "random", "--trials", "20", "--reps", "4", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "288 runs of 96 configurations")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Less(t, res["steps_ratio"].(float64), 1.0)
	assert.Equal(t, "median", res["pruner"])
}
