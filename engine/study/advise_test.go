package study

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/template"
)

// Advice learns from the template's runs that share their other values
// with the most others, keeps those values in what it suggests, and says
// the same thing twice for the same archive; with one run it declines.
func TestAdviseFromTheArchive(t *testing.T) {
	e, db := newEngine(t)
	ctx := context.Background()
	tm, err := template.Parse("ramp.yaml", []byte(strings.Replace(rampYAML, "params:", "tune: {search: [x]}\nparams:", 1)))
	require.NoError(t, err)
	submit := func(x float64, steps int64) {
		t.Helper()
		v := tm.Defaults()
		v["x"], v["steps"] = x, steps
		info, err := e.Submit(ctx, engine.RunSpec{Template: tm, Values: v})
		require.NoError(t, err)
		require.Eventually(t, func() bool { r, _ := e.Run(ctx, info.ID); return r.State.Done() }, time.Minute, 20*time.Millisecond)
		r, err := e.Run(ctx, info.ID)
		require.NoError(t, err)
		require.Equal(t, engine.Succeeded, r.State)
	}

	submit(0.9, 2)
	_, err = Advise(ctx, db, e, tm)
	var few *TooFewRuns
	require.True(t, errors.As(err, &few), "%v", err)
	require.Equal(t, 1, few.Have)
	require.EqualError(t, err, "a suggestion needs 2 succeeded runs of ramp that report score with the same other values; the archive has 1")

	submit(0.3, 2)
	submit(0.8, 3)
	submit(0.5, 3)
	submit(0.2, 3)
	a, err := Advise(ctx, db, e, tm)
	require.NoError(t, err)
	require.Equal(t, 3, a.Runs, "the three runs of 3 steps, the largest group")
	require.Equal(t, int64(3), a.Values["steps"], "it keeps the group's other values")
	require.Equal(t, []string{"steps=3"}, a.Unlike, "and says what sets them apart from the defaults")
	require.Equal(t, []string{"x"}, a.Searched)
	x, ok := a.Values["x"].(float64)
	require.True(t, ok, "%#v", a.Values)
	require.GreaterOrEqual(t, x, 0.01)
	require.LessOrEqual(t, x, 1.0)
	require.Equal(t, 3, a.Prediction.Trials)
	require.LessOrEqual(t, a.Prediction.Low, a.Prediction.Mean)
	require.GreaterOrEqual(t, a.Prediction.High, a.Prediction.Mean)
	require.Equal(t, "score", a.Objective)
	require.NoError(t, tm.Validate(a.Values), "a run it suggests can be launched as it is")

	again, err := Advise(ctx, db, e, tm)
	require.NoError(t, err)
	require.Equal(t, a, again, "the same archive, the same advice")

	noObjective, err := template.Parse("n.yaml", []byte("name: n\nparams:\n  x: {type: float, default: 0.5, min: 0, max: 1}\nstages:\n  - name: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = Advise(ctx, db, e, noObjective)
	require.ErrorContains(t, err, "declares no objective")
}
