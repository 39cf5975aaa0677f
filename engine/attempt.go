package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
	if g, ok := h.(processGroup); ok && e.opts.Owners != nil {
		e.opts.Owners.TrackGroup(g.ProcessGroup(), gpumon.Owner{RunID: job.RunID, Stage: job.Stage, Attempt: job.Attempt})
		defer e.opts.Owners.UntrackGroup(g.ProcessGroup())
	}
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
	// TensorBoard scalars the stage writes under its tb/ directory are
	// metrics too. Event files older than this attempt belong to an earlier
	// one (the slack absorbs the time between the start and this call).
	tbDir := filepath.Join(filepath.Dir(job.StdoutPath), "tb")
	tb := &metrics.TBFollower{Dir: tbDir, RunID: job.RunID, Stage: job.Stage, Attempt: job.Attempt,
		Writer: e.writer, Skip: skip, Since: time.Now().Add(-elapsed - time.Second), Logger: e.log,
		OnPoints: func(pts []storage.MetricPoint) {
			ev := Event{Kind: Metrics, RunID: job.RunID, Stage: job.Stage, Points: make([]Point, len(pts))}
			for i, p := range pts {
				ev.Points[i] = pointFrom(p)
			}
			e.events.Publish(ev)
			e.observe(ctx, pts)
		},
		// A damaged event file is worth a line in the run's record (once
		// per file): its curves have a gap or end early.
		OnProblem: func(path string, err error) {
			if _, aerr := e.store.AddEvent(context.WithoutCancel(ctx), storage.Event{RunID: job.RunID, Stage: job.Stage,
				Kind: "tensorboard_damaged", Severity: storage.SeverityInfo,
				Message: fmt.Sprintf("TensorBoard event file %s is damaged (%v); its readable scalars were kept", filepath.Base(path), err),
				Fix:     "nothing to do unless curves are missing: a writer killed mid-record or a disk error leaves such a file"}); aerr != nil {
				e.log.Warn("record a damaged TensorBoard file", "err", aerr)
			}
		}}
	fctx, stopFollow := context.WithCancel(context.Background())
	followed := make(chan struct{}, 2)
	go func() {
		defer func() { followed <- struct{}{} }()
		if err := follower.Run(fctx); err != nil && fctx.Err() == nil {
			e.log.Warn("follow stage output", "file", job.StdoutPath, "err", err)
		}
	}()
	go func() {
		defer func() { followed <- struct{}{} }()
		if err := tb.Run(fctx); err != nil && fctx.Err() == nil {
			e.log.Warn("follow TensorBoard logs", "dir", tbDir, "err", err)
		}
	}()
	endFollow := func() {
		follower.Stop()
		tb.Stop()
		stopFollow()
		<-followed
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
