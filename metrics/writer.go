package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"niuma/storage"
)

// Store is what the Writer needs from storage; *storage.DB implements it.
// InsertMetrics stores the points and the cursors in one transaction; it
// must not keep pts after it returns: the Writer reuses the slice for the
// next batch.
type Store interface {
	InsertMetrics(ctx context.Context, pts []storage.MetricPoint, cursors []storage.MetricCursor) error
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
	// RetryMax bounds the wait between two tries of a batch the store
	// refused for a passing cause (disk full, I/O error, lock held):
	// 250 ms, doubling, at most RetryMax (default 5 s).
	RetryMax time.Duration
	// StatusPath, when set, is a small file where the writer says, while
	// its store fails, how many points wait and why (see ReadBacklog), so
	// that other processes (niuma show) can tell the user. The file is
	// allocated when the writer starts, so that writing it needs no new
	// disk space when the disk is full.
	StatusPath string
}

// WriterStats counts what a Writer did since it was created.
type WriterStats struct {
	Points  uint64 // points stored
	Batches uint64 // successful InsertMetricPoints calls
	Errors  uint64 // failed InsertMetricPoints calls
	Failed  uint64 // points the store refused for good (e.g. their run was deleted): lost
	Dropped uint64 // points added after Close (or after an aborted Close): not stored
	Stalls  uint64 // Add calls that had to wait for the store (backpressure)
	Retries uint64 // tries of a batch the store refused for a passing cause
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
// Store faults that pass (storage.Transient: the disk is full, an I/O
// error, another process holds the database's lock past the busy timeout)
// lose nothing: the batch is tried again, 250 ms after the fault, doubling
// up to RetryMax, while later batches queue behind it; when the queue is
// full, Add blocks, so a stream's reader stops reading (its log file keeps
// the rest) until the store works again. Backlog says how many points wait
// and why, and StatusPath tells other processes. A point is only ever
// stored with the cursor of the line that produced it, so a process that
// stops while points wait has stored neither: its successor reads those
// lines again from the stored cursor.
//
// Other store errors (the run was deleted) are logged and counted (Stats)
// and returned by the next Flush; the points of such a call are lost. A
// Writer never panics. It is safe for concurrent use.
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
	curs   []storage.MetricCursor // the latest cursor of each source in buf
	armed  bool                   // a kick is pending or the flush timer runs
	closed bool

	q      chan request               // full batches and Flush/Close markers
	free   chan []storage.MetricPoint // stored batches, for reuse
	kick   chan struct{}              // "buf got its first point": arm the timer
	quit   chan struct{}              // closed by an aborted Close
	exited chan struct{}              // closed when the goroutine returns

	ctx       context.Context // for store calls; cancelled by an aborted Close
	cancel    context.CancelFunc
	abortOnce sync.Once

	points, batches, errs, failed, dropped, stalls, retries atomic.Uint64

	retryMax   time.Duration
	statusPath string
	bmu        sync.Mutex                   // guards the backlog
	pending    map[string]int               // run -> points added and not yet stored or given up
	paused     map[string]map[string]string // run -> stage -> why it is paused (SetPaused)
	lost       map[attemptKey]int64         // points the store refused for good, per attempt
	fault      string                       // why the store fails now ("" when it works)
	faultSince time.Time
	status     *statusFile

	closedWarn atomic.Bool
	lastLog    time.Time // of a store error; writer goroutine only

	onStall func() // test hook: called when Add is about to wait
}

type request struct {
	pts  []storage.MetricPoint
	curs []storage.MetricCursor
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
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Second
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

		retryMax:   opts.RetryMax,
		statusPath: opts.StatusPath,
		pending:    map[string]int{},
	}
	if opts.StatusPath != "" {
		st, err := openStatusFile(opts.StatusPath)
		if err != nil {
			w.log.Warn("cannot prepare the metrics status file; other processes will not see stalled points", "path", opts.StatusPath, "err", err)
		}
		w.status = st
	}
	w.buf = w.newBuf()
	go w.loop()
	return w
}

// Add queues points for writing; it copies them, so the caller may reuse
// pts. It blocks only while the store is QueueBatches batches behind (see
// Writer). Points added after Close are dropped, logged once and counted.
func (w *Writer) Add(pts ...storage.MetricPoint) { w.AddWith(nil, pts...) }

// AddWith queues points together with the cursor of the reader that
// produced them (nil for none): they are stored in one transaction, all in
// the same batch, so the cursor is never stored without its points or the
// points without it.
func (w *Writer) AddWith(cur *storage.MetricCursor, pts ...storage.MetricPoint) {
	if len(pts) == 0 && cur == nil {
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
	w.addPending(pts)
	if cur == nil {
		for len(pts) > 0 {
			n := copy(w.buf[len(w.buf):cap(w.buf)], pts)
			w.buf = w.buf[:len(w.buf)+n]
			pts = pts[n:]
			if len(w.buf) == cap(w.buf) {
				w.cut()
			}
		}
	} else {
		// One line's points and its cursor stay in one batch.
		if len(w.buf) > 0 && len(w.buf)+len(pts) > w.size {
			w.cut()
		}
		w.buf = append(w.buf, pts...)
		w.setCursor(*cur)
		if len(w.buf) >= w.size {
			w.cut()
		}
	}
	if (len(w.buf) > 0 || len(w.curs) > 0) && !w.armed {
		w.armed = true
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// setCursor records cur as its source's latest in the batch being built.
func (w *Writer) setCursor(cur storage.MetricCursor) {
	for i := range w.curs {
		c := &w.curs[i]
		if c.Source == cur.Source && c.Attempt == cur.Attempt && c.Stage == cur.Stage && c.RunID == cur.RunID {
			*c = cur
			return
		}
	}
	w.curs = append(w.curs, cur)
}

// cut hands the batch being built to the writer goroutine and starts a
// new one. Call with sem held.
func (w *Writer) cut() {
	w.enqueue(w.buf, w.curs)
	w.buf, w.curs = w.newBuf(), nil
}

// enqueue hands a full batch to the writer goroutine, waiting for room.
// Call with sem held.
func (w *Writer) enqueue(pts []storage.MetricPoint, curs []storage.MetricCursor) {
	r := request{pts: pts, curs: curs}
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
		w.donePending(pts)
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
	if len(w.buf) > 0 || len(w.curs) > 0 {
		r.pts, r.curs = w.buf, w.curs
	}
	if err := w.send(ctx, r); err != nil {
		<-w.sem
		return err
	}
	if r.pts != nil || r.curs != nil {
		w.buf, w.curs = w.newBuf(), nil
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
	r := request{pts: w.buf, curs: w.curs, done: make(chan error, 1), stop: true}
	w.buf, w.curs = nil, nil
	err := w.send(ctx, r)
	<-w.sem
	if err != nil {
		w.dropped.Add(uint64(len(r.pts)))
		w.donePending(r.pts)
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
		Retries: w.retries.Load(),
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
			if err := w.write(r.pts, r.curs); err != nil {
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
			var (
				pts  []storage.MetricPoint
				curs []storage.MetricCursor
			)
			if len(w.buf) > 0 || len(w.curs) > 0 {
				pts, curs = w.buf, w.curs
				w.buf, w.curs = w.newBuf(), nil
			}
			w.armed = false
			<-w.sem
			if err := w.write(pts, curs); err != nil {
				errs = append(errs, err)
			}
		case <-w.quit:
			return
		}
	}
}

// write stores one batch and recycles its slice. A passing store fault is
// retried until the batch is stored or the writer is aborted.
func (w *Writer) write(pts []storage.MetricPoint, curs []storage.MetricCursor) error {
	if len(pts) == 0 && len(curs) == 0 {
		return nil
	}
	defer w.recycle(pts)
	wait := 250 * time.Millisecond
	for {
		err := w.store.InsertMetrics(w.ctx, pts, curs)
		if err == nil {
			w.points.Add(uint64(len(pts)))
			w.batches.Add(1)
			w.donePending(pts)
			w.setFault("")
			return nil
		}
		reason, passing := storage.Transient(err)
		if !passing || w.ctx.Err() != nil {
			if w.ctx.Err() != nil {
				// The writer stops: not stored, nor their cursors, so the
				// next owner reads them again.
				w.dropped.Add(uint64(len(pts)))
			} else {
				w.failed.Add(uint64(len(pts)))
				w.addLost(pts)
			}
			w.donePending(pts)
			n := w.errs.Add(1)
			// Log the first failure, then at most one line every 10 s.
			if now := time.Now(); n == 1 || now.Sub(w.lastLog) >= 10*time.Second {
				w.lastLog = now
				w.log.Error("metric points could not be stored and are lost",
					"points", len(pts), "failures_so_far", n, "err", err)
			}
			return fmt.Errorf("store %d metric points: %w", len(pts), err)
		}
		if w.setFault(reason) {
			w.log.Warn("metric points wait for the database; they are kept and written when it works again",
				"points", w.Backlog().Points, "why", reason, "err", err)
		}
		w.retries.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.quit:
			t.Stop()
		}
		wait = min(2*wait, w.retryMax)
	}
}

// Backlog is what waits in a Writer: points added and not yet stored, per
// run, and why the store fails, if it does.
type Backlog struct {
	Points int            `json:"points"`
	Runs   map[string]int `json:"runs,omitempty"`
	Reason string         `json:"reason,omitempty"` // "disk full", ...; "" while the store works
	Since  time.Time      `json:"since,omitzero"`   // when the store began to fail
	// Paused: per run, the stages its executor paused because their disk
	// is full, each with why ("train: paused: disk full, 412 KiB free"):
	// said here because the full disk may keep it from being stored.
	Paused map[string][]string `json:"paused,omitempty"`
}

// Waiting is the number of a run's points that wait because the store
// fails ("" reason: none wait for that reason).
func (b Backlog) Waiting(runID string) (int, string) {
	if b.Reason == "" {
		return 0, ""
	}
	return b.Runs[runID], b.Reason
}

// Backlog returns what waits now.
func (w *Writer) Backlog() Backlog {
	w.bmu.Lock()
	defer w.bmu.Unlock()
	b := Backlog{Reason: w.fault, Since: w.faultSince}
	for run, stages := range w.paused {
		if b.Paused == nil {
			b.Paused = map[string][]string{}
		}
		for stage, why := range stages {
			b.Paused[run] = append(b.Paused[run], stage+": "+why)
		}
		sort.Strings(b.Paused[run])
	}
	if len(w.pending) > 0 {
		b.Runs = make(map[string]int, len(w.pending))
		for r, n := range w.pending {
			b.Runs[r] = n
			b.Points += n
		}
	}
	return b
}

func (w *Writer) addPending(pts []storage.MetricPoint) {
	if len(pts) == 0 {
		return
	}
	w.bmu.Lock()
	for i := 0; i < len(pts); {
		j := i + 1
		for j < len(pts) && pts[j].RunID == pts[i].RunID {
			j++
		}
		w.pending[pts[i].RunID] += j - i
		i = j
	}
	w.bmu.Unlock()
}

func (w *Writer) donePending(pts []storage.MetricPoint) {
	if len(pts) == 0 {
		return
	}
	w.bmu.Lock()
	for i := 0; i < len(pts); {
		j := i + 1
		for j < len(pts) && pts[j].RunID == pts[i].RunID {
			j++
		}
		if n := w.pending[pts[i].RunID] - (j - i); n > 0 {
			w.pending[pts[i].RunID] = n
		} else {
			delete(w.pending, pts[i].RunID)
		}
		i = j
	}
	w.bmu.Unlock()
}

// attemptKey names one attempt of a stage of a run.
type attemptKey struct {
	run, stage string
	attempt    int
}

func (w *Writer) addLost(pts []storage.MetricPoint) {
	w.bmu.Lock()
	defer w.bmu.Unlock()
	if w.lost == nil {
		w.lost = map[attemptKey]int64{}
	}
	for _, p := range pts {
		w.lost[attemptKey{p.RunID, p.Stage, p.Attempt}]++
	}
}

// Lost is how many of an attempt's points the store refused for good
// (Stats.Failed, per attempt): points that are in no archive.
func (w *Writer) Lost(runID, stage string, attempt int) int64 {
	w.bmu.Lock()
	defer w.bmu.Unlock()
	return w.lost[attemptKey{runID, stage, attempt}]
}

// SetPaused records that a stage of a run is paused, and why ("" once it
// runs again), for Backlog and the status file: a pause for a full disk is
// said where the disk being full cannot keep it from being read.
func (w *Writer) SetPaused(runID, stage, why string) {
	w.bmu.Lock()
	if why == "" && w.paused[runID][stage] == "" {
		w.bmu.Unlock()
		return
	}
	if why == "" {
		delete(w.paused[runID], stage)
		if len(w.paused[runID]) == 0 {
			delete(w.paused, runID)
		}
	} else {
		if w.paused == nil {
			w.paused = map[string]map[string]string{}
		}
		if w.paused[runID] == nil {
			w.paused[runID] = map[string]string{}
		}
		w.paused[runID][stage] = why
	}
	w.bmu.Unlock()
	if w.status != nil {
		_ = w.status.write(w.Backlog())
	}
}

// setFault records why the store fails ("" when it works again) and
// updates the status file; it reports whether a fault began.
func (w *Writer) setFault(reason string) (began bool) {
	w.bmu.Lock()
	changed := w.fault != reason
	began = w.fault == "" && reason != ""
	if changed {
		w.fault = reason
		w.faultSince = time.Time{}
		if reason != "" {
			w.faultSince = time.Now()
		}
	}
	w.bmu.Unlock()
	if w.status != nil && (changed || reason != "") {
		b := w.Backlog()
		if b.Reason == "" {
			b = Backlog{Paused: b.Paused}
		}
		if err := w.status.write(b); err != nil && began {
			w.log.Warn("cannot update the metrics status file", "err", err)
		}
	}
	if changed && reason == "" {
		w.log.Info("the database works again; waiting metric points are stored")
	}
	return began
}
