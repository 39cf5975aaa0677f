package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"niuma/engine/executor"
	"niuma/metrics"
	"niuma/storage"
)

// Why a stage waits, as codes: the engine's own, beside the shepherd's
// (shepherd.ReasonCode: no_gpus, never_fits, gpu_memory, gpu_busy, cpu,
// reserved, preempting, ...).
const (
	WaitNeeds      = "needs"      // an earlier stage has not succeeded yet
	WaitBackoff    = "backoff"    // waiting before a retry
	WaitExecutor   = "executor"   // its executor is not available (Docker is down)
	WaitScheduling = "scheduling" // ready, not yet through a scheduling pass
)

// Waiting is one stage waiting in the queue, for dashboards: since when it
// waits, and why, as a code and in words.
type Waiting struct {
	RunID, Template, Stage string
	Priority               int
	Since                  time.Time
	Code                   string
	Reason                 string
}

// waitBook keeps the shepherd's code for each waiting stage, as the loop
// last saw it, for readers on other goroutines. The zero value is ready.
type waitBook struct {
	mu sync.Mutex
	m  map[string]waitNote
}

type waitNote struct {
	code  string
	since time.Time
}

func (b *waitBook) note(key, code string, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]waitNote{}
	}
	b.m[key] = waitNote{code, since}
	if len(b.m) > 100_000 { // stages that left the queue are dropped by lookups; bound the rest
		clear(b.m)
	}
}

func (b *waitBook) lookup(key string, since time.Time) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.m[key]
	if !ok || !n.since.Equal(since) {
		return "", false
	}
	return n.code, true
}

// waitStart is since when a stage has waited: from its run's submission,
// the end of its last attempt, or the end of the last of its needs,
// whichever came last.
func waitStart(created, lastAttemptEnd time.Time, needsEnd ...time.Time) time.Time {
	since := created
	if lastAttemptEnd.After(since) {
		since = lastAttemptEnd
	}
	for _, t := range needsEnd {
		if t.After(since) {
			since = t
		}
	}
	return since
}

// Queue lists the stages waiting in the queue, with why each waits. It
// reads storage, so it answers in any process: the shepherd's codes are
// stored with each stage (a stage not yet through a pass reads
// "scheduling").
func (e *Engine) Queue(ctx context.Context) ([]Waiting, error) {
	runs, err := e.store.ListRuns(ctx, storage.RunFilter{States: []storage.RunState{storage.RunQueued, storage.RunRunning}})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	away := map[string]error{}
	var out []Waiting
	for _, r := range runs {
		if r.CancelRequested {
			continue
		}
		stages, err := e.store.Stages(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		var attempts []storage.Attempt
		byName := map[string]storage.Stage{}
		for _, s := range stages {
			byName[s.Name] = s
		}
		for _, s := range stages {
			if s.State != storage.StageQueued {
				continue
			}
			if attempts == nil && s.Attempts > 0 {
				if attempts, err = e.store.Attempts(ctx, r.ID); err != nil {
					return nil, err
				}
			}
			var lastEnd time.Time
			for _, a := range attempts {
				if a.Stage == s.Name && a.Number == s.Attempts {
					lastEnd = a.FinishedAt
				}
			}
			var needsEnd []time.Time
			needsDone := true
			for _, n := range s.Needs {
				dep, ok := byName[n]
				if !ok || dep.State != storage.StageSucceeded {
					needsDone = false
					continue
				}
				needsEnd = append(needsEnd, dep.FinishedAt)
			}
			w := Waiting{RunID: r.ID, Template: r.Template, Stage: s.Name, Priority: r.Priority, Reason: s.Reason,
				Since: waitStart(r.CreatedAt, lastEnd, needsEnd...)}
			switch code, ok := e.waits.lookup(r.ID+"/"+s.Name, w.Since); {
			case !needsDone:
				w.Code = WaitNeeds
			case now.Before(s.NextAttemptAt):
				w.Code = WaitBackoff
			case e.executorAway(ctx, r.Executor, away):
				w.Code = WaitExecutor
			case ok && code != "":
				w.Code = code
			case s.ReasonCode != "":
				w.Code = s.ReasonCode // stored with the stage: known in any process
			default:
				w.Code = WaitScheduling
			}
			out = append(out, w)
		}
	}
	return out, nil
}

// executorAway says whether an executor cannot start attempts now (memo
// holds the answers of one read).
func (e *Engine) executorAway(ctx context.Context, name string, memo map[string]error) bool {
	err, ok := memo[name]
	if !ok {
		if av, has := e.execs[name].(executor.Availability); has {
			err = av.Available(ctx)
		} else if _, known := e.execs[name]; !known {
			err = errors.New("unknown executor")
		}
		memo[name] = err
	}
	return err != nil
}

// RunCounts says how many runs are in each state.
func (e *Engine) RunCounts(ctx context.Context) (map[State]int, error) {
	c, err := e.store.CountRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[State]int, len(c))
	for s, n := range c {
		out[State(s)] = n
	}
	return out, nil
}

// FinishedStage is a stage that has ended: its template, name, final state
// and how long it took from its first attempt's start (0 if it never
// started: skipped or cancelled while queued).
type FinishedStage struct {
	RunID, Template, Stage string
	State                  State
	FinishedAt             time.Time
	Duration               time.Duration
}

// StagesFinishedAfter lists up to limit stages that ended after after,
// oldest first: a reader that passes the last one's FinishedAt back sees
// each stage once.
func (e *Engine) StagesFinishedAfter(ctx context.Context, after time.Time, limit int) ([]FinishedStage, error) {
	fs, err := e.store.FinishedStages(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]FinishedStage, len(fs))
	for i, f := range fs {
		out[i] = FinishedStage{RunID: f.RunID, Template: f.Template, Stage: f.Stage, State: State(f.State), FinishedAt: f.FinishedAt}
		if !f.StartedAt.IsZero() {
			out[i].Duration = f.FinishedAt.Sub(f.StartedAt)
		}
	}
	return out, nil
}

// EventKindsAfter counts the anomalies and other events recorded after the
// event with id after, by kind, and returns the last id counted.
func (e *Engine) EventKindsAfter(ctx context.Context, after int64) (map[string]int, int64, error) {
	return e.store.EventKindsAfter(ctx, after)
}

// Ingested is what this process's metrics writer stored while it drove the
// runs (zero before it does).
func (e *Engine) Ingested() metrics.WriterStats {
	select {
	case <-e.ready:
		return e.writer.Stats()
	default:
		return metrics.WriterStats{}
	}
}
