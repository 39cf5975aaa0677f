package report

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// studyReport is a comparison of five digits-mlp runs that are the trials
// of a study: trial 3 pruned, trial 4 still running.
func studyReport() *Report {
	rep := comparison(5)
	s := &Study{ID: "t20261202-010000-abcdef", Template: "digits-mlp", Objective: Objective{Metric: "val_acc", Goal: "max"},
		State: "running", Budget: 8, Parallel: 2, Pruner: "median", Searched: []string{"lr", "optimizer"}, Log: map[string]bool{"lr": true}}
	objs := []float64{0.95, 0.97, 0.96, 0.61, math.NaN()}
	states := []string{"done", "done", "done", "pruned", "running"}
	for i, r := range rep.Runs {
		lr, _ := r.param("lr")
		tr := Trial{Number: i, RunID: r.ID, State: states[i], Method: "random", Objective: objs[i],
			Params: []Param{{"lr", lr}, {"optimizer", "adam"}}}
		if states[i] == "pruned" {
			tr.Why = "val_acc 0.61 at step 3, median of 4 trials 0.9"
		}
		s.Trials = append(s.Trials, tr)
	}
	rep.Study = s
	return rep
}

func TestHTMLStudySection(t *testing.T) {
	rep := studyReport()
	doc, raw := mustHTML(t, rep, Options{})
	html := string(raw)
	h2 := texts(elements(doc, "h2"))
	if len(h2) == 0 || h2[0] != "Study" || !contains(h2, "Ranking") {
		t.Fatalf("sections = %q: want the study first, then the comparison", h2)
	}
	if !strings.Contains(html, "Study t20261202-010000-abcdef: digits-mlp") {
		t.Error("the title names the study")
	}
	if !strings.Contains(html, "5 of 8: 3 done, 1 pruned, 0 failed") {
		t.Error("the facts tally the trials")
	}
	if !strings.Contains(html, "val_acc = 0.97, trial 1") {
		t.Error("the best trial is named")
	}
	rows := tableAfter(t, doc, "Study")
	if got := strings.Join(rows[0], ","); got != "trial,run,state,method,val_acc,lr,optimizer,why" {
		t.Fatalf("trial columns = %s", got)
	}
	if rows[2][0] != "1 (best)" || rows[4][2] != "pruned" || rows[4][7] != "val_acc 0.61 at step 3, median of 4 trials 0.9" {
		t.Errorf("trial rows = %q", rows)
	}
	if rows[5][4] != "–" {
		t.Errorf("a running trial has no objective yet, got %q", rows[5][4])
	}
}

func TestStudyFigures(t *testing.T) {
	s := studyReport().Study
	figs := studyFigures(s)
	var titles []string
	for _, f := range figs {
		titles = append(titles, f.Title)
	}
	// optimizer is a choice: no scatter.
	if got := strings.Join(titles, "|"); got != "best val_acc so far|val_acc by trial|trials across the searched parameters|val_acc vs lr" {
		t.Fatalf("figures = %s", got)
	}
	// best so far: 0.95, 0.97, 0.97 (the pruned trial does not count), 0.97
	if got := fmt.Sprint(figs[0].Series[0].Y); got != "[0.95 0.97 0.97 0.97]" {
		t.Errorf("best so far = %s", got)
	}
	if len(figs[1].Series) != 2 || figs[1].Series[1].Name != "pruned" || figs[1].Series[1].Y[0] != 0.61 {
		t.Errorf("pruned trials are their own series: %+v", figs[1].Series)
	}
	par := figs[2].Parallel
	if par == nil || len(par.Axes) != 3 || par.Axes[2].Name != "val_acc" || !par.Axes[0].Log || len(par.Axes[1].Categories) != 1 {
		t.Errorf("parallel axes = %+v", par)
	}
	if len(par.Lines) != 4 || par.Lines[3].Color == nil {
		t.Errorf("four trials with a value, the pruned one grey: %+v", par.Lines)
	}
	if !figs[3].LogX {
		t.Error("lr is searched on a log scale: its axis is logarithmic")
	}
	if _, err := PDF(studyReport(), Options{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Markdown(studyReport(), Options{}, "fig"); err != nil {
		t.Fatal(err)
	}
}
