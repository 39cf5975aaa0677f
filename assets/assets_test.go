package assets

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestIconIs512PNG(t *testing.T) {
	b := Icon()
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, 512, img.Bounds().Dx())
	assert.Equal(t, 512, img.Bounds().Dy())

	// Callers get their own copy.
	b[0] = 0
	assert.NotEqual(t, b[0], Icon()[0])
}

func TestTemplatesFS(t *testing.T) {
	require.NoError(t, fstest.TestFS(Templates(),
		"digits-mlp/template.yaml", "digits-mlp/train.py", "digits-mlp/README.md"))
}

func TestTemplateNames(t *testing.T) {
	names := TemplateNames()
	assert.Contains(t, names, "digits-mlp")
	assert.True(t, slices.IsSorted(names), "names not sorted: %v", names)
	for _, n := range names {
		_, err := fs.Stat(Templates(), n+"/template.yaml")
		assert.NoError(t, err, n)
	}
}

// The bundled templates use only the fields the engine's parser knows, and every
// script a stage runs is shipped next to the template.
func TestTemplateYAMLShape(t *testing.T) {
	stageFields := []string{"name", "command", "needs", "gpus", "gpu_memory", "retries", "timeout", "env"}
	paramFields := []string{"type", "default", "min", "max", "log", "choices", "help"}
	for _, name := range TemplateNames() {
		t.Run(name, func(t *testing.T) {
			raw, err := fs.ReadFile(Templates(), name+"/template.yaml")
			require.NoError(t, err)
			var tpl struct {
				Name        string                    `yaml:"name"`
				Description string                    `yaml:"description"`
				Version     string                    `yaml:"version"`
				Runtime     map[string]any            `yaml:"runtime"`
				Objective   map[string]any            `yaml:"objective"`
				Params      map[string]map[string]any `yaml:"params"`
				Stages      []map[string]any          `yaml:"stages"`
				Sentinel    map[string]map[string]any `yaml:"sentinel"`
				Tune        map[string]any            `yaml:"tune"`
			}
			dec := yaml.NewDecoder(bytes.NewReader(raw))
			dec.KnownFields(true)
			require.NoError(t, dec.Decode(&tpl))
			assert.Equal(t, name, tpl.Name)
			assert.NotEmpty(t, tpl.Description)
			assert.NotEmpty(t, tpl.Version)
			for pname, p := range tpl.Params {
				for k := range p {
					assert.Contains(t, paramFields, k, "param %s", pname)
				}
				assert.Contains(t, p, "default", "param %s", pname)
			}
			require.NotEmpty(t, tpl.Stages)
			for _, st := range tpl.Stages {
				for k := range st {
					assert.Contains(t, stageFields, k, "stage %v", st["name"])
				}
				cmd, ok := st["command"].([]any)
				require.True(t, ok, "stage %v: command must be a list", st["name"])
				for _, arg := range cmd {
					s, _ := arg.(string)
					if rest, ok := strings.CutPrefix(s, "${code}/"); ok {
						_, err := fs.Stat(Templates(), name+"/"+rest)
						assert.NoError(t, err, "stage %v runs %s", st["name"], s)
					}
				}
			}
		})
	}
}

func TestExtractTemplate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b") // not there yet
	require.NoError(t, ExtractTemplate("digits-mlp", dir))
	checkExtracted(t, "digits-mlp", dir)

	// Idempotent, and repairs edited files.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "train.py"), []byte("broken"), 0o600))
	extra := filepath.Join(dir, "mine.txt")
	require.NoError(t, os.WriteFile(extra, []byte("keep me"), 0o644))
	require.NoError(t, ExtractTemplate("digits-mlp", dir))
	checkExtracted(t, "digits-mlp", dir)
	got, err := os.ReadFile(extra)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(got))

	// No temporary files left behind.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.Contains(e.Name(), ".tmp-"), "leftover %s", e.Name())
	}
}

func checkExtracted(t *testing.T, name, dir string) {
	t.Helper()
	n := 0
	err := fs.WalkDir(Templates(), name, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel := strings.TrimPrefix(strings.TrimPrefix(p, name), "/")
		target := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Stat(target)
		require.NoError(t, err, target)
		if d.IsDir() {
			assert.True(t, info.IsDir(), target)
			return nil
		}
		n++
		want, err := fs.ReadFile(Templates(), p)
		require.NoError(t, err)
		got, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, want, got, target)
		assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), target)
		return nil
	})
	require.NoError(t, err)
	assert.Positive(t, n)
	_, err = os.Stat(filepath.Join(dir, "template.yaml"))
	assert.NoError(t, err)
}

func TestExtractTemplateUnknown(t *testing.T) {
	for _, name := range []string{"no-such-template", "", ".", "..", "../templates", "digits-mlp/..", "digits-mlp/train.py"} {
		dir := filepath.Join(t.TempDir(), "out")
		err := ExtractTemplate(name, dir)
		require.Error(t, err, "name %q", name)
		assert.ErrorIs(t, err, ErrUnknownTemplate, "name %q", name)
		assert.Contains(t, err.Error(), "digits-mlp", "the error lists what is bundled")
		_, statErr := os.Stat(dir)
		assert.True(t, os.IsNotExist(statErr), "nothing written for %q", name)
	}
}

// TestDigitsMLPStages runs the demo's four stages the way the local executor
// does (cwd = run dir, NIUMA_* env, params.json), with few epochs. It needs
// /usr/bin/python3 with torch and scikit-learn and is skipped without them.
func TestDigitsMLPStages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python; skipped with -short")
	}
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch, sklearn").Run(); err != nil {
		t.Skipf("%s with torch and sklearn not available: %v", py, err)
	}
	code := t.TempDir()
	require.NoError(t, ExtractTemplate("digits-mlp", code))

	run := func(t *testing.T, params map[string]any, extraEnv ...string) (string, map[string]int) {
		runDir := t.TempDir()
		raw, err := json.Marshal(params)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(runDir, "params.json"), raw, 0o644))
		codes := map[string]int{}
		for _, stage := range []string{"preprocess", "train", "validate", "analyze"} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := exec.CommandContext(ctx, py, filepath.Join(code, stage+".py"))
			cmd.Dir = runDir
			cmd.Env = append(os.Environ(), "NIUMA_RUN_DIR="+runDir, "NIUMA_STAGE="+stage,
				"NIUMA_RUN_ID=test", "NIUMA_ATTEMPT=1", "NIUMA_SEED=3", "OMP_NUM_THREADS=2",
				"PYTHONDONTWRITEBYTECODE=1")
			for k, v := range params {
				cmd.Env = append(cmd.Env, "NIUMA_PARAM_"+strings.ToUpper(k)+"="+jsonString(v))
			}
			cmd.Env = append(cmd.Env, extraEnv...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			cancel()
			codes[stage] = cmd.ProcessState.ExitCode()
			require.NoError(t, os.WriteFile(filepath.Join(runDir, stage+".stdout"), stdout.Bytes(), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(runDir, stage+".stderr"), stderr.Bytes(), 0o644))
			if err != nil {
				break
			}
		}
		return runDir, codes
	}

	t.Run("ok", func(t *testing.T) {
		runDir, codes := run(t, map[string]any{"lr": 0.01, "hidden": 64, "epochs": 5, "optimizer": "adam", "batch_size": 64})
		require.Equal(t, map[string]int{"preprocess": 0, "train": 0, "validate": 0, "analyze": 0}, codes, stderrs(runDir))
		out, err := os.ReadFile(filepath.Join(runDir, "train.stdout"))
		require.NoError(t, err)
		var steps []float64
		for line := range strings.Lines(string(out)) {
			if !strings.HasPrefix(line, "{") {
				continue
			}
			var m map[string]float64
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			for _, k := range []string{"step", "loss", "val_loss", "val_acc", "grad_norm", "lr"} {
				assert.Contains(t, m, k, line)
			}
			steps = append(steps, m["step"])
		}
		assert.Equal(t, []float64{1, 2, 3, 4, 5}, steps)
		raw, err := os.ReadFile(filepath.Join(runDir, "analyze", "summary.json"))
		require.NoError(t, err)
		var sum struct {
			BestValAcc  float64            `json:"best_val_acc"`
			TestAcc     float64            `json:"test_acc"`
			Seed        int                `json:"seed"`
			PerClassAcc map[string]float64 `json:"per_class_acc"`
		}
		require.NoError(t, json.Unmarshal(raw, &sum))
		assert.Greater(t, sum.BestValAcc, 0.9)
		assert.Greater(t, sum.TestAcc, 0.9)
		assert.Equal(t, 3, sum.Seed)
		assert.Len(t, sum.PerClassAcc, 10)
	})

	t.Run("nan", func(t *testing.T) {
		runDir, codes := run(t, map[string]any{"epochs": 3}, "NIUMA_DEMO_INJECT_NAN=2")
		assert.Equal(t, 2, codes["train"], stderrs(runDir))
		out, err := os.ReadFile(filepath.Join(runDir, "train.stdout"))
		require.NoError(t, err)
		assert.Contains(t, string(out), `{"step": 2, "loss": NaN`)
		errOut, err := os.ReadFile(filepath.Join(runDir, "train.stderr"))
		require.NoError(t, err)
		assert.Contains(t, string(errOut), "training diverged")
		_, err = os.Stat(filepath.Join(runDir, "train", "model.pt"))
		assert.True(t, os.IsNotExist(err), "no model after divergence")
	})
}

func jsonString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func stderrs(runDir string) string {
	var sb strings.Builder
	for _, stage := range []string{"preprocess", "train", "validate", "analyze"} {
		b, _ := os.ReadFile(filepath.Join(runDir, stage+".stderr"))
		sb.WriteString(stage + ": " + string(b) + "\n")
	}
	return sb.String()
}
