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
	"niuma/shepherd"
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
	// The sentinel's clock is the arrival here, not the point's own wall
	// time: a TensorBoard file's events may be days old.
	now := time.Now()
	sp := make([]sentinel.Point, len(pts))
	for i, p := range pts {
		sp[i] = sentinel.Point{Run: p.RunID, Stage: p.Stage, Attempt: p.Attempt, Key: p.Key, Step: p.Step, Value: p.Value, Wall: now}
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
	now := time.Now()
	if e.metricsFaulted() {
		// The readers wait for the database: silence is no hang. The
		// detectors' clock restarts once points flow again.
		e.sent.Hold(now)
		return
	}
	for _, a := range e.sent.Tick(now) {
		e.recordAnomaly(ctx, a)
		e.onAnomaly(ctx, a)
	}
}

// onAnomaly applies the templates' answers to an anomaly, on the loop's
// goroutine: to the attempt it is about (a run's own anomaly), or to the
// running attempts on the GPU it is about — the run it names (a leak, an
// idle GPU), else every run there (overheating, a stall, XID/ECC errors).
// Each run is judged by its own template.
func (e *Engine) onAnomaly(ctx context.Context, a sentinel.Anomaly) {
	switch a.Kind.Scope() {
	case sentinel.ScopeRun:
		if lr := e.runs[a.Run]; lr != nil {
			if ls := lr.stage(a.Stage); ls != nil && ls.st.State == storage.StageRunning && ls.st.Attempts == a.Attempt {
				e.act(ctx, lr, ls, a)
			}
		}
	case sentinel.ScopeGPU:
		if a.GPU == "" {
			return
		}
		for _, lr := range sortRuns(e.runs) {
			if a.Run != "" && lr.run.ID != a.Run {
				continue
			}
			for _, ls := range lr.runningStages() {
				if ls.st.State != storage.StageRunning || !holds(ls, a.GPU) {
					continue
				}
				b := a
				b.Run, b.Stage, b.Attempt = lr.run.ID, ls.st.Name, ls.st.Attempts
				e.act(ctx, lr, ls, b)
			}
		}
	}
}

func holds(ls *liveStage, uuid string) bool {
	for _, g := range ls.gpus {
		if g.UUID == uuid {
			return true
		}
	}
	return false
}

// handOff gives the loop a result from a goroutine that must not block on
// it (the GPU sampler's): at once when the loop has room, else from a
// goroutine that gives up after a minute (the loop has stopped).
func (e *Engine) handOff(r result) {
	select {
	case e.results <- r:
		return
	default:
	}
	go func() {
		t := time.NewTimer(time.Minute)
		defer t.Stop()
		select {
		case e.results <- r:
		case <-t.C:
			e.log.Warn("the engine loop did not take an anomaly; its action was not applied", "run", r.runID)
		}
	}()
}

// recordAnomaly stores an anomaly as an event and tells subscribers.
func (e *Engine) recordAnomaly(ctx context.Context, a sentinel.Anomaly) {
	ev := storage.Event{RunID: a.Run, Stage: a.Stage, GPU: a.GPU, Kind: string(a.Kind),
		Severity: string(a.Severity), Message: a.Message, Fix: a.Fix, Evidence: a.Evidence.JSON(), At: a.At}
	if _, err := e.store.AddEvent(ctx, ev); err != nil {
		e.logWarn(ctx, "store anomaly", "kind", a.Kind, "run", a.Run, "err", err)
	}
	e.events.Publish(Event{Kind: AnomalyRaised, RunID: a.Run, Stage: a.Stage, Reason: a.Message, Severity: string(a.Severity), At: a.At})
}

// act applies the template's answer to an anomaly of a running attempt:
// flag (nothing more), notify the user, stop the run, or retry the attempt
// (with changed parameters when the answer sets any). The attempt is
// stopped now; finish does the rest.
func (e *Engine) act(ctx context.Context, lr *liveRun, ls *liveStage, a sentinel.Anomaly) {
	if ls.st.State != storage.StageRunning || ls.st.Pending.Action != "" {
		return
	}
	d := e.decide(ctx, lr, ls, a)
	switch d.Do {
	case sentinel.Notify:
		e.notify(ctx, lr, ls, a)
	case sentinel.Stop:
		why := "stopped by the sentinel: " + a.Message
		if d.Why != "" {
			why += " (" + d.Why + ")"
		}
		// The decision is stored before the attempt is stopped, so that
		// the next owner applies it should this one stop first.
		if e.transition(ctx, lr, ls, evDecide{pending: storage.Pending{Action: storage.PendingStop, Note: why}}) != nil {
			return
		}
		e.recordNote(ctx, lr, ls, "stop", fmt.Sprintf("stopped the run after %s: %s", a.Kind, strings.TrimPrefix(why, "stopped by the sentinel: ")))
		e.stopAttempt(ls) // a no-op until the attempt reports its handle; handle stops it then
	case sentinel.Retry:
		p, err := retryDecision(lr, d.Params)
		if err != nil {
			e.log.Warn("sentinel retry refused", "run", lr.run.ID, "err", err)
			e.recordNote(ctx, lr, ls, "retry_refused", "the sentinel's retry was not made: "+err.Error())
			return
		}
		what := strings.Join(d.Changes, ", ")
		if what == "" {
			what = "the same parameters"
		}
		p.Note = fmt.Sprintf("retrying after %s with %s", a.Kind, what)
		if e.transition(ctx, lr, ls, evDecide{pending: p}) != nil {
			return
		}
		e.recordNote(ctx, lr, ls, "retry", p.Note)
		e.stopAttempt(ls) // a no-op until the attempt reports its handle; handle stops it then
	}
}

// retryDecision is a sentinel retry with the parameters an answer sets,
// checked against the run's template.
func retryDecision(lr *liveRun, params map[string]any) (storage.Pending, error) {
	values, err := lr.tmpl.Normalize(template.Values(params))
	if err == nil {
		err = lr.tmpl.Validate(values)
	}
	if err != nil {
		return storage.Pending{}, err
	}
	js, err := values.JSON()
	if err != nil {
		return storage.Pending{}, err
	}
	p := storage.Pending{Action: storage.PendingRetry}
	if string(js) != lr.run.Params {
		p.Params = string(js)
	}
	return p, nil
}

// actQueued applies the template's answer to an anomaly of a stage waiting
// in the queue (it has no attempt to retry): flag, notify, or stop the run,
// which fails the stage with the anomaly as its reason.
func (e *Engine) actQueued(ctx context.Context, lr *liveRun, ls *liveStage, a sentinel.Anomaly) {
	if ls.st.State != storage.StageQueued {
		return
	}
	switch e.decide(ctx, lr, ls, a).Do {
	case sentinel.Notify:
		e.notify(ctx, lr, ls, a)
	case sentinel.Stop:
		if e.transition(ctx, lr, ls, evStopQueued{why: "stopped by the sentinel: " + a.Message}) == nil {
			e.recordNote(ctx, lr, ls, "stop", fmt.Sprintf("stopped the run after %s, while it waited in the queue", a.Kind))
		}
	}
}

// notify records that the user was told about an anomaly and tells every
// subscriber that delivers notifications (the window; a headless engine
// prints a line and asks the desktop to show it).
func (e *Engine) notify(ctx context.Context, lr *liveRun, ls *liveStage, a sentinel.Anomaly) {
	msg := fmt.Sprintf("%s in run %s, stage %s: %s", a.Kind, lr.run.ID, ls.st.Name, a.Message)
	e.recordNote(ctx, lr, ls, "notify", "notified: "+msg)
	e.events.Publish(Event{Kind: Notified, RunID: lr.run.ID, Stage: ls.st.Name, Reason: msg, At: a.At})
}

// recordNote stores what the engine did about an anomaly, for the record.
func (e *Engine) recordNote(ctx context.Context, lr *liveRun, ls *liveStage, kind, msg string) {
	ev := storage.Event{RunID: lr.run.ID, Stage: ls.st.Name, Kind: "action_" + kind, Severity: "info", Message: msg, At: time.Now()}
	if _, err := e.store.AddEvent(ctx, ev); err != nil {
		e.logWarn(ctx, "store action", "run", lr.run.ID, "err", err)
	}
	e.events.Publish(Event{Kind: AnomalyRaised, RunID: lr.run.ID, Stage: ls.st.Name, Reason: msg, Severity: "info"})
}

// paramsChanged follows a run's new parameters (a sentinel retry, stored
// by its transition): the loop's view and params.json, so the next attempt
// and later stages see the new values.
func (e *Engine) paramsChanged(lr *liveRun) {
	v, err := template.ValuesFromJSON(lr.tmpl, []byte(lr.run.Params))
	if err != nil {
		e.log.Error("the run's new parameters do not fit its template", "run", lr.run.ID, "err", err)
		return
	}
	lr.values = v
	if err := os.WriteFile(filepath.Join(lr.run.Dir, "params.json"), append([]byte(lr.run.Params), '\n'), 0o644); err != nil {
		e.log.Error("write params.json", "run", lr.run.ID, "err", err)
	}
}

// ObserveGPUs feeds one GPU snapshot to the sentinel (overheating, memory
// leaks, data-pipeline stalls, idle GPUs held by a run, XID/ECC errors) and
// hands what it finds to the loop, which applies the templates' answers to
// the runs on that GPU. Only the owner of the data directory records what
// it finds, so two processes sampling the same GPUs never report the same
// trouble twice.
func (e *Engine) ObserveGPUs(ctx context.Context, snap gpumon.Snapshot) {
	if !e.Owner() {
		return
	}
	for _, g := range snap.GPUs {
		for _, a := range e.sent.ObserveGPU(sentinelSample(snap.At, g)) {
			if snap.Simulated {
				a.Message += " (A simulated GPU: pretend telemetry, not a measurement.)"
			}
			e.recordAnomaly(ctx, a)
			a := a
			e.handOff(result{anomaly: &a})
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

// observeQueue tells the sentinel how long a stage has waited, why (the
// shepherd's decision: its words, code, the largest free memory and the
// runs ahead), so that a run stuck in the queue is flagged, and applies the
// template's answer to it. It runs on the loop's goroutine.
func (e *Engine) observeQueue(ctx context.Context, lr *liveRun, ls *liveStage, d shepherd.Decision, now time.Time) {
	var needsEnd []time.Time
	for _, n := range ls.st.Needs {
		if dep := lr.stage(n); dep != nil {
			needsEnd = append(needsEnd, dep.st.FinishedAt)
		}
	}
	since := waitStart(lr.run.CreatedAt, ls.attempt.FinishedAt, needsEnd...)
	e.waits.note(stageKey(lr, ls), string(d.Reason.Code), since)
	largest := float64(d.Reason.LargestFreeMiB)
	if d.Reason.LargestFreeGPU < 0 || d.Reason.Code == shepherd.WaitNoGPUs {
		largest = -1 // no usable GPU: nothing is free
	}
	q := sentinel.QueueObservation{Run: lr.run.ID, Stage: ls.st.Name, WaitingSince: since, Reason: d.Wait,
		Code: string(d.Reason.Code), NeedMiB: float64(ls.st.GPUMemoryMiB), LargestFreeMiB: largest, Ahead: d.Reason.Ahead}
	for _, a := range e.sent.ObserveQueue(q, now) {
		e.recordAnomaly(ctx, a)
		e.actQueued(ctx, lr, ls, a)
	}
}
