package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"niuma/engine/template"
	"niuma/storage"
)

// Reproducibility check defaults.
const (
	// KindNotReproducible is the anomaly kind CheckReproducible raises.
	KindNotReproducible = "not_reproducible"
	// ReproTolerance is the relative difference of two final objectives
	// beyond which runs with one fingerprint count as not reproducible.
	ReproTolerance = 1e-6
	reproFix       = "set all random seeds (Python, NumPy, framework, data loader workers) from NIUMA_SEED and enable deterministic algorithms"
)

// CheckReproducible compares a succeeded run's final objective with that of
// the other succeeded runs of the same fingerprint (same template, values,
// seed, runtime, code and data). When one differs by more than
// ReproTolerance (relative), the workload is not deterministic: an anomaly
// of kind KindNotReproducible is stored with the run and returned. It is
// raised once per run; a run without a fingerprint or an objective, or the
// first of its fingerprint, is never flagged.
func (e *Engine) CheckReproducible(ctx context.Context, runID string) (*AnomalyInfo, error) {
	r, err := e.store.GetRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("check reproducibility of %s: %w", runID, err)
	}
	if r.State != storage.RunSucceeded || r.Fingerprint == "" {
		return nil, nil
	}
	t, err := template.Parse(r.TemplateSource, []byte(r.TemplateYAML))
	if err != nil || t.Objective.Metric == "" {
		return nil, nil // no objective: nothing to compare
	}
	metric := t.Objective.Metric
	mine, ok, err := e.finalValue(ctx, runID, metric)
	if err != nil || !ok {
		return nil, err
	}
	evs, err := e.store.Events(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("check reproducibility of %s: %w", runID, err)
	}
	for _, ev := range evs {
		if ev.Kind == KindNotReproducible {
			return nil, nil // said already
		}
	}
	others, err := e.store.ListRuns(ctx, storage.RunFilter{States: []storage.RunState{storage.RunSucceeded}, Fingerprint: r.Fingerprint})
	if err != nil {
		return nil, fmt.Errorf("check reproducibility of %s: %w", runID, err)
	}
	for _, o := range others {
		if o.ID == runID || o.Fingerprint != r.Fingerprint {
			continue
		}
		theirs, ok, err := e.finalValue(ctx, o.ID, metric)
		if err != nil {
			return nil, err
		}
		if !ok || sameResult(mine, theirs) {
			continue
		}
		evidence, _ := json.Marshal(map[string]any{
			"metric": metric, "run": runID, "value": mine, "other_run": o.ID, "other_value": theirs,
			"fingerprint": r.Fingerprint, "seed": r.Seed,
		})
		ev := storage.Event{RunID: runID, Kind: KindNotReproducible, Severity: storage.SeverityWarning,
			Message: fmt.Sprintf("not reproducible: run %s has the same inputs and seed %d as run %s, but %s is %g there and %g here",
				runID, r.Seed, o.ID, metric, theirs, mine),
			Fix: reproFix, Evidence: string(evidence)}
		id, err := e.store.AddEvent(ctx, ev)
		if err != nil {
			return nil, fmt.Errorf("record the reproducibility anomaly of %s: %w", runID, err)
		}
		return &AnomalyInfo{ID: id, Kind: ev.Kind, Severity: ev.Severity, Message: ev.Message, Fix: ev.Fix,
			Evidence: ev.Evidence}, nil
	}
	return nil, nil
}

// finalValue is a run's last value of metric: from the last stage (in run
// order) that reports it.
func (e *Engine) finalValue(ctx context.Context, runID, metric string) (float64, bool, error) {
	pts, err := e.store.LastMetrics(ctx, runID)
	if err != nil {
		return 0, false, fmt.Errorf("read the metrics of %s: %w", runID, err)
	}
	v, ok := 0.0, false
	for _, p := range pts { // ordered by stage position
		if p.Key == metric {
			v, ok = p.Value, true
		}
	}
	return v, ok, nil
}

// sameResult compares two objectives with a relative tolerance; two NaNs
// are the same result.
func sameResult(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= ReproTolerance*max(math.Abs(a), math.Abs(b))
}
