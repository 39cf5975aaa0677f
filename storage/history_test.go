package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStageRunTimesCountWorkOfSucceededStages(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "niuma.db"))
	require.NoError(t, err)
	defer db.Close()
	t0 := time.Unix(1_800_000_000, 0)
	mk := func(id, tmpl string, state RunState, finished time.Time, attempts ...Attempt) {
		r := Run{ID: id, Template: tmpl, Params: `{"epochs":4}`, State: state, CreatedAt: t0, FinishedAt: finished, Spot: true}
		st := StageSucceeded
		if state != RunSucceeded {
			st = StageFailed
		}
		require.NoError(t, db.CreateRun(ctx, r, []Stage{{Name: "train", State: st, CPUMilli: 2000, MemMiB: 512, Estimate: time.Minute}}))
		for _, a := range attempts {
			a.RunID, a.Stage = id, "train"
			require.NoError(t, db.CreateAttempt(ctx, a))
		}
	}
	// a: a preempted attempt of 30 s, then 90 s to success: 2 min of work.
	mk("a", "mlp", RunSucceeded, t0.Add(10*time.Minute),
		Attempt{Number: 1, State: AttemptPreempted, StartedAt: t0, FinishedAt: t0.Add(30 * time.Second)},
		Attempt{Number: 2, State: AttemptSucceeded, StartedAt: t0.Add(time.Minute), FinishedAt: t0.Add(150 * time.Second)})
	// b: a failed attempt (not work it kept) and 60 s to success.
	mk("b", "mlp", RunSucceeded, t0.Add(20*time.Minute),
		Attempt{Number: 1, State: AttemptFailed, StartedAt: t0, FinishedAt: t0.Add(5 * time.Minute)},
		Attempt{Number: 2, State: AttemptSucceeded, StartedAt: t0, FinishedAt: t0.Add(time.Minute)})
	mk("c", "mlp", RunFailed, t0.Add(30*time.Minute), Attempt{Number: 1, State: AttemptFailed, StartedAt: t0, FinishedAt: t0.Add(time.Hour)})
	mk("d", "other", RunSucceeded, t0.Add(40*time.Minute), Attempt{Number: 1, State: AttemptSucceeded, StartedAt: t0, FinishedAt: t0.Add(time.Hour)})

	got, err := db.StageRunTimes(ctx, "mlp", 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "a", got[0].RunID)
	require.Equal(t, 2*time.Minute, got[0].RunTime)
	require.Equal(t, `{"epochs":4}`, got[0].Params)
	require.Equal(t, time.Minute, got[1].RunTime)

	got, err = db.StageRunTimes(ctx, "", 1) // the most recent run only
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "d", got[0].RunID)

	stages, err := db.Stages(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, int64(2000), stages[0].CPUMilli)
	require.Equal(t, int64(512), stages[0].MemMiB)
	require.Equal(t, time.Minute, stages[0].Estimate)
	stages[0].ReasonCode, stages[0].Reason = "cpu", "waiting for a CPU: 2 of 2 in use"
	require.NoError(t, db.UpdateStage(ctx, stages[0]))
	stages, err = db.Stages(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "cpu", stages[0].ReasonCode)
	r, err := db.GetRun(ctx, "a")
	require.NoError(t, err)
	require.True(t, r.Spot)
	require.False(t, r.Share)
}
