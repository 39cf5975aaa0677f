package study

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"niuma/engine/template"
	"niuma/storage"
	"niuma/tuner"
)

// Advice is what the archive suggests running next of a template, outside
// any study: the tuner's next point over the template's search space,
// learnt from the template's succeeded runs.
type Advice struct {
	// Values is every parameter of the run to launch: the suggested
	// values of the searched ones, and for the others the values the
	// runs it learnt from share.
	Values     template.Values
	Searched   []string // the searched parameters, in the template's order
	Prediction tuner.Prediction
	// Runs is how many earlier runs it learnt from; Objective and Goal
	// are what they are judged by (the template's objective).
	Runs            int
	Objective, Goal string
	// Unlike is those runs' values outside the search that are not the
	// template's defaults (epochs=5): what sets them apart.
	Unlike []string
}

// TooFewRuns is Advise's answer while the archive holds fewer than two
// comparable runs: a model needs two results to say anything.
type TooFewRuns struct {
	Template, Objective string
	Have                int // comparable runs so far
}

func (e *TooFewRuns) Error() string {
	return fmt.Sprintf("a suggestion needs 2 succeeded runs of %s that report %s with the same other values; the archive has %d", e.Template, e.Objective, e.Have)
}

// ErrNothingToAdvise is Advise's answer for a template it can never
// advise on, whatever the archive holds.
var ErrNothingToAdvise = errors.New("nothing to advise on")

// Advise works out the next run of t to try from the archive: the
// template's searchable parameters (its tune.search) are searched; its
// succeeded runs (of the same template text) are the finished trials, and
// of those only the ones that share their other values with the most
// others (the archive's largest comparable group; the newest wins a tie),
// so that the model compares like with like (the archive's largest such
// group that reports the objective, when the largest does not). The
// suggestion is seeded: the same archive gives the same advice. With
// fewer than two such runs it returns a *TooFewRuns; a template with no
// objective or nothing to search, ErrNothingToAdvise (wrapped).
func Advise(ctx context.Context, db *storage.DB, eng Engine, t *template.Template) (Advice, error) {
	if t == nil || t.Objective.Metric == "" {
		return Advice{}, fmt.Errorf("%w: the template declares no objective, so there is nothing to judge runs by", ErrNothingToAdvise)
	}
	names := t.Searchable()
	if len(names) == 0 {
		return Advice{}, fmt.Errorf("%w: the template has no parameter to search", ErrNothingToAdvise)
	}
	space := t.Space(names...)
	if err := space.Searchable(); err != nil {
		return Advice{}, err
	}
	runs, err := db.ListRuns(ctx, storage.RunFilter{States: []storage.RunState{storage.RunSucceeded}})
	if err != nil {
		return Advice{}, err
	}
	a := Advice{Searched: space.Names(), Objective: t.Objective.Metric, Goal: t.Objective.Goal}
	// The largest group of comparable runs that reports the objective
	// (a larger one may not: another stage, a metric since renamed).
	var (
		l      Loaded
		d      *Driver
		trials []tuner.Trial
		have   int
	)
	for i, g := range comparableGroups(t, space, runs) {
		if g.n < 2 || i == maxAdviceGroups {
			have = max(have, min(g.n, 1)) // a lone run: one, if it reports
			break
		}
		l = Loaded{Study: storage.Study{TemplateName: t.Name, TemplateYAML: string(t.YAML), Objective: t.Objective.Metric, Goal: t.Objective.Goal},
			Template: t, Space: space, Fixed: g.values}
		d = &Driver{Engine: eng, Store: db, stageOf: map[string]string{}}
		if trials, err = d.warmStart(ctx, l); err != nil {
			return a, err
		}
		if have = max(have, len(trials)); len(trials) >= 2 {
			break
		}
	}
	if len(trials) < 2 {
		return a, &TooFewRuns{Template: t.Name, Objective: t.Objective.Metric, Have: have}
	}
	// The model's own point: an opening design or a random draw is for a
	// study with a budget to spend, not for one piece of advice.
	sugg, err := tuner.Propose(tuner.Config{Space: space, Goal: tuner.Goal(t.Objective.Goal), Fixed: d.fixedOf(l)}, trials)
	if err != nil {
		return a, err
	}
	a.Values = maps.Clone(l.Fixed)
	for k, x := range sugg.Values {
		a.Values[k] = x
	}
	a.Prediction, a.Runs = finitePrediction(*sugg.Prediction), len(trials)
	defaults := t.Defaults()
	for _, p := range t.Params {
		if _, searched := space.Param(p.Name); searched {
			continue
		}
		if v := template.FormatValue(l.Fixed[p.Name]); v != template.FormatValue(defaults[p.Name]) {
			a.Unlike = append(a.Unlike, p.Name+"="+v)
		}
	}
	return a, nil
}

// maxAdviceGroups bounds the groups of comparable runs Advise reads the
// curves of, largest first.
const maxAdviceGroups = 5

// group is runs of a template that share their values outside the space:
// values is the newest one's, n how many there are.
type group struct {
	values template.Values
	n, at  int
}

// comparableGroups groups the runs of t by their values outside space,
// largest first (runs come newest first, so the newest group wins a tie).
func comparableGroups(t *template.Template, space tuner.Space, runs []storage.Run) []*group {
	groups := map[string]*group{}
	for i, r := range runs {
		if r.Template != t.Name || r.TemplateYAML != string(t.YAML) {
			continue
		}
		v, err := template.ValuesFromJSON(t, []byte(r.Params))
		if err != nil {
			continue // values the template no longer takes
		}
		key := ""
		for _, p := range t.Params {
			if _, searched := space.Param(p.Name); !searched {
				key += p.Name + "=" + template.FormatValue(v[p.Name]) + "\x00"
			}
		}
		g, ok := groups[key]
		if !ok {
			g = &group{values: v, at: i}
			groups[key] = g
		}
		g.n++
	}
	all := make([]*group, 0, len(groups))
	for _, g := range groups {
		all = append(all, g)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].at < all[j].at
	})
	return all
}
