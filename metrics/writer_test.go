package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/storage"
)

// fakeStore records the batches it is given.
type fakeStore struct {
	mu      sync.Mutex
	batches [][]storage.MetricPoint
	cursors [][]storage.MetricCursor
	fail    int           // fail this many calls, then succeed
	failErr error         // the error of a failing call (default: a permanent one)
	calls   chan int      // if set, gets the size of every call when it starts
	release chan struct{} // if set, every call waits for a value (or ctx)
}

func (s *fakeStore) InsertMetrics(ctx context.Context, pts []storage.MetricPoint, curs []storage.MetricCursor) error {
	if s.calls != nil {
		s.calls <- len(pts)
	}
	if s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		if s.failErr != nil {
			return s.failErr
		}
		return errors.New("no such table: metric_points")
	}
	s.batches = append(s.batches, append([]storage.MetricPoint(nil), pts...))
	s.cursors = append(s.cursors, append([]storage.MetricCursor(nil), curs...))
	return nil
}

func (s *fakeStore) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, b := range s.batches {
		out = append(out, len(b))
	}
	return out
}

func (s *fakeStore) steps() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, b := range s.batches {
		for _, p := range b {
			out = append(out, p.Step)
		}
	}
	return out
}

func pt(step int64) storage.MetricPoint {
	return storage.MetricPoint{RunID: "r1", Stage: "train", Attempt: 1, Key: "loss", Step: step, Value: float64(step) / 10}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// never is a flush interval long enough that the timer plays no part.
const never = time.Hour

func TestWriterBatchesBySize(t *testing.T) {
	st := &fakeStore{}
	w := NewWriter(st, WriterOptions{BatchSize: 3, FlushInterval: never, Logger: quiet})
	for i := range 7 {
		w.Add(pt(int64(i)))
	}
	require.NoError(t, w.Flush(t.Context()))
	assert.Equal(t, []int{3, 3, 1}, st.sizes(), "two full batches, then the rest at Flush")
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6}, st.steps())

	// One Add bigger than a batch is split.
	w.Add(pt(7), pt(8), pt(9), pt(10), pt(11), pt(12), pt(13))
	require.NoError(t, w.Close(t.Context()))
	assert.Equal(t, []int{3, 3, 1, 3, 3, 1}, st.sizes())
	assert.Equal(t, WriterStats{Points: 14, Batches: 6}, w.Stats())
}

func TestWriterFlushWritesPartialBatch(t *testing.T) {
	st := &fakeStore{}
	w := NewWriter(st, WriterOptions{FlushInterval: never, Logger: quiet})
	defer w.Close(t.Context())
	require.NoError(t, w.Flush(t.Context()), "flushing nothing is fine")
	assert.Empty(t, st.sizes())

	w.Add(pt(1), pt(2))
	require.NoError(t, w.Flush(t.Context()))
	assert.Equal(t, []int{2}, st.sizes(), "stored by the time Flush returns")
}

func TestWriterTimerWritesPartialBatch(t *testing.T) {
	st := &fakeStore{calls: make(chan int, 10)}
	w := NewWriter(st, WriterOptions{FlushInterval: time.Millisecond, Logger: quiet})
	defer w.Close(t.Context())
	w.Add(pt(1))
	select {
	case n := <-st.calls: // no Flush: the timer wrote it
		assert.Equal(t, 1, n)
	case <-time.After(10 * time.Second):
		t.Fatal("the flush timer did not write the partial batch")
	}
	w.Add(pt(2), pt(3)) // the timer re-arms for the next partial batch
	select {
	case n := <-st.calls:
		assert.Equal(t, 2, n)
	case <-time.After(10 * time.Second):
		t.Fatal("the flush timer did not write the second partial batch")
	}
}

func TestWriterBackpressure(t *testing.T) {
	st := &fakeStore{calls: make(chan int, 10), release: make(chan struct{})}
	w := NewWriter(st, WriterOptions{BatchSize: 1, QueueBatches: 1, FlushInterval: never, Logger: quiet})
	stalled := make(chan struct{})
	w.onStall = func() { close(stalled) }

	w.Add(pt(1))
	<-st.calls   // the store is busy with batch 1 (and blocked)
	w.Add(pt(2)) // batch 2 waits in the queue (room for one)
	added := make(chan struct{})
	go func() {
		w.Add(pt(3)) // no room: Add must wait for the store
		close(added)
	}()
	<-stalled
	select {
	case <-added:
		t.Fatal("Add returned although the queue was full")
	default:
	}
	assert.Empty(t, st.sizes(), "nothing stored yet")

	// Let the store go: every point arrives, none is dropped.
	close(st.release)
	<-added
	require.NoError(t, w.Close(t.Context()))
	assert.Equal(t, []int64{1, 2, 3}, st.steps())
	s := w.Stats()
	assert.Equal(t, uint64(1), s.Stalls)
	assert.Equal(t, uint64(3), s.Points)
	assert.Zero(t, s.Dropped)
}

func TestWriterStoreErrorIsCountedAndReported(t *testing.T) {
	st := &fakeStore{fail: 1}
	w := NewWriter(st, WriterOptions{BatchSize: 2, FlushInterval: never, Logger: quiet})
	w.Add(pt(1), pt(2)) // a full batch: fails
	w.Add(pt(3))
	err := w.Flush(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such table")
	assert.Equal(t, []int64{3}, st.steps(), "the batch after the failure is stored")

	w.Add(pt(4))
	assert.NoError(t, w.Flush(t.Context()), "the error was reported once")
	require.NoError(t, w.Close(t.Context()))
	assert.Equal(t, WriterStats{Points: 2, Batches: 2, Errors: 1, Failed: 2}, w.Stats())
	p := pt(1)
	assert.Equal(t, int64(2), w.Lost(p.RunID, p.Stage, p.Attempt), "the refused points are counted for their attempt")
	assert.Zero(t, w.Lost(p.RunID, p.Stage, p.Attempt+1), "and for no other")
}

// A stage paused for a full disk is in the backlog, and in what the
// status file tells other processes, until it runs again.
func TestWriterSaysWhichStagesArePaused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status.json")
	w := NewWriter(&fakeStore{}, WriterOptions{FlushInterval: never, Logger: quiet, StatusPath: path})
	defer w.Close(t.Context())
	w.SetPaused("r1", "train", "paused: disk full, 412 KiB free")
	assert.Equal(t, "train: paused: disk full, 412 KiB free", w.Backlog().Describe("r1"))
	b, ok := ReadBacklog(path)
	require.True(t, ok, "the status file says so")
	assert.Equal(t, "train: paused: disk full, 412 KiB free", b.Describe("r1"))
	assert.Empty(t, b.Describe("r2"))
	w.SetPaused("r1", "train", "")
	assert.Empty(t, w.Backlog().Describe("r1"))
	_, ok = ReadBacklog(path)
	assert.False(t, ok, "nothing to tell once it runs again")
}

func TestWriterAfterClose(t *testing.T) {
	st := &fakeStore{}
	w := NewWriter(st, WriterOptions{FlushInterval: never, Logger: quiet})
	w.Add(pt(1))
	require.NoError(t, w.Close(t.Context()))
	assert.Equal(t, []int{1}, st.sizes(), "Close writes what was added")

	require.NoError(t, w.Close(t.Context()), "closing twice is harmless")
	w.Add(pt(2), pt(3))
	assert.ErrorIs(t, w.Flush(t.Context()), ErrWriterClosed)
	assert.Equal(t, uint64(2), w.Stats().Dropped)
	assert.Equal(t, []int{1}, st.sizes())
}

func TestWriterCloseGivesUpOnHungStore(t *testing.T) {
	st := &fakeStore{calls: make(chan int, 10), release: make(chan struct{})} // never released
	w := NewWriter(st, WriterOptions{FlushInterval: never, Logger: quiet})
	w.Add(pt(1))
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-st.calls // Close's final write is in the store
		cancel()
	}()
	assert.ErrorIs(t, w.Close(ctx), context.Canceled)
	<-w.exited // the store call was cancelled and the goroutine stopped
	assert.Equal(t, uint64(1), w.Stats().Errors)

	w.Add(pt(2))
	assert.Equal(t, uint64(2), w.Stats().Dropped, "the point of the cancelled call and the one added after Close")
	assert.ErrorIs(t, w.Flush(t.Context()), ErrWriterClosed)
	assert.NoError(t, w.Close(t.Context()))
}

func TestWriterFlushHonoursContext(t *testing.T) {
	st := &fakeStore{calls: make(chan int, 10), release: make(chan struct{})}
	w := NewWriter(st, WriterOptions{FlushInterval: never, Logger: quiet})
	w.Add(pt(1))
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-st.calls
		cancel()
	}()
	assert.ErrorIs(t, w.Flush(ctx), context.Canceled)
	close(st.release)
	require.NoError(t, w.Close(t.Context()))
	assert.Equal(t, []int64{1}, st.steps(), "the point is still written")
}

func TestWriterConcurrentProducers(t *testing.T) {
	st := &fakeStore{}
	w := NewWriter(st, WriterOptions{BatchSize: 7, QueueBatches: 1, FlushInterval: time.Millisecond, Logger: quiet})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				w.Add(pt(int64(g*1000 + i)))
				if i%100 == 0 {
					assert.NoError(t, w.Flush(t.Context()))
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Close(t.Context()))
	assert.Len(t, st.steps(), 4000)
	assert.Equal(t, uint64(4000), w.Stats().Points)
}

// A store that fails for a passing cause (disk full) loses nothing: the
// batch is tried again, the backlog says how many points wait and why, and
// everything is stored, in order, once the store works again.
func TestWriterRetriesPassingStoreFaults(t *testing.T) {
	st := &fakeStore{fail: 4, failErr: errors.New("insert 3 metric points: commit: database or disk is full")}
	w := NewWriter(st, WriterOptions{BatchSize: 2, FlushInterval: time.Millisecond, RetryMax: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer w.Close(context.Background())
	cur := func(off int64) *storage.MetricCursor {
		return &storage.MetricCursor{RunID: "r", Stage: "train", Attempt: 1, Source: "stdout", Offset: off}
	}
	w.AddWith(cur(10), point("loss", 1), point("acc", 1))
	w.AddWith(cur(20), point("loss", 2))
	deadline := time.Now().Add(5 * time.Second)
	for w.Backlog().Reason == "" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b := w.Backlog()
	assert.Equal(t, "disk full", b.Reason)
	assert.Equal(t, 3, b.Runs["r"])
	assert.Contains(t, b.Describe("r"), "3 metric points not yet stored: disk full")
	require.NoError(t, w.Flush(context.Background()))
	assert.Equal(t, []int64{1, 1, 2}, st.steps(), "all stored, in order")
	assert.Equal(t, "", w.Backlog().Reason)
	assert.Zero(t, w.Backlog().Points)
	s := w.Stats()
	assert.Equal(t, uint64(3), s.Points)
	assert.Zero(t, s.Failed)
	assert.Equal(t, uint64(4), s.Retries)
	// Each line's cursor went with its points.
	st.mu.Lock()
	var offs []int64
	for _, cs := range st.cursors {
		for _, c := range cs {
			offs = append(offs, c.Offset)
		}
	}
	st.mu.Unlock()
	assert.Equal(t, []int64{10, 20}, offs)
}

// A line's points are never split between two batches: a batch stored
// without the rest of a line would have no cursor for it.
func TestWriterKeepsALinesPointsInOneBatch(t *testing.T) {
	st := &fakeStore{}
	w := NewWriter(st, WriterOptions{BatchSize: 4, FlushInterval: time.Hour})
	cur := &storage.MetricCursor{RunID: "r", Stage: "train", Attempt: 1, Source: "stdout"}
	for i := range 3 {
		cur.Offset = int64(i)
		w.AddWith(cur, point("a", int64(i)), point("b", int64(i)), point("c", int64(i)))
	}
	require.NoError(t, w.Close(context.Background()))
	assert.Equal(t, []int{3, 3, 3}, st.sizes())
}

func point(key string, step int64) storage.MetricPoint {
	return storage.MetricPoint{RunID: "r", Stage: "train", Attempt: 1, Key: key, Step: step, Value: float64(step)}
}
