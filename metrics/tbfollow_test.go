package metrics

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/storage"
)

type tbProblem struct {
	path string
	err  error
}

// tbFollowTest runs a TBFollower with a short poll; each poll's points
// arrive on pts, problems on probs.
func tbFollowTest(t *testing.T, f *TBFollower) (pts chan []storage.MetricPoint, probs chan tbProblem, errc chan error) {
	t.Helper()
	pts = make(chan []storage.MetricPoint, 100)
	probs = make(chan tbProblem, 100)
	errc = make(chan error, 1)
	f.Poll = time.Millisecond
	f.Logger = quiet
	f.OnPoints = func(p []storage.MetricPoint) { pts <- append([]storage.MetricPoint(nil), p...) }
	f.OnProblem = func(path string, err error) { probs <- tbProblem{path, err} }
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() { errc <- f.Run(ctx) }()
	return pts, probs, errc
}

func nextPoints(t *testing.T, ch chan []storage.MetricPoint) []storage.MetricPoint {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no points delivered")
		return nil
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestTBFollowerFollowsEventFilesWhileWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb") // created later by the workload
	store := &fakeStore{}
	w := NewWriter(store, WriterOptions{FlushInterval: never, Logger: quiet})
	f := &TBFollower{Dir: dir, RunID: "r1", Stage: "train", Attempt: 2, Writer: w}
	pts, probs, errc := tbFollowTest(t, f)

	main := filepath.Join(dir, "events.out.tfevents.1700000000.host.1.0")
	rec1 := AppendTFRecord(nil, tbEvent(1.7e9, 1, simpleValue("loss", 0.5)))
	rec2 := AppendTFRecord(nil, tbEvent(1.7e9+1, 2, simpleValue("loss", 0.25),
		tensorValue("acc", "scalars", tensor(dtFloat, content(le32(0.75))))))
	// The first record and half of the second: the writer is mid-record.
	appendBytes(t, main, AppendTFRecord(nil, fileVersionEvent()))
	appendBytes(t, main, append(append([]byte(nil), rec1...), rec2[:10]...))
	got := nextPoints(t, pts)
	assert.Equal(t, []storage.MetricPoint{{RunID: "r1", Stage: "train", Attempt: 2, Key: "loss", Step: 1,
		Value: 0.5, Wall: time.Unix(1_700_000_000, 0), StepSource: "tensorboard"}}, got)

	appendBytes(t, main, rec2[10:])
	got = nextPoints(t, pts)
	require.Len(t, got, 2)
	assert.Equal(t, "loss", got[0].Key)
	assert.Equal(t, "acc", got[1].Key)
	assert.Equal(t, 0.75, got[1].Value)

	// A second writer in a subdirectory (add_scalars): its dir prefixes keys.
	val := filepath.Join(dir, "val", "events.out.tfevents.1700000001.host.1.1")
	appendBytes(t, val, AppendTFRecord(nil, tbEvent(1.7e9+2, 2, simpleValue("loss", 0.375))))
	got = nextPoints(t, pts)
	require.Len(t, got, 1)
	assert.Equal(t, "val/loss", got[0].Key)

	// A damaged record in the main file: reported once, the rest still read.
	bad := AppendTFRecord(nil, tbEvent(1.7e9+3, 3, simpleValue("loss", 9)))
	bad[len(bad)-1] ^= 1
	rec4 := AppendTFRecord(nil, tbEvent(1.7e9+4, 4, simpleValue("loss", 0.125)))
	appendBytes(t, main, append(append(append([]byte(nil), bad...), bad...), rec4...))
	got = nextPoints(t, pts)
	require.Len(t, got, 1)
	assert.Equal(t, int64(4), got[0].Step)
	p := <-probs
	assert.Equal(t, main, p.path)
	assert.ErrorIs(t, p.err, ErrCorruptData)

	// The val writer dies mid-record; Stop reads what is there and says so.
	appendBytes(t, val, AppendTFRecord(nil, tbEvent(1.7e9+5, 5, simpleValue("loss", 1)))[:7])
	f.Stop()
	require.NoError(t, <-errc)
	p = <-probs
	assert.Equal(t, val, p.path)
	assert.ErrorContains(t, p.err, "truncated")
	select {
	case p := <-probs:
		t.Fatalf("problem reported twice: %v", p)
	default:
	}

	require.NoError(t, w.Close(t.Context()))
	var keys []string
	for _, b := range store.batches {
		for _, p := range b {
			keys = append(keys, p.Key)
		}
	}
	assert.Equal(t, []string{"loss", "loss", "acc", "val/loss", "loss"}, keys)
}

func TestTBFollowerSkipsStoredStepsAndReadsSortedFiles(t *testing.T) {
	dir := t.TempDir()
	// Two files of one writer that restarted: read in name (= time) order.
	appendBytes(t, filepath.Join(dir, "events.out.tfevents.2.host"),
		eventFile(tbEvent(2, 3, simpleValue("loss", 3)), tbEvent(2, 4, simpleValue("loss", 4))))
	appendBytes(t, filepath.Join(dir, "events.out.tfevents.1.host"),
		eventFile(tbEvent(1, 1, simpleValue("loss", 1)), tbEvent(1, 2, simpleValue("loss", 2), simpleValue("lr", 0.1))))
	appendBytes(t, filepath.Join(dir, "notes.txt"), []byte("not an event file"))

	var mu sync.Mutex
	var steps []int64
	var keys []string
	f := &TBFollower{Dir: dir, RunID: "r", Stage: "s", Skip: map[string]int64{"loss": 3}, Logger: quiet,
		OnPoints: func(pts []storage.MetricPoint) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range pts {
				steps = append(steps, p.Step)
				keys = append(keys, p.Key)
			}
		}}
	f.Stop() // before Run: one pass, then return
	require.NoError(t, f.Run(t.Context()))
	assert.Equal(t, []int64{2, 4}, steps)
	sort.Strings(keys)
	assert.Equal(t, []string{"loss", "lr"}, keys)
}

func TestTBFollowerIgnoresFilesOfEarlierAttempts(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "events.out.tfevents.1.host")
	appendBytes(t, old, eventFile(tbEvent(1, 1, simpleValue("loss", 1))))
	start := time.Now()
	require.NoError(t, os.Chtimes(old, start.Add(-time.Minute), start.Add(-time.Minute)))
	appendBytes(t, filepath.Join(dir, "events.out.tfevents.2.host"), eventFile(tbEvent(2, 7, simpleValue("loss", 2))))

	var steps []int64
	f := &TBFollower{Dir: dir, Since: start.Add(-time.Second), Logger: quiet,
		OnPoints: func(pts []storage.MetricPoint) {
			for _, p := range pts {
				steps = append(steps, p.Step)
			}
		}}
	f.Stop()
	require.NoError(t, f.Run(t.Context()))
	assert.Equal(t, []int64{7}, steps)
}

func TestTBFollowerWithoutDirectory(t *testing.T) {
	f := &TBFollower{Dir: filepath.Join(t.TempDir(), "absent"), Logger: quiet}
	f.Stop()
	require.NoError(t, f.Run(t.Context()))
}
