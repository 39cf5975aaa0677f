package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/storage"
)

// A stage whose attempts lost metric points is no plain success: its
// count is kept across attempts and its reason says so.
func TestPointsLostAreNoPlainSuccess(t *testing.T) {
	e := &Engine{}
	run := storage.Run{ID: "r1"}
	st := storage.Stage{RunID: "r1", Name: "train", State: storage.StageRunning, Attempts: 1, Retries: 1}
	a := storage.Attempt{RunID: "r1", Stage: "train", Number: 1}
	var tr storage.Transition
	e.opts.Backoff = func(int) time.Duration { return time.Second }
	e.end(&run, &st, &a, evEnded{exit: executor.Exit{Code: 1}, lost: 40}, time.Now(), &tr)
	require.Equal(t, storage.StageQueued, st.State, "a failure with retries left is retried")
	require.Equal(t, int64(40), st.PointsLost)

	st.State, st.Attempts = storage.StageRunning, 2
	a = storage.Attempt{RunID: "r1", Stage: "train", Number: 2}
	e.end(&run, &st, &a, evEnded{exit: executor.Exit{Code: 0}, lost: 2}, time.Now(), &tr)
	require.Equal(t, storage.StageSucceeded, st.State)
	require.Equal(t, int64(42), st.PointsLost, "counted over the stage's attempts")
	require.Equal(t, "succeeded, but 42 of its metric points could not be stored and are lost (see the log for why)", st.Reason)
	require.Equal(t, st.Reason, a.Reason)

	clean := storage.Stage{RunID: "r1", Name: "eval", State: storage.StageRunning, Attempts: 1}
	a = storage.Attempt{RunID: "r1", Stage: "eval", Number: 1}
	e.end(&run, &clean, &a, evEnded{exit: executor.Exit{Code: 0}}, time.Now(), &tr)
	require.Empty(t, clean.Reason, "a stage that lost nothing is a plain success")
}
