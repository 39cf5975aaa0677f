package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"niuma/engine"
	"niuma/engine/study"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/printable"
	"niuma/report"
	"niuma/storage"
	"niuma/tuner"
)

// studyFlags are `niuma tune`'s flags for a study of a template.
type studyFlags struct {
	budget          int
	budgetSet       bool
	parallel        string
	sets, spaces    []string
	pruner          string
	prunerSet       bool
	warmup          int64
	warmupSet       bool
	seed            int64
	executor        string
	wait            bool
	status, resume  string
	statusAll, json bool
}

// cpusPerTrial is the rule for --parallel auto on the CPU: one trial per
// two cores (the bundled demo trains with two threads), at least one.
const cpusPerTrial = 2

// autoParallel is how many trials of a study run at once with --parallel
// auto: when a trial needs GPUs, as many as the free GPUs hold (a GPU is
// free when no process runs on it; simulated GPUs count as GPUs); else one
// trial per cpusPerTrial CPU cores. Never fewer than one nor more than
// the budget. why says the rule as applied.
func autoParallel(snap gpumon.Snapshot, gpusPerTrial, cpus, budget int) (n int, why string) {
	if gpusPerTrial > 0 {
		free := 0
		for _, d := range snap.Devices() {
			if len(d.Processes) == 0 && d.Healthy {
				free++
			}
		}
		n = free / gpusPerTrial
		why = fmt.Sprintf("%d free GPUs of %d, %d per trial", free, len(snap.Devices()), gpusPerTrial)
	} else {
		n = cpus / cpusPerTrial
		why = fmt.Sprintf("%d CPU cores, one trial per %d; the trials need no GPU", cpus, cpusPerTrial)
	}
	return min(max(1, n), budget), why
}

// gpusPerTrial is the most GPUs any stage of a run with values v asks for.
func gpusPerTrial(t *template.Template, v template.Values) int {
	most := 0
	for _, st := range t.Stages {
		if g, _, err := t.NeedsOf(st, v); err == nil {
			most = max(most, g)
		}
	}
	return most
}

// studySpace is the space a study searches: the parameters --space names
// (NAME, or NAME=LO..HI[:log] for a number, NAME=A,B for a choice,
// narrowing the template's schema), else the template's own list (tune:
// search), else every searchable parameter; less the ones --set fixes.
func studySpace(t *template.Template, spaces []string, sets map[string]string) (tuner.Space, error) {
	var names []string
	narrow := map[string]string{}
	for _, s := range spaces {
		name, rng, _ := strings.Cut(s, "=")
		if _, ok := t.Param(name); !ok {
			return tuner.Space{}, fmt.Errorf("--space %s: the template has no parameter %q (it has %s)", printable.Shorten(s, 64), printable.Shorten(name, 32), strings.Join(t.Space().Names(), ", "))
		}
		if _, set := sets[name]; set {
			return tuner.Space{}, fmt.Errorf("--space %s: %s is also fixed with --set; give one", printable.Shorten(s, 64), name)
		}
		names = append(names, name)
		if rng != "" {
			narrow[name] = rng
		}
	}
	if len(names) == 0 {
		for _, n := range t.Searchable() {
			if _, set := sets[n]; !set {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return tuner.Space{}, errors.New("nothing to search: every searchable parameter is fixed; name some with --space NAME")
	}
	sp := t.Space(names...)
	for i := range sp.Params {
		p := &sp.Params[i]
		text, ok := narrow[p.Name]
		if !ok {
			continue
		}
		if err := narrowParam(p, text); err != nil {
			return tuner.Space{}, fmt.Errorf("--space %s=%s: %w", p.Name, printable.Shorten(text, 64), err)
		}
	}
	if err := sp.Searchable(); err != nil {
		return tuner.Space{}, err
	}
	return sp, nil
}

// narrowParam applies a --space range (LO..HI[:log]) or choice list
// (A,B) to p, inside the template's schema.
func narrowParam(p *tuner.Param, text string) error {
	switch p.Kind {
	case tuner.Choice:
		var keep []string
		for _, c := range strings.Split(text, ",") {
			c = strings.TrimSpace(c)
			if !contains(p.Choices, c) {
				return fmt.Errorf("%q is not one of %s", c, strings.Join(p.Choices, ", "))
			}
			if !contains(keep, c) {
				keep = append(keep, c)
			}
		}
		p.Choices = keep
		return nil
	case tuner.Float, tuner.Int:
	default:
		return fmt.Errorf("a %s parameter takes no range; give --space %s alone", p.Kind, p.Name)
	}
	body, scale, hasScale := strings.Cut(text, ":")
	lo, hi, ok := strings.Cut(body, "..")
	if !ok {
		return errors.New("write LO..HI, or LO..HI:log for a log scale")
	}
	a, err1 := strconv.ParseFloat(strings.TrimSpace(lo), 64)
	b, err2 := strconv.ParseFloat(strings.TrimSpace(hi), 64)
	switch {
	case err1 != nil || err2 != nil || math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0):
		return errors.New("LO and HI must be numbers")
	case a > b:
		return fmt.Errorf("%g is above %g", a, b)
	case a < p.Min || b > p.Max:
		return fmt.Errorf("the template allows %g..%g", p.Min, p.Max)
	case p.Kind == tuner.Int && (a != math.Trunc(a) || b != math.Trunc(b)):
		return errors.New("an int's bounds must be whole numbers")
	}
	p.Min, p.Max = a, b
	if hasScale {
		switch scale {
		case "log":
			if a <= 0 {
				return errors.New("a log scale needs LO above 0")
			}
			p.Log = true
		case "linear":
			p.Log = false
		default:
			return fmt.Errorf("scale %q: use log or linear", scale)
		}
	}
	if f, ok := p.Default.(float64); ok && (f < a || f > b) {
		p.Default = a
	}
	if i, ok := p.Default.(int64); ok && (float64(i) < a || float64(i) > b) {
		p.Default = int64(a)
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// tuneStudy is `niuma tune TEMPLATE ...`: create a study and drive it.
func (c *cli) tuneStudy(ctx context.Context, ref string, f studyFlags) error {
	if err := tooLong("template", maxPathArg, ref); err != nil {
		return err
	}
	sets := map[string]string{}
	for _, s := range f.sets {
		name, val, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return exitError{code: 2, msg: fmt.Sprintf("--set %s: write NAME=VALUE", printable.Shorten(s, 64))}
		}
		sets[name] = val
	}
	if !f.budgetSet {
		f.budget = 20
	}
	if f.budget < 1 || f.budget > 10000 {
		return exitError{code: 2, msg: fmt.Sprintf("--budget %d: give 1 to 10000 trials", f.budget)}
	}
	home, err := Home()
	if err != nil {
		return err
	}
	t, err := loadTemplate(home, ref)
	if err != nil {
		return err
	}
	if strings.ContainsRune(ref, os.PathSeparator) || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml") {
		// A resumed study, maybe started elsewhere, loads it by this path.
		if abs, err := filepath.Abs(ref); err == nil {
			ref = abs
		}
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	st, space, why, err := createStudy(ctx, s.engine, s.store, t, ref, sets, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "study %s: %s, %s %s over %s; %d trials, %d at once (%s), pruner %s\n",
		st.ID, t.Name, st.Goal, st.Objective, describeSpace(space), st.Budget, st.Parallel, why, st.Pruner)
	if !f.wait {
		s.close()
		pid, err := spawnStudy(home, st.ID)
		if err != nil {
			return fmt.Errorf("start the study in the background (niuma tune --resume %s --wait drives it in the foreground): %w", st.ID, err)
		}
		fmt.Fprintf(c.out, "driving it in the background (pid %d, log %s); follow it with: niuma tune --status %s\n",
			pid, studyLog(home, st.ID), st.ID)
		return nil
	}
	return c.driveStudy(ctx, s, st.ID, t)
}

// createStudy stores a new study of t (loaded from ref) with what
// `niuma tune` was given: sets fix values, f.spaces name what to search
// (else the template's tune: search, else every searchable parameter),
// f.parallel is auto or a number, f.pruner and f.warmup override the
// template's tune: ones when set. The window's Search mode creates its
// studies here too. why says how the parallel trials were chosen.
func createStudy(ctx context.Context, eng *engine.Engine, db *storage.DB, t *template.Template, ref string, sets map[string]string, f studyFlags) (st storage.Study, space tuner.Space, why string, err error) {
	vals, err := t.Resolve(sets)
	if err != nil {
		return st, space, "", exitError{code: 2, msg: oneLine(fmt.Errorf("--set: %w", err))}
	}
	space, err = studySpace(t, f.spaces, sets)
	if err != nil {
		return st, space, "", exitError{code: 2, msg: oneLine(err)}
	}
	pruner, warmup := t.Tune.Pruner, t.Tune.Warmup
	if f.prunerSet || pruner == "" {
		pruner = f.pruner
	}
	if f.warmupSet {
		warmup = f.warmup
	}
	parallel := 0
	switch {
	case f.parallel == "auto":
		snap, err := eng.GPUs(ctx)
		if err != nil {
			return st, space, "", fmt.Errorf("read the GPUs for --parallel auto: %w", err)
		}
		parallel, why = autoParallel(snap, gpusPerTrial(t, vals), runtime.NumCPU(), f.budget)
	default:
		n, err := strconv.Atoi(f.parallel)
		if err != nil || n < 1 {
			return st, space, "", exitError{code: 2, msg: fmt.Sprintf("--parallel %s: give auto or a number of trials, 1 or more", printable.Shorten(f.parallel, 32))}
		}
		parallel, why = n, "as given"
	}
	st, err = study.Create(ctx, db, study.Spec{Template: t, Ref: ref, Space: space, Values: vals, Budget: f.budget,
		Parallel: parallel, ParallelRule: f.parallel, Pruner: tuner.Rule(pruner), Warmup: warmup, Seed: f.seed, Executor: f.executor})
	if err != nil {
		return st, space, "", exitError{code: 2, msg: oneLine(err)}
	}
	return st, space, why, nil
}

// tuneResume is `niuma tune --resume STUDY`: drive a stored study on.
func (c *cli) tuneResume(ctx context.Context, id string, f studyFlags) error {
	if err := tooLong("study", maxNameArg, id); err != nil {
		return err
	}
	home, err := Home()
	if err != nil {
		return err
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	st, err := s.store.GetStudy(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return exitError{code: 1, msg: fmt.Sprintf("no study %q: `niuma tune --status` lists the studies", id)}
	}
	if err != nil {
		return err
	}
	if st.State != storage.StudyRunning {
		return exitError{code: 1, msg: fmt.Sprintf("study %s has %s; `niuma tune --status %s` shows its trials", st.ID, st.State, st.ID)}
	}
	t, err := loadTemplate(home, st.Template)
	if err != nil {
		return err
	}
	if !f.wait {
		s.close()
		pid, err := spawnStudy(home, st.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "driving study %s in the background (pid %d, log %s)\n", st.ID, pid, studyLog(home, st.ID))
		return nil
	}
	return c.driveStudy(ctx, s, st.ID, t)
}

func studyLog(home, id string) string { return filepath.Join(home, "studies", id+".log") }

// spawnStudy starts `niuma tune --resume ID --wait` in the background.
func spawnStudy(home, id string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(home, "studies"), 0o755); err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(studyLog(home, id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(self, "tune", "--resume", id, "--wait")
	cmd.Env = append(os.Environ(), "NIUMA_HOME="+home)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	return pid, cmd.Process.Release()
}

// lockStudy makes this process the only one driving the study, until the
// returned func runs (or the process dies: the lock goes with it).
func lockStudy(home, id string) (func(), error) {
	if err := os.MkdirAll(filepath.Join(home, "studies"), 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(home, "studies", id+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		return nil, exitError{code: 1, msg: fmt.Sprintf("study %s is being driven by another niuma (pid %s); `niuma tune --status %s` follows it", id, strings.TrimSpace(string(pid)), id)}
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

// loadStudyLocked loads a study for driving, once this process holds its
// lock (no other niuma drives it); unlock lets it go.
func loadStudyLocked(ctx context.Context, db *storage.DB, home, id string, t *template.Template) (l study.Loaded, unlock func(), err error) {
	unlock, err = lockStudy(home, id)
	if err != nil {
		return l, nil, err
	}
	l, err = study.Load(ctx, db, id, t)
	if err != nil {
		unlock()
		return l, nil, exitError{code: 1, msg: oneLine(err)}
	}
	return l, unlock, nil
}

// driveStudy drives a study to its end from this process, driving the
// engine too when no other process owns the data directory.
func (c *cli) driveStudy(ctx context.Context, s *stack, id string, t *template.Template) error {
	l, unlock, err := loadStudyLocked(ctx, s.store, s.home, id, t)
	if err != nil {
		return err
	}
	defer unlock()
	ectx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	engineDone := s.drive(ectx)
	start := time.Now()
	d := &study.Driver{Engine: s.engine, Store: s.store, Say: func(line string) {
		fmt.Fprintf(c.out, "%s %s\n", time.Now().Format("15:04:05"), printable.String(line))
	}}
	res, derr := d.Drive(ctx, l)
	stopEngine()
	<-engineDone
	if err := s.handOver(c); err != nil {
		say(c.err, err.Error())
	}
	if derr != nil {
		if errors.Is(derr, context.Canceled) {
			return exitError{code: 130, msg: fmt.Sprintf("stopped driving study %s; its running trials go on, and `niuma tune --resume %s --wait` carries it on", id, id)}
		}
		return derr
	}
	summarise(c.out, res, time.Since(start))
	return nil
}

// summarise prints a finished study's tally and best trial.
func summarise(w io.Writer, res study.Result, wall time.Duration) {
	n := res.Counts()
	fmt.Fprintf(w, "study %s %s: %d trials (%d done, %d pruned, %d failed, %d cancelled) in %s\n", res.Study.ID, res.Study.State,
		len(res.Trials), n[storage.TrialDone], n[storage.TrialPruned], n[storage.TrialFailed], n[storage.TrialCancelled], wall.Round(time.Second))
	if res.Best < 0 {
		fmt.Fprintln(w, "no trial finished with a result")
		return
	}
	b := res.Trials[res.Best]
	var space tuner.Space
	_ = json.Unmarshal([]byte(res.Study.Space), &space)
	fmt.Fprintf(w, "best: trial %d, run %s: %s %s with %s\n", b.Number, b.RunID, res.Study.Objective, objNum(b.Objective), printable.String(searchedOf(b.Params, space)))
	if len(res.Trials) > 0 && res.Trials[0].Method == "defaults" {
		d := res.Trials[0]
		fmt.Fprintf(w, "the template's values (trial 0, run %s): %s %s (%s)\n", d.RunID, res.Study.Objective, objNum(d.Objective), d.State)
	}
}

func objNum(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}

// studyJSON is `niuma tune --status STUDY --json`.
type studyJSON struct {
	ID        string      `json:"id"`
	Template  string      `json:"template"`
	State     string      `json:"state"`
	Objective string      `json:"objective"`
	Goal      string      `json:"goal"`
	Budget    int         `json:"budget"`
	Parallel  int         `json:"parallel"`
	Pruner    string      `json:"pruner"`
	Runs      int         `json:"runs"` // runs launched for the study (one per trial)
	Best      *int        `json:"best,omitempty"`
	Trials    []trialJSON `json:"trials"`
}

type trialJSON struct {
	Number    int             `json:"number"`
	Run       string          `json:"run"`
	State     string          `json:"state"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	Objective *float64        `json:"objective,omitempty"`
	Pruned    *pruneJSON      `json:"pruned,omitempty"`
	Predicted *predictionJSON `json:"predicted,omitempty"`
}

// pruneJSON is a stored pruning decision.
type pruneJSON struct {
	Reason    string             `json:"reason"` // a code: below_median, below_rung
	Metric    string             `json:"metric"`
	Step      int64              `json:"step"`
	Value     *float64           `json:"value"`
	Reference *float64           `json:"reference"`
	Trials    int                `json:"trials"`
	Rung      int                `json:"rung,omitempty"`
	RungStep  int64              `json:"rung_step,omitempty"`
	Compared  []storage.Compared `json:"compared"`
	Evidence  string             `json:"evidence"`
	DecidedAt time.Time          `json:"decided_at"`
}

// predictionJSON is what the model expected of a trial when it was
// suggested.
type predictionJSON struct {
	Mean    float64      `json:"mean"`
	Std     float64      `json:"std"`
	Chance  float64      `json:"chance_of_improving"`
	Trials  int          `json:"trials"`
	Drivers []driverJSON `json:"drivers"`
}

type driverJSON struct {
	Run       string  `json:"run"`
	Objective float64 `json:"objective"`
	Weight    float64 `json:"weight"`
}

func finiteOrNil(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// tuneStatus is `niuma tune --status [STUDY]`.
func (c *cli) tuneStatus(ctx context.Context, id string, asJSON bool) error {
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	if id == "" {
		all, err := s.store.ListStudies(ctx)
		if err != nil {
			return err
		}
		if len(all) == 0 {
			fmt.Fprintln(c.out, "no studies yet: niuma tune TEMPLATE --budget N --wait starts one")
			return nil
		}
		tw := newTable(c.out, "STUDY", "TEMPLATE", "STATE", "TRIALS", "PRUNED", "BEST")
		for _, st := range all {
			res, err := study.Status(ctx, s.store, st.ID)
			if err != nil {
				return err
			}
			best := "-"
			if res.Best >= 0 {
				best = fmt.Sprintf("%s %s (trial %d)", st.Objective, objNum(res.Trials[res.Best].Objective), res.Best)
			}
			tw.row(st.ID, st.TemplateName, string(st.State), fmt.Sprintf("%d/%d", len(res.Trials), st.Budget),
				strconv.Itoa(res.Counts()[storage.TrialPruned]), best)
		}
		return tw.flush()
	}
	res, err := study.Status(ctx, s.store, id)
	if err != nil {
		return exitError{code: 1, msg: oneLine(err)}
	}
	st := res.Study
	runs, _, err := s.store.SweepRuns(ctx, st.ID)
	if err != nil {
		return err
	}
	prunes := map[int]storage.Prune{}
	for _, tr := range res.Trials {
		if tr.RunID == "" {
			continue
		}
		if p, err := s.store.RunPrune(ctx, tr.RunID); err == nil {
			prunes[tr.Number] = p
		}
	}
	if asJSON {
		out := studyJSON{ID: st.ID, Template: st.TemplateName, State: string(st.State), Objective: st.Objective, Goal: st.Goal,
			Budget: st.Budget, Parallel: st.Parallel, Pruner: st.Pruner, Runs: len(runs), Trials: []trialJSON{}}
		if res.Best >= 0 {
			b := res.Best
			out.Best = &b
		}
		for _, tr := range res.Trials {
			j := trialJSON{Number: tr.Number, Run: tr.RunID, State: string(tr.State), Method: tr.Method, Params: json.RawMessage(tr.Params)}
			if !math.IsNaN(tr.Objective) {
				o := tr.Objective
				j.Objective = &o
			}
			if p, ok := prunes[tr.Number]; ok {
				j.Pruned = &pruneJSON{Reason: p.Reason, Metric: p.Metric, Step: p.Step, Value: finiteOrNil(p.Value),
					Reference: finiteOrNil(p.Reference), Trials: p.Trials, Rung: p.Rung, RungStep: p.RungStep,
					Compared: p.Compared, Evidence: p.Evidence, DecidedAt: p.DecidedAt}
				if j.Pruned.Compared == nil {
					j.Pruned.Compared = []storage.Compared{}
				}
			}
			if tr.Prediction != "" {
				var p tuner.Prediction
				if json.Unmarshal([]byte(tr.Prediction), &p) == nil {
					pj := &predictionJSON{Mean: p.Mean, Std: p.Std, Chance: p.Chance, Trials: p.Trials, Drivers: []driverJSON{}}
					for _, d := range p.Drivers {
						pj.Drivers = append(pj.Drivers, driverJSON{Run: d.ID, Objective: d.Objective, Weight: d.Weight})
					}
					j.Predicted = pj
				}
			}
			out.Trials = append(out.Trials, j)
		}
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	n := res.Counts()
	fmt.Fprintf(c.out, "study %s: %s, %s %s, %s; %d of %d trials (%d done, %d pruned, %d failed, %d running), %d at once, pruner %s\n",
		st.ID, st.TemplateName, st.Goal, st.Objective, st.State, len(res.Trials), st.Budget, n[storage.TrialDone], n[storage.TrialPruned],
		n[storage.TrialFailed], n[storage.TrialRunning]+n[storage.TrialSubmitting], st.Parallel, st.Pruner)
	tw := newTable(c.out, "TRIAL", "RUN", "STATE", "METHOD", st.Objective, "PARAMETERS", "WHY")
	var space tuner.Space
	_ = json.Unmarshal([]byte(st.Space), &space)
	for _, tr := range res.Trials {
		why := predictedWhy(tr)
		if p, ok := prunes[tr.Number]; ok {
			why = p.Evidence
		}
		mark := ""
		if tr.Number == res.Best {
			mark = " *"
		}
		tw.row(strconv.Itoa(tr.Number)+mark, tr.RunID, string(tr.State), tr.Method, objNum(tr.Objective), searchedOf(tr.Params, space), why)
	}
	if err := tw.flush(); err != nil {
		return err
	}
	if res.Best >= 0 {
		b := res.Trials[res.Best]
		fmt.Fprintf(c.out, "best so far (*): trial %d, run %s: %s %s\n", b.Number, b.RunID, st.Objective, objNum(b.Objective))
	}
	c.explainNext(res)
	return nil
}

// searchedOf writes the searched parameters of a trial's values.
func searchedOf(params string, space tuner.Space) string {
	var v map[string]any
	if json.Unmarshal([]byte(params), &v) != nil {
		return params
	}
	var parts []string
	for _, name := range space.Names() {
		if x, ok := v[name]; ok {
			if f, isNum := x.(float64); isNum {
				parts = append(parts, name+"="+strconv.FormatFloat(f, 'g', 4, 64))
			} else {
				parts = append(parts, fmt.Sprintf("%s=%v", name, x))
			}
		}
	}
	return strings.Join(parts, " ")
}

// studyNext is what the model of a study expects next: the values it
// would try, its prediction for them, and each parameter's importance.
type studyNext struct {
	Values     tuner.Values
	Prediction *tuner.Prediction
	Importance []tuner.Importance // most important first
}

// nextOf fits the model to a study's trials and asks it for the next
// suggestion; ok is false while it has fewer than two results or when the
// template is gone or changed.
func nextOf(home string, res study.Result) (next studyNext, space tuner.Space, ok bool) {
	if err := json.Unmarshal([]byte(res.Study.Space), &space); err != nil {
		return next, space, false
	}
	t, err := loadTemplate(home, res.Study.Template)
	if err != nil || string(t.YAML) != res.Study.TemplateYAML {
		return next, space, false
	}
	var trials []tuner.Trial
	fixed := tuner.Values{}
	if v, err := template.ValuesFromJSON(t, []byte(res.Study.Fixed)); err == nil {
		for k, x := range v {
			if _, searched := space.Param(k); !searched {
				fixed[k] = x
			}
		}
	}
	study.FixDefaults(&space, t)
	for _, tr := range res.Trials {
		v, err := template.ValuesFromJSON(t, []byte(tr.Params))
		if err != nil {
			return next, space, false
		}
		tv := tuner.Values{}
		for _, n := range space.Names() {
			if x, ok := v[n]; ok {
				tv[n] = x
			}
		}
		x := tuner.Trial{ID: tr.RunID, Values: tv, Objective: tr.Objective}
		switch tr.State {
		case storage.TrialDone:
			x.State = tuner.Done
		case storage.TrialPruned:
			x.State = tuner.Pruned
		case storage.TrialFailed:
			x.State = tuner.Failed
		case storage.TrialCancelled:
			continue
		default:
			x.State = tuner.Pending
		}
		trials = append(trials, x)
	}
	cfg := tuner.Config{Space: space, Goal: tuner.Goal(res.Study.Goal), Fixed: fixed, Seed: uint64(res.Study.Seed)}
	m, err := tuner.Fit(cfg, trials)
	if err != nil {
		return next, space, false // fewer than two results: nothing to explain yet
	}
	if sugg, err := tuner.Suggest(cfg, trials, 1); err == nil && len(sugg) == 1 && sugg[0].Prediction != nil {
		next.Values, next.Prediction = sugg[0].Values, sugg[0].Prediction
	}
	next.Importance = m.Importance()
	sort.SliceStable(next.Importance, func(i, j int) bool { return next.Importance[i].Share > next.Importance[j].Share })
	return next, space, true
}

// whyNext says what the model expects of its suggestion, e.g. "expected
// val_acc 0.9936 ± 0.004 from 16 trials" (what it learnt from: a study's
// trials, or the archive's runs).
func whyNext(objective string, p *tuner.Prediction, from string) string {
	return fmt.Sprintf("expected %s %s from %d %s", objective, p.Spread(), p.Trials, from)
}

// explainNext prints what the model expects of the next suggestion, which
// earlier trials drove it, and how much each parameter matters.
func (c *cli) explainNext(res study.Result) {
	home, err := Home()
	if err != nil {
		return
	}
	next, space, ok := nextOf(home, res)
	if !ok {
		if res.Study.State == storage.StudyRunning && json.Unmarshal([]byte(res.Study.Space), &space) == nil {
			c.designNext(res, space)
		}
		return
	}
	if p := next.Prediction; p != nil {
		vals := make([]string, 0, len(space.Params))
		for _, n := range space.Names() {
			if x, ok := next.Values[n]; ok {
				vals = append(vals, n+"="+formatParam(x))
			}
		}
		fmt.Fprintf(c.out, "suggested next: %s — %s; driven most by %s\n",
			strings.Join(vals, " "), whyNext(res.Study.Objective, p, "trials"), drivenBy(res.Study.Objective, p))
	} else if res.Study.State == storage.StudyRunning {
		c.designNext(res, space)
	}
	fmt.Fprintf(c.out, "parameter importance: %s\n", importanceOf(next.Importance))
}

// designNext says why a running study's next trial has no prediction:
// it is still drawn from the opening design.
func (c *cli) designNext(res study.Result, space tuner.Space) {
	results := 0
	for _, tr := range res.Trials {
		if tr.State == storage.TrialDone || tr.State == storage.TrialPruned {
			results++
		}
	}
	fmt.Fprintf(c.out, "suggested next: a point of the opening design, spread over the space (the model suggests from %d results on; %d so far)\n",
		tuner.DefaultStartup(len(space.Params)), results)
}

// drivenBy names the three earlier trials that weigh most in a
// prediction: "r-1 (val_acc 0.97, 40%), …".
func drivenBy(objective string, p *tuner.Prediction) string {
	var drivers []string
	for i, d := range p.Drivers {
		if i == 3 {
			break
		}
		drivers = append(drivers, fmt.Sprintf("%s (%s %s, %.0f%%)", d.ID, objective, objNum(d.Objective), 100*d.Weight))
	}
	return strings.Join(drivers, ", ")
}

// importanceOf says how much each parameter matters: "lr 62%, hidden 21%".
func importanceOf(imp []tuner.Importance) string {
	parts := make([]string, 0, len(imp))
	for _, x := range imp {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", x.Name, 100*x.Share))
	}
	return strings.Join(parts, ", ")
}

// studySummary is one study as the window's study view shows it (the
// fields of ui.StudyInfo): State is running, done or stopped; Done the
// trials that ended (pruned ones included), Running those still going.
type studySummary struct {
	ID, Template    string
	State           string
	Objective, Goal string
	Budget          int
	Done, Running   int
	Pruned          int
	Best            float64
	HasBest         bool
	BestRun         string
	Next            map[string]any
	Why             string
	// Drivers names the earlier trials that weigh most in the next
	// suggestion, Importance how much each searched parameter matters
	// ("lr 62%, hidden 21%"); empty while the model has too few results.
	Drivers, Importance string
	Trials              []trialSummary
}

// trialSummary is one trial in the study view: Params holds its searched
// values, Why a pruned trial's evidence.
type trialSummary struct {
	Number       int
	Run, State   string
	Method       string
	Params       map[string]any
	Objective    float64
	HasObjective bool
	Why          string
}

// studySummaries lists every study, newest first, with its progress, best
// trial and next suggestion.
func studySummaries(ctx context.Context, db *storage.DB, home string) ([]studySummary, error) {
	all, err := db.ListStudies(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]studySummary, 0, len(all))
	for _, st := range all {
		res, err := study.Status(ctx, db, st.ID)
		if err != nil {
			return nil, err
		}
		s := studySummary{ID: st.ID, Template: st.TemplateName, State: string(st.State), Objective: st.Objective, Goal: st.Goal, Budget: st.Budget}
		if st.State == storage.StudyFinished {
			s.State = "done"
		}
		for _, tr := range res.Trials {
			switch {
			case tr.State == storage.TrialPruned:
				s.Pruned++
				s.Done++
			case tr.State.Done():
				s.Done++
			default:
				s.Running++
			}
		}
		if res.Best >= 0 {
			b := res.Trials[res.Best]
			s.Best, s.HasBest, s.BestRun = b.Objective, true, b.RunID
		}
		var space tuner.Space
		_ = json.Unmarshal([]byte(st.Space), &space)
		for _, tr := range res.Trials {
			vals := jsonValues(tr.Params)
			ts := trialSummary{Number: tr.Number, Run: tr.RunID, State: string(tr.State), Method: tr.Method, Params: map[string]any{},
				Objective: tr.Objective, HasObjective: !math.IsNaN(tr.Objective)}
			for _, n := range space.Names() {
				if x, ok := vals[n]; ok {
					ts.Params[n] = x
				}
			}
			if tr.State == storage.TrialPruned && tr.RunID != "" {
				if p, err := db.RunPrune(ctx, tr.RunID); err == nil {
					ts.Why = p.Evidence
				}
			}
			s.Trials = append(s.Trials, ts)
		}
		// The model is fitted for running studies only: the open study
		// view reads every study every few seconds.
		if next, _, ok := nextOf(home, res); st.State == storage.StudyRunning && ok {
			if next.Prediction != nil {
				s.Next = map[string]any{}
				for k, v := range next.Values {
					s.Next[k] = v
				}
				s.Why = whyNext(st.Objective, next.Prediction, "trials")
				s.Drivers = drivenBy(st.Objective, next.Prediction)
			}
			s.Importance = importanceOf(next.Importance)
		}
		out = append(out, s)
	}
	return out, nil
}

// predictedWhy is what the model expected of a trial when it proposed it,
// "expected 0.9730 ± 0.019"; "" when it made no prediction. A pruned
// trial's evidence says more, where there is one.
func predictedWhy(tr storage.Trial) string {
	var p tuner.Prediction
	if tr.Prediction == "" || json.Unmarshal([]byte(tr.Prediction), &p) != nil {
		return ""
	}
	return "expected " + p.Spread()
}

// jsonValues decodes stored parameter values with whole numbers as int64
// (1024, not 1.02e+03) and the others as float64; nil when they do not
// read.
func jsonValues(text string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var raw map[string]any
	if dec.Decode(&raw) != nil {
		return nil
	}
	for k, v := range raw {
		n, ok := v.(json.Number)
		if !ok {
			continue
		}
		if i, err := n.Int64(); err == nil {
			raw[k] = i
		} else if f, err := n.Float64(); err == nil {
			raw[k] = f
		}
	}
	return raw
}

func formatParam(x any) string {
	if f, ok := x.(float64); ok {
		return strconv.FormatFloat(f, 'g', 3, 64)
	}
	return tuner.FormatValue(x)
}

// reportStudy fills a report's study section from the archive and returns
// the runs of its trials (at most report.MaxRuns: the first ones).
func reportStudy(ctx context.Context, db *storage.DB, id string) (*report.Study, []string, error) {
	res, err := study.Status(ctx, db, id)
	if err != nil {
		return nil, nil, exitError{code: 1, msg: oneLine(err)}
	}
	st := res.Study
	var space tuner.Space
	if err := json.Unmarshal([]byte(st.Space), &space); err != nil {
		return nil, nil, fmt.Errorf("study %s: its stored space: %w", st.ID, err)
	}
	out := &report.Study{ID: st.ID, Template: st.TemplateName, Objective: report.Objective{Metric: st.Objective, Goal: st.Goal},
		State: string(st.State), Budget: st.Budget, Parallel: st.Parallel, Pruner: st.Pruner, Log: map[string]bool{}}
	for _, p := range space.Params {
		out.Searched = append(out.Searched, p.Name)
		out.Log[p.Name] = p.Log
	}
	var ids []string
	for _, tr := range res.Trials {
		var vals map[string]any
		_ = json.Unmarshal([]byte(tr.Params), &vals)
		t := report.Trial{Number: tr.Number, RunID: tr.RunID, State: string(tr.State), Method: tr.Method, Objective: tr.Objective}
		for _, name := range out.Searched {
			if v, ok := vals[name]; ok {
				t.Params = append(t.Params, report.Param{Name: name, Value: v})
			}
		}
		t.Why = predictedWhy(tr)
		if p, err := db.RunPrune(ctx, tr.RunID); err == nil && tr.RunID != "" {
			t.Why = p.Evidence
		}
		out.Trials = append(out.Trials, t)
		if tr.RunID != "" && len(ids) < report.MaxRuns {
			ids = append(ids, tr.RunID)
		}
	}
	if len(ids) == 0 {
		return nil, nil, exitError{code: 1, msg: fmt.Sprintf("study %s has no runs yet to report on", st.ID)}
	}
	return out, ids, nil
}

// prunedJSON is why a study stopped a run early, as `niuma show` gives it.
type prunedJSON struct {
	Study    string `json:"study"`
	Trial    int    `json:"trial"`
	Reason   string `json:"reason"`
	Evidence string `json:"evidence"`
}

// prunedOf says whether a study's pruner stopped the run (nil when not).
func prunedOf(ctx context.Context, db *storage.DB, runID string) (*prunedJSON, error) {
	p, err := db.RunPrune(ctx, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := &prunedJSON{Reason: p.Reason, Evidence: p.Evidence}
	if tr, err := db.TrialOfRun(ctx, runID); err == nil {
		out.Study, out.Trial = tr.StudyID, tr.Number
	}
	return out, nil
}

// tuneStop is `niuma tune --stop STUDY`: no more trials, the running ones
// cancelled. When no other niuma drives the study, this one records how
// the cancelled trials end before it returns.
func (c *cli) tuneStop(ctx context.Context, id string) error {
	if err := tooLong("study", maxNameArg, id); err != nil {
		return err
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	st, err := study.Stop(ctx, s.store, s.engine, id)
	if err != nil {
		return exitError{code: 1, msg: oneLine(err)}
	}
	fmt.Fprintf(c.out, "stopping study %s: no more trials; its running trials are cancelled\n", st.ID)
	unlock, err := lockStudy(s.home, st.ID)
	if err != nil {
		fmt.Fprintf(c.out, "the niuma driving it records how they end; `niuma tune --status %s` shows them\n", st.ID)
		return nil
	}
	defer unlock()
	ectx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	engineDone := s.drive(ectx)
	d := &study.Driver{Engine: s.engine, Store: s.store, Say: func(line string) {
		fmt.Fprintf(c.out, "%s %s\n", time.Now().Format("15:04:05"), printable.String(line))
	}}
	start := time.Now()
	res, derr := d.Drive(ctx, study.Loaded{Study: st})
	stopEngine()
	<-engineDone
	if err := s.handOver(c); err != nil {
		say(c.err, err.Error())
	}
	if derr != nil {
		return derr
	}
	summarise(c.out, res, time.Since(start))
	return nil
}
