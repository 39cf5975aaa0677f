package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/sentinel"
	"niuma/storage"
)

// AnomalyInfo is one anomaly the sentinel raised, as stored.
type AnomalyInfo struct {
	ID       int64     `json:"id"`
	Stage    string    `json:"stage,omitempty"`
	GPU      string    `json:"gpu,omitempty"`
	Kind     string    `json:"kind"`
	Severity string    `json:"severity"`
	Message  string    `json:"message"`
	Fix      string    `json:"fix"`
	Evidence string    `json:"evidence,omitempty"` // JSON
	At       time.Time `json:"at"`
	// DismissedAt is when the user dismissed it (zero while it stands).
	DismissedAt time.Time `json:"dismissed_at,omitzero"`
}

// Anomalies lists what the sentinel raised about a run, oldest first.
func (e *Engine) Anomalies(ctx context.Context, runID string) ([]AnomalyInfo, error) {
	evs, err := e.store.Events(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]AnomalyInfo, 0, len(evs))
	for _, ev := range evs {
		out = append(out, AnomalyInfo{ID: ev.ID, Stage: ev.Stage, GPU: ev.GPU, Kind: ev.Kind, Severity: ev.Severity,
			Message: ev.Message, Fix: ev.Fix, Evidence: ev.Evidence, At: ev.At, DismissedAt: ev.DismissedAt})
	}
	return out, nil
}

// Dismiss marks one of a run's anomalies as seen; it stays in the record.
func (e *Engine) Dismiss(ctx context.Context, runID string, anomalyID int64) error {
	id, err := e.ResolveID(ctx, runID)
	if err != nil {
		return err
	}
	list, err := e.Anomalies(ctx, id)
	if err != nil {
		return err
	}
	for _, a := range list {
		if a.ID == anomalyID {
			return e.store.DismissEvent(ctx, anomalyID, time.Now())
		}
	}
	return fmt.Errorf("run %s has no anomaly %d: `niuma show %s` lists them", id, anomalyID, id)
}

// observe feeds an attempt's new metric points to the sentinel. It runs on
// the attempt's goroutine; what the template wants done about an anomaly is
// decided on the loop's.
func (e *Engine) observe(ctx context.Context, pts []storage.MetricPoint) {
	sp := make([]sentinel.Point, len(pts))
	for i, p := range pts {
		sp[i] = sentinel.Point{Run: p.RunID, Stage: p.Stage, Attempt: p.Attempt, Key: p.Key, Step: p.Step, Value: p.Value, Wall: p.Wall}
	}
	for _, a := range e.sent.ObserveAll(sp) {
		e.recordAnomaly(ctx, a)
		if a.Kind.Scope() == sentinel.ScopeRun {
			a := a
			e.report(ctx, result{runID: a.Run, stage: a.Stage, attempt: a.Attempt, anomaly: &a})
		}
	}
}

// tickSentinel lets time-based detectors (a hang: no metric for too long)
// speak. It runs on the loop's goroutine.
func (e *Engine) tickSentinel(ctx context.Context) {
	for _, a := range e.sent.Tick(time.Now()) {
		e.recordAnomaly(ctx, a)
		if lr := e.runs[a.Run]; lr != nil {
			if ls := lr.stage(a.Stage); ls != nil && ls.st.State == storage.StageRunning && ls.st.Attempts == a.Attempt {
				e.act(ctx, lr, ls, a)
			}
		}
	}
}

// recordAnomaly stores an anomaly as an event and tells subscribers.
func (e *Engine) recordAnomaly(ctx context.Context, a sentinel.Anomaly) {
	ev := storage.Event{RunID: a.Run, Stage: a.Stage, GPU: a.GPU, Kind: string(a.Kind),
		Severity: string(a.Severity), Message: a.Message, Fix: a.Fix, Evidence: a.Evidence.JSON(), At: a.At}
	if _, err := e.store.AddEvent(ctx, ev); err != nil {
		e.log.Warn("store anomaly", "kind", a.Kind, "run", a.Run, "err", err)
	}
	e.events.Publish(Event{Kind: AnomalyRaised, RunID: a.Run, Stage: a.Stage, Reason: a.Message, Severity: string(a.Severity), At: a.At})
}

// act applies the template's answer to an anomaly of a running attempt:
// flag (nothing more), stop the run, or retry the attempt with changed
// parameters. The attempt is stopped now; finish does the rest.
func (e *Engine) act(ctx context.Context, lr *liveRun, ls *liveStage, a sentinel.Anomaly) {
	if ls.st.State != storage.StageRunning || ls.sentinelStop != "" || ls.sentinelRetry != nil {
		return
	}
	d := lr.tmpl.Sentinel.Decide(a, ls.st.Attempts, map[string]any(lr.values))
	switch d.Do {
	case sentinel.Stop:
		ls.sentinelStop = "stopped by the sentinel: " + a.Message
		if d.Why != "" {
			ls.sentinelStop += " (" + d.Why + ")"
		}
		e.stopAttempt(ls) // a no-op until the attempt reports its handle; handle stops it then
	case sentinel.Retry:
		values, err := lr.tmpl.Normalize(template.Values(d.Params))
		if err == nil {
			err = lr.tmpl.Validate(values)
		}
		if err != nil {
			e.log.Warn("sentinel retry refused", "run", lr.run.ID, "err", err)
			e.recordNote(ctx, lr, ls, "retry_refused", "the sentinel's retry was not made: "+err.Error())
			return
		}
		ls.sentinelRetry = values
		ls.sentinelNote = fmt.Sprintf("retrying after %s with %s", a.Kind, strings.Join(d.Changes, ", "))
		e.recordNote(ctx, lr, ls, "retry", ls.sentinelNote)
		e.stopAttempt(ls) // a no-op until the attempt reports its handle; handle stops it then
	}
}

// recordNote stores what the engine did about an anomaly, for the record.
func (e *Engine) recordNote(ctx context.Context, lr *liveRun, ls *liveStage, kind, msg string) {
	ev := storage.Event{RunID: lr.run.ID, Stage: ls.st.Name, Kind: "action_" + kind, Severity: "info", Message: msg, At: time.Now()}
	if _, err := e.store.AddEvent(ctx, ev); err != nil {
		e.log.Warn("store action", "run", lr.run.ID, "err", err)
	}
	e.events.Publish(Event{Kind: AnomalyRaised, RunID: lr.run.ID, Stage: ls.st.Name, Reason: msg, Severity: "info"})
}

// setValues changes a run's parameters (a sentinel retry): storage,
// params.json and the loop's view, so the next attempt and later stages
// see the new values.
func (e *Engine) setValues(ctx context.Context, lr *liveRun, v template.Values) error {
	js, err := v.JSON()
	if err != nil {
		return err
	}
	if err := e.store.SetRunParams(ctx, lr.run.ID, string(js)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(lr.run.Dir, "params.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("write params.json: %w", err)
	}
	lr.run.Params, lr.values = string(js), v
	return nil
}

// ObserveGPUs feeds one GPU snapshot to the sentinel (overheating, memory
// leaks, data-pipeline stalls, idle GPUs held by a run, XID/ECC errors).
// Only the owner of the data directory records what it finds, so two
// processes sampling the same GPUs never report the same trouble twice.
func (e *Engine) ObserveGPUs(ctx context.Context, snap gpumon.Snapshot) {
	if !e.Owner() {
		return
	}
	for _, g := range snap.GPUs {
		for _, a := range e.sent.ObserveGPU(sentinelSample(snap.At, g)) {
			e.recordAnomaly(ctx, a)
		}
	}
}

// sentinelSample is gpumon's picture of one GPU in the sentinel's terms;
// values the GPU did not report are NaN.
func sentinelSample(at time.Time, g gpumon.GPU) sentinel.GPUSample {
	orNaN := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	s := sentinel.GPUSample{UUID: g.UUID, Time: at, UtilPercent: orNaN(g.UtilPercent), MemUsedMiB: float64(g.MemUsedMiB),
		MemTotalMiB: float64(g.MemTotalMiB), TempC: orNaN(g.TempC), ECCUncorrected: -1,
		RunMemMiB: map[string]float64{}, Stage: map[string]string{}}
	if g.TempSlowdownC != nil {
		s.SlowdownTempC = *g.TempSlowdownC
	}
	if g.ThrottleMask != nil {
		s.Throttle = sentinel.Throttle(*g.ThrottleMask)
	}
	if g.ECCUncorrected != nil {
		s.ECCUncorrected = *g.ECCUncorrected
	}
	for _, x := range g.XIDs {
		s.XIDs = append(s.XIDs, int(x))
	}
	for _, p := range g.Processes {
		if p.Owner != nil {
			s.RunMemMiB[p.Owner.RunID] += float64(p.MemMiB)
			s.Stage[p.Owner.RunID] = p.Owner.Stage
		}
	}
	return s
}

// observeQueue tells the sentinel how long a stage has waited and why, so
// that a run stuck in the queue is flagged with the shepherd's reason.
func (e *Engine) observeQueue(ctx context.Context, lr *liveRun, ls *liveStage, now time.Time) {
	since := lr.run.CreatedAt
	if !ls.attempt.FinishedAt.IsZero() {
		since = ls.attempt.FinishedAt
	}
	for _, n := range ls.st.Needs {
		if dep := lr.stage(n); dep != nil && dep.st.FinishedAt.After(since) {
			since = dep.st.FinishedAt
		}
	}
	q := sentinel.QueueObservation{Run: lr.run.ID, Stage: ls.st.Name, WaitingSince: since, Reason: ls.st.Reason,
		NeedMiB: float64(ls.st.GPUMemoryMiB)}
	for _, a := range e.sent.ObserveQueue(q, now) {
		e.recordAnomaly(ctx, a)
	}
}
