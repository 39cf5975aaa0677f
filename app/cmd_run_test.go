package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runDirs(t *testing.T, home string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(home, "runs", "*"))
	require.NoError(t, err)
	return len(m)
}

func TestRunRefusesADuplicateOfASucceededRun(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, `name: echo
params:
  n: {type: int, default: 1, min: 1, max: 9}
stages:
  - name: a
    command: [sh, -c, 'echo "{\"step\": 1, \"seed\": $NIUMA_SEED}"']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, errOut)
	first := runID(t, out)

	// The same inputs again: refused, naming the first run, nothing stored.
	code, out, errOut = niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 1, code, out)
	assert.Contains(t, errOut, "run "+first+" already succeeded")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
	assert.Equal(t, 1, runDirs(t, home))

	// --reuse: the earlier run's ID, exit 0, nothing run.
	code, out, errOut = niuma(t, "run", tmpl, "--reuse")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, first+"\n", out)
	assert.Equal(t, 1, runDirs(t, home))

	// Other values or another seed are another run.
	code, _, errOut = niuma(t, "run", tmpl, "--set", "n=2", "--wait")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = niuma(t, "run", tmpl, "--seed", "5", "--wait")
	require.Equal(t, 0, code, errOut)

	// --allow-duplicate runs it again, with the same (derived) seed.
	code, out, errOut = niuma(t, "run", tmpl, "--allow-duplicate", "--wait")
	require.Equal(t, 0, code, errOut)
	second := runID(t, out)
	assert.NotEqual(t, first, second)
	assert.Equal(t, 4, runDirs(t, home))
	a, b := showJSONOf(t, first), showJSONOf(t, second)
	require.Len(t, a.Metrics, 1)
	assert.Equal(t, a.Metrics[0].Value, b.Metrics[0].Value, "the same seed reached the stage")

	code, _, errOut = niuma(t, "run", tmpl, "--allow-duplicate", "--reuse")
	assert.Equal(t, 2, code, errOut)
}

func TestFailedRunsNeverBlockARerun(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, "name: flaky\nstages:\n  - name: a\n    command: [sh, -c, 'test -f \"$0\"', \""+
		filepath.Join(t.TempDir(), "ok")+"\"]\n")
	code, _, _ := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 1, code)
	code, _, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 1, code)
	assert.NotContains(t, errOut, "already succeeded")
	assert.Equal(t, 2, runDirs(t, home))
	code, out, _ := niuma(t, "run", tmpl, "--reuse")
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "run "), "--reuse without a succeeded run runs it: %q", out)
}

func TestRerunOfANonDeterministicWorkloadIsFlagged(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, `name: noisy
objective: {metric: score, goal: max}
stages:
  - name: a
    command: [sh, -c, 'echo "{\"step\": 1, \"score\": $(od -An -N4 -tu4 /dev/urandom)}"']
`)
	code, _, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, errOut, "not reproducible")
	code, _, errOut = niuma(t, "run", tmpl, "--wait", "--allow-duplicate")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "warning: not reproducible")
	assert.Contains(t, errOut, "fix: set all random seeds")
}

// The acceptance path on the real demo: the same values twice are refused
// with the first run's ID; run anyway, the demo honours the seed, so both
// runs end with the same accuracy and no anomaly.
func TestDemoDuplicateIsRefusedAndReproducible(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch, sklearn").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the demo needs python3-torch and python3-sklearn (make deps installs them): %v", err)
		}
		t.Skip("python3-torch or python3-sklearn missing: run make deps")
	}
	tempHome(t)
	args := []string{"run", "digits-mlp", "--set", "epochs=3", "--wait"}
	code, out, errOut := niuma(t, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	first := runID(t, out)

	code, _, errOut = niuma(t, args...)
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "run "+first+" already succeeded")

	code, out, errOut = niuma(t, append(args, "--allow-duplicate")...)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, errOut, "not reproducible")
	acc := func(id string) float64 {
		for _, m := range showJSONOf(t, id).Metrics {
			if m.Stage == "train" && m.Key == "val_acc" {
				return m.Value
			}
		}
		t.Fatalf("run %s has no train/val_acc", id)
		return 0
	}
	assert.Equal(t, acc(first), acc(runID(t, out)))
}
