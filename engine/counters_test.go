package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/storage"
)

// stubbornRetried ignores SIGTERM on its first attempt (so a stop takes
// the grace period) and succeeds at once on any later one.
const stubbornRetried = `
params:
  batch: {type: int, default: 64, min: 1, max: 1024}
stages:
  - name: train
    gpus: 1
    gpu_memory: 10GiB
    command: [sh, -c, 'if [ "$NIUMA_ATTEMPT" -ge 2 ]; then echo "{\"step\": 1, \"loss\": 0.5}"; exit 0; fi; trap "" TERM; touch trapped; for i in $(seq 1 600); do [ -e release ] && exit 0; sleep 0.1; done']
`

// The sentinel's decision and its free attempt are stored: an owner that
// stops after deciding a retry and before the attempt ends leaves the
// decision to the next owner, which applies it, and the attempt counts
// read "2 of 2, 1 by the sentinel" before and after a restart.
func TestSentinelRetrySurvivesARestart(t *testing.T) {
	h := newHarness(t)
	first := sentinelEngine(t, h, "1xA100-80GB")
	first.opts.StopGrace = time.Minute // the first owner's stop does not end the attempt before it stops
	stopFirst := h.drive(first)
	tm := parse(t, "name: gpu-retry\nsentinel:\n  gpu_health: {do: retry, set: {batch: \"/2\"}}\n"+stubbornRetried)
	info, err := first.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "release"), nil, 0o644) })
	uuid := running(t, first, info.ID)
	// Not before the stage ignores SIGTERM: the first owner's stop must
	// not end it.
	untilFile(t, filepath.Join(info.Dir, "trapped"))
	first.ObserveGPUs(context.Background(), gpuSnap(time.Now(), uuid, 95, 60, 10240, []uint64{79}, info.ID))
	require.Eventually(t, func() bool {
		st, err := h.store.Stages(context.Background(), info.ID)
		return err == nil && st[0].Pending.Action == storage.PendingRetry
	}, 20*time.Second, 10*time.Millisecond, "the decision is stored")
	stopFirst()

	r, err := first.Run(context.Background(), info.ID)
	require.NoError(t, err)
	require.Equal(t, Running, r.Stages[0].State, "the attempt outlived its owner")

	second := sentinelEngine(t, h, "1xA100-80GB")
	second.opts.StopGrace = 200 * time.Millisecond
	stopSecond := h.drive(second)
	r = waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	assert.Equal(t, 2, r.Stages[0].Attempts)
	assert.EqualValues(t, 32, r.Params["batch"], "the retry's new parameters were applied")
	assert.Equal(t, "2 of 2, 1 by the sentinel", r.Stages[0].AttemptsText())
	stopSecond()

	third := h.engine()
	h.drive(third)
	r, err = third.Run(context.Background(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, "2 of 2, 1 by the sentinel", r.Stages[0].AttemptsText(), "after a restart")
	assert.Equal(t, 2, r.Stages[0].MaxAttempts)

	// What it was launched with, and what each attempt ran with, are kept.
	launched, err := third.LaunchedParams(context.Background(), info.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 64, launched["batch"], "launched with the default")
	per, err := third.AttemptParams(context.Background(), info.ID, "train")
	require.NoError(t, err)
	require.Len(t, per, 2)
	assert.EqualValues(t, 64, per[1]["batch"], "attempt 1 ran with what it was launched with")
	assert.EqualValues(t, 32, per[2]["batch"], "attempt 2 with the sentinel's half")
}

// A sentinel retry's counts are the same whether read from the owner that
// made it or from a new one.
func TestSentinelCountsBeforeAndAfterRestart(t *testing.T) {
	h := newHarness(t)
	e := sentinelEngine(t, h, "1xA100-80GB")
	stop := h.drive(e)
	tm := parse(t, "name: gpu-retry\nsentinel:\n  gpu_health: {do: retry}\n"+holdUntilRetried)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	uuid := running(t, e, info.ID)
	e.ObserveGPUs(context.Background(), gpuSnap(time.Now(), uuid, 95, 60, 10240, []uint64{79}, info.ID))
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	before := r.Stages[0].AttemptsText()
	assert.Equal(t, "2 of 2, 1 by the sentinel", before)
	stop()

	next := h.engine()
	h.drive(next)
	r, err = next.Run(context.Background(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, before, r.Stages[0].AttemptsText())
}

func TestAttemptsText(t *testing.T) {
	for _, tt := range []struct {
		s    storage.Stage
		want string
	}{
		{storage.Stage{Attempts: 0}, "0 of 1"},
		{storage.Stage{Attempts: 2, Retries: 2}, "2 of 3"},
		{storage.Stage{Attempts: 2, FreeAttempts: 1, SentinelAttempts: 1}, "2 of 2, 1 by the sentinel"},
		{storage.Stage{Attempts: 3, Retries: 1, FreeAttempts: 2, SentinelAttempts: 1}, "3 of 4, 1 by the sentinel"},
	} {
		info := runInfo(storage.Run{}, nil, []storage.Stage{tt.s}, nil)
		assert.Equal(t, tt.want, info.Stages[0].AttemptsText())
	}
}
