package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/tuner"
)

// sweepFlags are `niuma run`'s ways of launching several runs at once: a
// grid (--sweep, every combination) or random draws from the template's
// ranges (--random).
type sweepFlags struct {
	sweeps     multiFlag
	random     int
	randomSet  bool // --random was given (0 is refused, not ignored)
	randomSeed uint64
}

func addSweepFlags(fs *flag.FlagSet) *sweepFlags {
	f := &sweepFlags{}
	fs.Var(&f.sweeps, "sweep", "sweep a parameter: NAME=V1,V2,... or NAME=A..B[:STEP] for an int (repeatable; every combination becomes a run)")
	fs.Func("random", "launch N runs with values drawn at random from the template's ranges (parameters given with --set stay fixed)", func(text string) error {
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("give a number of runs, such as 20")
		}
		f.random, f.randomSet = n, true
		return nil
	})
	fs.Uint64Var(&f.randomSeed, "random-seed", 0, "the seed of --random's draws (default: a fresh one, printed so the draws can be repeated)")
	return f
}

// many reports whether the flags ask for more than one run.
func (f *sweepFlags) many() bool { return len(f.sweeps) > 0 || f.randomSet }

// expand returns the values of every run the flags ask for, checked
// against the template like --set. It goes through the same expansion as
// the wizard's sweeps (template.Sweep) and the tuner's random search.
func (f *sweepFlags) expand(t *template.Template, sets map[string]string, note func(string)) ([]template.Values, error) {
	switch {
	case f.randomSet && f.random < 1:
		return nil, exitError{code: 2, msg: fmt.Sprintf("--random %d: give a number of runs of at least 1", f.random)}
	case f.random > tuner.MaxGrid:
		return nil, exitError{code: 2, msg: fmt.Sprintf("--random %d: at most %d runs at once", f.random, tuner.MaxGrid)}
	case f.random > 0 && len(f.sweeps) > 0:
		return nil, exitError{code: 2, msg: "--random and --sweep contradict each other: give one"}
	case f.random > 0:
		return f.draw(t, sets, note)
	}
	sweeps := map[string][]string{}
	for _, s := range f.sweeps {
		name, text, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return nil, exitError{code: 2, msg: fmt.Sprintf("--sweep %s: write NAME=V1,V2 (or NAME=A..B for an int)", s)}
		}
		if _, dup := sweeps[name]; dup {
			return nil, exitError{code: 2, msg: fmt.Sprintf("--sweep %s: %s is swept twice; list all its values in one --sweep", s, name)}
		}
		vals, err := t.ParseSweep(name, text)
		if err != nil {
			return nil, exitError{code: 2, msg: oneLine(fmt.Errorf("--sweep: %w", err))}
		}
		sweeps[name] = vals
	}
	runs, err := t.Sweep(sets, sweeps)
	if err != nil {
		return nil, exitError{code: 2, msg: oneLine(fmt.Errorf("--sweep: %w", err))}
	}
	return runs, nil
}

// draw samples --random's runs: every parameter the template gives a range
// or choices, except those fixed with --set.
func (f *sweepFlags) draw(t *template.Template, sets map[string]string, note func(string)) ([]template.Values, error) {
	base, err := t.Resolve(sets)
	if err != nil {
		return nil, exitError{code: 2, msg: oneLine(fmt.Errorf("--set: %w", err))}
	}
	var names, fixed []string
	for _, p := range t.Space().Params {
		_, set := sets[p.Name]
		if set || (tuner.Space{Params: []tuner.Param{p}}).Searchable() != nil {
			fixed = append(fixed, p.Name)
			continue
		}
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return nil, exitError{code: 2, msg: "--random: no parameter to draw: give the template's parameters a min and max (or choices), or leave them out of --set"}
	}
	seed := f.randomSeed
	if seed == 0 {
		seed = rand.Uint64()>>12 | 1
	}
	goal := tuner.Goal(t.Objective.Goal)
	if goal == "" {
		goal = tuner.Maximize // random draws do not look at the objective
	}
	cfg := tuner.Config{Space: t.Space(names...), Goal: goal, Fixed: tuner.Values(base), Seed: seed}
	draws, err := tuner.Random(cfg, nil, f.random)
	if err != nil {
		return nil, exitError{code: 2, msg: oneLine(fmt.Errorf("--random: %w", err))}
	}
	note(fmt.Sprintf("drawing %s at random (--random-seed %d repeats these draws); fixed: %s", strings.Join(names, ", "), seed, orNone(fixed)))
	runs := make([]template.Values, 0, len(draws))
	for _, d := range draws {
		v := template.Values{}
		for k, x := range base {
			v[k] = x
		}
		for k, x := range d.Values {
			v[k] = x
		}
		v, err := t.Normalize(v)
		if err != nil {
			return nil, err
		}
		runs = append(runs, v)
	}
	return runs, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// runMany submits one run per set of values. A run whose inputs already
// succeeded is skipped with a note (--allow-duplicate runs it anyway;
// --reuse prints the earlier run's ID). With wait it drives and follows
// them all, and fails unless every one succeeds.
func (c *cli) runMany(ctx context.Context, s *stack, base engine.RunSpec, runs []template.Values, allowDup, reuse, wait bool) error {
	ectx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	var engineDone <-chan struct{}
	if wait {
		engineDone = s.drive(ectx)
	}
	var ids []string
	skipped := 0
	for i, v := range runs {
		spec := base
		spec.Values = v
		label := describeValues(base.Template, v)
		if !allowDup {
			prov, err := s.engine.Provenance(ctx, spec)
			if err != nil {
				return err
			}
			dup, found, err := s.engine.FindDuplicate(ctx, prov.Fingerprint)
			if err != nil {
				return err
			}
			if found {
				skipped++
				if reuse {
					fmt.Fprintln(c.out, dup.ID)
				} else {
					fmt.Fprintf(c.err, "note: %s already succeeded as run %s; skipped (--allow-duplicate runs it again)\n", label, dup.ID)
				}
				continue
			}
		}
		info, err := s.engine.Submit(ctx, spec)
		if err != nil {
			return fmt.Errorf("run %d of %d (%s): %w", i+1, len(runs), label, err)
		}
		if len(ids) == 0 && info.ExecutorNote != "" {
			fmt.Fprintln(c.err, "note:", info.ExecutorNote)
		}
		fmt.Fprintf(c.out, "run %s: %s, seed %d\n", info.ID, label, info.Seed)
		ids = append(ids, info.ID)
	}
	fmt.Fprintf(c.out, "%d run(s) submitted", len(ids))
	if skipped > 0 {
		fmt.Fprintf(c.out, ", %d already done", skipped)
	}
	fmt.Fprintln(c.out)
	if len(ids) == 0 {
		return nil
	}
	if !wait {
		c.ensureEngine(s.home)
		fmt.Fprintln(c.out, "follow them with: niuma ls")
		return nil
	}
	wctx, stopWait := s.whileDriving(ctx, engineDone)
	defer stopWait()
	failed, werr := c.waitRuns(wctx, s.engine, ids)
	stopEngine()
	<-engineDone
	if err := s.driveErr(); err != nil {
		return err
	}
	if err := s.handOver(c); err != nil {
		fmt.Fprintln(c.err, "niuma:", err)
	}
	switch {
	case errors.Is(werr, context.Canceled):
		return exitError{code: 130, msg: "stopped waiting; the runs go on in the background (niuma ls shows them)"}
	case werr != nil:
		return werr
	case failed > 0:
		return exitError{code: 1, msg: fmt.Sprintf("%d of %d runs did not succeed (niuma ls lists them)", failed, len(ids))}
	}
	return nil
}

// describeValues names a run of a sweep by the values it was given.
func describeValues(t *template.Template, v template.Values) string {
	parts := make([]string, 0, len(t.Params))
	for _, p := range t.Params {
		parts = append(parts, p.Name+"="+template.FormatValue(v[p.Name]))
	}
	return strings.Join(parts, " ")
}

// waitRuns follows runs until all have ended, printing a line as each
// ends, and returns how many did not succeed.
func (c *cli) waitRuns(ctx context.Context, eng *engine.Engine, ids []string) (int, error) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	open := map[string]bool{}
	for _, id := range ids {
		open[id] = true
	}
	failed, done := 0, 0
	for {
		for _, id := range ids {
			if !open[id] {
				continue
			}
			info, err := eng.Run(ctx, id)
			if err != nil {
				return failed, err
			}
			if !info.State.Done() {
				continue
			}
			delete(open, id)
			done++
			line := fmt.Sprintf("run %s %s in %s%s", id, info.State, info.Elapsed(time.Now()).Round(100*time.Millisecond), bestOf(ctx, eng, info))
			if info.State != engine.Succeeded {
				failed++
				if info.Error != "" {
					line += ": " + info.Error
				}
			}
			fmt.Fprintf(c.out, "%s (%d/%d)\n", line, done, len(ids))
		}
		if len(open) == 0 {
			return failed, nil
		}
		select {
		case <-ctx.Done():
			return failed, ctx.Err()
		case <-tick.C:
		}
	}
}
