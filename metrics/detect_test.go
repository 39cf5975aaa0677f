package metrics

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/metrics/textrule"
	"niuma/storage"
)

func detecting() *Ingestor {
	in := NewIngestor(nil, "r1", "train", 1, nil)
	in.SetSource("stdout", 0)
	in.SetDetect(nil)
	return in
}

func feed(in *Ingestor, lines ...string) []string {
	var out []string
	for i, l := range lines {
		pts, _ := in.LineAt([]byte(l), int64(i+1), time.Now())
		out = append(out, keysAndSteps(pts)...)
	}
	return out
}

// JSON lines, the stage contract, are stored as they come while nothing
// is held: detection costs them nothing.
func TestDetectLeavesJSONLinesLive(t *testing.T) {
	in := detecting()
	pts, ok := in.LineAt([]byte(`{"step": 1, "loss": 0.5}`), 10, time.Now())
	require.True(t, ok)
	assert.Equal(t, []string{"loss@1"}, keysAndSteps(pts))
	assert.Equal(t, []string{"loss@2"}, feed(in, "starting", `{"step": 2, "loss": 0.4}`))
}

// A library's line is evidence enough: it is read at once, and the
// stream's state names the preset.
func TestDetectSettlesOnALibraryLine(t *testing.T) {
	in := detecting()
	assert.Equal(t, []string{"train-logloss@0", "eval-logloss@0"}, feed(in, "[0]\ttrain-logloss:0.5\teval-logloss:0.6"))
	presets, settled := Detected(in.state())
	assert.True(t, settled)
	assert.Equal(t, []string{"gbdt"}, presets)
}

// A generic format waits for its evidence: the held lines are stored
// once it comes, in order, at their own steps; without it nothing is.
func TestDetectHoldsGenericLinesUntilTheyRepeat(t *testing.T) {
	in := detecting()
	assert.Empty(t, feed(in, "step=1 loss=0.5", `{"step": 9, "acc": 1}`, "step=2 loss=0.4"))
	got := feed(in, "step=3 loss=0.3")
	assert.Equal(t, []string{"loss@1", "acc@9", "loss@2", "loss@3"}, got)
	presets, _ := Detected(in.state())
	assert.Equal(t, []string{"key-value"}, presets)

	in = detecting()
	assert.Empty(t, feed(in, "Config: lr: 0.1, batch_size: 32", "epoch 1 done", "best: 0.5"))
	assert.Empty(t, in.End(), "a config line and a stray pair are no format")
	_, settled := Detected(in.state())
	assert.True(t, settled)
}

// A window without evidence drops its matches, stores its JSON points and
// looks on: a format that starts later is still found.
func TestDetectLooksOnAfterAWindowWithoutEvidence(t *testing.T) {
	in := detecting()
	lines := []string{"Config: lr: 0.1, batch_size: 32", `{"step": 1, "acc": 0.5}`}
	for range DetectWindow {
		lines = append(lines, "preprocessing a shard")
	}
	got := feed(in, lines...)
	assert.Equal(t, []string{"acc@1"}, got, "the JSON point, once the window closed; not the config line")
	_, settled := Detected(in.state())
	assert.False(t, settled)
	assert.Equal(t, []string{"train-auc@0"}, feed(in, "[0]\ttrain-auc:0.5"))
}

// Held lines are stored when the stream ends, with the evidence there is.
func TestDetectEndStoresHeldLines(t *testing.T) {
	in := detecting()
	assert.Empty(t, feed(in, "{'step': 0, 'loss': 0.5}"), "one dict is not yet a format")
	assert.Empty(t, in.End())
	in = detecting()
	assert.Empty(t, feed(in, "{'step': 0, 'loss': 0.5}"))
	assert.Equal(t, []string{"loss@0", "loss@1"}, append(feed(in, "{'step': 1, 'loss': 0.4}"), keysAndSteps(in.End())...))
}

// After a restart the stream reads on with the preset found before: its
// steps go on from the stored state.
func TestDetectStateSurvivesARestart(t *testing.T) {
	in := detecting()
	feed(in, "{'loss': 0.7, 'epoch': 0.5}")
	state := in.state()
	again := detecting()
	again.Restore(state)
	assert.Equal(t, []string{"loss@1", "epoch@1"}, feed(again, "{'loss': 0.6, 'epoch': 1.0}"))
}

// A template's rules win: the stream is read by them alone.
func TestDetectIsOffWithRules(t *testing.T) {
	r := newCollectRig(t)
	r.sources.Rules = []textrule.Rule{{Preset: "keras"}}
	require.NoError(t, os.WriteFile(r.stdout, []byte("{'loss': 0.7, 'epoch': 0.5}\n[0]\ttrain-logloss:0.5\n"), 0o644))
	require.NoError(t, os.WriteFile(r.stderr, nil, 0o644))
	r.collect()
	assert.Equal(t, 0, r.count())
	require.Len(t, r.notes, 1)
	assert.Contains(t, r.notes[0], "metrics_unmatched: metrics preset keras matched nothing")
}

// FuzzDetect: any output is read without a panic, and every point has a
// step of the stage contract.
func FuzzDetect(f *testing.F) {
	f.Add("{'loss': 0.6931, 'epoch': 0.01}\n[3]\ttrain-logloss:0.57\nstep=1 loss=2\n")
	f.Add("  epoch    train_loss\n-------  ------------\n      1        0.6905\n")
	f.Fuzz(func(t *testing.T, out string) {
		in := detecting()
		check := func(pts []storage.MetricPoint) {
			for _, p := range pts {
				if p.Step < 0 || p.Key == "" {
					t.Fatalf("bad point %+v", p)
				}
			}
		}
		start := 0
		for i := 0; i <= len(out); i++ {
			if i == len(out) || out[i] == '\n' {
				pts, _ := in.LineAt([]byte(out[start:i]), int64(i), time.Now())
				check(pts)
				start = i + 1
			}
		}
		check(in.End())
	})
}

// BenchmarkDetect is what detection costs a line of a stage with no
// metrics: section: plain log lines that no preset reads (detection
// stays open the whole run), the lines of a library once it settled, and
// the same plain lines without detection (a stage with rules) to compare.
func BenchmarkDetect(b *testing.B) {
	plain := [][]byte{
		[]byte("2026-12-04 18:10:00,123 - data - INFO - loaded shard 17 of 64 from /data/shards/17.parquet"),
		[]byte("Saving checkpoint to ckpt/epoch_3.pt"),
		[]byte("  warnings.warn(f'the default value of antialias will change', UserWarning)"),
		[]byte("epoch 3 done in 12.3s"),
	}
	lib := [][]byte{[]byte("{'loss': 0.6931, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.01}")}
	run := func(b *testing.B, lines [][]byte, detect bool) {
		in := NewIngestor(nil, "r1", "train", 1, nil)
		in.SetSource("stdout", 0)
		if detect {
			in.SetDetect(nil)
		}
		now := time.Now()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			in.LineAt(lines[i%len(lines)], int64(i), now)
		}
	}
	b.Run("plain/detect", func(b *testing.B) { run(b, plain, true) })
	b.Run("plain/none", func(b *testing.B) { run(b, plain, false) })
	b.Run("hf-trainer/settled", func(b *testing.B) { run(b, lib, true) })
}

// A Trainer that prints its dicts and saves checkpoints is read once:
// from its output, not again from trainer_state.json at other steps.
func TestTrainerReadOnceFromItsOutput(t *testing.T) {
	r := newCollectRig(t)
	out, err := os.ReadFile("testdata/formats/hf_trainer/stdout")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.stdout, out, 0o644))
	require.NoError(t, os.WriteFile(r.stderr, nil, 0o644))
	copyTree(t, "testdata/formats/hf_trainer_state/files", r.runDir)
	r.collect()
	loss := r.series("loss")
	assert.Equal(t, []int64{0, 1, 2, 3}, steps(loss))
	sums, err := r.db.MetricSummaries(t.Context(), "run1")
	require.NoError(t, err)
	for _, s := range sums {
		assert.Equal(t, "log", s.StepSource, s.Key)
	}
}

// Python's json.dump writes a NaN loss as NaN, which is not JSON: the
// Trainer's state is still read, the NaN kept.
func TestTrainerStateWithNaN(t *testing.T) {
	r := newCollectRig(t)
	dir := filepath.Join(r.runDir, "out", "checkpoint-2")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trainer_state.json"), []byte(`{"global_step": 2, "note": "NaN in a string",
  "log_history": [{"epoch": 0.5, "grad_norm": NaN, "loss": 0.69, "step": 1},
                  {"epoch": 1.0, "grad_norm": Infinity, "loss": -Infinity, "step": 2}]}`), 0o644))
	r.collect()
	norm := r.series("grad_norm")
	require.Len(t, norm, 2)
	assert.True(t, math.IsNaN(norm[0].Value))
	assert.True(t, math.IsInf(norm[1].Value, 1))
	assert.Equal(t, []int64{1, 2}, steps(r.series("loss")))
}

// FuzzTrainerState: quotePythonNumbers never breaks JSON that was valid
// (it only quotes what is outside strings), and what Python writes for
// non-finite floats becomes valid JSON.
func FuzzTrainerState(f *testing.F) {
	f.Add(`{"log_history": [{"loss": NaN, "step": 1, "s": "NaN \" Infinity"}, {"x": -Infinity}]}`)
	f.Add(`{"a": "\\", "b": Infinity}`)
	f.Fuzz(func(t *testing.T, in string) {
		out := quotePythonNumbers([]byte(in))
		if json.Valid([]byte(in)) && !json.Valid(out) {
			t.Fatalf("valid %q became invalid %q", in, out)
		}
		py := strings.NewReplacer("NaN", "null", "-Infinity", "null", "Infinity", "null").Replace(in)
		if json.Valid([]byte(py)) && !strings.ContainsAny(in, `"\`) && !json.Valid(out) {
			t.Fatalf("%q (valid with its non-finite numbers) is still invalid: %q", in, out)
		}
	})
}
