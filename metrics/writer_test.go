package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
	fail    int           // fail this many calls, then succeed
	calls   chan int      // if set, gets the size of every call when it starts
	release chan struct{} // if set, every call waits for a value (or ctx)
}

func (s *fakeStore) InsertMetricPoints(ctx context.Context, pts []storage.MetricPoint) error {
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
		return errors.New("disk full")
	}
	s.batches = append(s.batches, append([]storage.MetricPoint(nil), pts...))
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
	assert.Contains(t, err.Error(), "disk full")
	assert.Equal(t, []int64{3}, st.steps(), "the batch after the failure is stored")

	w.Add(pt(4))
	assert.NoError(t, w.Flush(t.Context()), "the error was reported once")
	require.NoError(t, w.Close(t.Context()))
	assert.Equal(t, WriterStats{Points: 2, Batches: 2, Errors: 1, Failed: 2}, w.Stats())
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
	assert.Equal(t, uint64(1), w.Stats().Dropped)
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
