package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/storage"
)

// A pruned run stops like a cancelled one (its running stage gets
// SIGTERM, the queued ones never start) but ends in a state of its own,
// pruned, with the decision's evidence as its reason: it neither failed
// nor was cancelled by anyone.
func TestPruneStopsTheRunAndKeepsTheEvidence(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	ctx := context.Background()
	tm := parse(t, `
name: long
stages:
  - name: train
    command: [sh, -c, 'trap "echo term > train/got; exit 143" TERM; mkdir -p train; echo "{\"step\": 1, \"val_acc\": 0.1}"; touch train/started; while :; do sleep 0.05; done']
  - name: after
    needs: [train]
    command: ["true"]
`)
	info, err := e.Submit(ctx, RunSpec{Template: tm})
	require.NoError(t, err)
	sub := e.Subscribe(64)
	defer sub.Close()
	waitFor(t, ctx, e, sub, info.ID, func(RunInfo) bool {
		_, err := os.Stat(filepath.Join(info.Dir, "train", "started"))
		return err == nil
	})

	p := storage.Prune{RunID: info.ID[:10], Reason: "below_median", Metric: "val_acc", Step: 1, Value: 0.1, Reference: 0.5, Trials: 4,
		Compared: []storage.Compared{{RunID: "x", Value: 0.5}}, Evidence: "val_acc 0.1 at step 1, median of 4 trials 0.5"}
	require.NoError(t, e.Prune(ctx, p))
	done := waitDone(t, e, info.ID)
	require.Equal(t, Pruned, done.State)
	require.True(t, done.State.Done())
	require.Equal(t, "stopped early by its study's pruner: val_acc 0.1 at step 1, median of 4 trials 0.5", done.Error)
	got, err := os.ReadFile(filepath.Join(info.Dir, "train", "got"))
	require.NoError(t, err, "the stage was given SIGTERM")
	require.Equal(t, "term\n", string(got))
	require.Equal(t, Cancelled, done.Stages[1].State, "the next stage never started")

	stored, err := h.store.RunPrune(ctx, info.ID)
	require.NoError(t, err)
	require.Equal(t, p.Evidence, stored.Evidence)
	require.Equal(t, "below_median", stored.Reason)

	require.ErrorContains(t, e.Prune(ctx, storage.Prune{RunID: info.ID, Evidence: "again"}), "has already been pruned")
	require.ErrorContains(t, e.Prune(ctx, storage.Prune{RunID: "nope", Evidence: "x"}), "no run")
}
