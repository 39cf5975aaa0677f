package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"niuma/engine/executor"
	"niuma/storage"
)

// The state machine of runs, stages and attempts. transition is the only
// code that changes a state (or anything else the engine decides: retry
// counters, pending decisions, backoff deadlines): it computes the new
// rows from the loop's view and an event, writes them in ONE storage
// transaction (storage.DB.Apply), and only once that is committed installs
// them in the loop's view and tells subscribers. When the write fails,
// nothing changed, in storage or in memory, and the caller decides what
// to do (never launch, try again later).
//
//	run:     queued → running → succeeded | failed | cancelled
//	stage:   queued → running → succeeded | failed | cancelled
//	         running → queued (a retry, after backoff; or for free)
//	         queued → cancelled (a need failed, a cancel) | failed (sentinel)
//	attempt: starting → running → succeeded | failed | cancelled | lost
//	         | interrupted | preempted;  starting → not started (backend away)
//
// See docs/ARCHITECTURE.md, "The state machine".

// event is what happened, for transition to act on.
type event interface{ name() string }

type (
	// evStart: a queued stage may run now on gpus. A new attempt is
	// recorded as starting with token, before anything is launched.
	evStart struct {
		gpus  []executor.GPU
		token string
	}
	// evLaunched: the executor started the attempt; ref finds it again.
	evLaunched struct{ ref string }
	// evEnded: the attempt ended with exit. decided is a retry the
	// failure's diagnosis asks for (cuda_oom), unless one is pending.
	evEnded struct {
		exit    executor.Exit
		decided *storage.Pending
		lost    int64 // its metric points that could never be stored
	}
	// evNotStarted: the backend was away; the attempt never ran.
	evNotStarted struct{ why error }
	// evSkip: a queued stage can never run (a need failed or was
	// cancelled, or the run was cancelled before it started).
	evSkip struct{ why string }
	// evStopQueued: the sentinel stops a stage waiting in the queue.
	evStopQueued struct{ why string }
	// evWait: why a queued or starting stage waits (no state change), in
	// words and as a code (see StageInfo.ReasonCode).
	evWait struct{ why, code string }
	// evDecide: a decision about the running attempt, applied when it
	// ends (see storage.Pending).
	evDecide struct{ pending storage.Pending }
	// evRunEnded: every stage is done, or the run cannot be driven at all.
	evRunEnded struct {
		state storage.RunState
		why   string
	}
)

func (evStart) name() string      { return "start" }
func (evLaunched) name() string   { return "launched" }
func (evEnded) name() string      { return "ended" }
func (evNotStarted) name() string { return "not started" }
func (evSkip) name() string       { return "skip" }
func (evStopQueued) name() string { return "stop queued" }
func (evWait) name() string       { return "wait" }
func (evDecide) name() string     { return "decide" }
func (evRunEnded) name() string   { return "run ended" }

// newToken is a fresh attempt identity: letters and digits only, so every
// backend can put it in a name (a container's, a Slurm job's).
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "a" + hex.EncodeToString(b[:])
}

// transition applies ev to run lr and, for stage events, its stage ls (nil
// for run events). It returns the storage error when the change could not
// be recorded; nothing changed then.
func (e *Engine) transition(ctx context.Context, lr *liveRun, ls *liveStage, ev event) error {
	now := time.Now()
	run := lr.run
	var st storage.Stage
	var a storage.Attempt
	if ls != nil {
		st, a = ls.st, ls.attempt
	}
	var tr storage.Transition
	stageChanged, runChanged := ls != nil, false

	switch ev := ev.(type) {
	case evStart:
		st.Attempts++
		st.State, st.Reason, st.ReasonCode = storage.StageRunning, "", ""
		if st.StartedAt.IsZero() {
			st.StartedAt = now
		}
		uuids := make([]string, len(ev.gpus))
		for i, g := range ev.gpus {
			uuids[i] = g.UUID
		}
		a = storage.Attempt{RunID: run.ID, Stage: st.Name, Number: st.Attempts, State: storage.AttemptStarting,
			Executor: run.Executor, GPUs: uuids, StartedAt: now, Token: ev.token, Params: run.Params}
		tr.NewAttempt = &a
		if run.State == storage.RunQueued {
			run.State, run.StartedAt = storage.RunRunning, now
			runChanged = true
		}
	case evLaunched:
		a.State, a.Handle = storage.AttemptRunning, ev.ref
		tr.Attempt = &a
		stageChanged = false
	case evEnded:
		e.end(&run, &st, &a, ev, now, &tr)
		tr.Attempt = &a
		if tr.Params != nil {
			runChanged = true
		}
	case evNotStarted:
		a.State, a.Reason, a.FinishedAt = storage.AttemptNotStarted, ev.why.Error(), now
		tr.Attempt = &a
		st.FreeAttempts++
		st.State, st.Reason, st.ReasonCode = storage.StageQueued, waitReason(ev.why), WaitExecutor
	case evSkip:
		st.State, st.Reason, st.FinishedAt = storage.StageCancelled, ev.why, now
	case evStopQueued:
		st.State, st.Reason, st.FinishedAt = storage.StageFailed, ev.why, now
	case evWait:
		st.Reason, st.ReasonCode = ev.why, ev.code
	case evDecide:
		st.Pending = ev.pending
	case evRunEnded:
		run.State, run.Error, run.FinishedAt = ev.state, ev.why, now
		runChanged = true
	default:
		return fmt.Errorf("unknown event %T", ev)
	}
	if stageChanged {
		tr.Stages = []storage.Stage{st}
	}
	if runChanged {
		tr.Run = &run
	}
	if err := e.store.Apply(ctx, tr); err != nil {
		stage := ""
		if ls != nil {
			stage = ls.st.Name
		}
		e.logError(ctx, "record "+ev.name(), "run", run.ID, "stage", stage, "err", err)
		return err
	}
	lr.run = run
	if ls != nil {
		prev := ls.st.State
		ls.st, ls.attempt = st, a
		lr.track(ls, prev) // the loop's indexes follow the committed state
		e.dirty = e.dirty || prev != st.State
	}
	e.dirty = e.dirty || runChanged
	if stageChanged {
		e.events.Publish(Event{Kind: StageChanged, RunID: run.ID, Stage: st.Name, State: State(st.State), Reason: st.Reason})
	}
	if runChanged {
		e.events.Publish(Event{Kind: RunChanged, RunID: run.ID, State: State(run.State), Reason: run.Error})
	}
	return nil
}

// end decides what follows an attempt's end: success, a retry after
// backoff, a free retry (the sentinel's, a preemption, a backend that went
// away), failure, or cancellation.
func (e *Engine) end(run *storage.Run, st *storage.Stage, a *storage.Attempt, ev evEnded, now time.Time, tr *storage.Transition) {
	exit := ev.exit
	a.FinishedAt = now
	if exit.Code >= 0 {
		code := exit.Code
		a.ExitCode, st.ExitCode = &code, &code
	}
	p := st.Pending
	if p.Action == "" && ev.decided != nil {
		p = *ev.decided
	}
	st.Pending = storage.Pending{}
	st.PointsLost += ev.lost
	switch {
	case p.Action == storage.PendingRetry && !run.CancelRequested:
		a.State, a.Reason = storage.AttemptFailed, p.Note+"; "+exit.Describe()
		if p.Params != "" {
			run.Params = p.Params
			tr.Params = &run.Params
		}
		// A sentinel retry spends none of the template's retries.
		st.FreeAttempts++
		st.SentinelAttempts++
		st.State, st.NextAttemptAt = storage.StageQueued, now
		st.Reason = p.Note
	case p.Action == storage.PendingStop && !exit.Success():
		a.State, a.Reason = storage.AttemptFailed, p.Note
		st.State, st.FinishedAt = storage.StageFailed, now
		st.Reason = p.Note
	case exit.Success():
		a.State, a.Reason = storage.AttemptSucceeded, ""
		st.State, st.Reason, st.FinishedAt = storage.StageSucceeded, "", now
		if st.PointsLost > 0 {
			// Never a plain success: the stage's record lacks points.
			st.Reason = lostWords(st.PointsLost)
			a.Reason = st.Reason
		}
	case run.CancelRequested:
		a.State, a.Reason = storage.AttemptCancelled, "cancelled: "+exit.Describe()
		st.State, st.Reason, st.FinishedAt = storage.StageCancelled, "cancelled by request", now
	case p.Action == storage.PendingPreempt:
		// Stopped so that another run could have its GPUs (a spot run):
		// queued again at once, spending no retry; the next attempt
		// resumes from its checkpoint (NIUMA_RESUME).
		a.State, a.Reason = storage.AttemptPreempted, p.Note+"; "+exit.Describe()
		st.FreeAttempts++
		st.State, st.NextAttemptAt = storage.StageQueued, now
		st.Reason = fmt.Sprintf("attempt %d was preempted (%s); it resumes from its checkpoint when the shepherd places it again (no retry spent)", st.Attempts, p.Note)
		st.ReasonCode = WaitPreempted
	case exit.Interrupted:
		// The backend went away under the attempt (the Docker daemon
		// restarted): not the workload's failure. As for a backend that
		// was away, the stage waits for its executor and runs again
		// without spending a retry; the attempt itself did run.
		a.State, a.Reason = storage.AttemptInterrupted, exit.Describe()
		st.FreeAttempts++
		st.State, st.NextAttemptAt = storage.StageQueued, now
		st.Reason = fmt.Sprintf("attempt %d %s; it runs again when the executor is ready (no retry spent)", st.Attempts, exit.Describe())
	default:
		a.State, a.Reason = storage.AttemptFailed, exit.Describe()
		if exit.Lost {
			a.State = storage.AttemptLost
		}
		maxAttempts := st.MaxAttempts()
		if st.Attempts < maxAttempts {
			wait := e.opts.Backoff(st.Attempts)
			st.State = storage.StageQueued
			st.NextAttemptAt = now.Add(wait)
			st.Reason = fmt.Sprintf("attempt %d %s; retrying in %s (attempt %d of %d)",
				st.Attempts, exit.Describe(), wait.Round(time.Second), st.Attempts+1, maxAttempts)
		} else {
			st.State, st.FinishedAt = storage.StageFailed, now
			st.Reason = fmt.Sprintf("%s (attempt %d of %d)", exit.Describe(), st.Attempts, maxAttempts)
		}
	}
}

// lostWords says that a stage's record lacks points.
func lostWords(n int64) string {
	return fmt.Sprintf("succeeded, but %d of its metric points could not be stored and are lost (see the log for why)", n)
}

// logError logs what went wrong, at level Error, unless it went wrong
// only because this process is stopping (ctx is done): an owner that exits
// cleanly cancels what it was doing, and the next owner carries on; that
// is no error, and is logged at Debug.
func (e *Engine) logError(ctx context.Context, msg string, args ...any) {
	e.logAt(ctx, slog.LevelError, msg, args...)
}

// logWarn is logError at level Warn.
func (e *Engine) logWarn(ctx context.Context, msg string, args ...any) {
	e.logAt(ctx, slog.LevelWarn, msg, args...)
}

func (e *Engine) logAt(ctx context.Context, level slog.Level, msg string, args ...any) {
	if ctx.Err() != nil {
		level = slog.LevelDebug
	}
	e.log.Log(context.WithoutCancel(ctx), level, msg, args...)
}
