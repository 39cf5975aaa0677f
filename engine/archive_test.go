package engine

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

const objectiveYAML = `
name: obj
version: "1"
objective: {metric: loss, goal: min}
stages:
  - name: train
    command: [sh, -c, 'echo "{\"step\": 1, \"loss\": 2}"; echo "{\"step\": 2, \"loss\": 0.25}"; echo "{\"step\": 3, \"loss\": 0.5}"']
`

const blockYAML = `
name: block
version: "1"
stages:
  - name: wait
    command: [sh, -c, 'while [ ! -f go ]; do sleep 0.05; done']
`

func TestArchiveHasBestObjectiveAndDeleteRemovesFinishedRuns(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	ctx := context.Background()
	done, err := e.Submit(ctx, RunSpec{Template: parse(t, objectiveYAML)})
	require.NoError(t, err)
	waitDone(t, e, done.ID)
	running, err := e.Submit(ctx, RunSpec{Template: parse(t, blockYAML)})
	require.NoError(t, err)

	all, err := e.Archive(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	byID := map[string]ArchiveEntry{}
	for _, a := range all {
		byID[a.ID] = a
	}
	got := byID[done.ID]
	require.Equal(t, "loss", got.Objective)
	require.True(t, got.HasBest)
	require.InDelta(t, 0.25, got.Best, 1e-12, "the lowest loss, not the last")
	require.Empty(t, byID[running.ID].Objective, "a template without an objective")

	err = e.DeleteRun(ctx, running.ID)
	require.ErrorContains(t, err, "cancel it", "an unfinished run is refused")
	require.DirExists(t, running.Dir)

	require.NoError(t, e.DeleteRun(ctx, done.ID))
	_, err = os.Stat(done.Dir)
	require.True(t, os.IsNotExist(err), "the run folder is removed")
	_, err = e.Run(ctx, done.ID)
	require.Error(t, err)

	require.NoError(t, os.WriteFile(running.Dir+"/go", nil, 0o644))
	waitDone(t, e, running.ID)
}
