package sentinel_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"niuma/sentinel"
)

// The training-run corpus: real PyTorch runs recorded on this machine's CPU
// by testdata/gen/record_runs.py, each labelled from how it was made (the
// manifest: label, onset, the kinds that are as right as the label and the
// kinds that may truly fire as a side effect), split once into a tuning
// and a test half. The figures that count are the test half's.

// run is one entry of testdata/runs/manifest.json.
type run struct {
	Name     string          `json:"name"`
	Label    string          `json:"label"` // "healthy" or a sentinel.Kind
	Split    string          `json:"split"` // "tune" or "test"
	Onset    int             `json:"onset"` // the index of the first faulty point; -1 when healthy
	Accept   []sentinel.Kind `json:"accept"`
	Tolerate []sentinel.Kind `json:"tolerate"`
	Recipe   map[string]any  `json:"recipe"`
}

func (r run) right(k sentinel.Kind) bool {
	return string(k) == r.Label || slices.Contains(r.Accept, k)
}

func loadRuns(t testing.TB) []run {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "runs", "manifest.json"))
	if err != nil {
		t.Fatalf("the run corpus' manifest (run testdata/gen/record_runs.py): %v", err)
	}
	var rs []run
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return rs
}

// runPoints reads a recorded run's metrics lines as points of one attempt,
// one slice per line, keys in name order.
func runPoints(t testing.TB, name string) [][]sentinel.Point {
	t.Helper()
	var out [][]sentinel.Point
	for _, line := range readLines(t, filepath.Join("testdata", "runs", name+".jsonl")) {
		step, kv, ok := parseLine(line)
		if !ok {
			continue
		}
		keys := make([]string, 0, len(kv))
		for k := range kv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var pts []sentinel.Point
		for _, k := range keys {
			pts = append(pts, sentinel.Point{Run: name, Stage: "train", Attempt: 1, Key: k, Step: step, Value: kv[k]})
		}
		out = append(out, pts)
	}
	return out
}

// runFlag is one anomaly of a run, at the index of the point that tipped it.
type runFlag struct {
	kind  sentinel.Kind
	point int
}

// runFlags feeds a run to a fresh sentinel and returns what it flagged.
func runFlags(cfg sentinel.Config, lines [][]sentinel.Point) []runFlag {
	s := sentinel.New(cfg)
	var out []runFlag
	for i, pts := range lines {
		for _, a := range s.ObserveAll(pts) {
			out = append(out, runFlag{a.Kind, i})
		}
	}
	return out
}

// runScore is what a set of runs scored, per detector and overall.
type runScore struct {
	tp, fp        map[sentinel.Kind]int
	cases, found  map[string]int // by label
	delays        map[string][]float64
	kindFlagged   map[string]int // by label: runs with a flag that is no side effect
	kindRight     map[string]int // by label: of those, the ones whose first such flag is right
	flagged       int            // faulty runs with a flag that is no side effect
	firstRight    int            // of those, the ones whose first such flag (its point's flags) names a right kind
	strictFlagged int            // faulty runs with any flag
	strictRight   int            // of those, the ones whose first flag names a right kind
	healthyFlags  int
	healthyRuns   int
	wrong         []string // what went wrong, for the log
	overallDelays []float64
}

func scoreRuns(t testing.TB, cfg sentinel.Config, rs []run, lines map[string][][]sentinel.Point) runScore {
	sc := runScore{tp: map[sentinel.Kind]int{}, fp: map[sentinel.Kind]int{}, cases: map[string]int{},
		found: map[string]int{}, delays: map[string][]float64{}, kindFlagged: map[string]int{}, kindRight: map[string]int{}}
	for _, r := range rs {
		fl := runFlags(cfg, lines[r.Name])
		if r.Label == "healthy" {
			sc.healthyRuns++
			sc.healthyFlags += len(fl)
			for _, f := range fl {
				sc.fp[f.kind]++
				sc.wrong = append(sc.wrong, fmt.Sprintf("%s: %s at point %d on a healthy run", r.Name, f.kind, f.point))
			}
			continue
		}
		sc.cases[r.Label]++
		first := -1
		for _, f := range fl {
			switch {
			case r.right(f.kind) && f.point >= r.Onset:
				sc.tp[f.kind]++
				if first < 0 {
					first = f.point
				}
			case slices.Contains(r.Tolerate, f.kind):
			default:
				sc.fp[f.kind]++
				sc.wrong = append(sc.wrong, fmt.Sprintf("%s: %s at point %d (label %s from point %d)", r.Name, f.kind,
					f.point, r.Label, r.Onset))
			}
		}
		if first >= 0 {
			sc.found[r.Label]++
			d := float64(first - r.Onset)
			sc.delays[r.Label] = append(sc.delays[r.Label], d)
			sc.overallDelays = append(sc.overallDelays, d)
		} else {
			sc.wrong = append(sc.wrong, fmt.Sprintf("%s: missed (label %s from point %d; flags %v)", r.Name, r.Label,
				r.Onset, fl))
		}
		// The first kind: the first flag's point's flags, side effects (the
		// kinds the run tolerates) aside; strict: with them.
		var named []runFlag
		for _, f := range fl {
			if !slices.Contains(r.Tolerate, f.kind) {
				named = append(named, f)
			}
		}
		if len(named) > 0 {
			sc.flagged++
			sc.kindFlagged[r.Label]++
			if firstRight(r, named) {
				sc.firstRight++
				sc.kindRight[r.Label]++
			} else {
				sc.wrong = append(sc.wrong, fmt.Sprintf("%s: first flag %s at point %d, label %s", r.Name,
					named[0].kind, named[0].point, r.Label))
			}
		}
		if len(fl) > 0 {
			sc.strictFlagged++
			if firstRight(r, fl) {
				sc.strictRight++
			}
		}
	}
	return sc
}

// firstRight reports whether the flags at the first flagged point name a
// kind right for r.
func firstRight(r run, fl []runFlag) bool {
	for _, f := range fl {
		if f.point == fl[0].point && r.right(f.kind) {
			return true
		}
	}
	return false
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1 // nothing to get wrong
	}
	return float64(a) / float64(b)
}

func medianOf(v []float64) float64 {
	return score{delays: v}.medianDelay()
}

// faultKinds are the labels of the corpus' faulty runs, in table order.
var faultKinds = []string{string(sentinel.NaN), string(sentinel.LossSpike), string(sentinel.Divergence),
	string(sentinel.NoProgress)}

func (sc runScore) precision(k sentinel.Kind) float64 { return ratio(sc.tp[k], sc.tp[k]+sc.fp[k]) }

func (sc runScore) overall() (precision, recall float64) {
	var tp, fp, cases, found int
	for _, k := range faultKinds {
		tp += sc.tp[sentinel.Kind(k)]
		fp += sc.fp[sentinel.Kind(k)]
		cases += sc.cases[k]
		found += sc.found[k]
	}
	for _, k := range sentinel.Kinds { // flags of kinds no run is labelled with
		if !slices.Contains(faultKinds, string(k)) {
			fp += sc.fp[k]
		}
	}
	return ratio(tp, tp+fp), ratio(found, cases)
}

func (sc runScore) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| detector | runs | precision | recall | first kind right | median delay |\n|---|---:|---:|---:|---:|---:|\n")
	for _, k := range faultKinds {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s points |\n", k, sc.cases[k], f2(sc.precision(sentinel.Kind(k))),
			f2(ratio(sc.found[k], sc.cases[k])), f2(ratio(sc.kindRight[k], sc.kindFlagged[k])), f1(medianOf(sc.delays[k])))
	}
	for _, k := range sentinel.Kinds { // detectors no run is labelled with, where they spoke
		if !slices.Contains(faultKinds, string(k)) && sc.tp[k]+sc.fp[k] > 0 {
			fmt.Fprintf(&b, "| %s | — | %s | — | — | — |\n", k, f2(sc.precision(k)))
		}
	}
	p, r := sc.overall()
	fmt.Fprintf(&b, "| all | %d | %s | %s | %s | %s points |\n", sc.faulty(), f2(p), f2(r),
		f2(ratio(sc.firstRight, sc.flagged)), f1(medianOf(sc.overallDelays)))
	fmt.Fprintf(&b, "\nfirst kind right counting side effects too: %d of %d flagged faulty runs (%s); "+
		"flags on %d healthy runs: %d\n", sc.strictRight, sc.strictFlagged, f2(ratio(sc.strictRight, sc.strictFlagged)),
		sc.healthyRuns, sc.healthyFlags)
	return b.String()
}

func (sc runScore) faulty() int {
	n := 0
	for _, k := range faultKinds {
		n += sc.cases[k]
	}
	return n
}

func loadRunLines(t testing.TB, rs []run) map[string][][]sentinel.Point {
	lines := map[string][][]sentinel.Point{}
	for _, r := range rs {
		lines[r.Name] = runPoints(t, r.Name)
	}
	return lines
}

func half(rs []run, split string) []run {
	var out []run
	for _, r := range rs {
		if r.Split == split {
			out = append(out, r)
		}
	}
	return out
}

// runFigures are one label's figures on the test half.
type runFigures struct{ precision, recall, firstRight, delay float64 }

// recordedRuns are the test half's figures as docs/BENCHMARKS.md records
// them: TestRuns fails when one drops (a delay: rises) past its record, or
// past the acceptance line (0.9; a median delay of 5 points).
var recordedRuns = struct {
	all     runFigures
	perKind map[string]runFigures
}{
	all: runFigures{1, 1, 1, 1.5},
	perKind: map[string]runFigures{
		string(sentinel.NaN):        {1, 1, 1, 0},
		string(sentinel.LossSpike):  {1, 1, 1, 0},
		string(sentinel.Divergence): {1, 1, 1, 3},
		string(sentinel.NoProgress): {1, 1, 1, 3},
	},
}

// TestRuns replays the corpus of real training runs and holds the test
// half to its recorded figures: go test ./sentinel -run 'Runs$' -v prints
// both halves' tables.
func TestRuns(t *testing.T) {
	rs := loadRuns(t)
	if len(rs) < 60 {
		t.Fatalf("%d runs in the corpus, want at least 60", len(rs))
	}
	lines := loadRunLines(t, rs)
	cfg := sentinel.DefaultConfig()
	tune, test := scoreRuns(t, cfg, half(rs, "tune"), lines), scoreRuns(t, cfg, half(rs, "test"), lines)
	t.Logf("tuning half (%d runs):\n%s", len(half(rs, "tune")), tune.table())
	t.Logf("test half (%d runs):\n%s", len(half(rs, "test")), test.table())
	// The same runs with their training loss alone (no validation
	// accuracy, no gradient norm): what the loss rules find by themselves.
	alone := map[string][][]sentinel.Point{}
	for name, ls := range lines {
		for _, pts := range ls {
			var keep []sentinel.Point
			for _, p := range pts {
				if p.Key == "loss" {
					keep = append(keep, p)
				}
			}
			alone[name] = append(alone[name], keep)
		}
	}
	lossTest := scoreRuns(t, cfg, half(rs, "test"), alone)
	if testing.Verbose() {
		for _, w := range lossTest.wrong {
			t.Logf("test half, the loss alone: %s", w)
		}
	}
	np := string(sentinel.NoProgress)
	t.Logf("test half, the loss alone: no_progress recall %d of %d, divergence %d of %d, %d flags on healthy runs",
		lossTest.found[np], lossTest.cases[np], lossTest.found[string(sentinel.Divergence)],
		lossTest.cases[string(sentinel.Divergence)], lossTest.healthyFlags)
	if testing.Verbose() {
		for _, w := range test.wrong {
			t.Logf("test half: %s", w)
		}
		for _, w := range tune.wrong {
			t.Logf("tuning half: %s", w)
		}
	}
	p, r := test.overall()
	check := func(what string, got, want float64) {
		t.Helper()
		if got < max(0.9, want) {
			t.Errorf("test half: %s %.2f, want ≥ %.2f", what, got, max(0.9, want))
		}
	}
	checkDelay := func(what string, got, want float64) {
		t.Helper()
		if !(got <= min(5, want)) {
			t.Errorf("test half: %s median delay %.1f points, want ≤ %.1f", what, got, min(5, want))
		}
	}
	check("precision", p, recordedRuns.all.precision)
	check("recall", r, recordedRuns.all.recall)
	check("first kind right", ratio(test.firstRight, test.flagged), recordedRuns.all.firstRight)
	checkDelay("overall", medianOf(test.overallDelays), recordedRuns.all.delay)
	for _, k := range faultKinds {
		if test.cases[k] < 5 {
			t.Errorf("test half: %d %s runs, want at least 5", test.cases[k], k)
			continue
		}
		want := recordedRuns.perKind[k]
		check(k+" precision", test.precision(sentinel.Kind(k)), want.precision)
		check(k+" recall", ratio(test.found[k], test.cases[k]), want.recall)
		check(k+" first kind right", ratio(test.kindRight[k], test.kindFlagged[k]), want.firstRight)
		checkDelay(k, medianOf(test.delays[k]), want.delay)
	}
	if test.healthyFlags > 0 {
		t.Errorf("test half: %d flags on healthy runs, want none", test.healthyFlags)
	}
}

// The no_progress label's onset, point 5, rests on this: by its fifth
// point every healthy run of the corpus has its loss below its first.
func TestRunsHealthyLossesAreDownByPoint5(t *testing.T) {
	for _, r := range loadRuns(t) {
		if r.Label != "healthy" {
			continue
		}
		lines := runPoints(t, r.Name)
		loss := func(i int) float64 {
			for _, p := range lines[i] {
				if p.Key == "loss" {
					return p.Value
				}
			}
			t.Fatalf("%s: no loss at point %d", r.Name, i)
			return 0
		}
		if loss(4) >= loss(0) {
			t.Errorf("%s: loss %.4g at point 5, not below its first, %.4g", r.Name, loss(4), loss(0))
		}
	}
}
