package app

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/engine/template"
)

// The same template, inputs and runs as ui's
// TestWizardSweepIsTheTemplatesExpansion: the wizard and the CLI launch
// the same runs.
const sweepYAML = `name: sweepdemo
params:
  lr:        {type: float, default: 0.01, min: 0.00001, max: 1.0, log: true}
  hidden:    {type: int, default: 64, min: 8, max: 1024}
  optimizer: {type: choice, default: adam, choices: [adam, sgd]}
  momentum:  {type: float, default: 0.9, min: 0, max: 0.99, when: {optimizer: sgd}}
stages:
  - name: train
    command: [/bin/true]
`

var sweepRuns = []string{
	"lr=0.001 hidden=16 optimizer=adam momentum=0.5",
	"lr=0.001 hidden=16 optimizer=sgd momentum=0.5",
	"lr=0.001 hidden=16 optimizer=sgd momentum=0.9",
	"lr=0.001 hidden=32 optimizer=adam momentum=0.5",
	"lr=0.001 hidden=32 optimizer=sgd momentum=0.5",
	"lr=0.001 hidden=32 optimizer=sgd momentum=0.9",
	"lr=0.001 hidden=48 optimizer=adam momentum=0.5",
	"lr=0.001 hidden=48 optimizer=sgd momentum=0.5",
	"lr=0.001 hidden=48 optimizer=sgd momentum=0.9",
	"lr=0.01 hidden=16 optimizer=adam momentum=0.5",
	"lr=0.01 hidden=16 optimizer=sgd momentum=0.5",
	"lr=0.01 hidden=16 optimizer=sgd momentum=0.9",
	"lr=0.01 hidden=32 optimizer=adam momentum=0.5",
	"lr=0.01 hidden=32 optimizer=sgd momentum=0.5",
	"lr=0.01 hidden=32 optimizer=sgd momentum=0.9",
	"lr=0.01 hidden=48 optimizer=adam momentum=0.5",
	"lr=0.01 hidden=48 optimizer=sgd momentum=0.5",
	"lr=0.01 hidden=48 optimizer=sgd momentum=0.9",
}

type listed struct {
	ID     string         `json:"id"`
	State  string         `json:"state"`
	Params map[string]any `json:"params"`
}

func listRuns(t *testing.T) []listed {
	t.Helper()
	code, out, errOut := niuma(t, "ls", "--json", "-n", "1000")
	require.Equal(t, 0, code, errOut)
	var runs []listed
	require.NoError(t, json.Unmarshal([]byte(out), &runs), out)
	return runs
}

func TestRunSweepMatchesTheWizard(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, sweepYAML)
	args := []string{"run", tmpl, "--sweep", "lr=1e-3,1e-2", "--sweep", "hidden=16..48:16",
		"--sweep", "optimizer=adam,sgd", "--sweep", "momentum=0.5, 0.9", "--wait"}
	code, out, errOut := niuma(t, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "18 run(s) submitted")
	assert.Equal(t, 18, strings.Count(out, " succeeded in "), out)

	var got []string
	for _, r := range listRuns(t) {
		assert.Equal(t, "succeeded", r.State)
		p := r.Params
		got = append(got, "lr="+template.FormatValue(p["lr"])+" hidden="+template.FormatValue(p["hidden"])+
			" optimizer="+template.FormatValue(p["optimizer"])+" momentum="+template.FormatValue(p["momentum"]))
	}
	sort.Strings(got)
	require.Equal(t, sweepRuns, got)

	// The same sweep again: every run is already done, so nothing runs.
	code, out, errOut = niuma(t, args...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "0 run(s) submitted, 18 already done")
	assert.Equal(t, 18, strings.Count(errOut, "skipped (--allow-duplicate runs it again)"), errOut)
}

func TestRunSweepAndRandomRefuseBadInput(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, sweepYAML)
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"--sweep", "lr"}, "--sweep lr: write NAME=V1,V2"},
		{[]string{"--sweep", "lr=1e-3,5"}, "--sweep: lr: 5 is above the maximum"},
		{[]string{"--sweep", "hidden=64..8"}, `--sweep: hidden: "64..8" is not a range`},
		{[]string{"--sweep", "depth=1,2"}, `--sweep: unknown parameter "depth"`},
		{[]string{"--sweep", "lr=0.1,0.2", "--sweep", "lr=0.3"}, "lr is swept twice"},
		{[]string{"--sweep", "lr=0.1,0.2", "--set", "lr=0.3"}, "lr: it is both set and swept"},
		{[]string{"--sweep", "hidden=8..300", "--sweep", "lr=0.1,0.2"}, "the sweep makes more than 500 runs (up to 2×293 = 586)"},
		{[]string{"--random", "3", "--sweep", "lr=0.1,0.2"}, "--random and --sweep contradict each other"},
		{[]string{"--random", "-1"}, "--random -1: give a number of runs of at least 1"},
		{[]string{"--random", "0"}, "--random 0: give a number of runs of at least 1"},
		{[]string{"--random", "501"}, "at most 500 runs at once"},
		{[]string{"--random", "2", "--set", "lr=0.1", "--set", "hidden=8", "--set", "optimizer=sgd", "--set", "momentum=0.5"}, "--random: no parameter to draw"},
	}
	for _, c := range cases {
		code, _, errOut := niuma(t, append([]string{"run", tmpl}, c.args...)...)
		assert.Equal(t, 2, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg, "%v", c.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
	}
	assert.Equal(t, 0, runDirs(t, home), "nothing was stored")
}

func TestRunRandomDrawsReproducibly(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, sweepYAML)
	code, out, errOut := niuma(t, "run", tmpl, "--random", "6", "--random-seed", "7", "--set", "hidden=32", "--wait")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, errOut, "note: drawing lr, optimizer, momentum at random (--random-seed 7 repeats these draws); fixed: hidden")
	runs := listRuns(t)
	require.Len(t, runs, 6)
	seen := map[string]bool{}
	for _, r := range runs {
		p := r.Params
		assert.Equal(t, float64(32), p["hidden"], "--set stays fixed")
		lr := p["lr"].(float64)
		assert.True(t, lr >= 1e-5 && lr <= 1, "lr %g in range", lr)
		if p["optimizer"] == "adam" {
			assert.Equal(t, 0.9, p["momentum"], "momentum does not apply to adam: it keeps its default")
		}
		seen[template.FormatValue(lr)] = true
	}
	assert.Len(t, seen, 6, "six different draws")

	// The same seed draws the same values: every run is already done.
	code, out, _ = niuma(t, "run", tmpl, "--random", "6", "--random-seed", "7", "--set", "hidden=32")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "0 run(s) submitted, 6 already done")
}
