package engine

import (
	"context"
	"encoding/json"
	"fmt"
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
	// Runs is how many earlier runs of its template the prediction learnt
	// from; 0 when the user's estimates alone say it.
	Runs  int
	Known bool
	// Stages is each unfinished stage's estimate of its whole run time.
	Stages map[string]predict.Estimate
}

// String is the ETA as `niuma show` and the board write it: "ETA 14 min,
// from 9 earlier runs".
func (t ETA) String() string {
	switch {
	case !t.Known:
		return "ETA unknown (no earlier runs of this template)"
	case t.Runs == 0:
		return fmt.Sprintf("ETA %s, from the estimates given", predict.Words(t.Left))
	case t.Runs == 1:
		return fmt.Sprintf("ETA %s, from 1 earlier run", predict.Words(t.Left))
	}
	return fmt.Sprintf("ETA %s, from %d earlier runs", predict.Words(t.Left), t.Runs)
}

// ETA predicts how much longer an unfinished run takes: for each stage not
// yet done, the user's estimate or the predictor's median (learnt from the
// template's earlier succeeded runs), less what a running stage has run.
// Stages run one after another here, so this is an upper bound when
// independent stages run side by side. It reads storage, so it answers in
// any process.
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
			out.Runs = max(out.Runs, est.N)
		}
		if !est.Known() {
			return ETA{}, nil
		}
		out.Stages[s.Name] = est
		left := est.Median
		if s.State == storage.StageRunning && !s.StartedAt.IsZero() {
			left = max(left-now.Sub(s.StartedAt), 0)
		}
		out.Left += left
	}
	return out, nil
}
