package app

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/shepherd"
)

func TestShepherdSettings(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(settingsFile(home), []byte("shepherd:\n  policy: las\n  cpus: 6\n  memory: 48GiB\n"), 0o644))
	s, err := loadSettings(home)
	require.NoError(t, err)
	require.Equal(t, ShepherdSettings{Policy: "las", CPUMilli: 6000, MemMiB: 48 * 1024}, s.Shepherd)
	p, h, err := s.Shepherd.placement()
	require.NoError(t, err)
	require.Equal(t, "las", p.Name)
	require.Equal(t, shepherd.Host{CPUMilli: 6000, MemMiB: 48 * 1024}, h)

	p, h, err = ShepherdSettings{}.placement()
	require.NoError(t, err)
	require.Equal(t, "herd", p.Name, "the default policy")
	require.Positive(t, h.CPUMilli, "this machine's CPUs")

	for _, tt := range []struct{ yaml, want string }{
		{"shepherd:\n  policy: best\n", `settings.yaml:2: shepherd: policy "best": use one of herd, bestfit, las, fifo`},
		{"shepherd:\n  cpus: 0\n", `settings.yaml:2: shepherd: cpus must be a positive number of CPUs such as 6 (got "0")`},
		{"shepherd:\n  memory: lots\n", `settings.yaml:2: shepherd: memory must be a size such as 48GiB (got "lots")`},
		{"shepherd:\n  polcy: herd\n", `settings.yaml:2: unknown shepherd setting "polcy" (shepherd settings are: policy, cpus, memory)`},
		{"shepherd: herd\n", "settings.yaml:1: shepherd must be a mapping"},
	} {
		require.NoError(t, os.WriteFile(settingsFile(home), []byte(tt.yaml), 0o644))
		_, err := loadSettings(home)
		require.ErrorContains(t, err, tt.want)
	}
}

func TestRunNeedFlagsAreCheckedAndStored(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, "name: needs\nstages:\n  - name: prep\n    command: [\"true\"]\n  - name: train\n    needs: [prep]\n    gpus: 1\n    command: [\"true\"]\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "-1"}, "--gpus -1: write a whole number of GPUs from 0 to 4096"},
		{[]string{"--gpu-memory", "lots"}, "--gpu-memory lots: write a size such as 20GiB or 512MiB"},
		{[]string{"--estimate", "soon"}, "--estimate soon: write a duration such as 40m, 2h or 1h30m"},
	} {
		code, _, errOut := niuma(t, append([]string{"run", tmpl}, tt.args...)...)
		require.Equal(t, 2, code, errOut)
		require.Contains(t, errOut, tt.want)
	}
	require.Equal(t, 0, runDirs(t, home), "nothing stored")

	code, out, errOut := niuma(t, "run", tmpl, "--gpus", "0", "--gpu-memory", "20GiB", "--estimate", "2h", "--spot", "--share")
	require.Equal(t, 0, code, errOut)
	id := runID(t, out)
	code, out, errOut = niuma(t, "show", id, "--json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Spot, Share bool
		ETA         string
		Stages      []struct {
			Name         string
			GPUs         int
			GPUMemoryMiB int64         `json:"gpu_memory_mib"`
			CPUMilli     int64         `json:"cpu_milli"`
			Estimate     time.Duration `json:"estimate"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.True(t, got.Spot)
	require.True(t, got.Share)
	require.Equal(t, "prep", got.Stages[0].Name)
	require.Zero(t, got.Stages[0].Estimate, "the overrides are for the stage that uses GPUs")
	require.Equal(t, int64(1000), got.Stages[0].CPUMilli)
	require.Equal(t, 0, got.Stages[1].GPUs)
	require.Equal(t, int64(20*1024), got.Stages[1].GPUMemoryMiB)
	require.Equal(t, 2*time.Hour, got.Stages[1].Estimate)
	require.Equal(t, "ETA unknown (no earlier runs of this template)", got.ETA, "prep has no estimate and no history")

	code, out, errOut = niuma(t, "show", id)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, regexp.MustCompile(`spot \(may be preempted\)   share \(may share a GPU\)`), out)
}

// After earlier runs of a template, `niuma show` of a new one says how long
// it should take and from how many runs it learnt that.
func TestShowGivesTheETAFromEarlierRuns(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, "name: eta\nparams:\n  n: {type: int, default: 1, min: 1, max: 99}\nstages:\n  - name: a\n    command: [sh, -c, 'sleep 0.2']\n")
	for i := range 3 {
		code, _, errOut := niuma(t, "run", tmpl, "--set", "n="+string(rune('1'+i)), "--wait")
		require.Equal(t, 0, code, errOut)
	}
	code, out, errOut := niuma(t, "run", tmpl, "--set", "n=2", "--allow-duplicate")
	require.Equal(t, 0, code, errOut)
	id := runID(t, out)
	code, out, errOut = niuma(t, "show", id)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^ETA [0-9]+ s, from 3 earlier runs$`, out)

	// A count far past theirs: the ETA says the earlier runs are unlike it.
	code, out, errOut = niuma(t, "run", tmpl, "--set", "n=9")
	require.Equal(t, 0, code, errOut)
	code, out, errOut = niuma(t, "show", runID(t, out))
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^ETA [0-9]+ s, from 3 earlier runs \(unlike them: n 9, theirs 1–3\)$`, out)
	require.NotContains(t, out, "ETA 0 s", "an unfinished run has some time to go")
}

// `niuma run` refuses a GPU need this machine can never hold, saying what
// it has, and stores nothing; --flag-only is stored and shown.
func TestRunRefusesWhatTheGPUsNeverHoldAndTakesFlagOnly(t *testing.T) {
	home := tempHome(t)
	t.Setenv("NIUMA_SIMULATE_GPUS", "2xA100-80GB")
	tmpl := writeTemplate(t, "name: big\nstages:\n  - name: train\n    gpus: 1\n    command: [\"true\"]\n")
	code, _, errOut := niuma(t, "run", tmpl, "--gpus", "3")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "stage train can never start on this machine: it needs 3 GPUs and this machine has 2 usable GPU(s), at most 80 GiB each")
	code, _, errOut = niuma(t, "run", tmpl, "--gpu-memory", "96GiB")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "it needs 1 GPU with 96 GiB and this machine has 2 usable GPU(s), at most 80 GiB each")
	require.Equal(t, 0, runDirs(t, home), "nothing stored")

	code, out, errOut := niuma(t, "run", tmpl, "--flag-only")
	require.Equal(t, 0, code, errOut)
	code, out, errOut = niuma(t, "show", runID(t, out))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "sentinel only flags (no retry or stop)")
}
