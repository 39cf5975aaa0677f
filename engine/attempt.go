package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"niuma/engine/executor"
	"niuma/metrics"
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
	e.watch(ctx, h, job, timeoutSec, nil, 0)
}

// watch follows a running attempt's stdout into metrics and reports its
// end. skip holds, per metric key, the last step already stored (for an
// adopted attempt whose log is read again). When ctx ends first (this
// process stops owning the data dir), the attempt is left running for the
// next owner to adopt.
func (e *Engine) watch(ctx context.Context, h executor.Handle, job executor.Job, timeoutSec int64, skip map[string]int64, elapsed time.Duration) {
	ing := metrics.NewIngestor(e.writer, job.RunID, job.Stage, job.Attempt, skip)
	follower := &metrics.Follower{Path: job.StdoutPath, OnLine: func(line []byte, _ int64) {
		pts, ok := ing.Line(line, time.Now())
		if !ok || len(pts) == 0 {
			return
		}
		ev := Event{Kind: Metrics, RunID: job.RunID, Stage: job.Stage, Points: make([]Point, len(pts))}
		for i, p := range pts {
			ev.Points[i] = pointFrom(p)
		}
		e.events.Publish(ev)
		e.observe(ctx, pts)
	}}
	fctx, stopFollow := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		if err := follower.Run(fctx); err != nil && fctx.Err() == nil {
			e.log.Warn("follow stage output", "file", job.StdoutPath, "err", err)
		}
	}()
	endFollow := func() {
		follower.Stop()
		stopFollow()
		<-followed
	}

	var timedOut <-chan time.Time
	if timeoutSec > 0 {
		left := time.Duration(timeoutSec)*time.Second - elapsed
		t := time.NewTimer(max(left, 0))
		defer t.Stop()
		timedOut = t.C
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
			endFollow()
			if r, ok := h.(executor.Releaser); ok {
				r.Release()
			}
			return
		case <-timedOut:
			timedOut = nil
			timeoutNote = fmt.Sprintf("timed out after %s", time.Duration(timeoutSec)*time.Second)
			go func() {
				sctx, cancel := context.WithTimeout(context.Background(), e.opts.StopGrace+30*time.Second)
				defer cancel()
				_ = h.Stop(sctx, e.opts.StopGrace)
			}()
		case ex := <-waited:
			endFollow()
			e.sent.EndAttempt(job.RunID, job.Stage, job.Attempt)
			fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := e.writer.Flush(fctx); err != nil {
				e.log.Warn("flush metrics", "err", err)
			}
			cancel()
			if timeoutNote != "" && !ex.Success() {
				ex.Reason = timeoutNote
			}
			e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt, finished: true, exit: ex})
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
