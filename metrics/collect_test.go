package metrics

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/metrics/textrule"
	"niuma/storage"
)

type collectRig struct {
	t                *testing.T
	db               *storage.DB
	runDir, stageDir string
	stdout, stderr   string
	sources          Sources
	maxKeys          int
	stageFolder      func(string) bool

	mu    sync.Mutex
	notes []string
}

func newCollectRig(t *testing.T) *collectRig {
	runDir := t.TempDir()
	r := &collectRig{t: t, db: openTestDB(t, "run1"), runDir: runDir, stageDir: filepath.Join(runDir, "train")}
	r.stdout = filepath.Join(r.stageDir, "attempt-1.stdout.log")
	r.stderr = filepath.Join(r.stageDir, "attempt-1.stderr.log")
	require.NoError(t, os.MkdirAll(r.stageDir, 0o755))
	return r
}

// collect runs one Collector over the attempt to the end of its files, as
// the engine does for an attempt that ends (or is adopted and ends).
func (r *collectRig) collect() {
	t := r.t
	w := NewWriter(r.db, WriterOptions{Logger: quiet})
	c := &Collector{Store: r.db, Writer: w, RunID: "run1", Stage: "train", Attempt: 1,
		RunDir: r.runDir, StageDir: r.stageDir, StageFolder: r.stageFolder, Stdout: r.stdout, Stderr: r.stderr, Sources: r.sources,
		MaxKeys: r.maxKeys, Logger: quiet,
		OnNote: func(kind, msg, fix string) {
			r.mu.Lock()
			r.notes = append(r.notes, kind+": "+msg)
			r.mu.Unlock()
		}}
	require.NoError(t, c.Start(t.Context()))
	c.Stop()
	require.NoError(t, c.Stored(t.Context()))
	require.NoError(t, w.Close(t.Context()))
}

func (r *collectRig) series(key string) []storage.MetricPoint {
	pts, err := r.db.MetricSeries(context.Background(), "run1", "train", key)
	require.NoError(r.t, err)
	return pts
}

func (r *collectRig) count() int {
	n, err := r.db.CountMetricPoints(context.Background(), "run1")
	require.NoError(r.t, err)
	return n
}

func values(pts []storage.MetricPoint) []float64 {
	var out []float64
	for _, p := range pts {
		out = append(out, p.Value)
	}
	return out
}

func steps(pts []storage.MetricPoint) []int64 {
	var out []int64
	for _, p := range pts {
		out = append(out, p.Step)
	}
	return out
}

// The output of pytorch/examples' word_language_model, read with its
// preset, with no change to the script.
func TestCollectWordLanguageModelWithPreset(t *testing.T) {
	r := newCollectRig(t)
	out, err := os.ReadFile("testdata/word_language_model.stdout")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.stdout, out, 0o644))
	r.sources.Rules = []textrule.Rule{{Preset: "pytorch-examples"}}
	r.collect()
	loss := r.series("loss")
	require.NotEmpty(t, loss)
	assert.Equal(t, int64(50), loss[0].Step)
	assert.Equal(t, 7.99, loss[0].Value)
	assert.NotEmpty(t, r.series("ppl"))
	assert.NotEmpty(t, r.series("lr"))
	assert.NotEmpty(t, r.series("valid_loss"))
	assert.Len(t, r.series("valid_ppl"), 3, "one per epoch")
	assert.Equal(t, []int64{310, 620, 930}, steps(r.series("valid_loss")), "epoch·batches")
	n := r.count()
	r.collect()
	assert.Equal(t, n, r.count(), "read again: nothing stored twice")
}

// JSON lines are found on stderr, after '\r' progress segments and
// Python logging's prefix, with epoch as the step and numbers as strings.
func TestCollectLenientJSON(t *testing.T) {
	r := newCollectRig(t)
	appendFile(t, r.stderr, "INFO:root:{\"epoch\": 1, \"loss\": \"0.5\"}\n"+
		"  0%|          | 0/3\r 33%|###3      | 1/3\r{\"step\": \"15\", \"acc\": 0.75}\n"+
		"2024-05-01 12:00:00,123 - train - INFO - {\"global_step\": 30, \"epoch\": 2, \"loss\": 0.25}\n"+
		"{\"iteration\": 40, \"loss\": 0.125}\n")
	r.collect()
	loss := r.series("loss")
	assert.Equal(t, []int64{1, 30, 40}, steps(loss))
	assert.Equal(t, []float64{0.5, 0.25, 0.125}, values(loss))
	assert.Equal(t, []int64{15}, steps(r.series("acc")))
	assert.Equal(t, []float64{2}, values(r.series("epoch")), "global_step is the step; epoch is a point")
	sums, err := r.db.MetricSummaries(t.Context(), "run1")
	require.NoError(t, err)
	src := map[string]string{}
	for _, s := range sums {
		src[s.Key] = s.StepSource
	}
	assert.Equal(t, "iteration", src["loss"], "the series records what gave its latest step")
	assert.Equal(t, "step", src["acc"])
}

// A restart reads every source again from its stored cursor: the points
// before it are not stored twice, also where steps repeat (a "skip steps
// already stored" rule would lose the repeated ones).
func TestCollectResumesExactlyOnce(t *testing.T) {
	r := newCollectRig(t)
	r.sources.Rules = []textrule.Rule{{Preset: "key-value"}}
	appendFile(t, r.stdout, "{\"step\": 0, \"reward\": 1}\n{\"step\": 0, \"reward\": 2}\nloss=0.9\n")
	csvPath := filepath.Join(r.runDir, "lightning_logs", "version_0", "metrics.csv")
	require.NoError(t, os.MkdirAll(filepath.Dir(csvPath), 0o755))
	appendFile(t, csvPath, "epoch,step,train_loss,val_loss\n0,49,0.7,\n")
	tb := filepath.Join(r.runDir, "runs", "Dec01_12-00-00_host", "events.out.tfevents.1.host.1.0")
	require.NoError(t, os.MkdirAll(filepath.Dir(tb), 0o755))
	appendBytes(t, tb, AppendTFRecord(nil, fileVersionEvent()))
	appendBytes(t, tb, AppendTFRecord(nil, tbEvent(1.7e9, 0, simpleValue("train/q", 1))))
	appendBytes(t, tb, AppendTFRecord(nil, tbEvent(1.7e9, 0, simpleValue("train/q", 2))))
	r.collect()
	assert.Equal(t, 7, r.count(), "3 from stdout, 2 from the CSV row (epoch is a point there), 2 from TensorBoard")

	// More of everything, including another point at step 0.
	appendFile(t, r.stdout, "{\"step\": 0, \"reward\": 3}\nloss=0.8\n")
	appendFile(t, csvPath, "0,49,,0.6\n")
	appendBytes(t, tb, AppendTFRecord(nil, tbEvent(1.7e9, 0, simpleValue("train/q", 3))))
	r.collect()
	assert.Equal(t, []float64{1, 2, 3}, values(r.series("reward")))
	assert.Equal(t, []int64{0, 1}, steps(r.series("loss")), "the key-value counter goes on from its cursor")
	assert.Equal(t, []float64{1, 2, 3}, values(r.series("train/q")), "the tag keeps its prefix; points at step 0 are all kept")
	assert.Equal(t, []float64{0.6}, values(r.series("val_loss")))
	assert.Equal(t, []float64{0.7}, values(r.series("train_loss")))
	assert.Equal(t, 12, r.count())

	// Lightning rewrites its file with a wider header: old rows are not
	// stored again, the new one is.
	require.NoError(t, os.WriteFile(csvPath, []byte("epoch,lr,step,train_loss,val_loss\n0,,49,0.7,\n0,,49,,0.6\n1,0.01,99,0.5,\n"), 0o644))
	r.collect()
	assert.Equal(t, []float64{0.7, 0.5}, values(r.series("train_loss")))
	assert.Equal(t, []float64{0.01}, values(r.series("lr")))
	assert.Equal(t, 15, r.count())
}

func TestCollectTensorBoardLocations(t *testing.T) {
	for _, tt := range []struct {
		name, rel, glob, key string
	}{
		{"stage tb/", "train/tb/events.out.tfevents.1", "", "loss"},
		{"SummaryWriter's runs/ in the run dir", "runs/Dec01_12-00-00_host/events.out.tfevents.1", "", "loss"},
		{"add_scalars folder", "runs/Dec01_12-00-00_host/loss_val/events.out.tfevents.1", "", "loss_val/loss"},
		{"lightning_logs/", "lightning_logs/version_0/events.out.tfevents.1", "", "loss"},
		{"stage runs/", "train/runs/x/events.out.tfevents.1", "", "loss"},
		{"a template glob", "outputs/keras/train/events.out.tfevents.1", "outputs/**", "keras/train/loss"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newCollectRig(t)
			if tt.glob != "" {
				r.sources.TensorBoard = []string{tt.glob}
			}
			path := filepath.Join(r.runDir, tt.rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			appendBytes(t, path, AppendTFRecord(nil, tbEvent(1.7e9, 7, simpleValue("loss", 0.5))))
			r.collect()
			pts := r.series(tt.key)
			require.Len(t, pts, 1, "key %s", tt.key)
			assert.Equal(t, int64(7), pts[0].Step)
		})
	}
}

func TestCollectSaysWhenAPresetMatchesNothing(t *testing.T) {
	r := newCollectRig(t)
	r.sources.Rules = []textrule.Rule{{Preset: "keras"}}
	appendFile(t, r.stdout, strings.Repeat("| epoch 1 | loss 1.0 |\n", 20))
	r.collect()
	require.Len(t, r.notes, 1)
	assert.Equal(t, "metrics_unmatched: metrics preset keras matched nothing in its 20 lines of stdout and stderr", r.notes[0])
}

// Another stage's folder is one level down in the run's folder, where a
// save_dir is looked for: its files are that stage's, and this stage does
// not read them (it stored them as its own). A save_dir in the run folder
// itself, and this stage's own folder, are read.
func TestCollectLeavesOtherStagesFolders(t *testing.T) {
	r := newCollectRig(t)
	other := filepath.Join(r.runDir, "eval")
	require.NoError(t, os.MkdirAll(other, 0o755))
	appendFile(t, filepath.Join(other, "attempt-1.stdout.log"), "")
	r.stageFolder = func(dir string) bool {
		logs, _ := filepath.Glob(filepath.Join(dir, "attempt-*.stdout.log"))
		return filepath.Dir(dir) == r.runDir && len(logs) > 0
	}
	write := func(path, body string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		appendFile(t, path, body)
	}
	write(filepath.Join(other, "lightning_logs", "version_0", "metrics.csv"), "step,eval_loss\n1,0.9\n")
	write(filepath.Join(r.runDir, "logs", "lightning_logs", "version_0", "metrics.csv"), "step,run_loss\n1,0.8\n")
	write(filepath.Join(r.stageDir, "lightning_logs", "version_0", "metrics.csv"), "step,own_loss\n1,0.7\n")
	r.collect()
	assert.Empty(t, r.series("eval_loss"), "the eval stage's file is eval's")
	assert.Equal(t, []float64{0.8}, values(r.series("run_loss")), "a save_dir in the run folder")
	assert.Equal(t, []float64{0.7}, values(r.series("own_loss")), "the stage's own folder")
}
