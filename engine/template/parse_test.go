package template

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/metrics/textrule"
)

// example is the bundled demo's shape, as given in the design brief.
const example = `name: digits-mlp
description: Classify scikit-learn's 8x8 digits with a small PyTorch MLP.
version: "1.0"
runtime:
  kind: local            # local | docker
  image: ""              # required when kind is docker
objective:
  metric: val_acc
  goal: max              # min | max
params:
  lr:         {type: float, default: 0.01, min: 0.00001, max: 1.0, log: true, help: Learning rate}
  hidden:     {type: int, default: 64, min: 8, max: 1024, help: Hidden units}
  epochs:     {type: int, default: 30, min: 1, max: 500}
  optimizer:  {type: choice, default: adam, choices: [adam, sgd]}
  batch_size: {type: int, default: 64, min: 8, max: 1024}
  augment:    {type: bool, default: false}
  note:       {type: string, default: ""}
stages:
  - name: preprocess
    command: [/usr/bin/python3, "${code}/preprocess.py"]
  - name: train
    needs: [preprocess]
    command: [/usr/bin/python3, "${code}/train.py", --lr, "${params.lr}"]
    gpus: 0
    gpu_memory: 2GiB
    retries: 1
    timeout: 30m
    env: {OMP_NUM_THREADS: "2"}
  - name: validate
    needs: [train]
    command: [/usr/bin/python3, "${code}/validate.py"]
  - name: analyze
    needs: [validate]
    command: [/usr/bin/python3, "${code}/analyze.py"]
`

func f64(f float64) *float64 { return &f }

func TestParseExample(t *testing.T) {
	tp, err := Parse("digits.yaml", []byte(example))
	require.NoError(t, err)

	require.Equal(t, "digits-mlp", tp.Name)
	require.Equal(t, "Classify scikit-learn's 8x8 digits with a small PyTorch MLP.", tp.Description)
	require.Equal(t, "1.0", tp.Version)
	require.Equal(t, Runtime{Kind: "local", Image: ""}, tp.Runtime)
	require.Equal(t, Objective{Metric: "val_acc", Goal: "max"}, tp.Objective)
	require.Equal(t, "digits.yaml", tp.Source)
	require.Equal(t, "", tp.Dir)
	require.Equal(t, example, string(tp.YAML))

	require.Equal(t, []Param{
		{Name: "lr", Type: KindFloat, Default: 0.01, Min: f64(0.00001), Max: f64(1), Log: true, Help: "Learning rate", Line: 11},
		{Name: "hidden", Type: KindInt, Default: int64(64), Min: f64(8), Max: f64(1024), Help: "Hidden units", Line: 12},
		{Name: "epochs", Type: KindInt, Default: int64(30), Min: f64(1), Max: f64(500), Line: 13},
		{Name: "optimizer", Type: KindChoice, Default: "adam", Choices: []string{"adam", "sgd"}, Line: 14},
		{Name: "batch_size", Type: KindInt, Default: int64(64), Min: f64(8), Max: f64(1024), Line: 15},
		{Name: "augment", Type: KindBool, Default: false, Line: 16},
		{Name: "note", Type: KindString, Default: "", Line: 17},
	}, tp.Params)

	require.Equal(t, []Stage{
		{Name: "preprocess", Command: []string{"/usr/bin/python3", "${code}/preprocess.py"}, Line: 19},
		{
			Name: "train", Needs: []string{"preprocess"},
			Command:      []string{"/usr/bin/python3", "${code}/train.py", "--lr", "${params.lr}"},
			GPUMemoryMiB: 2048, Retries: 1, Timeout: 30 * time.Minute,
			Env: map[string]string{"OMP_NUM_THREADS": "2"}, Line: 21,
		},
		{Name: "validate", Needs: []string{"train"}, Command: []string{"/usr/bin/python3", "${code}/validate.py"}, Line: 29},
		{Name: "analyze", Needs: []string{"validate"}, Command: []string{"/usr/bin/python3", "${code}/analyze.py"}, Line: 32},
	}, tp.Stages)

	require.Equal(t, []string{"preprocess", "train", "validate", "analyze"}, tp.Order())

	p, ok := tp.Param("optimizer")
	require.True(t, ok)
	require.Equal(t, []string{"adam", "sgd"}, p.Choices)
	_, ok = tp.Param("nope")
	require.False(t, ok)
	s, ok := tp.Stage("train")
	require.True(t, ok)
	require.Equal(t, 1, s.Retries)
	_, ok = tp.Stage("nope")
	require.False(t, ok)

	require.Equal(t, Values{
		"lr": 0.01, "hidden": int64(64), "epochs": int64(30), "optimizer": "adam",
		"batch_size": int64(64), "augment": false, "note": "",
	}, tp.Defaults())
	require.NoError(t, tp.Validate(tp.Defaults()))
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "template.yaml")
	require.NoError(t, os.WriteFile(path, []byte(example), 0o644))

	tp, err := ParseFile(path)
	require.NoError(t, err)
	require.Equal(t, path, tp.Source)
	require.Equal(t, dir, tp.Dir)
	require.True(t, filepath.IsAbs(tp.Dir))

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: x\n"), 0o644))
	_, err = ParseFile(bad)
	require.ErrorContains(t, err, bad+":1: stages is required")

	_, err = ParseFile(filepath.Join(dir, "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestParseBundledDemo parses the demo template shipped in assets, when it
// is there, so the two cannot drift apart.
func TestParseBundledDemo(t *testing.T) {
	path := filepath.Join("..", "..", "assets", "templates", "digits-mlp", "template.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no bundled demo at %s", path)
	}
	tp, err := ParseFile(path)
	require.NoError(t, err)
	require.Equal(t, "digits-mlp", tp.Name)
	require.NotEmpty(t, tp.Order())
}

func TestParseFeatures(t *testing.T) {
	t.Run("docker runtime with image", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nruntime: {kind: docker, image: pytorch/pytorch}\nstages: [{name: a, command: [x]}]\n"))
		require.NoError(t, err)
		require.Equal(t, Runtime{Kind: "docker", Image: "pytorch/pytorch"}, tp.Runtime)
	})
	t.Run("container fields", func(t *testing.T) {
		for _, tt := range []struct {
			name, runtime string
			want          Runtime
		}{
			{"none: the executor's defaults", "{kind: docker, image: i}", Runtime{Kind: "docker", Image: "i"}},
			{"shm_size and memory are sizes in MiB", "{kind: docker, image: i, shm_size: 2GiB, memory: 16m}",
				Runtime{Kind: "docker", Image: "i", ShmSizeMiB: 2048, MemoryMiB: 16}},
			{"cpus may be fractional", "{kind: docker, image: i, cpus: 1.5}", Runtime{Kind: "docker", Image: "i", CPUs: 1.5}},
			{"user, network none and keep", "{kind: docker, image: i, user: \"1000:1000\", network: none, keep: true}",
				Runtime{Kind: "docker", Image: "i", User: "1000:1000", Network: "none", Keep: true}},
			{"cap_add is upper-cased without CAP_", "{kind: docker, image: i, cap_add: [sys_ptrace, CAP_SYS_NICE]}",
				Runtime{Kind: "docker", Image: "i", CapAdd: []string{"SYS_PTRACE", "SYS_NICE"}}},
			{"a data directory", "{kind: docker, image: i, data: ../datasets/digits}", Runtime{Kind: "docker", Image: "i", Data: "../datasets/digits"}},
			{"slurm: partition, account, QOS, memory and CPUs", "{kind: slurm, partition: gpu, account: lab, qos: normal, memory: 8GiB, cpus: 4}",
				Runtime{Kind: "slurm", Partition: "gpu", Account: "lab", QOS: "normal", MemoryMiB: 8192, CPUs: 4}},
			{"slurm: a list of partitions Slurm may choose from", "{kind: slurm, partition: \"a100,h100\"}", Runtime{Kind: "slurm", Partition: "a100,h100"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				tp, err := Parse("t.yaml", []byte("name: t\nruntime: "+tt.runtime+"\nstages: [{name: a, command: [x]}]\n"))
				require.NoError(t, err)
				require.Equal(t, tt.want, tp.Runtime)
			})
		}
	})
	t.Run("runtime and objective may be left out", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nstages: [{name: a, command: [x]}]\n"))
		require.NoError(t, err)
		require.Equal(t, Runtime{Kind: "local"}, tp.Runtime)
		require.Equal(t, Objective{}, tp.Objective)
		require.Empty(t, tp.Params)
		require.Empty(t, tp.Defaults())
	})
	t.Run("missing defaults of bool string and choice", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nparams:\n  b: {type: bool}\n  s: {type: string}\n  c: {type: choice, choices: [x, y]}\nstages: [{name: a, command: [x]}]\n"))
		require.NoError(t, err)
		require.Equal(t, Values{"b": false, "s": "", "c": "x"}, tp.Defaults())
	})
	t.Run("needs as a single name", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nstages:\n  - {name: a, command: [x]}\n  - {name: b, command: [x], needs: a}\n"))
		require.NoError(t, err)
		require.Equal(t, []string{"a"}, tp.Stages[1].Needs)
	})
	t.Run("numbers in commands and env are text", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nstages:\n  - {name: a, command: [x, --epochs, 30, 1.50], env: {N: 2, B: true}}\n"))
		require.NoError(t, err)
		require.Equal(t, []string{"x", "--epochs", "30", "1.50"}, tp.Stages[0].Command)
		require.Equal(t, map[string]string{"N": "2", "B": "true"}, tp.Stages[0].Env)
	})
	t.Run("unquoted version keeps its text", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nversion: 1.10\nstages: [{name: a, command: [x]}]\n"))
		require.NoError(t, err)
		require.Equal(t, "1.10", tp.Version)
	})
	t.Run("literal dollars and engine variables", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nstages:\n  - {name: a, command: [x, $$HOME, $PATH, \"${run_dir}/${stage}-${seed}\", \"${run_id}${stage_dir}${code}\"]}\n"))
		require.NoError(t, err)
		require.Len(t, tp.Stages[0].Command, 5)
	})
	t.Run("anchors aliases and merge keys", func(t *testing.T) {
		src := `name: t
stages:
  - &base
    name: a
    command: [x]
    retries: 2
    env: {A: "1"}
  - <<: *base
    name: b
    needs: [a]
    retries: 3
`
		tp, err := Parse("t.yaml", []byte(src))
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, tp.Order())
		b := tp.Stages[1]
		require.Equal(t, []string{"x"}, b.Command)
		require.Equal(t, 3, b.Retries)
		require.Equal(t, map[string]string{"A": "1"}, b.Env)
	})
	t.Run("gpu fields", func(t *testing.T) {
		tp, err := Parse("t.yaml", []byte("name: t\nstages: [{name: a, command: [x], gpus: 2, gpu_memory: 1.5GB, timeout: 1h30m}]\n"))
		require.NoError(t, err)
		require.Equal(t, 2, tp.Stages[0].GPUs)
		require.Equal(t, int64(1431), tp.Stages[0].GPUMemoryMiB)
		require.Equal(t, 90*time.Minute, tp.Stages[0].Timeout)
	})
}

// stagesDoc puts body under "stages:"; body's first line is line 3.
func stagesDoc(body string) string { return "name: t\nstages:\n" + body }

// paramDoc declares one parameter p on line 3 and a stage on line 5.
func paramDoc(spec string) string {
	return "name: t\nparams:\n  p: " + spec + "\nstages:\n  - {name: a, command: [x]}\n"
}

func TestParseProblems(t *testing.T) {
	cases := []struct {
		name   string
		yaml   string
		line   int
		phrase string
	}{
		// YAML itself
		{"yaml unclosed flow list", stagesDoc("  - name: a\n    command: [a\n"), 4, "YAML syntax error: did not find expected ',' or ']'"},
		{"yaml mapping in a plain value", stagesDoc("  - name: a\n    command: a: b\n"), 4, "YAML syntax error: mapping values are not allowed"},
		{"yaml tab indentation", "name: t\n\tstages:\n", 2, "YAML syntax error: found a tab character"},
		{"yaml unknown anchor", stagesDoc("  - name: a\n    command: *nope\n"), 4, "unknown anchor *nope"},
		{"empty file", "", 0, "the file is empty"},
		{"only a comment", "# nothing\n", 0, "the file is empty"},
		{"not a mapping", "- name: t\n", 1, "a template is a YAML mapping"},
		{"second document", "name: t\nstages: [{name: a, command: [x]}]\n---\nname: u\n", 3, "a second YAML document starts here"},

		// fields
		{"unknown top-level field", "name: t\nstagse: []\n", 2, `unknown field "stagse"; did you mean "stages"?`},
		{"unknown top-level field without a close match", "name: t\nstages: [{name: a, command: [x]}]\nowner: me\n", 3, `unknown field "owner" (fields are: name, description, version, runtime, objective, params, stages, sentinel, spot, share, tune)`},
		{"unknown stage field", stagesDoc("  - name: a\n    command: [x]\n    need: [b]\n"), 5, `stage "a": unknown field "need"; did you mean "needs"?`},
		{"unknown param field", paramDoc("{type: int, defualt: 3}"), 3, `parameter "p": unknown field "defualt"; did you mean "default"?`},
		{"unknown runtime field", "name: t\nruntime:\n  knd: local\nstages: [{name: a, command: [x]}]\n", 3, `runtime: unknown field "knd"; did you mean "kind"?`},
		{"runtime shm_size not a size", "name: t\nruntime: {kind: docker, image: i, shm_size: big}\nstages: [{name: a, command: [x]}]\n", 2, `runtime: shm_size "big" is not a size`},
		{"runtime memory below Docker's minimum", "name: t\nruntime: {kind: docker, image: i, memory: 1MiB}\nstages: [{name: a, command: [x]}]\n", 2, "runtime: memory must be at least 6MiB"},
		{"runtime cpus zero", "name: t\nruntime: {kind: docker, image: i, cpus: 0}\nstages: [{name: a, command: [x]}]\n", 2, "runtime: cpus must be a positive number"},
		{"runtime network host", "name: t\nruntime: {kind: docker, image: i, network: host}\nstages: [{name: a, command: [x]}]\n", 2, `runtime: network must be bridge or none (got "host")`},
		{"runtime keep not a bool", "name: t\nruntime: {kind: docker, image: i, keep: maybe}\nstages: [{name: a, command: [x]}]\n", 2, "runtime: keep must be true or false"},
		{"runtime cap_add not a list", "name: t\nruntime: {kind: docker, image: i, cap_add: NET_RAW}\nstages: [{name: a, command: [x]}]\n", 2, "runtime: cap_add must be a list"},
		{"runtime cap_add SYS_ADMIN", "name: t\nruntime: {kind: docker, image: i, cap_add: [SYS_ADMIN]}\nstages: [{name: a, command: [x]}]\n", 2, "runtime: cap_add: SYS_ADMIN is not granted"},
		{"${data} without a data directory", "name: t\nstages: [{name: a, command: [x, \"${data}/x\"]}]\n", 2, "refers to ${data}, but the template names no data directory"},
		{"runtime cap_add not a name", "name: t\nruntime: {kind: docker, image: i, cap_add: [\"a b\"]}\nstages: [{name: a, command: [x]}]\n", 2, "is not a capability name"},
		{"unknown objective field", "name: t\nobjective:\n  metric: acc\n  goal: max\n  target: 1\nstages: [{name: a, command: [x]}]\n", 5, `objective: unknown field "target"`},
		{"unknown field in a merged mapping", "name: t\nstages: [{name: a, command: [x], <<: {tries: 1}}]\n", 2, `stage "a": unknown field "tries"; did you mean "retries"?`},
		{"duplicate field", "name: t\nname: u\nstages: [{name: a, command: [x]}]\n", 2, `duplicate field "name" (first at line 1)`},
		{"duplicate parameter", "name: t\nparams:\n  p: {type: bool}\n  p: {type: int, default: 1}\nstages: [{name: a, command: [x]}]\n", 4, `duplicate parameter "p" (first at line 3)`},
		{"field that must be a single value", "name: [a, b]\nstages: [{name: a, command: [x]}]\n", 1, "name must be a single value, not a list"},
		{"merge list with a non-mapping", "name: t\nstages: [{name: a, command: [x], <<: [{retries: 1}, 3]}]\n", 2, "<< must refer to mappings"},
		{"merge cycle", "name: t\nstages: [&m {name: a, command: [x], <<: *m}]\n", 2, "merge keys (<<) are nested too deeply"},
		{"alias bomb", "name: t\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n", 0, "too large once its aliases (*name) are expanded"},
		{"yaml error in a second document", "name: t\nstages: [{name: a, command: [x]}]\n---\nx: [\n", 4, "YAML syntax error"},
		{"merge of a non-mapping", "name: t\nstages: [{name: a, command: [x], <<: 3}]\n", 2, "<< must refer to a mapping"},

		// template name
		{"name missing", "stages: [{name: a, command: [x]}]\n", 1, "name is required"},
		{"name empty", "name: \"\"\nstages: [{name: a, command: [x]}]\n", 1, "name is empty"},
		{"name with a slash", "name: a/b\nstages: [{name: a, command: [x]}]\n", 1, `name "a/b" must be letters, digits`},

		// runtime and objective
		{"runtime kind unknown", "name: t\nruntime: {kind: podman}\nstages: [{name: a, command: [x]}]\n", 2, `runtime: kind must be local, docker or slurm (got "podman")`},
		{"slurm with an image", "name: t\nruntime:\n  kind: slurm\n  image: x/y:1\nstages: [{name: a, command: [x]}]\n", 4, "runtime: image is not used with kind slurm"},
		{"partition without slurm", "name: t\nruntime:\n  kind: docker\n  image: x/y:1\n  partition: gpu\nstages: [{name: a, command: [x]}]\n", 5, "runtime: partition is for kind slurm; this runtime's kind is docker"},
		{"partition with a space", "name: t\nruntime:\n  kind: slurm\n  partition: gpu big\nstages: [{name: a, command: [x]}]\n", 4, `runtime: partition "gpu big" is not a Slurm name`},
		{"qos with a semicolon", "name: t\nruntime: {kind: slurm, qos: \"a;b\"}\nstages: [{name: a, command: [x]}]\n", 2, `runtime: qos "a;b" is not a Slurm name`},
		{"runtime not a mapping", "name: t\nruntime: docker\nstages: [{name: a, command: [x]}]\n", 2, "runtime must be a mapping"},
		{"docker without image", "name: t\nruntime:\n  kind: docker\n  image: \"\"\nstages: [{name: a, command: [x]}]\n", 4, "runtime: image is required when kind is docker"},
		{"objective goal unknown", "name: t\nobjective: {metric: acc, goal: maximize}\nstages: [{name: a, command: [x]}]\n", 2, `objective: goal must be min or max (got "maximize")`},
		{"objective metric without goal", "name: t\nobjective:\n  metric: acc\nstages: [{name: a, command: [x]}]\n", 3, "objective: goal is required when metric is set"},

		// stages
		{"stages missing", "name: t\n", 1, "stages is required"},
		{"stages empty", "name: t\nstages: []\n", 2, "stages is empty"},
		{"stages not a list", "name: t\nstages: {name: a}\n", 2, "stages must be a list"},
		{"stage not a mapping", stagesDoc("  - train\n"), 3, "stage 1 must be a mapping"},
		{"stage name missing", stagesDoc("  - command: [x]\n"), 3, "stage 1: name is required"},
		{"stage name uppercase", stagesDoc("  - name: Train\n    command: [x]\n"), 3, `stage name "Train" must be lowercase letters, digits, - and _`},
		{"stage name with a space", stagesDoc("  - name: my stage\n    command: [x]\n"), 3, "it becomes a directory name"},
		{"stage name used twice", stagesDoc("  - {name: a, command: [x]}\n  - {name: a, command: [y]}\n"), 4, `stage name "a" is used twice (first at line 3)`},
		{"command missing", stagesDoc("  - name: a\n"), 3, `stage "a": command is required`},
		{"command as a shell string", stagesDoc("  - name: a\n    command: python3 train.py\n"), 4, "not one string: it is not run through a shell"},
		{"command empty", stagesDoc("  - name: a\n    command: []\n"), 4, `stage "a": command is empty`},
		{"command argument is a mapping", stagesDoc("  - name: a\n    command:\n      - x\n      - {k: v}\n"), 6, `stage "a": command argument 2 must be a single value`},
		{"command program empty", stagesDoc("  - name: a\n    command: [\"\", x]\n"), 4, "the program (the first command argument) is empty"},
		{"command argument with a NUL", stagesDoc("  - name: a\n    command: [x, \"a\\0b\"]\n"), 4, `stage "a": command argument 2 contains a NUL character`},
		{"needs unknown stage", stagesDoc("  - {name: preprocess, command: [x]}\n  - name: train\n    command: [x]\n    needs: [prep]\n  - {name: validate, command: [x], needs: [train]}\n"),
			6, `stage "train" needs unknown stage "prep" (stages are: preprocess, train, validate)`},
		{"needs itself", stagesDoc("  - name: a\n    command: [x]\n    needs: [a]\n"), 5, `stage "a" needs itself`},
		{"needs twice", stagesDoc("  - {name: a, command: [x]}\n  - name: b\n    command: [x]\n    needs:\n      - a\n      - a\n"), 8, `stage "b": needs "a" twice`},
		{"needs not a list", stagesDoc("  - name: a\n    command: [x]\n    needs: {b: 1}\n"), 5, "needs must be a list of stage names"},
		{"cycle of two", stagesDoc("  - {name: preprocess, command: [x]}\n  - name: train\n    command: [x]\n    needs: [preprocess, validate]\n  - name: validate\n    command: [x]\n    needs: [train]\n"),
			6, "stages form a cycle: train → validate → train"},
		{"cycle of three", stagesDoc("  - {name: a, command: [x], needs: [c]}\n  - {name: b, command: [x], needs: [a]}\n  - {name: c, command: [x], needs: [b]}\n"),
			3, "stages form a cycle: a → b → c → a"},
		{"gpus negative", stagesDoc("  - {name: a, command: [x], gpus: -1}\n"), 3, `stage "a": gpus must be 0 or more (got -1)`},
		{"gpus not a number", stagesDoc("  - {name: a, command: [x], gpus: two}\n"), 3, `stage "a": gpus must be a whole number (got "two")`},
		{"gpus fractional", stagesDoc("  - {name: a, command: [x], gpus: 0.5}\n"), 3, `gpus must be a whole number (got "0.5")`},
		{"retries negative", stagesDoc("  - name: a\n    command: [x]\n    retries: -2\n"), 5, `stage "a": retries must be 0 or more (got -2)`},
		{"retries absurd", stagesDoc("  - {name: a, command: [x], retries: 5000}\n"), 3, "retries must be at most 1000"},
		{"gpu_memory not a size", stagesDoc("  - name: a\n    command: [x]\n    gpu_memory: lots\n"), 5, `stage "a": gpu_memory "lots" is not a size`},
		{"gpu_memory negative", stagesDoc("  - {name: a, command: [x], gpu_memory: -1GiB}\n"), 3, `gpu_memory "-1GiB" is not a size`},
		{"gpu_memory unknown unit", stagesDoc("  - {name: a, command: [x], gpu_memory: 2 gigs}\n"), 3, `gpu_memory "2 gigs" has an unknown unit "gigs"`},
		{"gpu_memory fractional MiB", stagesDoc("  - {name: a, command: [x], gpu_memory: 1.5}\n"), 3, "a number without a unit means MiB and must be whole"},
		{"timeout not a duration", stagesDoc("  - name: a\n    command: [x]\n    timeout: 1d\n"), 5, `stage "a": timeout "1d" is not a duration`},
		{"timeout without unit", stagesDoc("  - {name: a, command: [x], timeout: 30}\n"), 3, `timeout "30" has no unit; write e.g. 30s, 30m or 30h`},
		{"timeout negative", stagesDoc("  - {name: a, command: [x], timeout: -5m}\n"), 3, `timeout "-5m" is negative`},
		{"env not a mapping", stagesDoc("  - {name: a, command: [x], env: [A=1]}\n"), 3, `stage "a": env must be a mapping`},
		{"env bad name", stagesDoc("  - name: a\n    command: [x]\n    env:\n      1A: x\n"), 6, `env name "1A" must be letters, digits and _`},
		{"env reserved name", stagesDoc("  - name: a\n    command: [x]\n    env:\n      NIUMA_SEED: \"1\"\n"), 6, "env NIUMA_SEED is set by Niuma itself"},
		{"env GPUs past the shepherd", stagesDoc("  - name: a\n    command: [x]\n    env:\n      NVIDIA_VISIBLE_DEVICES: all\n"), 6,
			"env NVIDIA_VISIBLE_DEVICES would give a container GPUs the shepherd did not assign; ask for them with gpus: N"},
		{"env without value", stagesDoc("  - name: a\n    command: [x]\n    env:\n      A:\n"), 6, `env A has no value; write A: "" for an empty one`},
		{"env value refers to unknown variable", stagesDoc("  - name: a\n    command: [x]\n    env:\n      A: ${HOME}\n"), 6, `stage "a": env A refers to unknown variable ${HOME}`},

		// references
		{"command refers to unknown parameter", "name: t\nparams:\n  lr: {type: float, default: 0.1}\n  hidden: {type: int, default: 3}\nstages:\n  - name: a\n    command: [x, \"${params.lrr}\"]\n",
			7, `stage "a": command argument 2 refers to unknown parameter ${params.lrr} (parameters are: hidden, lr)`},
		{"command refers to unknown variable", stagesDoc("  - name: a\n    command: [x, \"${workdir}/out\"]\n"), 4, "command argument 2 refers to unknown variable ${workdir}; use ${params.NAME} for a parameter, or one of ${code}, ${run_dir}"},
		{"command has an unterminated reference", stagesDoc("  - name: a\n    command: [x, \"${code/out\"]\n"), 4, `command argument 2: unterminated "${" in "${code/out"`},
		{"command has an empty reference", stagesDoc("  - name: a\n    command: [x, \"${}\"]\n"), 4, "command argument 2: empty ${}"},

		// parameters
		{"param name with a dash", "name: t\nparams:\n  learning-rate: {type: float, default: 1}\nstages: [{name: a, command: [x]}]\n", 3, `parameter name "learning-rate" must be lowercase letters, digits and _`},
		{"param spec not a mapping", paramDoc("0.01"), 3, `parameter "p": the spec must be a mapping such as {type: float, default: 0.01}`},
		{"param spec empty", paramDoc(""), 3, `parameter "p": the spec is empty`},
		{"param type missing", paramDoc("{default: 1}"), 3, `parameter "p": type is required: one of float, int, bool, choice, string`},
		{"param type unknown", paramDoc("{type: double, default: 1}"), 3, `parameter "p": type must be one of float, int, bool, choice, string (got "double")`},
		{"float default not a number", paramDoc("{type: float, default: abc}"), 3, `parameter "p": default "abc" is not a number`},
		{"int default not whole", paramDoc("{type: int, default: 6.5}"), 3, `parameter "p": default "6.5" is not a whole number`},
		{"bool default not a bool", paramDoc("{type: bool, default: maybe}"), 3, `parameter "p": default "maybe" is not true or false`},
		{"default is a list", paramDoc("{type: string, default: [a]}"), 3, `parameter "p": default must be a single value, not a list`},
		{"float default missing", paramDoc("{type: float, min: 0}"), 3, `parameter "p": default is required`},
		{"string default with a NUL", paramDoc("{type: string, default: \"a\\0\"}"), 3, `parameter "p": default "a\x00" contains a NUL character`},
		{"min above max", paramDoc("{type: int, default: 5, min: 10, max: 1}"), 3, `parameter "p": min 10 is above max 1; swap them`},
		{"min not a number", paramDoc("{type: float, default: 5, min: low}"), 3, `parameter "p": min must be a number (got "low")`},
		{"int max not whole", paramDoc("{type: int, default: 5, max: 9.5}"), 3, `parameter "p": max 9.5 must be a whole number`},
		{"default above max", "name: t\nparams:\n  lr:\n    type: float\n    default: 5\n    max: 1\nstages: [{name: a, command: [x]}]\n", 5, `parameter "lr": default 5 is above max 1`},
		{"default below min", paramDoc("{type: int, default: 2, min: 8}"), 3, `parameter "p": default 2 is below min 8`},
		{"log with min zero", paramDoc("{type: float, default: 0.1, min: 0, log: true}"), 3, `parameter "p": log: true needs a min above 0 (a log scale cannot reach 0), but min is 0`},
		{"log without min", paramDoc("{type: float, default: 0.1, log: true}"), 3, `parameter "p": log: true needs a min above 0`},
		{"log not a bool", paramDoc("{type: float, default: 0.1, min: 0.01, log: sometimes}"), 3, `parameter "p": log must be true or false (got "sometimes")`},
		{"log on a string", paramDoc("{type: string, log: true}"), 3, `parameter "p": log only applies to float and int parameters`},
		{"min on a bool", paramDoc("{type: bool, min: 0}"), 3, `parameter "p": min only applies to float and int parameters`},
		{"choice without choices", paramDoc("{type: choice, default: a}"), 3, `parameter "p": a choice parameter needs choices`},
		{"choices empty", paramDoc("{type: choice, choices: []}"), 3, `parameter "p": choices is empty`},
		{"choices not a list", paramDoc("{type: choice, choices: adam}"), 3, `parameter "p": choices must be a list`},
		{"choice listed twice", paramDoc("{type: choice, choices: [a, a]}"), 3, `parameter "p": choice "a" is listed twice`},
		{"choice empty string", paramDoc("{type: choice, choices: [a, \"\"]}"), 3, `parameter "p": choice 2 is empty`},
		{"choice default not a choice", paramDoc("{type: choice, default: adamw, choices: [adam, sgd]}"), 3, `parameter "p": default "adamw" is not one of the choices (adam, sgd)`},
		{"choices on an int", paramDoc("{type: int, default: 1, choices: [1, 2]}"), 3, `parameter "p": choices only apply to choice parameters`},
		{"params not a mapping", "name: t\nparams: [lr]\nstages: [{name: a, command: [x]}]\n", 2, "params must be a mapping from names to specs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := Parse("digits.yaml", []byte(tc.yaml))
			require.Error(t, err)
			require.Nil(t, tp)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "error is a *ValidationError")
			require.Equal(t, "digits.yaml", ve.Source)
			require.NotEmpty(t, ve.Problems)
			if len(ve.Problems) > 1 {
				t.Logf("MULTI %v", err)
			}

			found := false
			for _, p := range ve.Problems {
				if p.Line == tc.line && strings.Contains(p.Msg, tc.phrase) {
					found = true
				}
			}
			require.True(t, found, "want a problem on line %d containing %q; got:\n%v", tc.line, tc.phrase, err)

			// Every problem is one line that names the file (and its line).
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, len(ve.Problems))
			for _, l := range lines {
				require.True(t, strings.HasPrefix(l, "digits.yaml:"), l)
			}
			// Problems come ordered by line.
			for i := 1; i < len(ve.Problems); i++ {
				require.LessOrEqual(t, ve.Problems[i-1].Line, ve.Problems[i].Line)
			}
			if tc.line > 0 {
				require.Contains(t, err.Error(), "digits.yaml:"+strconv.Itoa(tc.line)+": ")
			}
		})
	}
}

func TestParseCollectsAllProblems(t *testing.T) {
	src := `name: Bad Name
params:
  lr: {type: float, default: 5, max: 1}
stages:
  - name: train
    need: [prep]
    command: [python3, "${params.lrr}"]
    gpus: -1
  - name: train
    command: []
`
	_, err := Parse("x.yaml", []byte(src))
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []Problem{
		{1, `name "Bad Name" must be letters, digits, '.', '-' and '_', starting with a letter or digit, at most 64 characters`},
		{3, `parameter "lr": default 5 is above max 1`},
		{6, `stage "train": unknown field "need"; did you mean "needs"?`},
		{7, `stage "train": command argument 2 refers to unknown parameter ${params.lrr} (parameters are: lr)`},
		{8, `stage "train": gpus must be 0 or more (got -1)`},
		{9, `stage name "train" is used twice (first at line 5); stage names must be unique`},
		{10, `stage "train": command is empty; give the program and its arguments, e.g. [python3, train.py]`},
	}, ve.Problems)
	require.True(t, strings.HasPrefix(err.Error(), `x.yaml:1: name "Bad Name"`))
}

func TestParseLongListsAreElided(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: t\nstages:\n")
	for i := range 30 {
		fmt.Fprintf(&b, "  - {name: s%d, command: [x], needs: [s%d]}\n", i, (i+1)%30)
	}
	fmt.Fprintf(&b, "  - {name: extra, command: [x], needs: [ghost]}\n")
	_, err := Parse("t.yaml", []byte(b.String()))
	require.ErrorContains(t, err, "t.yaml:3: stages form a cycle: s0 → s29 → s28 → s27 → s26 → s25 → s24 → s23 → s22 → s21 → … (19 more) → s1 → s0 (each needs the one before it)")
	require.ErrorContains(t, err, `t.yaml:33: stage "extra" needs unknown stage "ghost" (stages are: s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17, s18, s19, … (11 more))`)
}

func TestParseTypoDoesNotAlsoReportTheMissingField(t *testing.T) {
	cases := []struct{ name, yaml, phrase string }{
		{"stages", "name: t\nstagse: [{name: a, command: [x]}]\n", `unknown field "stagse"; did you mean "stages"?`},
		{"name", "nmae: t\nstages: [{name: a, command: [x]}]\n", `unknown field "nmae"; did you mean "name"?`},
		{"command", stagesDoc("  - {name: a, comand: [x]}\n"), `unknown field "comand"; did you mean "command"?`},
		{"type", paramDoc("{tpye: int, default: 1}"), `unknown field "tpye"; did you mean "type"?`},
		{"default", paramDoc("{type: int, defualt: 1}"), `unknown field "defualt"; did you mean "default"?`},
		{"goal", "name: t\nobjective: {metric: acc, gaol: max}\nstages: [{name: a, command: [x]}]\n", `unknown field "gaol"; did you mean "goal"?`},
		{"image", "name: t\nruntime: {kind: docker, imgae: x}\nstages: [{name: a, command: [x]}]\n", `unknown field "imgae"; did you mean "image"?`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml))
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Len(t, ve.Problems, 1, "%v", err)
			require.Contains(t, ve.Problems[0].Msg, tc.phrase)
		})
	}
}

func TestValidationErrorFormat(t *testing.T) {
	e := &ValidationError{Source: "a.yaml", Problems: []Problem{{0, "whole file"}, {3, "line three"}}}
	require.Equal(t, "a.yaml: whole file\na.yaml:3: line three", e.Error())
	e.Source = ""
	require.Equal(t, "template:3: line three", e.Format(Problem{3, "line three"}))
}

func TestParseSentinelSection(t *testing.T) {
	base := "name: s\nparams:\n  lr: {type: float, default: 0.1}\nstages:\n  - name: a\n    command: [\"true\"]\n"
	tm, err := Parse("s.yaml", []byte(base+"sentinel:\n  divergence: {do: retry, set: {lr: \"*0.1\"}}\n  hang: {do: stop}\n"+
		"  memory_leak: {do: retry}\n  overheating: {do: stop}\n  queue_stuck: {do: notify}\n"))
	require.NoError(t, err)
	require.Len(t, tm.Sentinel, 5)

	tests := []struct{ name, section, line, want string }{
		{"an unknown kind", "sentinel:\n  divergance: {do: stop}\n", "s.yaml:8:", "divergance"},
		{"an unknown action", "sentinel:\n  nan: {do: explode}\n", "s.yaml:8:", `unknown action "explode"`},
		{"a change to a parameter that does not exist", "sentinel:\n  nan: {do: retry, set: {lrr: \"*0.1\"}}\n", "s.yaml:8:", `sets "lrr", which is not a parameter`},
		{"not a mapping", "sentinel: [stop]\n", "s.yaml:7:", "sentinel must map anomaly kinds to actions"},
		{"a misspelt field of an action", "sentinel:\n  hang: {do: stop}\n  nan: {do: retry, sett: {lr: \"*0.1\"}}\n", "s.yaml:9:",
			`sentinel: nan: unknown field "sett" (an action has do, set and max_retries)`},
		{"a retry of a waiting stage", "sentinel:\n  queue_stuck: {do: retry}\n", "s.yaml:8:", "use flag, notify or stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(base+tt.section))
			require.ErrorContains(t, err, tt.line)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestStageMetricSources(t *testing.T) {
	tm, err := Parse("t.yaml", []byte(`name: wlm
stages:
  - name: train
    command: [python3, main.py]
    metrics:
      - pytorch-examples
      - {pattern: 'acc (?P<acc>[0-9.]+)', step: line, stream: stderr}
    tensorboard: "outputs/**"
    csv: [lightning_logs/**/metrics.csv]
  - name: eval
    command: [python3, eval.py]
    metrics: keras
`))
	require.NoError(t, err)
	train, _ := tm.Stage("train")
	assert.Equal(t, []textrule.Rule{{Preset: "pytorch-examples"}, {Pattern: `acc (?P<acc>[0-9.]+)`, Step: "line", Stream: "stderr"}}, train.Metrics)
	assert.Equal(t, []string{"outputs/**"}, train.TensorBoard)
	assert.Equal(t, []string{"lightning_logs/**/metrics.csv"}, train.CSV)
	eval, _ := tm.Stage("eval")
	assert.Equal(t, []textrule.Rule{{Preset: "keras"}}, eval.Metrics)

	_, err = Parse("t.yaml", []byte(`name: bad
stages:
  - name: train
    command: [python3, main.py]
    metrics:
      - pytorch
      - {pattern: 'loss (\d+)'}
      - {preset: keras, stream: stdin}
      - {pattern: 'x', steps: line}
    tensorboard: /abs/**
    csv: ../up.csv
`))
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`t.yaml:6: stage "train": metrics: unknown preset "pytorch": use one of key-value, pytorch-examples, keras, tqdm`,
		`t.yaml:7: stage "train": metrics: pattern "loss (\\d+)" has no named group`,
		`t.yaml:8: stage "train": metrics: stream must be stdout, stderr or both`,
		`t.yaml:9: stage "train": metrics: unknown field "steps"`,
		`t.yaml:10: stage "train": tensorboard: path pattern "/abs/**" must be relative to the run directory`,
		`t.yaml:11: stage "train": csv: path pattern "../up.csv" must stay inside the run directory`,
	} {
		assert.Contains(t, msg, want)
	}
}
