package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Corpus is testdata/formats/manifest.json: one real output per library
// (recorded from the library, or written from its documented format) and
// the series it must give, read with no configuration.
type Corpus struct {
	Cases []CorpusCase `json:"cases"`
}

// CorpusCase is one library's output: stdout and stderr files and a files/
// folder copied into the run's folder, as the library writes them.
type CorpusCase struct {
	Name    string `json:"name"`
	Library string `json:"library"`
	// Origin is "recorded" (run here, from the Debian package named in
	// Source) or "documented" (written from the library's format).
	Origin   string                  `json:"origin"`
	Source   string                  `json:"source"`
	Detected []CorpusRead            `json:"detected"`
	Series   map[string]CorpusSeries `json:"series"`
}

// CorpusRead is how a case's metrics must be read.
type CorpusRead struct {
	Format string `json:"format"`
	From   string `json:"from"`
}

// CorpusSeries is what one series must hold.
type CorpusSeries struct {
	Points     int64  `json:"points"`
	LastStep   int64  `json:"last_step"`
	StepSource string `json:"step_source"`
}

func loadCorpus(t *testing.T) Corpus {
	b, err := os.ReadFile("testdata/formats/manifest.json")
	require.NoError(t, err)
	var c Corpus
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	require.NoError(t, err)
}

// Every case of the corpus, through a Collector with no rules: 100% of
// its series and points, at the library's own step, read as the
// manifest says, and nothing else.
func TestCorpusWithNoConfiguration(t *testing.T) {
	for _, cs := range loadCorpus(t).Cases {
		t.Run(cs.Name, func(t *testing.T) {
			r := newCollectRig(t)
			dir := filepath.Join("testdata/formats", cs.Name)
			for _, s := range []struct{ name, path string }{{"stdout", r.stdout}, {"stderr", r.stderr}} {
				b, err := os.ReadFile(filepath.Join(dir, s.name))
				if os.IsNotExist(err) {
					b = nil
				} else {
					require.NoError(t, err)
				}
				require.NoError(t, os.WriteFile(s.path, b, 0o644))
			}
			if _, err := os.Stat(filepath.Join(dir, "files")); err == nil {
				copyTree(t, filepath.Join(dir, "files"), r.runDir)
			}
			r.collect()
			sums, err := r.db.MetricSummaries(context.Background(), "run1")
			require.NoError(t, err)
			got := map[string]CorpusSeries{}
			for _, s := range sums {
				got[s.Key] = CorpusSeries{Points: s.Points, LastStep: s.Last.Step, StepSource: s.StepSource}
			}
			curs, err := r.db.MetricCursors(context.Background(), "run1", "train", 1)
			require.NoError(t, err)
			var read []CorpusRead
			var sources []string
			for src := range curs {
				sources = append(sources, src)
			}
			sort.Strings(sources)
			for _, src := range sources {
				if f, from := Format(src, curs[src].State); f != "" {
					read = append(read, CorpusRead{f, from})
				}
			}
			if os.Getenv("NIUMA_CORPUS_DUMP") != "" {
				b, _ := json.Marshal(map[string]any{"detected": read, "series": got})
				fmt.Printf("%s %s\n", cs.Name, b)
				return
			}
			if cs.Series == nil {
				cs.Series = map[string]CorpusSeries{}
			}
			if len(cs.Detected) == 0 {
				cs.Detected = nil
			}
			assert.Equal(t, cs.Series, got, "series of %s (%s)", cs.Name, cs.Library)
			assert.Equal(t, cs.Detected, read, "how %s was read", cs.Name)
		})
	}
}

// The corpus' NumPy 2 repr case value by value: tensor(...) with a device
// and grad_fn, np.float32/np.float64/np.int64 scalars, and nan, inf and
// -inf, bare and inside np.float…(), each at the dict's own step.
func TestCorpusPythonReprValues(t *testing.T) {
	r := newCollectRig(t)
	b, err := os.ReadFile("testdata/formats/numpy2_repr/stdout")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.stdout, b, 0o644))
	require.NoError(t, os.WriteFile(r.stderr, nil, 0o644))
	r.collect()
	inf, nan := math.Inf(1), math.NaN()
	want := map[string][]float64{
		"loss":      {2.3026, 1.9041, nan, 1.2, 0.9812},
		"acc":       {0.125, 0.3125, nan, 0.5625, 0.6875},
		"grad_norm": {1.5, inf, -inf, nan, inf},
		"lr":        {0.1, 0.1, 0.05, 0.05, 0.025},
		"seen":      {640, 1280, 1920, 2560, 3200},
	}
	for key, vals := range want {
		pts := r.series(key)
		require.Len(t, pts, len(vals), key)
		for i, p := range pts {
			assert.Equal(t, int64(10*(i+1)), p.Step, "%s point %d", key, i)
			if math.IsNaN(vals[i]) {
				assert.True(t, math.IsNaN(p.Value), "%s at step %d: %v, want NaN", key, p.Step, p.Value)
			} else {
				assert.Equal(t, vals[i], p.Value, "%s at step %d", key, p.Step)
			}
		}
	}
}
