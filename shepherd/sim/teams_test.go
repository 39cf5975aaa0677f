package sim

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/shepherd"
)

// The acceptance figures of sharing among teams, kept as a regression
// test on a day of Philly the sharing rules were not tuned on (all its
// virtual clusters as teams, 32×80 GiB at load 1.0): no team's average
// JCT more than 5% above its static partition's, the average JCT no worse
// than free-for-all best fit's, utilisation at least 0.95× best fit's.
func TestTeamsKeepTheSharingIncentive(t *testing.T) {
	f, err := os.Open("testdata/philly-2017-10-20.csv")
	require.NoError(t, err)
	defer f.Close()
	col, err := ReadColumn(f, "cluster")
	require.NoError(t, err)
	_, err = f.Seek(0, 0)
	require.NoError(t, err)
	jobs, err := LoadPhilly(f, 32, 1)
	require.NoError(t, err)
	SetTeams(jobs, col)
	jobs = Rescale(jobs, 1.0, 32)
	cfg := DefaultConfig()
	cfg.GPUs = 32
	best := cfg
	best.Policy = shepherd.BestFit()
	ref := Replay(jobs, best)
	for _, mode := range ShareModes {
		teams, err := SharesOf(jobs, 32, mode)
		require.NoError(t, err)
		rep := ReplayTeams(jobs, cfg, teams, mode, 2)
		require.Equal(t, len(jobs), rep.Jobs+rep.Refused, mode)
		require.Len(t, rep.Teams, 11, mode)
		name, ratio := rep.WorstTeam()
		require.LessOrEqual(t, ratio, 1.05, "%s: team %s against its static partition", mode, name)
		require.LessOrEqual(t, rep.AvgJCT, ref.AvgJCT, "%s: average JCT against best fit", mode)
		require.GreaterOrEqual(t, rep.GPUUtil, 0.95*ref.GPUUtil, "%s: utilisation against best fit", mode)
		for n, ts := range rep.Teams {
			require.Greater(t, ts.Jobs, 0, n)
			require.Greater(t, ts.Share, 0.0, n)
		}
	}
}

func TestSharesOf(t *testing.T) {
	jobs := []Job{
		{Team: "a", GPUs: 1, Duration: 700}, {Team: "b", GPUs: 1, Duration: 200}, {Team: "c", GPUs: 1, Duration: 100},
	}
	got := func(mode string, gpus int) map[string]float64 {
		teams, err := SharesOf(jobs, gpus, mode)
		require.NoError(t, err)
		m := map[string]float64{}
		sum := 0.0
		for _, tm := range teams {
			m[tm.Name] = tm.Nominal
			sum += tm.Nominal
			require.Equal(t, float64(shepherd.NoLimit), tm.BorrowLimit)
		}
		require.Equal(t, float64(gpus), sum, "every GPU is someone's")
		return m
	}
	// 10 GPUs by GPU-time 7:2:1 → 7, 2, 1; evenly → 4, 3, 3 (3.33 each,
	// the remainder to the first by name).
	require.Equal(t, map[string]float64{"a": 7, "b": 2, "c": 1}, got("proportional", 10))
	require.Equal(t, map[string]float64{"a": 4, "b": 3, "c": 3}, got("even", 10))
	// 4 GPUs: c's 0.4 is raised to one, taken back from a (2.8 → 2).
	require.Equal(t, map[string]float64{"a": 2, "b": 1, "c": 1}, got("proportional", 4))
	_, err := SharesOf(jobs, 2, "even")
	require.ErrorContains(t, err, "3 teams and 2 GPUs")
	_, err = SharesOf(jobs, 8, "fair")
	require.ErrorContains(t, err, "use even or proportional")
}
