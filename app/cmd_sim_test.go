package app

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSimCommand(t *testing.T) {
	const philly = "../shepherd/sim/testdata/philly-2017-10-20.csv"
	const pai = "../shepherd/sim/testdata/pai2023-pods-1000.csv"
	t.Run("philly report", func(t *testing.T) {
		code, out, errs := niuma(t, "sim", "--trace", philly, "--policy", "bestfit", "--load", "0.8")
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "policy bestfit:")
		require.Contains(t, out, "JCT          avg")
		require.Contains(t, out, "per priority class:")
	})
	t.Run("philly json", func(t *testing.T) {
		code, out, errs := niuma(t, "sim", "--trace", philly, "--gpus", "4x40GiB", "--json")
		require.Equal(t, 0, code, errs)
		var rep struct {
			Policy string
			Jobs   int
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.Equal(t, "herd", rep.Policy)
		require.Positive(t, rep.Jobs)
	})
	t.Run("estimate regimes", func(t *testing.T) {
		for _, est := range []string{"none", "predicted", "noisy:0.5"} {
			code, out, errs := niuma(t, "sim", "--trace", philly, "--estimates", est, "--load", "0.8")
			require.Equal(t, 0, code, errs)
			require.Contains(t, out, "estimates: "+est)
			require.Contains(t, out, "policy herd:")
		}
	})
	t.Run("one virtual cluster", func(t *testing.T) {
		code, out, errs := niuma(t, "sim", "--trace", philly, "--cluster", "6214e9", "--json")
		require.Equal(t, 0, code, errs)
		var rep struct{ Jobs int }
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.Positive(t, rep.Jobs)
		code, _, errs = niuma(t, "sim", "--trace", philly, "--cluster", "nosuch")
		require.Equal(t, 1, code)
		require.Contains(t, errs, `no jobs of virtual cluster "nosuch"`)
	})
	t.Run("pai packing onto nodes", func(t *testing.T) {
		code, out, errs := niuma(t, "sim", "--trace", pai, "--nodes", "../shepherd/sim/testdata/pai2023-gpu-nodes-50.csv", "--policy", "bestfit")
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "onto 50 nodes with 248 GPUs before the first refusal")
	})
	t.Run("teams", func(t *testing.T) {
		for _, shares := range []string{"even", "proportional"} {
			code, out, errs := niuma(t, "sim", "--trace", philly, "--teams", "cluster", "--shares", shares, "--gpus", "32x80GiB",
				"--load", "1.0", "--json")
			require.Equal(t, 0, code, errs)
			var rep struct {
				AvgJCT      float64 `json:"avg_jct_s"`
				Utilization float64 `json:"utilization"`
				Teams       map[string]struct {
					Jobs   int     `json:"jobs"`
					AvgJCT float64 `json:"avg_jct_s"`
					Static float64 `json:"static_avg_jct_s"`
					Wide   int     `json:"static_refused"`
				} `json:"teams"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			require.Positive(t, rep.AvgJCT)
			require.Positive(t, rep.Utilization)
			require.Len(t, rep.Teams, 11)
			for name, tm := range rep.Teams {
				require.Positive(t, tm.Jobs, name)
				require.True(t, tm.Static > 0 || tm.Wide > 0, "%s: a static figure, or jobs too wide for its partition", name)
			}
		}
		code, out, errs := niuma(t, "sim", "--trace", philly, "--teams", "cluster", "--gpus", "32x80GiB")
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "per team (proportional shares")
		require.Contains(t, out, "worst off against its own partition:")
		code, out, errs = niuma(t, "sim", "--trace", pai, "--teams", "qos", "--gpus", "16x80GiB")
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "BE ")
		require.Contains(t, out, "PAI pod durations are censored")
	})
	t.Run("pai packing", func(t *testing.T) {
		code, out, errs := niuma(t, "sim", "--trace", pai)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "before the first refusal")
	})
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no trace", []string{"sim"}, "sim needs --trace FILE"},
		{"bad policy", []string{"sim", "--trace", philly, "--policy", "sjf"}, `unknown policy "sjf": choose one of herd, bestfit, las, fifo`},
		{"bad estimates", []string{"sim", "--trace", philly, "--estimates", "exact"}, "use none, predicted or noisy:σ"},
		{"bad sigma", []string{"sim", "--trace", philly, "--estimates", "noisy:-1"}, "σ must be a number from 0 to 5"},
		{"bad gpus", []string{"sim", "--trace", philly, "--gpus", "8"}, "write COUNTxMEMORY"},
		{"bad format", []string{"sim", "--trace", philly, "--format", "slurm"}, "use philly or pai"},
		{"no such team column", []string{"sim", "--trace", philly, "--teams", "team"}, `no column "team" in the header`},
		{"bad shares", []string{"sim", "--trace", philly, "--teams", "cluster", "--shares", "fair"}, `--shares "fair": use even or proportional`},
		{"more teams than GPUs", []string{"sim", "--trace", philly, "--teams", "cluster"}, "11 teams and 8 GPUs: each team needs a GPU of its own"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := niuma(t, tt.args...)
			require.Equal(t, 2, code)
			require.Contains(t, errs, tt.want)
		})
	}
}
