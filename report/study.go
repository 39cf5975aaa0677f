package report

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"niuma/plot"
)

// Study is a search over a template's parameters whose trials are the
// report's runs: a study report opens with it, then compares the runs.
type Study struct {
	ID, Template string
	Objective    Objective
	State        string // running, finished or stopped
	Budget       int
	Parallel     int
	Pruner       string // none, median or asha
	// Searched names the parameters the study varied, in order; Log marks
	// those searched on a log scale (their axes are logarithmic).
	Searched []string
	Log      map[string]bool
	Trials   []Trial
}

// Trial is one trial of a study.
type Trial struct {
	Number int
	RunID  string
	State  string // submitting, running, done, pruned, failed or cancelled
	Method string // how the tuner chose it
	// Objective is its result (the best value it reached; a pruned
	// trial's best before it was stopped); NaN when it has none.
	Objective float64
	Params    []Param // the searched parameters' values
	// Why is the pruning decision's evidence for a pruned trial, the
	// model's expectation for a suggested one.
	Why string
}

// best is the index of the best done trial, -1 when none.
func (s *Study) best() int {
	b := -1
	for i, t := range s.Trials {
		if t.State != "done" || math.IsNaN(t.Objective) {
			continue
		}
		if b < 0 || better(s.Objective.Goal, t.Objective, s.Trials[b].Objective) {
			b = i
		}
	}
	return b
}

func better(goal string, a, b float64) bool {
	if goal == "max" {
		return a > b
	}
	return a < b
}

// studyOutline is the study's section: its facts, the trials with the
// pruning evidence, the best objective so far by trial, and each searched
// number against the objective with pruned trials marked.
func studyOutline(o *outline, s *Study, opt Options) {
	counts := map[string]int{}
	for _, t := range s.Trials {
		counts[t.State]++
	}
	o.h(2, "Study")
	bestText := "none yet"
	b := s.best()
	if b >= 0 {
		bestText = fmt.Sprintf("%s = %s, trial %d (run %s)", s.Objective.Metric, formatNum(s.Trials[b].Objective), s.Trials[b].Number, s.Trials[b].RunID)
	}
	o.facts(
		Item{"Study", s.ID},
		Item{"Template", s.Template},
		Item{"State", s.State},
		Item{"Objective", fmt.Sprintf("%s (%s is better)", s.Objective.Metric, goalWord(s.Objective.Goal))},
		Item{"Trials", fmt.Sprintf("%d of %d: %d done, %d pruned, %d failed", len(s.Trials), s.Budget, counts["done"], counts["pruned"], counts["failed"])},
		Item{"At once", strconv.Itoa(s.Parallel)},
		Item{"Pruner", s.Pruner},
		Item{"Best", bestText},
	)
	head := []string{"trial", "run", "state", "method", s.Objective.Metric}
	head = append(head, s.Searched...)
	head = append(head, "why")
	num := make([]bool, len(head))
	num[0], num[4] = true, true
	rows := make([][]string, len(s.Trials))
	for i, t := range s.Trials {
		mark := strconv.Itoa(t.Number)
		if i == b {
			mark += " (best)"
		}
		obj := "–"
		if !math.IsNaN(t.Objective) {
			obj = formatNum(t.Objective)
		}
		row := []string{mark, t.RunID, t.State, t.Method, obj}
		for _, name := range s.Searched {
			v := "–"
			for _, p := range t.Params {
				if p.Name == name {
					v = p.String()
				}
			}
			row = append(row, v)
		}
		rows[i] = append(row, t.Why)
	}
	o.table(head, num, rows)
	if !opt.NoCurves {
		for _, f := range studyFigures(s) {
			o.figure(f)
		}
	}
}

// studyFigures draws the best objective so far against the trial number
// and each searched number against the objective, done and pruned trials
// apart.
func studyFigures(s *Study) []figure {
	m := s.Objective.Metric
	var bx, by []float64
	done, pruned := plot.Series{Name: "done"}, plot.Series{Name: "pruned"}
	best, has := 0.0, false
	for _, t := range s.Trials {
		if math.IsNaN(t.Objective) {
			continue
		}
		x := float64(t.Number)
		switch t.State {
		case "done":
			if !has || better(s.Objective.Goal, t.Objective, best) {
				best, has = t.Objective, true
			}
			done.X, done.Y = append(done.X, x), append(done.Y, t.Objective)
		case "pruned":
			pruned.X, pruned.Y = append(pruned.X, x), append(pruned.Y, t.Objective)
		}
		if has {
			bx, by = append(bx, x), append(by, best)
		}
	}
	var figs []figure
	if len(bx) > 0 {
		figs = append(figs, figure{Title: "best " + m + " so far", XLabel: "trial", YLabel: m,
			Series:  []plot.Series{{Name: "best so far", X: bx, Y: by}},
			Caption: fmt.Sprintf("The best %s among the trials that ran to their end, after each trial.", m)})
	}
	if len(done.X)+len(pruned.X) > 0 {
		figs = append(figs, figure{Title: m + " by trial", XLabel: "trial", YLabel: m, Scatter: true,
			Series:  nonEmpty(done, pruned),
			Caption: "Each dot is a trial; a pruned trial's value is the best it reached before it was stopped."})
	}
	if f, ok := parallelFigure(s); ok {
		figs = append(figs, f)
	}
	for _, name := range s.Searched {
		if len(figs) >= 3+maxScatterFigures {
			break
		}
		d, p := plot.Series{Name: "done"}, plot.Series{Name: "pruned"}
		for _, t := range s.Trials {
			if math.IsNaN(t.Objective) {
				continue
			}
			for _, prm := range t.Params {
				x, ok := toFloat(prm.Value)
				if prm.Name != name || !ok {
					continue
				}
				switch t.State {
				case "done":
					d.X, d.Y = append(d.X, x), append(d.Y, t.Objective)
				case "pruned":
					p.X, p.Y = append(p.X, x), append(p.Y, t.Objective)
				}
			}
		}
		if len(d.X)+len(p.X) < 2 {
			continue // a choice, or too few values to draw
		}
		sortXY(d.X, d.Y)
		sortXY(p.X, p.Y)
		figs = append(figs, figure{Title: fmt.Sprintf("%s vs %s", m, name), XLabel: name, YLabel: m, Scatter: true,
			LogX: s.Log[name], Series: nonEmpty(d, p),
			Caption: fmt.Sprintf("Each dot is a trial: its %s and its %s.", name, m)})
	}
	return figs
}

func nonEmpty(ss ...plot.Series) []plot.Series {
	var out []plot.Series
	for _, s := range ss {
		if len(s.X) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// parallelFigure draws every trial with a value across the searched
// parameters and the objective, coloured by the objective (green best);
// pruned trials are grey.
func parallelFigure(s *Study) (figure, bool) {
	if len(s.Searched) == 0 {
		return figure{}, false
	}
	axes := make([]plot.Axis, 0, len(s.Searched)+1)
	cats := map[string]map[string]int{}
	for _, name := range s.Searched {
		a := plot.Axis{Name: name, Log: s.Log[name]}
		for _, t := range s.Trials {
			for _, p := range t.Params {
				if _, num := toFloat(p.Value); p.Name == name && !num {
					if cats[name] == nil {
						cats[name] = map[string]int{}
					}
					if _, seen := cats[name][p.String()]; !seen {
						cats[name][p.String()] = len(a.Categories)
						a.Categories = append(a.Categories, p.String())
					}
				}
			}
		}
		axes = append(axes, a)
	}
	axes = append(axes, plot.Axis{Name: s.Objective.Metric})
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, t := range s.Trials {
		if !math.IsNaN(t.Objective) && !math.IsInf(t.Objective, 0) {
			lo, hi = math.Min(lo, t.Objective), math.Max(hi, t.Objective)
		}
	}
	var lines []plot.Line
	for _, t := range s.Trials {
		if math.IsNaN(t.Objective) || math.IsInf(t.Objective, 0) {
			continue
		}
		vals := make([]float64, len(axes))
		for i, name := range s.Searched {
			vals[i] = math.NaN()
			for _, p := range t.Params {
				if p.Name != name {
					continue
				}
				if x, num := toFloat(p.Value); num {
					vals[i] = x
				} else {
					vals[i] = float64(cats[name][p.String()])
				}
			}
		}
		vals[len(vals)-1] = t.Objective
		shade := 1.0
		if hi > lo {
			shade = (t.Objective - lo) / (hi - lo)
			if s.Objective.Goal != "max" {
				shade = 1 - shade
			}
		}
		l := plot.Line{Values: vals, Shade: shade}
		if t.State == "pruned" {
			l.Color = color.Gray{Y: 0xa0}
		}
		lines = append(lines, l)
	}
	if len(lines) < 2 {
		return figure{}, false
	}
	return figure{Title: "trials across the searched parameters", Parallel: &parallelFig{Axes: axes, Lines: lines},
		Caption: fmt.Sprintf("Parallel coordinates: a line per trial, coloured by %s (green best); pruned trials grey.", s.Objective.Metric)}, true
}
