package app

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"niuma/tuner"
	"niuma/tuner/tabular"
)

// tune is `niuma tune`: the tuner replayed on recorded benchmarks. With
// --table it searches a tabular benchmark under the comparison protocol
// (the one ../shared/data/hpo/optuna_reference.py runs Optuna under) and
// prints the median regret after each trial; with --curves it replays
// recorded learning curves with and without early stopping.
func (c *cli) tune(ctx context.Context, args []string) error {
	fs := c.flags("tune")
	table := fs.String("table", "", "a tabular benchmark: parameter columns, then METRIC_seedN value columns (.csv or .csv.gz)")
	curves := fs.String("curves", "", "recorded learning curves (as bench/tuner/record-digits-grid.sh writes them), to measure early stopping")
	budget := fs.Int("budget", 100, "trials of a study (20 when not given), or per search with --table (100)")
	reps := fs.Int("reps", 20, "repetitions, each with its own seed (the median is reported)")
	firstSeed := fs.Int("first-seed", 0, "the first repetition's seed; the reference script's are 0, 1, …, so another value scores the tuner on seeds nothing was tuned on (--table)")
	noisy := fs.Bool("noisy", false, "a trial's result is one seed's value drawn at random, not the mean over seeds (--table)")
	sampler := fs.String("sampler", "bayes", "bayes or random")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "repetitions run at once (--table); parallel trials of a study (--curves: default 4)")
	pruner := fs.String("pruner", "median", "none, median or asha (--curves; a study: default the template's tune: pruner, else median)")
	warmup := fs.Int64("warmup", 0, "no trial is stopped before this step (--curves and studies; default: the template's tune: warmup, else a tenth of the longest curve)")
	trials := fs.Int("trials", 40, "trials per study (--curves)")
	metric := fs.String("metric", "val_acc", "the curves' objective column (--curves)")
	goal := fs.String("goal", "max", "min or max: which way the --metric is better (--curves)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var sf studyFlags
	var sets, spaces multiFlag
	fs.StringVar(&sf.parallel, "parallel", "auto", "a study's trials at once: auto (as many as free GPUs, or one per 2 CPU cores when the trials need no GPU) or a number")
	fs.Var(&sets, "set", "a study: fix a parameter, NAME=VALUE (repeatable)")
	fs.Var(&spaces, "space", "a study: search this parameter, NAME, NAME=LO..HI[:log] or NAME=A,B (repeatable; default: the template's tune: search, else every searchable parameter)")
	fs.Int64Var(&sf.seed, "seed", 1, "a study's seed: the same seed and results give the same suggestions")
	fs.StringVar(&sf.executor, "executor", "", "a study's runs: local, docker or slurm (default: the template's runtime)")
	fs.BoolVar(&sf.wait, "wait", false, "drive the study from this process until it ends (default: in the background)")
	fs.StringVar(&sf.resume, "resume", "", "carry on a stored study (after its driver stopped or was killed)")
	stop := fs.String("stop", "", "stop a study: no more trials, its running ones cancelled")
	status := fs.Bool("status", false, "list the studies, or with a STUDY, its trials, best so far and the next suggestion")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	workersSet := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "workers":
			workersSet = true
		case "budget":
			sf.budgetSet = true
		case "pruner":
			sf.prunerSet = true
		case "warmup":
			sf.warmupSet = true
		}
	})
	sf.budget, sf.pruner, sf.warmup, sf.sets, sf.spaces = *budget, *pruner, *warmup, sets, spaces
	switch {
	case *status:
		if len(pos) > 1 {
			return exitError{code: 2, msg: "tune --status takes at most one STUDY"}
		}
		id := ""
		if len(pos) == 1 {
			id = pos[0]
		}
		return c.tuneStatus(ctx, id, *asJSON)
	case *stop != "":
		if len(pos) > 0 {
			return exitError{code: 2, msg: "tune --stop STUDY takes no TEMPLATE"}
		}
		return c.tuneStop(ctx, *stop)
	case sf.resume != "":
		if len(pos) > 0 {
			return exitError{code: 2, msg: "tune --resume STUDY takes no TEMPLATE: the study knows its own"}
		}
		return c.tuneResume(ctx, sf.resume, sf)
	case len(pos) > 1:
		return exitError{code: 2, msg: "tune takes one TEMPLATE"}
	case len(pos) == 1:
		if *table != "" || *curves != "" {
			return exitError{code: 2, msg: "tune TEMPLATE runs a study; --table and --curves replay benchmarks instead: give one or the other"}
		}
		return c.tuneStudy(ctx, pos[0], sf)
	case (*table == "") == (*curves == ""):
		return exitError{code: 2, msg: "tune needs a TEMPLATE (a study: niuma tune TEMPLATE --budget N --wait), --table FILE (a tabular benchmark) or --curves FILE (recorded learning curves)"}
	case *reps < 1:
		return exitError{code: 2, msg: fmt.Sprintf("--reps %d: give at least 1", *reps)}
	case *sampler != "bayes" && *sampler != "random":
		return exitError{code: 2, msg: fmt.Sprintf("--sampler %q: use bayes or random", *sampler)}
	case *workers < 1:
		return exitError{code: 2, msg: fmt.Sprintf("--workers %d: give at least 1", *workers)}
	}
	if *curves != "" {
		if !workersSet {
			*workers = 4
		}
		return c.tuneCurves(*curves, *metric, *goal, *pruner, *warmup, *sampler, *trials, *workers, *reps, *asJSON)
	}
	if *budget < 1 || *budget > 10000 {
		return exitError{code: 2, msg: fmt.Sprintf("--budget %d: give 1 to 10000 trials", *budget)}
	}
	t, err := tabular.Load(*table)
	if err != nil {
		return fmt.Errorf("read the table: %w", err)
	}
	fmt.Fprintf(c.err, "tune: %s: %d configurations of %s; %s %s (best %.6g); %s search, %d trials × %d repetitions\n",
		t.Name, t.Configurations(), describeSpace(t.Space), t.Goal, t.Metric, t.Best(), *sampler, *budget, *reps)
	start := time.Now()
	progress := func(done int) {
		fmt.Fprintf(c.err, "\rtune: %d/%d repetitions (%s)", done, *reps, time.Since(start).Round(time.Second))
		if done == *reps {
			fmt.Fprintln(c.err)
		}
	}
	med, err := tabular.Regret(t, tabular.Samplers[*sampler], tabular.Protocol{Budget: *budget, Reps: *reps, FirstSeed: *firstSeed, Noisy: *noisy, Workers: *workers, Progress: progress})
	if err != nil {
		return err
	}
	if !*asJSON {
		for _, b := range []int{10, 25, 50, 100, 200, 500, 1000} {
			if b <= len(med) {
				fmt.Fprintf(c.out, "%s budget %d: median regret %.5g\n", *sampler, b, med[b-1])
			}
		}
		return nil
	}
	// One line like the reference script's, the budgets in order.
	var b bytes.Buffer
	head, _ := json.Marshal(map[string]any{"table": t.Name, "sampler": *sampler, "noisy": *noisy, "budget": *budget, "reps": *reps, "first_seed": *firstSeed})
	b.Write(head[:len(head)-1])
	b.WriteString(`,"median_regret":{`)
	for i, v := range med {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(strconv.Itoa(i+1)) + ":" + strconv.FormatFloat(v, 'g', -1, 64))
	}
	b.WriteString("}}\n")
	_, err = c.out.Write(b.Bytes())
	return err
}

// describeSpace lists a space's parameters for a progress line, e.g.
// "alpha (log float), depth (int), op0 (5 choices)".
func describeSpace(s tuner.Space) string {
	var parts []string
	for _, p := range s.Params {
		switch {
		case p.Kind == tuner.Choice:
			parts = append(parts, fmt.Sprintf("%s (%d choices)", p.Name, len(p.Choices)))
		case p.Log:
			parts = append(parts, fmt.Sprintf("%s (log %s)", p.Name, p.Kind))
		default:
			parts = append(parts, fmt.Sprintf("%s (%s)", p.Name, p.Kind))
		}
	}
	return strings.Join(parts, ", ")
}

func (c *cli) tuneCurves(path, metric, goal, rule string, warmup int64, sampler string, trials, workers, reps int, asJSON bool) error {
	if goal != "min" && goal != "max" {
		return exitError{code: 2, msg: fmt.Sprintf("--goal %q: use min or max", goal)}
	}
	p := tuner.Pruner{Rule: tuner.Rule(rule), Warmup: warmup}
	switch p.Rule {
	case tuner.NoPruning, tuner.MedianRule, tuner.SuccessiveHalving:
	default:
		return exitError{code: 2, msg: fmt.Sprintf("--pruner %q: use none, median or asha", rule)}
	}
	if trials < 2 || workers < 1 {
		return exitError{code: 2, msg: "--trials needs at least 2 and --workers at least 1"}
	}
	cv, err := tabular.LoadCurves(path, metric, tuner.Goal(goal))
	if err != nil {
		return fmt.Errorf("read the curves: %w", err)
	}
	fmt.Fprintf(c.err, "tune: %s: %d runs of %d configurations of %s, up to %d steps; %s search, %d trials on %d slots × %d repetitions, pruner %s\n",
		cv.Name, cv.Runs(), cv.Configurations(), describeSpace(cv.Space), cv.Steps, sampler, trials, workers, reps, rule)
	r, err := cv.ReplayPruning(p, sampler, trials, workers, reps)
	if err != nil {
		return err
	}
	if asJSON {
		out := map[string]any{"curves": cv.Name, "pruner": rule, "warmup": warmup, "sampler": sampler, "trials": trials, "workers": workers, "reps": reps,
			"steps_ratio": r.StepsRatio, "same_best": r.SameBest, "reach_ratio": finite(r.ReachRatio), "reach_vs_first": finite(r.ReachVsFirst), "reached": r.Reached,
			"pruned": r.Pruned, "best_without": r.BestWithout, "best_with": r.BestWith}
		enc := json.NewEncoder(c.out)
		return enc.Encode(out)
	}
	fmt.Fprintf(c.out, "training steps with pruning / without: %.2f (same %d trials; best %s %.4g without, %.4g with; same best in %.0f%% of studies; %.0f%% of trials stopped)\n",
		r.StepsRatio, trials, metric, r.BestWithout, r.BestWith, 100*r.SameBest, 100*r.Pruned)
	fmt.Fprintf(c.out, "steps to reach the best without pruning / its steps: %.2f (reached in %.0f%% of studies); / its steps when it first got there: %.2f\n", r.ReachRatio, 100*r.Reached, r.ReachVsFirst)
	return nil
}

// finite turns an infinite median (most studies never got there) into
// null for JSON.
func finite(x float64) any {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return x
}
