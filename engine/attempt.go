package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"niuma/engine/executor"
	"niuma/gpumon"
	"niuma/metrics"
	"niuma/storage"
)

// launch starts one attempt and watches it to the end. It runs in its own
// goroutine and talks to the loop only through results.
func (e *Engine) launch(ctx context.Context, x executor.Executor, job executor.Job, timeoutSec int64) {
	if len(job.Argv) == 0 {
		e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, finished: true,
			exit: executor.Exit{Code: -1, Reason: "the stage's command could not be expanded"}})
		return
	}
	h, err := x.Start(ctx, job)
	if err != nil && ctx.Err() != nil {
		// This process stops while it launches: the attempt stays recorded
		// as starting, and the next owner resolves it by its token.
		return
	}
	if errors.Is(err, executor.ErrUnavailable) {
		e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, requeue: err})
		return
	}
	if err != nil {
		e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, finished: true,
			exit: executor.Exit{Code: -1, Reason: "could not start: " + err.Error()}})
		return
	}
	if !e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, handle: h}) {
		return
	}
	e.watch(ctx, h, job, timeoutSec, 0)
}

// watch follows a running attempt's metrics and reports its end. When ctx
// ends first (this process stops owning the data dir), the attempt is left
// running for the next owner to adopt, which reads its metrics on from the
// cursors stored with them.
func (e *Engine) watch(ctx context.Context, h executor.Handle, job executor.Job, timeoutSec int64, elapsed time.Duration) {
	if g, ok := h.(processGroup); ok && e.opts.Owners != nil {
		e.opts.Owners.TrackGroup(g.ProcessGroup(), gpumon.Owner{RunID: job.RunID, Stage: job.Stage, Attempt: job.Attempt})
		defer e.opts.Owners.UntrackGroup(g.ProcessGroup())
	}
	c := e.collector(ctx, job, elapsed)
	if err := c.Start(ctx); err != nil {
		e.logWarn(ctx, "follow the stage's metrics", "run", job.RunID, "stage", job.Stage, "err", err)
	}

	// The timeout counts from when the attempt runs: an attempt that
	// waits in its backend's queue (a pending cluster job) arms it once
	// the wait is over.
	var timedOut <-chan time.Time
	armTimeout := func() {
		left := time.Duration(timeoutSec)*time.Second - elapsed
		t := time.NewTimer(max(left, 0))
		timedOut = t.C
	}
	waiter, _ := h.(executor.Waiter)
	if timeoutSec > 0 && waiter == nil {
		armTimeout()
	}
	var waitTick <-chan time.Time
	lastWaiting, armed := "\x00", waiter == nil
	if waiter != nil {
		tk := time.NewTicker(e.opts.PollInterval)
		defer tk.Stop()
		waitTick = tk.C
	}
	// A paused attempt (its disk is full) says so in its stage's reason,
	// told every tick: a reason the full disk kept from being stored is
	// tried again.
	pauser, _ := h.(executor.Pauser)
	var pauseTick <-chan time.Time
	lastPaused := ""
	defer func() {
		if lastPaused != "" && e.writer != nil {
			e.writer.SetPaused(job.RunID, job.Stage, "")
		}
	}()
	if pauser != nil && waiter == nil {
		tk := time.NewTicker(e.opts.PollInterval)
		defer tk.Stop()
		pauseTick = tk.C
	}
	// What the attempt uses of the host, read every tick (Engine.Usage),
	// and kept minute by minute (Engine.HostUsage).
	meter, _ := h.(executor.Meter)
	var meterTick <-chan time.Time
	var hm *hostMeter
	if meter != nil {
		tk := time.NewTicker(e.opts.PollInterval)
		defer tk.Stop()
		meterTick = tk.C
		defer e.setUsage(StageUsage{RunID: job.RunID, Stage: job.Stage})
		hm = e.hostMeter(ctx, job, elapsed)
	}
	waited := make(chan executor.Exit, 1)
	wctx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	go func() {
		if ex, err := h.Wait(wctx); err == nil {
			waited <- ex
		}
	}()
	var timeoutNote string
	for {
		select {
		case <-ctx.Done():
			c.Abandon()
			if r, ok := h.(executor.Releaser); ok {
				r.Release()
			}
			if hm != nil {
				e.keepHostMinute(hm.finish()) // Drive stores it once its attempts have stopped
			}
			return
		case <-waitTick:
			why := waiter.Waiting()
			if why != lastWaiting {
				lastWaiting = why
				e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, waiting: &why})
			}
			if why == "" && !armed {
				armed = true
				if timeoutSec > 0 {
					armTimeout()
				}
			}
		case <-meterTick:
			if u, ok := meter.Usage(); ok {
				now := time.Now()
				e.setUsage(StageUsage{RunID: job.RunID, Stage: job.Stage, Attempt: job.Attempt, Usage: u, At: now})
				e.keepHostMinute(hm.add(now, u))
			}
		case <-pauseTick:
			why := pauser.Paused()
			if why != "" || lastPaused != "" {
				if why != lastPaused && e.writer != nil {
					e.writer.SetPaused(job.RunID, job.Stage, why)
				}
				lastPaused = why
				e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, waiting: &why})
			}
		case <-timedOut:
			timedOut = nil
			timeoutNote = fmt.Sprintf("timed out after %s", time.Duration(timeoutSec)*time.Second)
			go func() {
				sctx, cancel := context.WithTimeout(context.Background(), e.opts.StopGrace+30*time.Second)
				defer cancel()
				_ = h.Stop(sctx, e.opts.StopGrace)
			}()
		case ex := <-waited:
			// The attempt's end is reported only once all its points are
			// stored (the database may be full or locked for a while):
			// a stage never succeeds with points missing.
			if !e.settleMetrics(ctx, c) {
				return // this process stops owning the attempt; the next owner settles it
			}
			e.sent.EndAttempt(job.RunID, job.Stage, job.Attempt)
			if timeoutNote != "" && !ex.Success() {
				ex.Reason = timeoutNote
			}
			var lost int64
			if e.writer != nil {
				lost = e.writer.Lost(job.RunID, job.Stage, job.Attempt)
			}
			if hm != nil {
				// Its last reading, as it ended (a stage shorter than a
				// tick has no other), and the minute in progress.
				if u, ok := meter.Usage(); ok {
					e.keepHostMinute(hm.end(time.Now(), u))
				}
				e.keepHostMinute(hm.finish())
				e.storeHostAtEnd(ctx)
			}
			e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, finished: true, exit: ex, lost: lost})
			return
		}
	}
}

// report hands a result to the loop; false when the loop has stopped.
func (e *Engine) report(ctx context.Context, r result) bool {
	select {
	case e.results <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// collector is the metrics collector of one attempt: stdout, stderr, the
// stage's metrics.jsonl, TensorBoard files and CSV logs, with the stage's
// `metrics:`, `tensorboard:` and `csv:` from the run's template. Points go
// to live subscribers and the sentinel as they are read.
func (e *Engine) collector(ctx context.Context, job executor.Job, elapsed time.Duration) *metrics.Collector {
	publish := func(pts []storage.MetricPoint) {
		ev := Event{Kind: Metrics, RunID: job.RunID, Stage: job.Stage, Points: make([]Point, len(pts))}
		for i, p := range pts {
			ev.Points[i] = pointFrom(p)
		}
		e.events.Publish(ev)
		e.observe(ctx, pts)
	}
	return &metrics.Collector{
		Store: e.store, Writer: e.writer, RunID: job.RunID, Stage: job.Stage, Attempt: job.Attempt,
		RunDir: job.RunDir, StageDir: job.StageDir, StageFolder: stageFolder(job.RunDir), Stdout: job.StdoutPath, Stderr: job.StderrPath,
		Sources: e.metricSources(ctx, job.RunID, job.Stage),
		// Files older than this attempt belong to an earlier one (the
		// slack absorbs the time between the start and this call).
		Since: time.Now().Add(-elapsed - time.Second), Logger: e.log, OnPoints: publish,
		// What the user should know about the sources (a damaged event
		// file, a preset that matches nothing) is a line in the run's
		// record, once.
		OnNote: func(kind, msg, fix string) {
			if _, err := e.store.AddEvent(context.WithoutCancel(ctx), storage.Event{RunID: job.RunID, Stage: job.Stage,
				Kind: kind, Severity: storage.SeverityInfo, Message: msg, Fix: fix, At: time.Now()}); err != nil {
				e.logWarn(ctx, "record a note about the stage's metrics", "kind", kind, "err", err)
			}
		},
	}
}

// settleMetrics drains an ended attempt's sources and waits until their
// points are stored; false when ctx ends first.
func (e *Engine) settleMetrics(ctx context.Context, c *metrics.Collector) bool {
	drained := make(chan struct{})
	go func() { c.Stop(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
		c.Abandon()
		return false
	}
	for {
		// Flush waits as long as the store fails; a minute at a time, so a
		// long wait is in the log.
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := c.Stored(fctx)
		cancel()
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			return false
		case errors.Is(err, context.DeadlineExceeded):
			e.log.Warn("an ended attempt waits for its metric points to be stored", "why", e.writer.Backlog().Reason)
		default:
			// A point the store refused for good (its run was deleted):
			// nothing more to wait for.
			e.logWarn(ctx, "store metrics", "err", err)
			return true
		}
	}
}
