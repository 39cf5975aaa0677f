package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"niuma/shepherd/predict"
	"niuma/storage"
)

// historyRuns is how many of the most recent succeeded runs the predictor
// learns from when it starts: as many as it keeps per stage.
const historyRuns = 500

// predictKey names a stage's history: its template and name.
func predictKey(template, stage string) string { return template + "/" + stage }

// numericParams are the parameters the predictor may scale a run time by.
func numericParams(values map[string]any) map[string]float64 {
	out := map[string]float64{}
	for k, v := range values {
		switch x := v.(type) {
		case float64:
			out[k] = x
		case int64:
			out[k] = float64(x)
		case int:
			out[k] = float64(x)
		}
	}
	return out
}

// observeArchive feeds a predictor the run times of the succeeded stages
// of the most recent succeeded runs (of one template, or all with "").
func observeArchive(ctx context.Context, db *storage.DB, p *predict.Predictor, template string, limit int) (runs int, err error) {
	times, err := db.StageRunTimes(ctx, template, limit)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, x := range times {
		var values map[string]any
		if err := json.Unmarshal([]byte(x.Params), &values); err != nil {
			continue // a run whose parameters do not read says nothing
		}
		p.Observe(predict.Run{Key: predictKey(x.Template, x.Stage), Params: numericParams(values), Duration: x.RunTime})
		seen[x.RunID] = true
	}
	return len(seen), nil
}

// predict is the predictor's estimate of a stage's run time, learnt from
// the archive's earlier runs of its template (loaded at the first call,
// then kept up to date as runs end). It runs on the loop's goroutine.
func (e *Engine) predict(lr *liveRun, stage string) predict.Estimate {
	if e.pred == nil {
		e.pred = predict.New(predict.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := observeArchive(ctx, e.store, e.pred, "", historyRuns); err != nil {
			e.log.Warn("read earlier run times for the predictor", "err", err)
		}
	}
	return e.pred.Predict(predict.Query{Key: predictKey(lr.run.Template, stage), Params: numericParams(lr.values)})
}

// learn tells the predictor how long the stages of a run that just
// succeeded took.
func (e *Engine) learn(ctx context.Context, lr *liveRun) {
	if e.pred == nil || lr.run.State != storage.RunSucceeded {
		return // a predictor not loaded yet reads the run from the archive
	}
	attempts, err := e.store.Attempts(ctx, lr.run.ID)
	if err != nil {
		e.log.Warn("read run times for the predictor", "run", lr.run.ID, "err", err)
		return
	}
	params := numericParams(lr.values)
	// Summed per stage in one walk: a run may have thousands of stages.
	ran := make(map[string]time.Duration, len(lr.stages))
	for _, a := range attempts {
		if (a.State == storage.AttemptSucceeded || a.State == storage.AttemptPreempted) &&
			!a.StartedAt.IsZero() && a.FinishedAt.After(a.StartedAt) {
			ran[a.Stage] += a.FinishedAt.Sub(a.StartedAt)
		}
	}
	for _, ls := range lr.stages {
		e.pred.Observe(predict.Run{Key: predictKey(lr.run.Template, ls.st.Name), Params: params, Duration: ran[ls.st.Name]})
	}
}

// ETA is how long a run is expected to take still, and what says so.
type ETA struct {
	Left time.Duration // 0 with Known false: nothing to go by
	// Low and High bound Left: the predictor's bounds summed over the
	// unfinished stages (less what a running one has run).
	Low, High time.Duration
	// Runs is how many earlier runs of its template the prediction learnt
	// from; Given is set when a stage's own estimate (the user's) said its
	// share, and Paced when a running stage's share is from its own pace
	// (the steps it reports against its total_steps).
	Runs         int
	Given, Paced bool
	Known        bool
	// Beyond is the counts (epochs, steps…) this run has past twice the
	// range of the earlier runs the prediction learnt from.
	Beyond []predict.Beyond
	// Stages is each unfinished stage's estimate of its whole run time,
	// from its start.
	Stages map[string]predict.Estimate
}

// String is the ETA as `niuma show` writes it: "ETA 14 min, from 9
// earlier runs".
func (t ETA) String() string {
	if !t.Known {
		return "ETA unknown (no earlier runs of this template)"
	}
	return "ETA " + t.Words()
}

// Words is a known ETA without its "ETA", as the board writes it after
// "ETA" or "then runs about": "4 min, from its progress and 9 earlier
// runs".
func (t ETA) Words() string {
	var from []string
	if t.Paced {
		from = append(from, "its progress")
	}
	switch {
	case t.Runs == 1:
		from = append(from, "1 earlier run")
	case t.Runs > 1:
		from = append(from, fmt.Sprintf("%d earlier runs", t.Runs))
	}
	if t.Given || len(from) == 0 {
		from = append(from, "the estimates given")
	}
	out := predict.Words(t.Left) + ", from " + strings.Join(from, " and ")
	if len(t.Beyond) > 0 && !t.Paced {
		// The earlier runs alone say it, and this one is unlike them.
		g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
		unlike := make([]string, len(t.Beyond))
		for i, b := range t.Beyond {
			unlike[i] = b.Param + " " + g(b.Value)
		}
		if b := t.Beyond[0]; len(t.Beyond) == 1 {
			theirs := g(b.Min)
			if b.Max != b.Min {
				theirs += "–" + g(b.Max)
			}
			unlike[0] += ", theirs " + theirs
		}
		out += " (unlike them: " + strings.Join(unlike, ", ") + ")"
	}
	return out
}

// TotalStepsKey is the metric a workload reports its total number of
// steps with ({"step": 12, "loss": 0.4, "total_steps": 30}): the board
// shows how far the stage is, and its ETA follows the stage's pace.
const TotalStepsKey = "total_steps"

// minPace is how far a running stage must be before its own pace says
// its share of the ETA in place of the earlier runs (or the user's
// estimate): its first steps are a thin sample. A stage with neither, or
// whose earlier runs are unlike it (counts past their range: Beyond),
// goes by its pace as soon as it has one.
const minPace = 0.05

// ETA predicts how much longer an unfinished run takes: for each stage not
// yet done, the user's estimate or the predictor's median (learnt from the
// template's earlier succeeded runs), less what a running stage has run;
// a running stage that reports its total_steps goes by its own pace once
// it is minPace of the way (so a run of 500 epochs after runs of 30 is
// not said to end in a second). Stages run one after another here, so
// this is an upper bound when independent stages run side by side. It
// reads storage, so it answers in any process.
func (e *Engine) ETA(ctx context.Context, info RunInfo) (ETA, error) {
	var out ETA
	if info.State.Done() {
		return out, nil
	}
	p := predict.New(predict.Options{})
	if _, err := observeArchive(ctx, e.store, p, info.Template, historyRuns); err != nil {
		return out, err
	}
	stages, err := e.store.Stages(ctx, info.ID)
	if err != nil {
		return out, err
	}
	var paces map[string]pace
	for _, s := range stages {
		if s.State == storage.StageRunning {
			// Without its pace (a read that failed) a stage goes by the
			// earlier runs, as before it reported.
			paces, _ = e.paces(ctx, info.ID)
			break
		}
	}
	params := numericParams(info.Params)
	now := time.Now()
	out.Known, out.Stages = true, map[string]predict.Estimate{}
	for _, s := range stages {
		if s.State.Done() {
			continue
		}
		est := predict.Estimate{Median: s.Estimate, Low: s.Estimate, High: s.Estimate}
		if s.Estimate <= 0 {
			est = p.Predict(predict.Query{Key: predictKey(info.Template, s.Name), Params: params})
		}
		ran := time.Duration(0)
		if s.State == storage.StageRunning && !s.StartedAt.IsZero() {
			ran = now.Sub(s.StartedAt)
		}
		paced := false
		if pc, ok := paces[s.Name]; ok && s.State == storage.StageRunning && (pc.done >= minPace || !est.Known() || (len(est.Beyond) > 0 && pc.reported)) {
			whole := ran + pc.left(now)
			est, paced = predict.Estimate{Median: whole, Low: whole, High: whole}, true
		}
		if !est.Known() {
			return ETA{}, nil
		}
		switch {
		case paced:
			out.Paced = true
		case s.Estimate > 0:
			out.Given = true
		default:
			out.Runs = max(out.Runs, est.N)
			for _, b := range est.Beyond {
				if !slices.ContainsFunc(out.Beyond, func(o predict.Beyond) bool { return o.Param == b.Param }) {
					out.Beyond = append(out.Beyond, b)
				}
			}
		}
		out.Stages[s.Name] = est
		out.Left += max(est.Median-ran, 0)
		out.Low += max(est.Low-ran, 0)
		out.High += max(est.High-ran, 0)
	}
	// A run past its median still has some time to go in words: "1 s",
	// not "0 s".
	out.Left = max(out.Left, time.Second)
	out.High = max(out.High, out.Left)
	return out, nil
}

// pace is how far a running stage's latest attempt is by its own report.
type pace struct {
	done    float64   // share of its total_steps, in (0, 1]
	perStep float64   // seconds a step has taken
	steps   float64   // steps still to go
	at      time.Time // when it last reported
	// reported is set when the pace runs between two reports (so leaves
	// the start-up out), not from the attempt's start.
	reported bool
}

// left is how long the stage still has to go at its pace: the steps to
// go, less the time since it last reported.
func (p pace) left(now time.Time) time.Duration {
	secs := p.perStep * p.steps
	if !(secs < maxPaceSeconds) {
		secs = maxPaceSeconds // a total_steps no stage will reach: as good as unknown
	}
	return max(time.Duration(secs*float64(time.Second))-now.Sub(p.at), 0)
}

// maxPaceSeconds bounds what a pace may say is left (a year).
const maxPaceSeconds = 365 * 24 * 3600.0

// paces reads the pace of each stage of a run whose latest attempt
// reports a total_steps and has made a step. Only the latest attempt
// counts: an earlier one's steps (a retry's failed attempt) say nothing
// of it.
func (e *Engine) paces(ctx context.Context, runID string) (map[string]pace, error) {
	sums, err := e.store.MetricSummaries(ctx, runID)
	if err != nil {
		return nil, err
	}
	hasTotal := false
	for _, m := range sums {
		hasTotal = hasTotal || m.Key == TotalStepsKey
	}
	if !hasTotal {
		return nil, nil
	}
	attempts, err := e.store.Attempts(ctx, runID)
	if err != nil {
		return nil, err
	}
	latest := map[string]storage.Attempt{} // by stage
	for _, a := range attempts {
		if l, ok := latest[a.Stage]; !ok || a.Number > l.Number {
			latest[a.Stage] = a
		}
	}
	totals := map[string]float64{}
	last := map[string]storage.MetricPoint{}
	for _, m := range sums {
		if a, ok := latest[m.Stage]; !ok || m.Attempt != a.Number {
			continue
		}
		if m.Key == TotalStepsKey {
			totals[m.Stage] = m.Last.Value
			continue
		}
		if l, ok := last[m.Stage]; !ok || m.Last.Step > l.Step {
			last[m.Stage] = m.Last
		}
	}
	out := map[string]pace{}
	for stage, total := range totals {
		p, ok := last[stage]
		start := latest[stage].StartedAt
		if !ok || !(total >= 1) || p.Step < 1 || start.IsZero() || p.Wall.IsZero() || p.Wall.Before(start) {
			continue
		}
		step := min(float64(p.Step), total)
		pc := pace{done: step / total, perStep: p.Wall.Sub(start).Seconds() / step, steps: total - step, at: p.Wall}
		// Between its first report and its last, the pace leaves out the
		// start-up (imports, data loading) and counts only the steps this
		// attempt made (one resumed from a checkpoint starts far in).
		first, ok, err := e.store.FirstMetricPoint(ctx, runID, stage, p.Key, p.Attempt)
		if err != nil {
			return nil, err
		}
		if ok && first.Step < p.Step && !first.Wall.IsZero() && p.Wall.After(first.Wall) {
			pc.perStep = p.Wall.Sub(first.Wall).Seconds() / float64(p.Step-first.Step)
			pc.reported = true
		}
		out[stage] = pc
	}
	return out, nil
}
