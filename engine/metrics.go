package engine

import (
	"context"
	"path/filepath"
	"sort"
	"strings"

	"niuma/engine/template"
	"niuma/metrics"
	"niuma/storage"
)

// SeriesInfo is what is kept about one metric of a stage as its points are
// written: no point is ever collapsed, so Points counts them all, Repeats
// those that arrived at a step not above an earlier one (a step shared, a
// counter that restarted).
type SeriesInfo struct {
	Stage      string  `json:"stage"`
	Key        string  `json:"key"`
	Attempt    int     `json:"attempt"`
	Points     int64   `json:"points"`
	Repeats    int64   `json:"repeated_steps"`
	NonFinite  int64   `json:"nonfinite"`
	Min        float64 `json:"-"` // NaN when no finite value
	Max        float64 `json:"-"`
	Last       Point   `json:"last"`
	StepSource string  `json:"step_source,omitempty"` // what gave the steps: step, epoch, counter, tensorboard, ...
}

// MetricSeriesInfo returns the kept summary of every metric of a run (the
// highest attempt that logged each), without reading its points: fast
// however many points the run has.
func (e *Engine) MetricSeriesInfo(ctx context.Context, runID string) ([]SeriesInfo, error) {
	sums, err := e.store.MetricSummaries(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]SeriesInfo, len(sums))
	for i, s := range sums {
		out[i] = SeriesInfo{Stage: s.Stage, Key: s.Key, Attempt: s.Attempt, Points: s.Points, Repeats: s.Repeats,
			NonFinite: s.NonFinite, Min: s.Min, Max: s.Max, Last: pointFrom(s.Last), StepSource: s.StepSource}
	}
	return out, nil
}

// SeriesOrder is how a series' points are ordered for a curve.
type SeriesOrder int

// Orders: by step (points sharing a step in arrival order), by arrival
// (Seq: a counter that restarts each epoch draws as one line), by the
// points' own wall time.
const (
	ByStep SeriesOrder = iota
	ByArrival
	ByWall
)

// SeriesOrdered is Series in the given order.
func (e *Engine) SeriesOrdered(ctx context.Context, runID, stage, key string, order SeriesOrder) ([]Point, error) {
	pts, err := e.Series(ctx, runID, stage, key)
	if err != nil {
		return nil, err
	}
	switch order {
	case ByArrival:
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].Seq < pts[j].Seq })
	case ByWall:
		sort.SliceStable(pts, func(i, j int) bool {
			if !pts[i].Wall.Equal(pts[j].Wall) {
				return pts[i].Wall.Before(pts[j].Wall)
			}
			return pts[i].Seq < pts[j].Seq
		})
	}
	return pts, nil
}

// objectiveMissing says, for a finished run whose template names an
// objective, when that metric never appeared among its metrics.
func objectiveMissing(r storage.Run, series []storage.SeriesSummary) string {
	if !r.State.Done() {
		return ""
	}
	t, err := template.Parse(r.TemplateSource, []byte(r.TemplateYAML))
	if err != nil || t.Objective.Metric == "" {
		return ""
	}
	want := t.Objective.Metric
	var keys []string
	seen := map[string]bool{}
	for _, s := range series {
		if s.Key == want || strings.HasSuffix(s.Key, "/"+want) {
			return ""
		}
		if !seen[s.Key] {
			seen[s.Key] = true
			keys = append(keys, s.Key)
		}
	}
	if len(keys) == 0 {
		return "the objective metric " + want + " never appeared: the run stored no metrics at all; print JSON lines, or name a preset or a pattern under the stage's metrics: (see docs/guide/metrics.md)"
	}
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return "the objective metric " + want + " never appeared (the run logged " + strings.Join(keys, ", ") +
		"); check the objective's name in the template against what the stage reports"
}

// metricsStatusPath is where the owner's metrics writer says, while the
// database fails, how many points wait (read by every other process).
func metricsStatusPath(home string) string { return filepath.Join(home, "metrics-status.json") }

// MetricsWaiting says how many of a run's metric points are read but not
// yet stored because the database fails (disk full, I/O error, its lock
// held by another process), e.g. "1,204 metric points not yet stored: disk
// full (since 14:02:11); ...", or "" when none wait. It works in any
// process: the owner asks its writer, the others read its status file.
func (e *Engine) MetricsWaiting(runID string) string {
	if e.Owner() && e.writer != nil {
		return e.writer.Backlog().Describe(runID)
	}
	if b, ok := metrics.ReadBacklog(metricsStatusPath(e.opts.Home)); ok {
		return b.Describe(runID)
	}
	return ""
}

// metricsFaulted reports whether the owner's metrics writer is failing to
// store: the attempts' readers are held back then, so no metric arriving is
// no sign of a hang.
func (e *Engine) metricsFaulted() bool {
	return e.writer != nil && e.writer.Backlog().Reason != ""
}

// SeriesEnvelope is Series for drawing a long curve: about buckets points
// evenly by arrival, plus the extremes and NaNs, by step
// (storage.MetricSeriesEnvelope). A short series comes back whole.
func (e *Engine) SeriesEnvelope(ctx context.Context, runID, stage, key string, buckets int) ([]Point, error) {
	pts, err := e.store.MetricSeriesEnvelope(ctx, runID, stage, key, buckets)
	if err != nil {
		return nil, err
	}
	out := make([]Point, len(pts))
	for i, p := range pts {
		out[i] = pointFrom(p)
	}
	return out, nil
}

// metricsRead fills each stage's MetricsRead from its last attempt's
// cursors: the state stored with them names the presets found.
func (e *Engine) metricsRead(ctx context.Context, info *RunInfo) error {
	for i := range info.Stages {
		st := &info.Stages[i]
		if st.Attempts == 0 {
			continue
		}
		curs, err := e.store.MetricCursors(ctx, info.ID, st.Name, st.Attempts)
		if err != nil {
			return err
		}
		sources := make([]string, 0, len(curs))
		for src := range curs {
			sources = append(sources, src)
		}
		sort.Strings(sources)
		for _, src := range sources {
			if format, from := metrics.Format(src, curs[src].State); format != "" {
				st.MetricsRead = append(st.MetricsRead, MetricsRead{Format: format, From: from})
			}
		}
	}
	return nil
}
