package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The runs of one sweep share its id through storage, so that the window
// can group them; a run launched alone has none.
func TestSweepIDIsStored(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	tm := parse(t, "name: t\nruntime: {kind: local}\nparams:\n  x: {type: int, default: 1}\nstages:\n  - {name: a, command: [/bin/true]}\n")
	ctx := context.Background()
	sweep := NewSweepID(time.Now())
	var ids []string
	for _, x := range []int64{1, 2} {
		r, err := e.Submit(ctx, RunSpec{Template: tm, Values: map[string]any{"x": x}, Sweep: sweep})
		require.NoError(t, err)
		require.Equal(t, sweep, r.Sweep)
		ids = append(ids, r.ID)
	}
	alone, err := e.Submit(ctx, RunSpec{Template: tm})
	require.NoError(t, err)
	for _, id := range ids {
		r, err := e.Run(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sweep, r.Sweep, "read back from storage")
	}
	r, err := e.Run(ctx, alone.ID)
	require.NoError(t, err)
	require.Empty(t, r.Sweep)
	require.NotEqual(t, sweep, NewSweepID(time.Now()), "each sweep gets its own id")
}

// A stage whose GPU needs are parameters asks, per run, for what the run's
// values say.
func TestStageNeedsFollowTheRunsValues(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	tm := parse(t, "name: t\nruntime: {kind: local}\nparams:\n  gpus: {type: int, default: 0, min: 0}\n  mem: {type: string, default: 2GiB}\nstages:\n  - {name: a, command: [/bin/true], gpus: \"${params.gpus}\", gpu_memory: \"${params.mem}\"}\n")
	ctx := context.Background()
	r, err := e.Submit(ctx, RunSpec{Template: tm, Values: map[string]any{"gpus": int64(1), "mem": "6GiB"}})
	require.NoError(t, err)
	st, err := h.store.Stages(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, 1, st[0].GPUs)
	require.Equal(t, int64(6144), st[0].GPUMemoryMiB)
	_, err = e.Submit(ctx, RunSpec{Template: tm, Values: map[string]any{"gpus": int64(1), "mem": "six"}})
	require.ErrorContains(t, err, "gpu_memory", "a bad size is refused before anything is written")
}
