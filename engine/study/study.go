package study

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/storage"
	"niuma/tuner"
)

// Engine is what a study needs of the engine.
type Engine interface {
	Submit(ctx context.Context, spec engine.RunSpec) (engine.RunInfo, error)
	Run(ctx context.Context, idOrPrefix string) (engine.RunInfo, error)
	Series(ctx context.Context, runID, stage, key string) ([]engine.Point, error)
	Prune(ctx context.Context, p storage.Prune) error
}

// Spec is a study to create.
type Spec struct {
	Template *template.Template
	// Ref is the template as the user named it, so that a resumed study
	// loads it again.
	Ref string
	// Space is the searched parameters; Values holds every parameter's
	// value (defaults and the user's settings): the searched ones are
	// replaced in each trial, the others are fixed.
	Space  tuner.Space
	Values template.Values
	Budget int
	// Parallel is how many trials run at once; ParallelRule says where
	// the number came from ("auto" or the number given).
	Parallel     int
	ParallelRule string
	Pruner       tuner.Rule
	Warmup       int64 // 0: the pruner's default
	Seed         int64
	Executor     string
}

// NewID returns a study ID that sorts by time like run IDs
// ("t20261202-010203-3f2a1b").
func NewID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return engine.StudyPrefix + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Create checks a spec and stores it as a new running study.
func Create(ctx context.Context, db *storage.DB, spec Spec) (storage.Study, error) {
	t := spec.Template
	switch {
	case t == nil:
		return storage.Study{}, errors.New("a study needs a template")
	case t.Objective.Metric == "":
		return storage.Study{}, fmt.Errorf("template %s declares no objective; add objective: {metric: NAME, goal: max} (or min) to say what to search for", t.Name)
	case spec.Budget < 1:
		return storage.Study{}, fmt.Errorf("budget %d: give at least one trial", spec.Budget)
	case spec.Parallel < 1:
		return storage.Study{}, fmt.Errorf("parallel %d: give at least 1", spec.Parallel)
	}
	switch spec.Pruner {
	case tuner.NoPruning, tuner.MedianRule, tuner.SuccessiveHalving:
	case "":
		spec.Pruner = tuner.MedianRule
	default:
		return storage.Study{}, fmt.Errorf("pruner %q: use none, median or asha", spec.Pruner)
	}
	if err := spec.Space.Searchable(); err != nil {
		return storage.Study{}, err
	}
	if err := t.Validate(spec.Values); err != nil {
		return storage.Study{}, err
	}
	space, err := json.Marshal(storable(spec.Space))
	if err != nil {
		return storage.Study{}, fmt.Errorf("encode the space: %w", err)
	}
	fixed, err := spec.Values.JSON()
	if err != nil {
		return storage.Study{}, err
	}
	rule := spec.ParallelRule
	if rule == "" {
		rule = fmt.Sprint(spec.Parallel)
	}
	s := storage.Study{
		ID: NewID(time.Now()), Template: spec.Ref, TemplateName: t.Name, TemplateYAML: string(t.YAML),
		Objective: t.Objective.Metric, Goal: t.Objective.Goal, Space: string(space), Fixed: string(fixed),
		Budget: spec.Budget, Parallel: spec.Parallel, ParallelRule: rule, Pruner: string(spec.Pruner), Warmup: spec.Warmup,
		Seed: spec.Seed, Executor: spec.Executor, State: storage.StudyRunning,
	}
	if s.Template == "" {
		s.Template = t.Name
	}
	if err := db.CreateStudy(ctx, s); err != nil {
		return storage.Study{}, err
	}
	return s, nil
}

// storable is the space with the unused bounds of choices and bools
// zeroed: they are infinite, which JSON cannot carry.
func storable(s tuner.Space) tuner.Space {
	out := tuner.Space{Params: make([]tuner.Param, len(s.Params))}
	for i, p := range s.Params {
		if p.Kind != tuner.Float && p.Kind != tuner.Int {
			p.Min, p.Max = 0, 0
		}
		out.Params[i] = p
	}
	return out
}

// Loaded is a stored study with what driving it needs decoded.
type Loaded struct {
	storage.Study
	Template *template.Template
	Space    tuner.Space
	Fixed    template.Values
}

// Load reads a study and checks that t is the template it began with.
func Load(ctx context.Context, db *storage.DB, id string, t *template.Template) (Loaded, error) {
	s, err := db.GetStudy(ctx, id)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return Loaded{}, fmt.Errorf("no study %q: `niuma tune --status` lists the studies", id)
		}
		return Loaded{}, err
	}
	if t == nil || string(t.YAML) != s.TemplateYAML {
		return Loaded{}, fmt.Errorf("study %s: template %s has changed since the study began; its trials would not be comparable: restore the template or start a new study", s.ID, s.Template)
	}
	l := Loaded{Study: s, Template: t}
	if err := json.Unmarshal([]byte(s.Space), &l.Space); err != nil {
		return Loaded{}, fmt.Errorf("study %s: its stored space: %w", s.ID, err)
	}
	FixDefaults(&l.Space, t)
	if l.Fixed, err = template.ValuesFromJSON(t, []byte(s.Fixed)); err != nil {
		return Loaded{}, fmt.Errorf("study %s: its stored values: %w", s.ID, err)
	}
	return l, nil
}

// FixDefaults gives a decoded space's defaults their Go types back (JSON
// reads every number as float64): the template's, unless the study
// narrowed the range or the choices past it (`niuma tune --space
// x=0.6..1`), where the tuner needs a default inside, so its low end or
// first choice.
func FixDefaults(s *tuner.Space, t *template.Template) {
	ref := t.Space(s.Names()...)
	for i := range s.Params {
		sp := &s.Params[i]
		p, ok := ref.Param(sp.Name)
		if !ok {
			continue
		}
		sp.Default = p.Default
		switch d := p.Default.(type) {
		case float64:
			if d < sp.Min || d > sp.Max {
				sp.Default = sp.Min
			}
		case int64:
			if float64(d) < sp.Min || float64(d) > sp.Max {
				sp.Default = int64(sp.Min)
			}
		case string:
			if sp.Kind == tuner.Choice && len(sp.Choices) > 0 && !slices.Contains(sp.Choices, d) {
				sp.Default = sp.Choices[0]
			}
		}
	}
}

// Result is how a study stands.
type Result struct {
	Study  storage.Study
	Trials []storage.Trial
	// Best is the index in Trials of the best finished (done) trial; -1
	// while there is none.
	Best int
}

// Counts tallies the trials by state.
func (r Result) Counts() map[storage.TrialState]int {
	m := map[storage.TrialState]int{}
	for _, t := range r.Trials {
		m[t.State]++
	}
	return m
}

// best is the index of the best done trial, -1 when none.
func best(trials []storage.Trial, goal string) int {
	b := -1
	for i, t := range trials {
		if t.State != storage.TrialDone || math.IsNaN(t.Objective) {
			continue
		}
		if b < 0 || (goal == "max" && t.Objective > trials[b].Objective) || (goal != "max" && t.Objective < trials[b].Objective) {
			b = i
		}
	}
	return b
}

// Status reads a study's trials and its best one.
func Status(ctx context.Context, db *storage.DB, id string) (Result, error) {
	s, err := db.GetStudy(ctx, id)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return Result{}, fmt.Errorf("no study %q: `niuma tune --status` lists the studies", id)
		}
		return Result{}, err
	}
	ts, err := db.Trials(ctx, s.ID)
	if err != nil {
		return Result{}, err
	}
	return Result{Study: s, Trials: ts, Best: best(ts, s.Goal)}, nil
}

// Canceller stops runs; *engine.Engine is one.
type Canceller interface {
	Cancel(ctx context.Context, idOrPrefix string) error
}

// Stop marks a running study stopped and cancels every run launched for
// it that has not ended (a trial stored but not yet linked to its run
// included). A driver then launches nothing more and records how the
// trials still running end; a stopped study cannot be resumed.
func Stop(ctx context.Context, db *storage.DB, eng Canceller, id string) (storage.Study, error) {
	s, err := db.GetStudy(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Study{}, fmt.Errorf("no study %q: `niuma tune --status` lists the studies", id)
	}
	if err != nil {
		return storage.Study{}, err
	}
	if s.State != storage.StudyRunning {
		return storage.Study{}, fmt.Errorf("study %s has already %s", s.ID, s.State)
	}
	if err := db.SetStudyState(ctx, s.ID, storage.StudyStopped, "stopped by the user"); err != nil {
		return storage.Study{}, err
	}
	ids, _, err := db.SweepRuns(ctx, s.ID)
	if err != nil {
		return storage.Study{}, err
	}
	for _, rid := range ids {
		r, err := db.GetRun(ctx, rid)
		if err != nil {
			return storage.Study{}, err
		}
		if r.State.Done() {
			continue
		}
		var ended *engine.EndedError
		if err := eng.Cancel(ctx, rid); err != nil && !errors.As(err, &ended) { // one that just ended needs no stop
			return storage.Study{}, fmt.Errorf("stop study %s: %w", s.ID, err)
		}
	}
	s.State = storage.StudyStopped
	return s, nil
}
