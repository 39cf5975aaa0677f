package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"go/parser"
	"go/token"
	"image/png"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name        string
		values      []float64
		goal        string
		final, best float64
		bestStep    int64
		finite      bool
	}{
		{"min", []float64{3, 1, 2}, "min", 2, 1, 1, true},
		{"max", []float64{3, 1, 2}, "max", 2, 3, 0, true},
		{"NaN skipped for best, kept as final", []float64{3, 1, nan}, "min", nan, 1, 1, true},
		{"all NaN", []float64{nan, nan}, "min", nan, nan, 0, false},
		{"empty", nil, "max", nan, nan, 0, false},
		{"goal guessed from the key (loss → min)", []float64{3, 1, 2}, "", 2, 1, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Metric{Key: "loss", Values: tc.values, Steps: make([]int64, len(tc.values))}
			for i := range m.Steps {
				m.Steps[i] = int64(i)
			}
			s := m.Summarize(tc.goal)
			same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
			if !same(s.Final, tc.final) || !same(s.Best, tc.best) || s.Finite != tc.finite || (s.Finite && s.BestStep != tc.bestStep) {
				t.Errorf("Summarize = %+v, want final %v best %v at %d finite %v", s, tc.final, tc.best, tc.bestStep, tc.finite)
			}
		})
	}
}

func TestGuessGoal(t *testing.T) {
	for key, want := range map[string]string{
		"val_acc": "max", "accuracy": "max", "f1": "max", "reward": "max", "BLEU": "max",
		"loss": "min", "val_loss": "min", "perplexity": "min", "error_rate": "min", "lr": "min",
	} {
		if got := GuessGoal(key); got != want {
			t.Errorf("GuessGoal(%q) = %s, want %s", key, got, want)
		}
	}
}

func TestEffectiveObjective(t *testing.T) {
	m := func(key string) Metric { return Metric{Key: key} }
	cases := []struct {
		name string
		run  Run
		want Objective
	}{
		{"declared", Run{Objective: Objective{"val_loss", "min"}, Metrics: []Metric{m("val_acc")}}, Objective{"val_loss", "min"}},
		{"declared without goal", Run{Objective: Objective{Metric: "top1"}}, Objective{"top1", "min"}},
		{"an accuracy first", Run{Metrics: []Metric{m("loss"), m("val_acc")}}, Objective{"val_acc", "max"}},
		{"else the last loss", Run{Metrics: []Metric{m("loss"), m("val_loss"), m("lr")}}, Objective{"val_loss", "min"}},
		{"else the first metric", Run{Metrics: []Metric{m("lr"), m("tokens")}}, Objective{"lr", "min"}},
		{"no metrics", Run{}, Objective{}},
	}
	for _, tc := range cases {
		if got := tc.run.EffectiveObjective(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestRankingAndParamDiff(t *testing.T) {
	run := func(id string, acc float64, params ...Param) Run {
		r := Run{ID: id, Objective: Objective{"val_acc", "max"}, Params: params}
		if !math.IsNaN(acc) {
			r.Metrics = []Metric{{Key: "val_acc", Steps: []int64{0, 1}, Values: []float64{0.1, acc}}}
		}
		return r
	}
	rep := &Report{Runs: []Run{
		run("a", 0.90, Param{"lr", 0.1}, Param{"opt", "adam"}),
		run("b", math.NaN(), Param{"lr", 0.01}, Param{"opt", "adam"}), // no metrics: last
		run("c", 0.95, Param{"lr", 0.001}, Param{"opt", "adam"}, Param{"wd", 0.0}),
		run("d", 0.93, Param{"lr", 0.1}, Param{"opt", "adam"}),
	}}
	o, ranked := rep.Ranking()
	var order []string
	for _, r := range ranked {
		order = append(order, r.Run.ID)
	}
	if o != (Objective{"val_acc", "max"}) || strings.Join(order, "") != "cdab" {
		t.Errorf("ranking %v by %+v, want cdab by val_acc max", order, o)
	}
	names, values := rep.ParamDiff()
	if strings.Join(names, ",") != "lr,wd" {
		t.Errorf("differing params %v, want lr,wd (opt is the same everywhere)", names)
	}
	if values[2][0] != "0.001" || values[2][1] != "0" || values[0][1] != "" {
		t.Errorf("diff values %q", values)
	}
}

func TestCheckRefuses(t *testing.T) {
	tooMany := &Report{Runs: make([]Run, MaxRuns+1)}
	mismatched := &Report{Runs: []Run{{ID: "r", Metrics: []Metric{{Stage: "s", Key: "k", Steps: []int64{1, 2}, Values: []float64{1}}}}}}
	for name, tc := range map[string]struct {
		rep  *Report
		want string
	}{
		"no runs":    {&Report{}, "no runs to report on"},
		"101 runs":   {tooMany, "101 runs is more than a comparison report takes (100)"},
		"mismatched": {mismatched, "metric s/k has 2 steps, 1 values"},
	} {
		for format, f := range map[string]func(*Report) ([]byte, error){
			"html": func(r *Report) ([]byte, error) { return HTML(r, Options{}) },
			"pdf":  func(r *Report) ([]byte, error) { return PDF(r, Options{}) },
			"csv":  CSV, "json": JSON,
			"md": func(r *Report) ([]byte, error) { b, _, err := Markdown(r, Options{}, ""); return b, err },
		} {
			if _, err := f(tc.rep); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s: err = %v, want %q", name, format, err, tc.want)
			}
		}
	}
}

func TestMarkdown(t *testing.T) {
	r := demoRun("20261129-100000-aaaaaa", 0.003, 1)
	r.Params = append(r.Params, Param{"note", "a|b *c* <d>"})
	doc, files, err := Markdown(&Report{Runs: []Run{r}}, Options{}, "r_files")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	for _, want := range []string{"# Run report: digits-mlp 20261129-100000-aaaaaa\n", "\n## Stages\n", "| stage | state | attempts |", "| note | a\\|b \\*c\\* &lt;d&gt; |"} {
		if !strings.Contains(s, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	links := regexp.MustCompile(`!\[[^\]]*\]\(<([^>]+)>\)`).FindAllStringSubmatch(s, -1)
	if len(links) != 7 || len(files) != 7 {
		t.Fatalf("%d image links and %d files, want 7 of each (3 curves, 4 of the GPU)", len(links), len(files))
	}
	for i, l := range links {
		if files[i].Name != l[1] || filepath.Dir(l[1]) != "r_files" {
			t.Errorf("link %q, file %q", l[1], files[i].Name)
		}
		if _, err := png.Decode(bytes.NewReader(files[i].Data)); err != nil {
			t.Errorf("%s is not a PNG: %v", files[i].Name, err)
		}
	}
}

func TestCSV(t *testing.T) {
	rep := comparison(3)
	rep.Runs[1].Metrics[0].Values[5] = math.Inf(1)
	b, err := CSV(rep)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	if got := strings.Join(rows[0], ","); got != "run,stage,attempt,metric,step,value,wall,epochs,hidden,lr,optimizer" {
		t.Errorf("header %s", got)
	}
	if n := len(rows) - 1; n != pointCount(rep) {
		t.Errorf("%d rows, want one per point: %d", n, pointCount(rep))
	}
	found := false
	for _, r := range rows[1:] {
		if r[0] == rep.Runs[1].ID && r[3] == "loss" && r[4] == "5" {
			found = r[5] == "+Inf" && r[10] == "adam"
		}
	}
	if !found {
		t.Errorf("the +Inf point of run 2 is missing or wrong")
	}
}

func TestJSON(t *testing.T) {
	r := failedRun()
	b, err := JSON(&Report{Runs: []Run{r}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs []struct {
			ID      string         `json:"id"`
			Params  map[string]any `json:"params"`
			Metrics []struct {
				Key    string `json:"key"`
				Final  any    `json:"final"`
				Values []any  `json:"values"`
			} `json:"metrics"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	m := got.Runs[0].Metrics[0]
	if got.Runs[0].ID != r.ID || got.Runs[0].Params["lr"] != 0.5 || len(m.Values) != 40 || m.Final != "NaN" {
		t.Errorf("JSON = %+v", got.Runs[0])
	}
}

func TestFormatNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 30: "30", 0.97704: "0.97704", 0.123456789: "0.12346", 1e-5: "1.000e-05", 2e7: "20000000", 1.5e20: "1.500e+20", math.Inf(-1): "-Inf"} {
		if got := formatNum(v); got != want {
			t.Errorf("formatNum(%g) = %s, want %s", v, got, want)
		}
	}
}

func TestNoIOImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"os", "net", "database", "syscall", "io/ioutil", "path/filepath", "niuma/engine", "niuma/storage"}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %q: package report must stay free of I/O", name, path)
				}
			}
		}
	}
}
