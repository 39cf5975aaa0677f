package metrics

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/storage"
)

func keysAndSteps(pts []storage.MetricPoint) []string {
	var out []string
	for _, p := range pts {
		out = append(out, fmt.Sprintf("%s@%d", p.Key, p.Step))
	}
	return out
}

func TestIngestorLine(t *testing.T) {
	st := &fakeStore{}
	w := NewWriter(st, WriterOptions{FlushInterval: never, Logger: quiet})
	in := NewIngestor(w, "r1", "train", 2, nil)
	wall := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

	pts, ok := in.Line([]byte("Epoch 1/10"), wall)
	assert.False(t, ok, "log text")
	assert.Empty(t, pts)

	pts, ok = in.Line([]byte(`{"step": 5, "loss": 0.25, "note": "x"}`), wall)
	require.True(t, ok)
	assert.Equal(t, []storage.MetricPoint{
		{RunID: "r1", Stage: "train", Attempt: 2, Key: "loss", Step: 5, Value: 0.25, Wall: wall, StepSource: "step"},
	}, pts)

	pts, ok = in.Line([]byte(`{"step": 6}`), wall)
	assert.True(t, ok, "a metric line without values still is one")
	assert.Empty(t, pts)

	require.NoError(t, w.Close(t.Context()))
	require.Len(t, st.batches, 1)
	assert.Equal(t, []string{"loss@5"}, keysAndSteps(st.batches[0]))
}

func TestIngestorSkipsStoredSteps(t *testing.T) {
	// After a restart the log is read again from the start; storage already
	// has loss up to step 2 and acc up to step 1 (MaxSteps).
	skip := map[string]int64{"loss": 2, "acc": 1}
	in := NewIngestor(nil, "r1", "train", 1, skip)
	skip["loss"] = 100 // the Ingestor keeps its own copy

	lines := []struct {
		line string
		want []string
	}{
		{`{"step":0,"loss":1,"acc":0.1}`, nil},                         // both stored
		{`{"step":1,"loss":0.9,"acc":0.2,"lr":0.1}`, []string{"lr@1"}}, // lr is new: never skipped
		{`{"step":2,"loss":0.8,"acc":0.3}`, []string{"acc@2"}},         // loss@2 stored, acc@2 not
		{`{"step":3,"loss":0.7,"acc":0.4}`, []string{"loss@3", "acc@3"}},
		{`{"step":1,"loss":0.5}`, nil}, // an old step again (e.g. a re-logged value)
	}
	for _, l := range lines {
		pts, ok := in.Line([]byte(l.line), time.Time{})
		require.True(t, ok, l.line)
		assert.Equal(t, l.want, keysAndSteps(pts), l.line)
	}
}

func TestIngestorSkipMarkOfZero(t *testing.T) {
	in := NewIngestor(nil, "r1", "s", 1, map[string]int64{"a": 0})
	pts, _ := in.Line([]byte(`{"step":0,"a":1,"b":2}`), time.Time{})
	assert.Equal(t, []string{"b@0"}, keysAndSteps(pts), "a@0 is stored; b is unknown")
	pts, _ = in.Line([]byte(`{"step":1,"a":1}`), time.Time{})
	assert.Equal(t, []string{"a@1"}, keysAndSteps(pts))
}

func openTestDB(t testing.TB, runID string) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "niuma.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.CreateRun(context.Background(), storage.Run{ID: runID, State: storage.RunQueued}, nil))
	return db
}

// TestEndToEnd follows a stage's stdout file into a real database, then
// "restarts" and reads the whole log again: nothing is stored twice.
func TestEndToEnd(t *testing.T) {
	ctx := t.Context()
	db := openTestDB(t, "run1")
	path := filepath.Join(t.TempDir(), "train", "attempt-1.stdout.log")
	require.NoError(t, mkdirFor(path))

	follow := func(skip map[string]int64, wantLines int) (metricLines int) {
		w := NewWriter(db, WriterOptions{Logger: quiet})
		in := NewIngestor(w, "run1", "train", 1, skip)
		seen := make(chan struct{}, 100)
		f := &Follower{Path: path, Poll: time.Millisecond, Logger: quiet, OnLine: func(line []byte, _ int64) {
			if _, ok := in.Line(line, time.Now()); ok {
				metricLines++
			}
			seen <- struct{}{}
		}}
		errc := make(chan error, 1)
		go func() { errc <- f.Run(ctx) }()
		for range wantLines - 1 {
			<-seen
		}
		f.Stop() // the last line has no newline: Stop delivers it
		require.NoError(t, <-errc)
		require.NoError(t, w.Close(ctx))
		return metricLines
	}

	appendFile(t, path, "starting\n")
	for s := range 3 {
		appendFile(t, path, fmt.Sprintf(`{"step": %d, "loss": %g, "acc": %g}`+"\n", s, 1/float64(s+1), float64(s)/10))
	}
	appendFile(t, path, `{"step": 3, "loss": NaN, "acc": Infinity}`)
	assert.Equal(t, 4, follow(nil, 5))

	n, err := db.CountMetricPoints(ctx, "run1")
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	series, err := db.MetricSeries(ctx, "run1", "train", "loss")
	require.NoError(t, err)
	require.Len(t, series, 4)
	assert.Equal(t, 0.5, series[1].Value)
	assert.True(t, math.IsNaN(series[3].Value), "NaN survives the round trip")
	acc, err := db.MetricSeries(ctx, "run1", "train", "acc")
	require.NoError(t, err)
	require.Len(t, acc, 4)
	assert.True(t, math.IsInf(acc[3].Value, 1))

	// Restart: read the same log again with the steps already stored.
	skip, err := db.MaxSteps(ctx, "run1", "train", 1)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"loss": 3, "acc": 3}, skip)
	appendFile(t, path, "\n"+`{"step": 4, "loss": 0.1, "acc": 0.9}`)
	assert.Equal(t, 5, follow(skip, 6))
	n, err = db.CountMetricPoints(ctx, "run1")
	require.NoError(t, err)
	assert.Equal(t, 10, n, "only step 4 was new")
}

func mkdirFor(path string) error { return os.MkdirAll(filepath.Dir(path), 0o755) }
