package template

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const tuneBase = `name: t
objective: {metric: acc, goal: max}
params:
  lr: {type: float, default: 0.1, min: 0.001, max: 1, log: true}
  n: {type: int, default: 3, min: 1, max: 9}
  open: {type: int, default: 3, min: 1}
  opt: {type: choice, default: a, choices: [a, b]}
  tag: {type: string, default: x}
stages:
  - name: a
    command: ["true"]
`

func TestTuneSection(t *testing.T) {
	tm, err := Parse("t.yaml", []byte(tuneBase+"tune: {search: [lr, opt], pruner: asha, warmup: 4}\n"))
	require.NoError(t, err)
	require.Equal(t, Tune{Search: []string{"lr", "opt"}, Pruner: "asha", Warmup: 4}, tm.Tune)
	require.Equal(t, []string{"lr", "opt"}, tm.Searchable())

	tm, err = Parse("t.yaml", []byte(tuneBase))
	require.NoError(t, err)
	require.Equal(t, []string{"lr", "n", "opt"}, tm.Searchable(), "without tune: every parameter a study can search")

	for _, c := range []struct{ tune, want string }{
		{"tune: {search: [nope]}", `tune: search names "nope", which is not a parameter`},
		{"tune: {search: [tag]}", "tag is a string"},
		{"tune: {search: [open]}", "open needs both min and max"},
		{"tune: {search: [lr, lr]}", `lists "lr" twice`},
		{"tune: {search: lr}", "search must be a list"},
		{"tune: {pruner: hyperband}", "pruner must be none, median or asha"},
		{"tune: {warmup: -1}", "warmup must be a whole number"},
		{"tune: {prune: median}", `unknown field "prune"`},
		{"tune: median", "tune must be a mapping"},
	} {
		_, err := Parse("t.yaml", []byte(tuneBase+c.tune+"\n"))
		require.ErrorContains(t, err, c.want, c.tune)
	}
}
