//go:build !nowindow

package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"niuma/engine"
	"niuma/engine/study"
	"niuma/engine/template"
	"niuma/storage"
	"niuma/ui"
)

// windowBackend is the engine as the window uses it: every engine method,
// and a submit that takes the Resources step's choices (ui's
// resourceBackend), the archive's studies (ui's studyBackend) and a
// template's suggested next run (ui's adviser). The
// board's ETA is the engine's own RunETA; what a run was launched with is
// the engine's LaunchedParams and AttemptParams.
type windowBackend struct {
	*engine.Engine
	store *storage.DB // the studies' tables
	home  string
	// studies drives the studies the window launches (nil: it launches
	// none).
	studies *studyDrivers
	// processes is local.Executor.Mode, for the board.
	processes string
}

// ProcessMode says how local attempts' processes are found, limited and
// ended: by a cgroup per attempt, or by the token scan (the board shows
// it under the GPUs, with or without any).
func (b windowBackend) ProcessMode() string { return b.processes }

// LaunchStudy stores a study as `niuma tune TEMPLATE` does with the
// wizard's Search choices (createStudy, shared with it) and drives it from
// the window's process until it ends or the window closes.
func (b windowBackend) LaunchStudy(ctx context.Context, spec ui.StudySpec) (string, error) {
	if b.studies == nil {
		return "", errors.New("this window drives no studies: `niuma tune TEMPLATE` starts one")
	}
	if spec.Budget < 1 || spec.Budget > 10000 {
		return "", fmt.Errorf("budget %d: give 1 to 10000 trials", spec.Budget)
	}
	ref := spec.Template
	if spec.Source != "" && spec.Source != "bundled" {
		ref = spec.Source // a user template: its file, as the wizard loads it
	}
	t, err := loadTemplate(b.home, ref)
	if err != nil {
		return "", err
	}
	parallel := spec.Parallel
	if parallel == "" {
		parallel = "auto"
	}
	f := studyFlags{budget: spec.Budget, budgetSet: true, parallel: parallel, pruner: spec.Pruner, prunerSet: spec.Pruner != "",
		spaces: spec.Space, seed: 1}
	if f.pruner == "" {
		f.pruner = "median"
	}
	st, _, _, err := createStudy(ctx, b.Engine, b.store, t, ref, spec.Sets, f)
	if err != nil {
		return "", err
	}
	if err := b.studies.start(st.ID, t); err != nil {
		return st.ID, fmt.Errorf("study %s is stored but not driven (`niuma tune --resume %s` drives it): %w", st.ID, st.ID, err)
	}
	return st.ID, nil
}

// Studies is every study, newest first, as `niuma tune --status` reads
// them: progress, best trial, next suggestion.
func (b windowBackend) Studies(ctx context.Context) ([]ui.StudyInfo, error) {
	all, err := studySummaries(ctx, b.store, b.home)
	if err != nil {
		return nil, err
	}
	out := make([]ui.StudyInfo, len(all))
	for i, s := range all {
		trials := make([]ui.StudyTrial, len(s.Trials))
		for j, t := range s.Trials {
			trials[j] = ui.StudyTrial(t)
		}
		out[i] = ui.StudyInfo{ID: s.ID, Template: s.Template, State: s.State, Objective: s.Objective, Goal: s.Goal,
			Budget: s.Budget, Done: s.Done, Running: s.Running, Pruned: s.Pruned, Best: s.Best, HasBest: s.HasBest,
			BestRun: s.BestRun, Next: s.Next, Why: s.Why, Drivers: s.Drivers, Importance: s.Importance, Trials: trials}
	}
	return out, nil
}

// Advise is the Templates page's "Suggested next" for a template: what
// the tuner would try next over the template's search space, learnt from
// the archive's runs of it (study.Advise). A template that can never be
// advised on (no objective, nothing to search) gets no values and no
// error.
func (b windowBackend) Advise(ctx context.Context, name string) (ui.Advice, error) {
	t, err := loadTemplate(b.home, name)
	if err != nil {
		return ui.Advice{}, err
	}
	a, err := study.Advise(ctx, b.store, b.Engine, t)
	switch {
	case errors.Is(err, study.ErrNothingToAdvise):
		return ui.Advice{}, nil // never any advice: the page shows none
	case err != nil:
		return ui.Advice{}, err
	}
	why := whyNext(a.Objective, &a.Prediction, "runs")
	if len(a.Unlike) > 0 {
		why += " with " + strings.Join(a.Unlike, " ")
	}
	return ui.Advice{Values: a.Values, Searched: a.Searched, Why: why}, nil
}

// SubmitWithResources submits spec with what the Resources step chose on
// top of its template, as `niuma run` applies --gpus, --gpu-memory,
// --estimate, --spot and --share: GPUs, GPU memory and the estimate go to
// the stages that use GPUs (to every stage when none does: the engine's
// rule, Needs), CPUs to every stage, spot and share to the run. The
// engine checks every value, and what this machine can hold, before it
// stores anything.
func (b windowBackend) SubmitWithResources(ctx context.Context, spec engine.RunSpec, res ui.Resources) (engine.RunInfo, error) {
	spec, err := withResources(spec, res)
	if err != nil {
		return engine.RunInfo{}, err
	}
	return b.Submit(ctx, spec)
}

// withResources is spec with res applied.
func withResources(spec engine.RunSpec, res ui.Resources) (engine.RunSpec, error) {
	if spec.Template == nil {
		return spec, fmt.Errorf("submit: no template")
	}
	if res.UseGPUs {
		n := res.GPUs
		spec.Needs.GPUs = &n
	}
	if res.GPUMemMiB != 0 {
		spec.Needs.GPUMemoryMiB = res.GPUMemMiB
	}
	if res.Estimate != 0 {
		spec.Needs.Estimate = res.Estimate
	}
	switch {
	case res.CPUMilli < 0:
		return spec, fmt.Errorf("CPUs %d thousandths: write a number above 0, such as 4 or 2.5", res.CPUMilli)
	case res.CPUMilli > 0:
		// A stage's CPUs are its template's cpus: field; the run's own
		// replace it for this launch, on a copy (the caller's template is
		// shared by every run of the launch).
		t := *spec.Template
		t.Stages = append([]template.Stage(nil), t.Stages...)
		for i := range t.Stages {
			t.Stages[i].CPUMilli = res.CPUMilli
		}
		spec.Template = &t
	}
	spec.Spot = spec.Spot || res.Spot
	spec.Share = spec.Share || res.Share
	spec.FlagOnly = spec.FlagOnly || res.FlagOnly
	return spec, nil
}
