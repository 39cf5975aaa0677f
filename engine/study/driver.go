package study

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/storage"
	"niuma/tuner"
)

// Driver drives studies: it follows their trials, prunes losing ones and
// launches the next suggestions. One driver may drive one study at a time;
// the caller makes sure no two processes drive the same study (the
// storage refuses a trial number twice either way).
type Driver struct {
	Engine Engine
	Store  *storage.DB
	// Poll is the wait between passes; default half a second.
	Poll time.Duration
	// Say, when set, is told what the driver does, a line at a time.
	Say func(string)

	stageOf map[string]string      // run ID → the stage that reports the objective
	ended   map[string]tuner.Curve // curves of trials whose runs have ended (they no longer change)
	asked   map[string]bool        // runs the driver asked to prune (or found pruned)
	warm    []tuner.Trial          // earlier runs the tuner learns from (see warmStart)
	warmed  bool
}

func (d *Driver) say(format string, args ...any) {
	if d.Say != nil {
		d.Say(fmt.Sprintf(format, args...))
	}
}

// Drive runs passes over the study until every trial of its budget has
// ended, then marks it finished. Cancelling ctx leaves the study running
// in storage, to be driven again.
func (d *Driver) Drive(ctx context.Context, l Loaded) (Result, error) {
	poll := d.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		done, err := d.Pass(ctx, l)
		if err != nil {
			return Result{}, err
		}
		if done {
			return Status(ctx, d.Store, l.ID)
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// Pass does one round of the study's work: it links trials stored before
// their run was submitted (a restart), records the end of trials whose
// runs ended, prunes losing running trials, and launches new trials while
// there is room and budget. done reports that the study has finished.
func (d *Driver) Pass(ctx context.Context, l Loaded) (done bool, err error) {
	if d.stageOf == nil {
		d.stageOf, d.ended, d.asked = map[string]string{}, map[string]tuner.Curve{}, map[string]bool{}
	}
	st, err := d.Store.GetStudy(ctx, l.ID)
	if err != nil {
		return false, err
	}
	// A stopped study launches nothing more: its driver only records how
	// the trials still running end.
	stopped := st.State == storage.StudyStopped
	trials, err := d.Store.Trials(ctx, l.ID)
	if err != nil {
		return false, err
	}
	for i := range trials {
		switch {
		case trials[i].State != storage.TrialSubmitting:
		case stopped:
			if err := d.Store.EndTrial(ctx, l.ID, trials[i].Number, storage.TrialCancelled, math.NaN()); err != nil {
				return false, err
			}
			trials[i].State = storage.TrialCancelled
		default:
			if err := d.submit(ctx, l, &trials[i]); err != nil {
				return false, err
			}
		}
	}
	curves := make([]tuner.Curve, len(trials))
	for i := range trials {
		tr := &trials[i]
		if tr.RunID == "" {
			continue
		}
		if c, ok := d.ended[tr.RunID]; ok {
			curves[i] = c
			continue
		}
		c, err := d.curve(ctx, l, tr.RunID)
		if err != nil {
			return false, err
		}
		curves[i] = c
		if tr.State.Done() {
			d.ended[tr.RunID] = c
			continue
		}
		info, err := d.Engine.Run(ctx, tr.RunID)
		if err != nil {
			return false, err
		}
		if !info.State.Done() {
			continue
		}
		// Read the curve again: points may have landed between the two reads.
		if c, err = d.curve(ctx, l, tr.RunID); err != nil {
			return false, err
		}
		curves[i] = c
		state, obj, err := d.outcome(ctx, l, info, c)
		if err != nil {
			return false, err
		}
		if err := d.Store.EndTrial(ctx, l.ID, tr.Number, state, obj); err != nil {
			return false, err
		}
		tr.State, tr.Objective = state, obj
		d.ended[tr.RunID] = c
		if state == storage.TrialPruned {
			d.say("trial %d stopped (run %s): best %s %s before it was pruned", tr.Number, tr.RunID, l.Objective, num(obj))
		} else {
			d.say("trial %d %s (run %s): %s %s", tr.Number, state, tr.RunID, l.Objective, num(obj))
		}
	}
	active, ended := 0, 0
	for _, tr := range trials {
		if tr.State.Done() {
			ended++
		} else {
			active++
		}
	}
	if stopped {
		return active == 0, nil
	}
	if err := d.prune(ctx, l, trials, curves); err != nil {
		return false, err
	}
	if n := min(l.Parallel-active, l.Budget-len(trials)); n > 0 {
		if err := d.launch(ctx, l, trials, n); err != nil {
			return false, err
		}
		return false, nil
	}
	if len(trials) >= l.Budget && ended == len(trials) {
		if err := d.Store.SetStudyState(ctx, l.ID, storage.StudyFinished, ""); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// curve is the objective as the run has reported it so far, from the
// first stage (in the template's order) that reports it.
func (d *Driver) curve(ctx context.Context, l Loaded, runID string) (tuner.Curve, error) {
	c := tuner.Curve{ID: runID}
	var stages []string
	switch s, ok := d.stageOf[runID]; {
	case ok:
		stages = []string{s}
	case l.Template != nil:
		stages = l.Template.Order()
	default: // a study followed without its template (stopping it): the run's own stages
		info, err := d.Engine.Run(ctx, runID)
		if err != nil {
			return c, err
		}
		for _, st := range info.Stages {
			stages = append(stages, st.Name)
		}
	}
	for _, s := range stages {
		pts, err := d.Engine.Series(ctx, runID, s, l.Objective)
		if err != nil {
			return c, fmt.Errorf("the %s of run %s: %w", l.Objective, runID, err)
		}
		if len(pts) == 0 {
			continue
		}
		d.stageOf[runID] = s
		for _, p := range pts {
			if n := len(c.Steps); n > 0 && c.Steps[n-1] == p.Step {
				c.Values[n-1] = p.Value // the latest report of a step counts
				continue
			}
			c.Steps, c.Values = append(c.Steps, p.Step), append(c.Values, p.Value)
		}
		break
	}
	return c, nil
}

// outcome is the trial state and objective of a run that has ended. A
// succeeded run's objective is the best value any of its stages reported
// (as the archive shows it); a pruned one's is the best it reached
// before it was stopped.
func (d *Driver) outcome(ctx context.Context, l Loaded, info engine.RunInfo, c tuner.Curve) (storage.TrialState, float64, error) {
	bestOf := func(vals []float64, acc float64) float64 {
		for _, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			if math.IsNaN(acc) || (l.Goal == "max" && v > acc) || (l.Goal != "max" && v < acc) {
				acc = v
			}
		}
		return acc
	}
	obj := bestOf(c.Values, math.NaN())
	_, err := d.Store.RunPrune(ctx, info.ID)
	switch {
	case err == nil:
		return storage.TrialPruned, obj, nil
	case !errors.Is(err, storage.ErrNotFound):
		return "", 0, err
	}
	switch info.State {
	case engine.Succeeded:
		for _, st := range info.Stages {
			if st.Name == d.stageOf[info.ID] {
				continue
			}
			pts, err := d.Engine.Series(ctx, info.ID, st.Name, l.Objective)
			if err != nil {
				return "", 0, err
			}
			vals := make([]float64, len(pts))
			for i, p := range pts {
				vals[i] = p.Value
			}
			obj = bestOf(vals, obj)
		}
		return storage.TrialDone, obj, nil
	case engine.Failed:
		return storage.TrialFailed, obj, nil
	}
	return storage.TrialCancelled, obj, nil
}

// prune asks the engine to stop each running trial the pruner judges
// losing, compared with every other trial's curve.
func (d *Driver) prune(ctx context.Context, l Loaded, trials []storage.Trial, curves []tuner.Curve) error {
	rule := tuner.Rule(l.Pruner)
	if rule == tuner.NoPruning || rule == "" {
		return nil
	}
	p := tuner.Pruner{Rule: rule, Goal: tuner.Goal(l.Goal), Metric: l.Objective, Warmup: l.Warmup}
	full := fullLength(trials, curves)
	for i, tr := range trials {
		if tr.State != storage.TrialRunning || d.asked[tr.RunID] || len(curves[i].Steps) == 0 {
			continue
		}
		if full > 0 && curves[i].Steps[len(curves[i].Steps)-1] >= full {
			continue // it has reported as far as a finished trial did: stopping it saves nothing
		}
		if _, err := d.Store.RunPrune(ctx, tr.RunID); err == nil {
			d.asked[tr.RunID] = true // decided before a restart
			continue
		}
		var others []tuner.Curve
		for j, c := range curves {
			if j != i && len(c.Steps) > 0 {
				others = append(others, c)
			}
		}
		dec := p.Decide(curves[i], others)
		if !dec.Prune {
			continue
		}
		pr := storage.Prune{RunID: tr.RunID, Reason: string(dec.Reason), Metric: l.Objective, Step: dec.Step, Value: dec.Value,
			Reference: dec.Reference, Trials: dec.Trials, Rung: dec.Rung, RungStep: dec.RungStep, Evidence: dec.Evidence()}
		for _, c := range dec.Compared {
			pr.Compared = append(pr.Compared, storage.Compared{RunID: c.ID, Value: c.Value})
		}
		if err := d.Engine.Prune(ctx, pr); err != nil {
			// The run may have ended between the read and the request:
			// the next pass records how.
			d.say("trial %d: not pruned: %v", tr.Number, err)
			continue
		}
		d.asked[tr.RunID] = true
		d.say("trial %d pruned (run %s): %s", tr.Number, tr.RunID, pr.Evidence)
	}
	return nil
}

// fullLength is the last step a trial that ran to its end reported (the
// longest such), 0 before any did.
func fullLength(trials []storage.Trial, curves []tuner.Curve) int64 {
	var full int64
	for i, tr := range trials {
		if n := len(curves[i].Steps); tr.State == storage.TrialDone && n > 0 {
			full = max(full, curves[i].Steps[n-1])
		}
	}
	return full
}

// launch asks the tuner for n more trials and submits them. The first
// trial of a study runs the study's values as they are (the template's
// defaults and the user's settings), so that the search is measured
// against them and never ends worse.
func (d *Driver) launch(ctx context.Context, l Loaded, trials []storage.Trial, n int) error {
	var sugg []tuner.Suggestion
	if len(trials) == 0 {
		sugg = append(sugg, tuner.Suggestion{Values: baseline(l), Method: "defaults"})
		n--
	}
	if n > 0 {
		tt, err := d.tunerTrials(l, trials)
		if err != nil {
			return err
		}
		warm, err := d.warmStart(ctx, l)
		if err != nil {
			return err
		}
		tt = append(append(warm, tt...), pendingOf(sugg)...)
		cfg := tuner.Config{Space: l.Space, Goal: tuner.Goal(l.Goal), Fixed: d.fixedOf(l), Seed: uint64(l.Seed)}
		more, err := tuner.Suggest(cfg, tt, n)
		if err != nil {
			return fmt.Errorf("suggest the next trials of study %s: %w", l.ID, err)
		}
		sugg = append(sugg, more...)
	}
	for k, s := range sugg {
		values := template.Values{}
		for name, x := range l.Fixed {
			values[name] = x
		}
		for name, x := range s.Values {
			values[name] = x
		}
		params, err := values.JSON()
		if err != nil {
			return err
		}
		var pred []byte
		if s.Prediction != nil {
			if pred, err = json.Marshal(finitePrediction(*s.Prediction)); err != nil {
				return fmt.Errorf("encode a prediction: %w", err)
			}
		}
		tr := storage.Trial{StudyID: l.ID, Number: len(trials) + k, Params: string(params), Method: string(s.Method),
			Prediction: string(pred), State: storage.TrialSubmitting, Objective: math.NaN()}
		if err := d.Store.AddTrial(ctx, tr); err != nil {
			if errors.Is(err, storage.ErrTrialExists) {
				return fmt.Errorf("study %s is being driven by another process (trial %d was added under this one)", l.ID, tr.Number)
			}
			return err
		}
		if err := d.submit(ctx, l, &tr); err != nil {
			return err
		}
		msg := fmt.Sprintf("trial %d started (run %s, %s): %s", tr.Number, tr.RunID, s.Method, describe(l.Space, s.Values))
		if p := s.Prediction; p != nil {
			msg += fmt.Sprintf("; expected %s %s", l.Objective, p.Spread())
		}
		d.say("%s", msg)
	}
	return nil
}

// submit gives a stored trial its run: the run a killed driver submitted
// for it when there is one (same study, same values, not another trial's),
// else a new one.
func (d *Driver) submit(ctx context.Context, l Loaded, tr *storage.Trial) error {
	ids, params, err := d.Store.SweepRuns(ctx, l.ID)
	if err != nil {
		return err
	}
	trials, err := d.Store.Trials(ctx, l.ID)
	if err != nil {
		return err
	}
	linked := map[string]bool{}
	for _, t := range trials {
		linked[t.RunID] = true
	}
	runID := ""
	for i, id := range ids {
		if params[i] == tr.Params && !linked[id] {
			runID = id
			break
		}
	}
	if runID == "" {
		values, err := template.ValuesFromJSON(l.Template, []byte(tr.Params))
		if err != nil {
			return fmt.Errorf("trial %d of study %s: %w", tr.Number, l.ID, err)
		}
		info, err := d.Engine.Submit(ctx, engine.RunSpec{Template: l.Template, Values: values, Executor: l.Executor, Sweep: l.ID})
		if err != nil {
			return fmt.Errorf("submit trial %d of study %s: %w", tr.Number, l.ID, err)
		}
		runID = info.ID
	}
	if err := d.Store.LinkTrial(ctx, l.ID, tr.Number, runID); err != nil {
		return err
	}
	tr.RunID, tr.State = runID, storage.TrialRunning
	return nil
}

// tunerTrials turns the stored trials into the tuner's: their searched
// values, state and objective. Running trials are pending; cancelled ones
// say nothing about their values and are left out.
func (d *Driver) tunerTrials(l Loaded, trials []storage.Trial) ([]tuner.Trial, error) {
	var out []tuner.Trial
	for _, tr := range trials {
		v, err := template.ValuesFromJSON(l.Template, []byte(tr.Params))
		if err != nil {
			return nil, fmt.Errorf("trial %d of study %s: %w", tr.Number, l.ID, err)
		}
		t := tuner.Trial{ID: tr.RunID, Values: d.searched(l, v), Objective: tr.Objective}
		if t.ID == "" {
			t.ID = "trial " + strconv.Itoa(tr.Number)
		}
		switch tr.State {
		case storage.TrialDone:
			t.State = tuner.Done
		case storage.TrialPruned:
			t.State = tuner.Pruned
		case storage.TrialFailed:
			t.State = tuner.Failed
		case storage.TrialCancelled:
			continue
		default:
			t.State = tuner.Pending
		}
		out = append(out, t)
	}
	return out, nil
}

// warmStart is what the archive already knows: the succeeded runs of the
// study's template (the same template text) from outside the study whose
// other parameters have the study's values. The tuner learns from them as
// finished trials; they spend none of the budget. Read once per driver:
// finished runs do not change. A study not stored (Advise's, with no ID)
// learns from every such run.
func (d *Driver) warmStart(ctx context.Context, l Loaded) ([]tuner.Trial, error) {
	if d.warmed {
		return slices.Clone(d.warm), nil
	}
	runs, err := d.Store.ListRuns(ctx, storage.RunFilter{States: []storage.RunState{storage.RunSucceeded}})
	if err != nil {
		return nil, err
	}
	fixed := d.fixedOf(l)
	for _, r := range runs {
		if (l.ID != "" && r.Sweep == l.ID) || r.Template != l.TemplateName || r.TemplateYAML != l.TemplateYAML {
			continue
		}
		v, err := template.ValuesFromJSON(l.Template, []byte(r.Params))
		if err != nil {
			continue // values the template no longer takes
		}
		same := true
		for name, x := range fixed {
			if tuner.FormatValue(v[name]) != tuner.FormatValue(x) {
				same = false
				break
			}
		}
		if !same {
			continue
		}
		info, err := d.Engine.Run(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		c, err := d.curve(ctx, l, r.ID)
		if err != nil {
			return nil, err
		}
		_, obj, err := d.outcome(ctx, l, info, c)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(obj) {
			continue
		}
		d.warm = append(d.warm, tuner.Trial{ID: r.ID, Values: d.searched(l, v), State: tuner.Done, Objective: obj})
	}
	d.warmed = true
	if len(d.warm) > 0 {
		runs := "runs"
		if len(d.warm) == 1 {
			runs = "run"
		}
		d.say("the tuner learns from %d earlier %s of %s with the same other values", len(d.warm), runs, l.TemplateName)
	}
	return slices.Clone(d.warm), nil
}

// searched keeps the values of the searched parameters.
func (d *Driver) searched(l Loaded, v template.Values) tuner.Values {
	out := tuner.Values{}
	for _, name := range l.Space.Names() {
		if x, ok := v[name]; ok {
			out[name] = x
		}
	}
	return out
}

// baseline is the first trial's searched values: the study's own, but
// for those it narrowed the range or the choices past (`niuma tune
// --space x=0.6..1`), which take the space's default, inside.
func baseline(l Loaded) tuner.Values {
	out := tuner.Values{}
	for _, p := range l.Space.Params {
		x, ok := l.Fixed[p.Name]
		if !ok {
			continue
		}
		switch v := x.(type) {
		case float64:
			if v < p.Min || v > p.Max {
				x = p.Default
			}
		case int64:
			if float64(v) < p.Min || float64(v) > p.Max {
				x = p.Default
			}
		case string:
			if p.Kind == tuner.Choice && !slices.Contains(p.Choices, v) {
				x = p.Default
			}
		}
		out[p.Name] = x
	}
	return out
}

// fixedOf is the values of the parameters outside the space.
func (d *Driver) fixedOf(l Loaded) tuner.Values {
	out := tuner.Values{}
	for name, x := range l.Fixed {
		if _, searched := l.Space.Param(name); !searched {
			out[name] = x
		}
	}
	return out
}

func pendingOf(s []tuner.Suggestion) []tuner.Trial {
	out := make([]tuner.Trial, len(s))
	for i, x := range s {
		out[i] = tuner.Trial{ID: "trial " + strconv.Itoa(i), Values: x.Values, State: tuner.Pending}
	}
	return out
}

// finitePrediction drops what JSON cannot carry (an infinite bound).
func finitePrediction(p tuner.Prediction) tuner.Prediction {
	for _, f := range []*float64{&p.Mean, &p.Low, &p.High, &p.Std, &p.Chance} {
		if math.IsNaN(*f) || math.IsInf(*f, 0) {
			*f = 0
		}
	}
	return p
}

// describe writes a trial's searched values, e.g. "lr=0.003 hidden=128".
func describe(s tuner.Space, v tuner.Values) string {
	out := ""
	for _, name := range s.Names() {
		x, ok := v[name]
		if !ok {
			continue
		}
		if out != "" {
			out += " "
		}
		if f, isFloat := x.(float64); isFloat {
			out += name + "=" + num(f)
		} else {
			out += name + "=" + tuner.FormatValue(x)
		}
	}
	return out
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}
