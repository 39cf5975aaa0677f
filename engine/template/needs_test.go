package template

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const needsDoc = `name: t
params:
  gpus:       {type: int, default: 1, min: 0, max: 8}
  gpu_memory: {type: string, default: 4GiB}
stages:
  - name: train
    command: [x]
    gpus: ${params.gpus}
    gpu_memory: ${params.gpu_memory}
  - {name: eval, command: [x], gpus: 2, gpu_memory: 1GiB}
`

// A stage may take its GPU needs from parameters, so that each run asks
// for its own; a fixed stage keeps its fields.
func TestStageNeedsFromParameters(t *testing.T) {
	tm, err := Parse("t.yaml", []byte(needsDoc))
	require.NoError(t, err)
	train, _ := tm.Stage("train")
	require.Equal(t, "gpus", train.GPUsParam)
	require.Equal(t, 1, train.GPUs, "the default is the stage's GPUs")
	require.Equal(t, int64(4096), train.GPUMemoryMiB)

	v, err := tm.Resolve(map[string]string{"gpus": "0", "gpu_memory": "512MiB"})
	require.NoError(t, err)
	g, m, err := tm.NeedsOf(train, v)
	require.NoError(t, err)
	require.Equal(t, 0, g)
	require.Equal(t, int64(512), m)
	eval, _ := tm.Stage("eval")
	g, m, err = tm.NeedsOf(eval, v)
	require.NoError(t, err)
	require.Equal(t, 2, g)
	require.Equal(t, int64(1024), m)

	_, err = tm.Resolve(map[string]string{"gpu_memory": "lots"})
	require.ErrorContains(t, err, "gpu_memory (parameter gpu_memory)")
	require.Error(t, tm.Validate(Values{"gpus": int64(1), "gpu_memory": "lots"}))
}

func TestStageNeedsParameterErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown", "name: t\nstages:\n  - {name: a, command: [x], gpus: \"${params.n}\"}\n", "gpus refers to unknown parameter ${params.n}"},
		{"not an int", "name: t\nparams:\n  n: {type: float, default: 1, min: 0}\nstages:\n  - {name: a, command: [x], gpus: \"${params.n}\"}\n", "must be an int"},
		{"no min", "name: t\nparams:\n  n: {type: int, default: 1}\nstages:\n  - {name: a, command: [x], gpus: \"${params.n}\"}\n", "needs min: 0"},
		{"memory not a size", "name: t\nparams:\n  m: {type: string, default: lots}\nstages:\n  - {name: a, command: [x], gpu_memory: \"${params.m}\"}\n", `default "lots" is not a size`},
		{"memory a bool", "name: t\nparams:\n  m: {type: bool}\nstages:\n  - {name: a, command: [x], gpu_memory: \"${params.m}\"}\n", "must be a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.doc))
			require.ErrorContains(t, err, tc.want)
		})
	}
}
