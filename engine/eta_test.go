package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/shepherd/predict"
)

// A stage that reports its total_steps is judged by its own pace once it
// is some way in: a run of 100 steps after three runs of 3 is not said to
// end in a second, and the ETA says what it went by. Before its first
// steps, the earlier runs say it.
func TestETAFollowsTheStagesPace(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	gate := filepath.Join(t.TempDir(), "go")
	tm := parse(t, `
name: paced
params:
  n: {type: int, default: 3, min: 1, max: 1000}
  gate: {type: string, default: ""}
stages:
  - name: train
    command: [sh, -c, 'if [ -n "${params.gate}" ]; then sleep 3; fi; i=1; while [ $i -le ${params.n} ]; do echo "{\"step\": $i, \"total_steps\": ${params.n}, \"loss\": 1}"; if [ $i -eq 3 ] && [ -n "${params.gate}" ]; then while [ ! -e "${params.gate}" ]; do sleep 0.05; done; fi; sleep 0.1; i=$((i+1)); done']
  - name: check
    needs: [train]
    command: ["true"]
`)
	ctx := context.Background()
	for range 3 {
		info, err := e.Submit(ctx, RunSpec{Template: tm, Values: mustValues(t, tm, "n", "3")})
		require.NoError(t, err)
		require.Equal(t, Succeeded, waitDone(t, e, info.ID).State)
	}

	long, err := e.Submit(ctx, RunSpec{Template: tm, Values: mustValues(t, tm, "n", "100", "gate", gate)})
	require.NoError(t, err)
	// Before it reports, the earlier runs say it, and the ETA says how
	// unlike them this run is.
	before, err := e.ETA(ctx, mustRun(t, e, long.ID))
	require.NoError(t, err)
	require.Regexp(t, `^ETA [0-9]+ s, from 3 earlier runs \(unlike them: n 100, theirs 3\)$`, before.String())
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	var eta ETA
	until(t, 30*time.Second, "the long run at its 3rd step", func() bool {
		pts, err := e.LastMetrics(ctx, long.ID)
		require.NoError(t, err)
		for _, p := range pts {
			if p.Key == "loss" && p.Step == 3 {
				return true
			}
		}
		return false
	})
	eta, err = e.RunETA(ctx, long.ID)
	require.NoError(t, err)
	require.True(t, eta.Known)
	require.True(t, eta.Paced, "3 of 100 steps, under minPace, but the earlier runs are unlike it: its pace says it (%+v)", eta)
	// 97 steps to go at ≥ 0.1 s each (its sleep), less the moments since
	// it reported; the earlier runs alone would say well under a second.
	// Its 3 s start-up is no step: counted in, the pace would say 40 s.
	require.Greater(t, eta.Left, 5*time.Second, "%+v", eta)
	require.Less(t, eta.Left, 30*time.Second, "%+v", eta)
	require.Equal(t, 3, eta.Runs, "the check stage still goes by the earlier runs")
	require.Regexp(t, `^ETA [0-9]+ s, from its progress and 3 earlier runs$`, eta.String())
	require.NoError(t, e.Cancel(ctx, long.ID))
	require.Equal(t, Cancelled, waitDone(t, e, long.ID).State)
}

// After a retry, the pace is the running attempt's, never the one that
// failed: until the new attempt reports, the earlier runs say it.
func TestETAAfterARetryIsTheNewAttempts(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	gate := filepath.Join(t.TempDir(), "go")
	tm := parse(t, `
name: retried
params:
  gate: {type: string, default: ""}
stages:
  - name: train
    retries: 1
    command: [sh, -c, 'if [ ! -e "${params.gate}.failed" ]; then i=1; while [ $i -le 50 ]; do echo "{\"step\": $i, \"total_steps\": 100, \"loss\": 1}"; i=$((i+1)); done; touch "${params.gate}.failed"; exit 1; fi; while [ ! -e "${params.gate}" ]; do sleep 0.05; done']
`)
	ctx := context.Background()
	run, err := e.Submit(ctx, RunSpec{Template: tm, Values: mustValues(t, tm, "gate", gate)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	until(t, 30*time.Second, "the second attempt running", func() bool {
		r := mustRun(t, e, run.ID)
		return len(r.Stages) == 1 && r.Stages[0].State == Running && r.Stages[0].Attempts == 2
	})
	eta, err := e.RunETA(ctx, run.ID)
	require.NoError(t, err)
	require.False(t, eta.Paced, "the failed attempt's 50 of 100 steps say nothing of this one: %+v", eta)
}

// How the ETA says what it went by.
func TestETAWords(t *testing.T) {
	b := func(p string, v, lo, hi float64) predict.Beyond {
		return predict.Beyond{Param: p, Value: v, Min: lo, Max: hi}
	}
	for _, tt := range []struct {
		eta  ETA
		want string
	}{
		{ETA{Left: 14 * time.Minute, Runs: 9}, "14 min, from 9 earlier runs"},
		{ETA{Left: 3 * time.Second, Runs: 1}, "3 s, from 1 earlier run"},
		{ETA{Left: 2 * time.Hour, Given: true}, "2.0 h, from the estimates given"},
		{ETA{Left: 4 * time.Minute, Runs: 6, Paced: true, Beyond: []predict.Beyond{b("epochs", 500, 30, 30)}}, "4 min, from its progress and 6 earlier runs"},
		{ETA{Left: 3 * time.Second, Runs: 6, Beyond: []predict.Beyond{b("epochs", 500, 20, 30)}}, "3 s, from 6 earlier runs (unlike them: epochs 500, theirs 20–30)"},
		{ETA{Left: 3 * time.Second, Runs: 6, Beyond: []predict.Beyond{b("batch_size", 8, 64, 64), b("epochs", 500, 30, 30), b("hidden", 1024, 64, 64)}},
			"3 s, from 6 earlier runs (unlike them: batch_size 8, epochs 500, hidden 1024)"},
	} {
		require.Equal(t, tt.want, tt.eta.Words())
	}
}
