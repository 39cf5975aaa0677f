package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The next owner rebuilds which stages are ready from the stored states
// alone: a chain stopped with one stage done, one running and two queued
// goes on from where it was, each stage run once.
func TestNextOwnerGoesOnThroughAChain(t *testing.T) {
	h := newHarness(t)
	first := h.engine()
	stopFirst := h.drive(first)
	tm := parse(t, `
name: chain
stages:
  - name: a
    command: [sh, -c, 'echo a >> ran']
  - name: b
    needs: [a]
    command: [sh, -c, 'echo b >> ran; touch b-started; while [ ! -f go ]; do sleep 0.05; done']
  - name: c
    needs: [b]
    command: [sh, -c, 'echo c >> ran']
  - name: d
    needs: [c]
    command: [sh, -c, 'echo d >> ran']
`)
	info, err := first.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "go"), nil, 0o644) })
	untilFile(t, filepath.Join(info.Dir, "b-started"))
	stopFirst()

	r, err := first.Run(context.Background(), info.ID)
	require.NoError(t, err)
	require.Equal(t, []State{Succeeded, Running, Queued, Queued},
		[]State{r.Stages[0].State, r.Stages[1].State, r.Stages[2].State, r.Stages[3].State})

	second := h.engine()
	h.drive(second)
	letGo(t, info.Dir)
	r = waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	for _, s := range r.Stages {
		require.Equal(t, 1, s.Attempts, s.Name)
	}
	ran, err := os.ReadFile(filepath.Join(info.Dir, "ran"))
	require.NoError(t, err)
	require.Equal(t, "a\nb\nc\nd\n", string(ran), "each stage ran once, in order")
}

// A failure at the head of a long chain cancels every stage after it on
// the events of that failure: the pass that skips a stage also sees the
// stages the skip makes ready. The engine polls storage only once an hour
// here, so a cascade that needed a pass per stage would never end.
func TestAFailureCancelsTheRestOfAChainAtOnce(t *testing.T) {
	h := newHarness(t)
	e := h.engine(func(o *Options) { o.PollInterval = time.Hour })
	h.drive(e)
	var y strings.Builder
	y.WriteString("name: chain\nstages:\n  - name: s0\n    command: [\"false\"]\n")
	const n = 200
	for i := 1; i < n; i++ {
		fmt.Fprintf(&y, "  - name: s%d\n    needs: [s%d]\n    command: [\"true\"]\n", i, i-1)
	}
	info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, y.String())})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Failed, r.State)
	require.Equal(t, Failed, r.Stages[0].State)
	for i, s := range r.Stages[1:] {
		why := fmt.Sprintf("skipped: stage s%d was cancelled", i)
		if i == 0 {
			why = "skipped: stage s0 failed"
		}
		require.Equal(t, Cancelled, s.State, s.Name)
		require.Equal(t, why, s.Reason)
		require.Zero(t, s.Attempts, s.Name)
	}
}
