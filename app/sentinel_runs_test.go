package app

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"niuma/metrics"
)

// The sentinel's run corpus (sentinel/testdata/runs: real PyTorch runs,
// labelled from how they were made) through the engine path a user has:
// `niuma run` of a template whose stages print the recorded metrics lines
// on stdout, as the runs printed them, the engine's metric reader and its
// sentinel, then the anomalies `niuma show --json` lists. The test half is
// held to the figures sentinel's TestRuns records, and the healthy
// word_language_model log the metric readers test with (pytorch/examples'
// printed tables) raises nothing.

type corpusRun struct {
	Name     string   `json:"name"`
	Label    string   `json:"label"`
	Split    string   `json:"split"`
	Onset    int      `json:"onset"`
	Accept   []string `json:"accept"`
	Tolerate []string `json:"tolerate"`
}

func (r corpusRun) right(kind string) bool { return kind == r.Label || slices.Contains(r.Accept, kind) }

type shownAnomaly struct {
	Stage    string `json:"stage"`
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
	Evidence string `json:"evidence"`
}

// corpusAnomalies runs the stages of one `niuma run` and returns its
// anomalies by stage.
func corpusAnomalies(t *testing.T, yaml string) map[string][]shownAnomaly {
	t.Helper()
	code, out, errOut := niuma(t, "run", writeTemplate(t, yaml), "--wait")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id := runID(t, out)
	code, out, errOut = niuma(t, "show", id, "--json")
	require.Equal(t, 0, code, errOut)
	var s struct {
		Anomalies []shownAnomaly `json:"anomalies"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	by := map[string][]shownAnomaly{}
	for _, a := range s.Anomalies {
		by[a.Stage] = append(by[a.Stage], a)
	}
	return by
}

// point is the index of the point an anomaly is about (steps are 1-based).
func (a shownAnomaly) point(t *testing.T) int {
	var ev struct {
		ToStep int `json:"to_step"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.Evidence), &ev), a.Evidence)
	return ev.ToStep - 1
}

// corpusFigures are the test half's figures sentinel's TestRuns records
// (docs/BENCHMARKS.md), overall and per label (precision, recall): the
// engine path must reach them too, and never less than the acceptance line
// (0.9).
var corpusFigures = struct {
	precision, recall, firstRight float64
	perKind                       map[string][2]float64
}{1, 1, 1, map[string][2]float64{
	"nan": {1, 1}, "loss_spike": {1, 1}, "divergence": {1, 1}, "no_progress": {1, 1},
}}

func TestSentinelRunCorpusThroughTheEngine(t *testing.T) {
	tempHome(t)
	dir, err := filepath.Abs(filepath.Join("..", "sentinel", "testdata", "runs"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	var runs []corpusRun
	require.NoError(t, json.Unmarshal(b, &runs))
	require.GreaterOrEqual(t, len(runs), 60)
	wlm, err := filepath.Abs(filepath.Join("..", "metrics", "testdata", "word_language_model.stdout"))
	require.NoError(t, err)

	// One run of the whole corpus, a stage per recording (its own attempt,
	// so its own streams), with the objective the sentinel's replay uses.
	var y strings.Builder
	y.WriteString("name: sentinel-corpus\nobjective: {metric: loss, goal: min}\nstages:\n")
	for i, r := range runs {
		fmt.Fprintf(&y, "  - name: r%02d\n    command: [cat, %q]\n", i, filepath.Join(dir, r.Name+".jsonl"))
	}
	fmt.Fprintf(&y, "  - name: wlm\n    command: [cat, %q]\n    metrics: pytorch-examples\n", wlm)
	got := corpusAnomalies(t, y.String())
	assert.Empty(t, got["wlm"], "the healthy word_language_model log")

	for _, split := range []string{"tune", "test"} {
		var tp, fp, faulty, found, flagged, firstRight, healthyFlags int
		perKind := map[string][2]int{}                       // label -> cases, found
		tpKind, fpKind := map[string]int{}, map[string]int{} // by the flag's kind
		for i, r := range runs {
			if r.Split != split {
				continue
			}
			as := got[fmt.Sprintf("r%02d", i)]
			for _, a := range as {
				assert.NotEmpty(t, a.Fix, "%s: %s has a fix", r.Name, a.Kind)
			}
			if r.Label == "healthy" {
				// A flag on a healthy run is a false alarm, as in TestRuns.
				healthyFlags += len(as)
				fp += len(as)
				for _, a := range as {
					fpKind[a.Kind]++
					t.Logf("%s: %s (healthy): %s: %s", split, r.Name, a.Kind, a.Message)
				}
				continue
			}
			faulty++
			k := perKind[r.Label]
			k[0]++
			hit := false
			var named []shownAnomaly // the flags that are no side effect
			for _, a := range as {
				p := a.point(t)
				switch {
				case r.right(a.Kind) && p >= r.Onset:
					tp++
					tpKind[a.Kind]++
					hit = true
				case slices.Contains(r.Tolerate, a.Kind):
					continue
				default:
					fp++
					fpKind[a.Kind]++
					t.Logf("%s: %s: %s at point %d (label %s from %d)", split, r.Name, a.Kind, p, r.Label, r.Onset)
				}
				named = append(named, a)
			}
			if hit {
				found++
				k[1]++
			} else {
				t.Logf("%s: %s: missed (label %s from %d)", split, r.Name, r.Label, r.Onset)
			}
			perKind[r.Label] = k
			if len(named) > 0 {
				flagged++
				sort.SliceStable(named, func(i, j int) bool { return named[i].point(t) < named[j].point(t) })
				for _, a := range named {
					if a.point(t) == named[0].point(t) && r.right(a.Kind) {
						firstRight++
						break
					}
				}
			}
		}
		precision, recall := float64(tp)/float64(max(1, tp+fp)), float64(found)/float64(max(1, faulty))
		fr := float64(firstRight) / float64(max(1, flagged))
		t.Logf("through the engine, %s half: precision %.2f, recall %.2f, first kind right %d of %d, %d flags on healthy runs",
			split, precision, recall, firstRight, flagged, healthyFlags)
		if split != "test" {
			continue
		}
		assert.GreaterOrEqual(t, precision, max(0.9, corpusFigures.precision), "precision")
		assert.GreaterOrEqual(t, recall, max(0.9, corpusFigures.recall), "recall")
		assert.GreaterOrEqual(t, fr, max(0.9, corpusFigures.firstRight), "first kind right")
		for label, want := range corpusFigures.perKind {
			k := perKind[label]
			if !assert.GreaterOrEqual(t, k[0], 5, "%s: runs in the test half", label) {
				continue
			}
			kp := 1.0 // no flag of the kind: nothing to get wrong, as in TestRuns
			if n := tpKind[label] + fpKind[label]; n > 0 {
				kp = float64(tpKind[label]) / float64(n)
			}
			assert.GreaterOrEqual(t, kp, max(0.9, want[0]), "%s: precision (%d right flags, %d wrong)", label,
				tpKind[label], fpKind[label])
			assert.GreaterOrEqual(t, float64(k[1])/float64(k[0]), max(0.9, want[1]), "%s: %d of %d found", label, k[1], k[0])
		}
		assert.Zero(t, healthyFlags, "flags on healthy runs")
	}
}

// The corpus' healthy runs again, as Lightning's CSVLogger writes them
// (lightning_logs/version_0/metrics.csv in the stage folder, read by the
// engine's CSV follower, not from stdout): the sentinel raises nothing on
// them either.
func TestSentinelHealthyRunsAsCSVRaiseNothing(t *testing.T) {
	tempHome(t)
	dir, err := filepath.Abs(filepath.Join("..", "sentinel", "testdata", "runs"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	var runs []corpusRun
	require.NoError(t, json.Unmarshal(b, &runs))
	cols := []string{"step", "loss", "val_loss", "val_acc", "grad_norm", "lr"}
	tmp := t.TempDir()
	var y strings.Builder
	y.WriteString("name: sentinel-csv\nobjective: {metric: loss, goal: min}\nstages:\n")
	n := 0
	for _, r := range runs {
		if r.Label != "healthy" {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, r.Name+".jsonl"))
		require.NoError(t, err)
		var csv strings.Builder
		csv.WriteString(strings.Join(cols, ",") + "\n")
		points := 0
		for _, line := range strings.Split(strings.TrimSpace(string(src)), "\n") {
			var m map[string]float64
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			var cells []string
			for _, c := range cols {
				if v, ok := m[c]; ok {
					cells = append(cells, fmt.Sprint(v))
				} else {
					cells = append(cells, "") // a regression has no accuracy
				}
			}
			csv.WriteString(strings.Join(cells, ",") + "\n")
			points++
		}
		require.Greater(t, points, 30)
		path := filepath.Join(tmp, r.Name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(csv.String()), 0o644))
		fmt.Fprintf(&y, "  - name: h%02d\n    command: [sh, -c, 'mkdir -p \"$0/lightning_logs/version_0\" && "+
			"cp \"$1\" \"$0/lightning_logs/version_0/metrics.csv\"', \"${stage_dir}\", %q]\n", n, path)
		n++
	}
	require.GreaterOrEqual(t, n, 20)
	code, out, errOut := niuma(t, "run", writeTemplate(t, y.String()), "--wait")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	s := showJSONOf(t, runID(t, out))
	read := 0
	for _, m := range s.Metrics {
		if m.Key == "loss" {
			read++
			assert.Greater(t, m.Points, 30, "%s: the CSV's loss was read", m.Stage)
		}
	}
	assert.Equal(t, n, read, "every stage's CSV was read")
	code, out, errOut = niuma(t, "show", runID(t, out), "--json")
	require.Equal(t, 0, code, errOut)
	var shown struct {
		Anomalies []shownAnomaly `json:"anomalies"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	assert.Empty(t, shown.Anomalies)
}

// tbScalar is one TFRecord of an event file holding one scalar, as
// SummaryWriter.add_scalar writes it (simple_value, one event per call).
func tbScalar(wall float64, step int64, tag string, v float64) []byte {
	var val []byte
	val = protowire.AppendTag(val, 1, protowire.BytesType)
	val = protowire.AppendString(val, tag)
	val = protowire.AppendTag(val, 2, protowire.Fixed32Type)
	val = protowire.AppendFixed32(val, math.Float32bits(float32(v)))
	var summary []byte
	summary = protowire.AppendTag(summary, 1, protowire.BytesType)
	summary = protowire.AppendBytes(summary, val)
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wall))
	ev = protowire.AppendTag(ev, 2, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, 5, protowire.BytesType)
	ev = protowire.AppendBytes(ev, summary)
	return metrics.AppendTFRecord(nil, ev)
}

// The corpus' healthy runs once more, as a training loop that calls
// SummaryWriter.add_scalar for each value writes them (an event file under
// runs/NAME/ in the stage folder, one event per scalar, read by the
// engine's TensorBoard follower): the sentinel raises nothing on them.
// (This machine's Debian has no tensorboard package, so no event file
// written by PyTorch's own writer is in the tree; the wire format is the
// one the metric readers test with.)
func TestSentinelHealthyRunsAsTensorBoardRaiseNothing(t *testing.T) {
	tempHome(t)
	dir, err := filepath.Abs(filepath.Join("..", "sentinel", "testdata", "runs"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	var runs []corpusRun
	require.NoError(t, json.Unmarshal(b, &runs))
	keys := []string{"loss", "val_loss", "val_acc", "grad_norm", "lr"}
	tmp := t.TempDir()
	var y strings.Builder
	y.WriteString("name: sentinel-tensorboard\nobjective: {metric: loss, goal: min}\nstages:\n")
	n := 0
	for _, r := range runs {
		if r.Label != "healthy" {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, r.Name+".jsonl"))
		require.NoError(t, err)
		// The file_version event every writer starts with.
		var ev []byte
		ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
		ev = protowire.AppendFixed64(ev, math.Float64bits(1.7e9))
		ev = protowire.AppendTag(ev, 3, protowire.BytesType)
		ev = protowire.AppendString(ev, "brain.Event:2")
		file := metrics.AppendTFRecord(nil, ev)
		points := 0
		for i, line := range strings.Split(strings.TrimSpace(string(src)), "\n") {
			var m map[string]float64
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			for _, k := range keys {
				if v, ok := m[k]; ok { // a regression has no accuracy
					file = append(file, tbScalar(1.7e9+float64(i), int64(m["step"]), k, v)...)
				}
			}
			points++
		}
		require.Greater(t, points, 30)
		path := filepath.Join(tmp, r.Name+".tfevents")
		require.NoError(t, os.WriteFile(path, file, 0o644))
		fmt.Fprintf(&y, "  - name: h%02d\n    command: [sh, -c, 'mkdir -p \"$0/runs/x\" && "+
			"cp \"$1\" \"$0/runs/x/events.out.tfevents.1700000000.host.1.0\"', \"${stage_dir}\", %q]\n", n, path)
		n++
	}
	require.GreaterOrEqual(t, n, 20)
	code, out, errOut := niuma(t, "run", writeTemplate(t, y.String()), "--wait")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	s := showJSONOf(t, runID(t, out))
	read := 0
	for _, m := range s.Metrics {
		if m.Key == "loss" {
			read++
			assert.Greater(t, m.Points, 30, "%s: the event file's loss was read", m.Stage)
		}
	}
	assert.Equal(t, n, read, "every stage's event file was read")
	code, out, errOut = niuma(t, "show", runID(t, out), "--json")
	require.Equal(t, 0, code, errOut)
	var shown struct {
		Anomalies []shownAnomaly `json:"anomalies"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	for _, a := range shown.Anomalies {
		t.Logf("%s: %s: %s", a.Stage, a.Kind, a.Message)
	}
	assert.Empty(t, shown.Anomalies)
}

// A run that blows up at its second logged point and then stays at or above
// its first loss, its validation accuracy at chance, is flagged as
// divergence or no progress through `niuma run`, with the evidence and a
// fix: the corpus' recording of it (AdamW at lr 8 on the digits MLP, logged
// from its first batch on: 2.29, then 2.4e6, then a dead network at 2.4).
func TestSentinelFlagsARunThatBlewUpAtItsStart(t *testing.T) {
	tempHome(t)
	rec, err := filepath.Abs(filepath.Join("..", "sentinel", "testdata", "runs", "divergence-lr8-digits-mlp2-adamw-perbatch.jsonl"))
	require.NoError(t, err)
	got := corpusAnomalies(t, fmt.Sprintf("name: blowup\nstages:\n  - name: train\n    command: [cat, %q]\n", rec))
	var kinds []string
	for _, a := range got["train"] {
		kinds = append(kinds, a.Kind)
		assert.NotEmpty(t, a.Fix)
		t.Logf("%s at point %d: %s", a.Kind, a.point(t), a.Message)
	}
	require.NotEmpty(t, kinds)
	assert.Contains(t, []string{"divergence", "no_progress"}, kinds[0], "%v", got["train"])
	for _, a := range got["train"] {
		switch a.Kind {
		case "divergence":
			assert.Contains(t, a.Message, "blew up at step 2")
			assert.Contains(t, a.Evidence, `"first_level":2.2886`)
		case "no_progress":
			assert.Contains(t, a.Message, "not below where it started")
			assert.Contains(t, a.Fix, "learning rate is too high")
		}
	}
	assert.Contains(t, kinds, "no_progress", "the loss never went below where it started: %v", got["train"])
}
