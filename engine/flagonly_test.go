package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run launched flag-only keeps running through an anomaly its template
// answers with a retry or a stop: the anomaly is flagged, what the template
// would have done is in the record, and the run keeps the parameters it
// was launched with.
func TestFlagOnlyRunIsNeitherRetriedNorStopped(t *testing.T) {
	const workload = `
params:
  lr: {type: float, default: 1, min: 0.0001, max: 10}
stages:
  - name: train
    command: [sh, -c, 'echo "{\"step\": 1, \"loss\": NaN}"; sleep 1; echo "{\"step\": 2, \"loss\": 0.5}"']
`
	for _, action := range []string{`{do: retry, set: {lr: "*0.1"}}`, `{do: stop}`} {
		t.Run(action, func(t *testing.T) {
			h := newHarness(t)
			e := h.engine()
			h.drive(e)
			tm := parse(t, "name: nan\nsentinel:\n  nan: "+action+"\n"+workload)
			info, err := e.Submit(context.Background(), RunSpec{Template: tm, FlagOnly: true})
			require.NoError(t, err)
			require.True(t, info.FlagOnly)
			r := waitDone(t, e, info.ID)
			require.Equal(t, Succeeded, r.State, r.Error)
			require.True(t, r.FlagOnly, "stored with the run")
			require.Equal(t, 1, r.Stages[0].Attempts, "not retried")
			require.Equal(t, 1.0, r.Params["lr"], "the parameters it was launched with")

			anomalies, err := e.Anomalies(context.Background(), info.ID)
			require.NoError(t, err)
			require.NotEmpty(t, anomalies)
			require.Equal(t, "nan", anomalies[0].Kind, "flagged")
			events, err := h.store.Events(context.Background(), info.ID)
			require.NoError(t, err)
			var kinds, notes []string
			for _, ev := range events {
				kinds = append(kinds, ev.Kind)
				if ev.Kind == "action_flag_only" {
					notes = append(notes, ev.Message)
				}
			}
			require.NotContains(t, kinds, "action_retry")
			require.NotContains(t, kinds, "action_stop")
			require.Len(t, notes, 1, "what the template would have done: %v", kinds)
			require.Contains(t, notes[0], "only flagged nan")
		})
	}
}

// A flag-only run out of GPU memory is not retried with other parameters:
// its stage's own retries run it again as it was launched.
func TestFlagOnlyRunKeepsItsBatchAfterCUDAOOM(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: oom
params:
  batch_size: {type: int, default: 64, min: 1, max: 4096}
sentinel:
  cuda_oom: {do: retry, set: {batch_size: "/2"}}
stages:
  - name: train
    retries: 1
    command: [/bin/sh, -c, 'if [ $0 -gt 16 ]; then echo "Traceback (most recent call last):" >&2; echo "$1" >&2; exit 1; fi', "${params.batch_size}", "`+realCUDAOOM+`"]
`)
	info, err := e.Submit(t.Context(), RunSpec{Template: tm, FlagOnly: true})
	require.NoError(t, err)
	final := waitDone(t, e, info.ID)
	require.Equal(t, Failed, final.State)
	require.Equal(t, 64.0, final.Params["batch_size"], "launched with 64, ran with 64")
	require.Equal(t, 2, final.Stages[0].Attempts, "the stage's own retry, with the same parameters")
	events, err := h.store.Events(t.Context(), info.ID)
	require.NoError(t, err)
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
	}
	require.NotContains(t, kinds, "action_retry")
	require.Contains(t, kinds, "action_flag_only")
}
