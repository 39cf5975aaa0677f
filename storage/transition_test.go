package storage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A transition is written whole or not at all: when one of its rows
// cannot be written (here a new attempt whose number exists), the run,
// stage and attempt rows it would also change are left as they were.
func TestApplyIsAllOrNothing(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r", State: RunQueued, Params: `{"a":1}`}, []Stage{{Name: "s", Retries: 1}}))
	require.NoError(t, db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "s", Number: 1, State: AttemptFailed, Token: "t1"}))

	run := Run{ID: "r", State: RunRunning}
	params := `{"a":2}`
	st := Stage{RunID: "r", Name: "s", State: StageRunning, Attempts: 1, FreeAttempts: 1, SentinelAttempts: 1,
		Pending: Pending{Action: PendingRetry, Note: "n", Params: params}}
	old := Attempt{RunID: "r", Stage: "s", Number: 1, State: AttemptSucceeded}
	err := db.Apply(ctx, Transition{Run: &run, Params: &params, Stages: []Stage{st}, Attempt: &old,
		NewAttempt: &Attempt{RunID: "r", Stage: "s", Number: 1, State: AttemptStarting}})
	require.Error(t, err)

	got, err := db.GetRun(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, RunQueued, got.State)
	require.Equal(t, `{"a":1}`, got.Params)
	stages, err := db.Stages(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, StageQueued, stages[0].State)
	require.Zero(t, stages[0].FreeAttempts)
	require.Equal(t, Pending{}, stages[0].Pending)
	as, err := db.Attempts(ctx, "r")
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Equal(t, AttemptFailed, as[0].State)

	// The same without the clash is written whole, counters, decision and
	// token included.
	err = db.Apply(ctx, Transition{Run: &run, Params: &params, Stages: []Stage{st}, Attempt: &old,
		NewAttempt: &Attempt{RunID: "r", Stage: "s", Number: 2, State: AttemptStarting, Token: "t2"}})
	require.NoError(t, err)
	got, _ = db.GetRun(ctx, "r")
	require.Equal(t, RunRunning, got.State)
	require.Equal(t, params, got.Params)
	stages, _ = db.Stages(ctx, "r")
	require.Equal(t, 1, stages[0].FreeAttempts)
	require.Equal(t, 1, stages[0].SentinelAttempts)
	require.Equal(t, st.Pending, stages[0].Pending)
	require.Equal(t, 3, stages[0].MaxAttempts())
	as, _ = db.Attempts(ctx, "r")
	require.Len(t, as, 2)
	require.Equal(t, AttemptSucceeded, as[0].State)
	require.Equal(t, "t2", as[1].Token)
}

func TestAttemptTokens(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r", Executor: "docker"}, []Stage{{Name: "s"}}))
	require.NoError(t, db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "s", Number: 1, State: AttemptSucceeded, Executor: "docker", Token: "t1"}))
	require.NoError(t, db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "s", Number: 2, State: AttemptStarting, Executor: "docker", Token: "t2"}))
	require.NoError(t, db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "s", Number: 3, State: AttemptRunning, Executor: "local", Token: "t3"}))
	require.NoError(t, db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "s", Number: 4, State: AttemptRunning, Executor: "docker"}))
	got, err := db.AttemptTokens(ctx, "docker")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"t1", "t2"}, got)
}
