package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"niuma/storage"
)

// Store is what the Writer needs from storage; *storage.DB implements it.
// InsertMetricPoints must not keep pts after it returns: the Writer reuses
// the slice for the next batch.
type Store interface {
	InsertMetricPoints(ctx context.Context, pts []storage.MetricPoint) error
}

// Writer defaults.
const (
	DefaultBatchSize     = 4096
	DefaultFlushInterval = 250 * time.Millisecond
	DefaultQueueBatches  = 4
)

// ErrWriterClosed is returned by Flush after Close.
var ErrWriterClosed = errors.New("metrics writer is closed")

// WriterOptions tune a Writer; zero values take the defaults.
type WriterOptions struct {
	// BatchSize is the number of points per InsertMetricPoints call
	// (default 4096).
	BatchSize int
	// FlushInterval bounds how long a point waits in a partial batch
	// before it is written (default 250 ms).
	FlushInterval time.Duration
	// QueueBatches is how many full batches may wait for the store before
	// Add blocks (default 4).
	QueueBatches int
	// Logger receives store errors (default slog.Default()).
	Logger *slog.Logger
}

// WriterStats counts what a Writer did since it was created.
type WriterStats struct {
	Points  uint64 // points stored
	Batches uint64 // successful InsertMetricPoints calls
	Errors  uint64 // failed InsertMetricPoints calls
	Failed  uint64 // points in failed calls: they are lost
	Dropped uint64 // points added after Close (or after an aborted Close): lost
	Stalls  uint64 // Add calls that had to wait for the store (backpressure)
}

// Writer batches metric points into a Store from one goroutine, so that the
// code producing points (a stage's output reader) is never slowed down by
// one SQLite transaction per line.
//
// Points collect in a batch; a full batch (BatchSize points) goes to a
// bounded queue that the writer goroutine drains; a partial batch is written
// at the latest FlushInterval after its first point, or by Flush.
//
// Backpressure: when the store falls behind and QueueBatches full batches
// are waiting, Add blocks until the store has taken one. Points are never
// dropped for speed; a producer that must not block should not call Add on
// its critical path (the metrics path is designed to be much faster than a
// training loop can print, see docs/BENCHMARKS.md). Memory stays bounded:
// at most QueueBatches+2 batches exist at a time.
//
// Store errors are logged and counted (Stats) and returned by the next
// Flush; the points of a failed call are lost. A Writer never panics. It is
// safe for concurrent use.
type Writer struct {
	store    Store
	size     int
	interval time.Duration
	log      *slog.Logger

	// sem is a lock (a channel, so that Close and Flush can give up on it
	// when their context ends). It guards buf, armed and closed; Add holds
	// it while it waits for queue space, which serialises producers.
	sem    chan struct{}
	buf    []storage.MetricPoint
	armed  bool // a kick is pending or the flush timer runs
	closed bool

	q      chan request               // full batches and Flush/Close markers
	free   chan []storage.MetricPoint // stored batches, for reuse
	kick   chan struct{}              // "buf got its first point": arm the timer
	quit   chan struct{}              // closed by an aborted Close
	exited chan struct{}              // closed when the goroutine returns

	ctx       context.Context // for store calls; cancelled by an aborted Close
	cancel    context.CancelFunc
	abortOnce sync.Once

	points, batches, errs, failed, dropped, stalls atomic.Uint64

	closedWarn atomic.Bool
	lastLog    time.Time // of a store error; writer goroutine only

	onStall func() // test hook: called when Add is about to wait
}

type request struct {
	pts  []storage.MetricPoint
	done chan error // non-nil for Flush and Close: gets the errors since the last one
	stop bool       // Close: the goroutine returns after this request
}

// NewWriter starts a Writer on store. Call Close to stop it.
func NewWriter(store Store, opts WriterOptions) *Writer {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.QueueBatches <= 0 {
		opts.QueueBatches = DefaultQueueBatches
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		store:    store,
		size:     opts.BatchSize,
		interval: opts.FlushInterval,
		log:      opts.Logger,
		sem:      make(chan struct{}, 1),
		q:        make(chan request, opts.QueueBatches),
		free:     make(chan []storage.MetricPoint, opts.QueueBatches+2),
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		exited:   make(chan struct{}),
		ctx:      ctx,
		cancel:   cancel,
	}
	w.buf = w.newBuf()
	go w.loop()
	return w
}

// Add queues points for writing; it copies them, so the caller may reuse
// pts. It blocks only while the store is QueueBatches batches behind (see
// Writer). Points added after Close are dropped, logged once and counted.
func (w *Writer) Add(pts ...storage.MetricPoint) {
	if len(pts) == 0 {
		return
	}
	w.sem <- struct{}{}
	defer func() { <-w.sem }()
	if !w.closed {
		select {
		case <-w.quit: // an aborted Close
			w.closed = true
		default:
		}
	}
	if w.closed {
		w.dropped.Add(uint64(len(pts)))
		if !w.closedWarn.Swap(true) {
			w.log.Warn("metric points added after the writer was closed are dropped", "points", len(pts))
		}
		return
	}
	for len(pts) > 0 {
		n := copy(w.buf[len(w.buf):cap(w.buf)], pts)
		w.buf = w.buf[:len(w.buf)+n]
		pts = pts[n:]
		if len(w.buf) == cap(w.buf) {
			w.enqueue(w.buf)
			w.buf = w.newBuf()
		}
	}
	if len(w.buf) > 0 && !w.armed {
		w.armed = true
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// enqueue hands a full batch to the writer goroutine, waiting for room.
// Call with sem held.
func (w *Writer) enqueue(pts []storage.MetricPoint) {
	r := request{pts: pts}
	select {
	case w.q <- r:
		return
	default:
	}
	w.stalls.Add(1)
	if w.onStall != nil {
		w.onStall()
	}
	select {
	case w.q <- r:
	case <-w.quit:
		w.dropped.Add(uint64(len(pts)))
	}
}

// lock takes sem unless ctx ends or the writer was aborted first.
func (w *Writer) lock(ctx context.Context) error {
	select {
	case w.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case w.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		return ErrWriterClosed
	}
}

// send queues a marker request. Call with sem held.
func (w *Writer) send(ctx context.Context, r request) error {
	select {
	case w.q <- r:
		return nil
	default:
	}
	select {
	case w.q <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		return ErrWriterClosed
	}
}

// Flush waits until every point added before the call is stored (or its
// store call failed). It returns the store errors seen since the previous
// Flush, ctx's error if ctx ends first, or ErrWriterClosed after Close.
func (w *Writer) Flush(ctx context.Context) error {
	if err := w.lock(ctx); err != nil {
		return err
	}
	if w.closed {
		<-w.sem
		return ErrWriterClosed
	}
	r := request{done: make(chan error, 1)}
	if len(w.buf) > 0 {
		r.pts = w.buf
	}
	if err := w.send(ctx, r); err != nil {
		<-w.sem
		return err
	}
	if r.pts != nil {
		w.buf = w.newBuf()
	}
	<-w.sem
	return w.wait(ctx, r.done)
}

func (w *Writer) wait(ctx context.Context, done chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		return ErrWriterClosed
	}
}

// Close writes every point added before it, stops the writer goroutine and
// returns the store errors since the last Flush. If ctx ends first, Close
// cancels the store call in progress, drops what is still queued (counted
// in Stats.Dropped) and returns ctx's error. Closing twice is harmless.
func (w *Writer) Close(ctx context.Context) error {
	if err := w.lock(ctx); err != nil {
		w.abort()
		if errors.Is(err, ErrWriterClosed) {
			return nil // aborted before
		}
		return err
	}
	if w.closed {
		<-w.sem
		return nil
	}
	w.closed = true
	r := request{pts: w.buf, done: make(chan error, 1), stop: true}
	w.buf = nil
	err := w.send(ctx, r)
	<-w.sem
	if err != nil {
		w.dropped.Add(uint64(len(r.pts)))
		w.abort()
		return err
	}
	select {
	case err := <-r.done:
		<-w.exited
		return err
	case <-ctx.Done():
		w.abort()
		return ctx.Err()
	}
}

// abort stops the writer goroutine without writing what is queued.
func (w *Writer) abort() {
	w.abortOnce.Do(func() {
		w.cancel()
		close(w.quit)
	})
}

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	return WriterStats{
		Points:  w.points.Load(),
		Batches: w.batches.Load(),
		Errors:  w.errs.Load(),
		Failed:  w.failed.Load(),
		Dropped: w.dropped.Load(),
		Stalls:  w.stalls.Load(),
	}
}

func (w *Writer) newBuf() []storage.MetricPoint {
	select {
	case b := <-w.free:
		return b[:0]
	default:
		return make([]storage.MetricPoint, 0, w.size)
	}
}

func (w *Writer) recycle(b []storage.MetricPoint) {
	if cap(b) != w.size {
		return
	}
	select {
	case w.free <- b:
	default:
	}
}

// loop is the writer goroutine.
func (w *Writer) loop() {
	defer close(w.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	timerOn := false
	var errs []error // store errors since the last Flush/Close
	for {
		select {
		case r := <-w.q:
			if err := w.write(r.pts); err != nil {
				errs = append(errs, err)
			}
			if r.done != nil {
				r.done <- errors.Join(errs...)
				errs = nil
			}
			if r.stop {
				return
			}
		case <-w.kick:
			if !timerOn {
				timer.Reset(w.interval)
				timerOn = true
			}
		case <-timer.C:
			timerOn = false
			select {
			case w.sem <- struct{}{}:
			default:
				// A producer holds the lock (it may wait for queue room,
				// which this goroutine provides): try again later.
				timer.Reset(w.interval)
				timerOn = true
				continue
			}
			var pts []storage.MetricPoint
			if len(w.buf) > 0 {
				pts = w.buf
				w.buf = w.newBuf()
			}
			w.armed = false
			<-w.sem
			if err := w.write(pts); err != nil {
				errs = append(errs, err)
			}
		case <-w.quit:
			return
		}
	}
}

// write stores one batch and recycles its slice.
func (w *Writer) write(pts []storage.MetricPoint) error {
	if len(pts) == 0 {
		return nil
	}
	defer w.recycle(pts)
	err := w.store.InsertMetricPoints(w.ctx, pts)
	if err == nil {
		w.points.Add(uint64(len(pts)))
		w.batches.Add(1)
		return nil
	}
	n := w.errs.Add(1)
	w.failed.Add(uint64(len(pts)))
	// Log the first failure, then at most one line every 10 s.
	if now := time.Now(); n == 1 || now.Sub(w.lastLog) >= 10*time.Second {
		w.lastLog = now
		w.log.Error("metric points could not be stored and are lost",
			"points", len(pts), "failures_so_far", n, "err", err)
	}
	return fmt.Errorf("store %d metric points: %w", len(pts), err)
}
