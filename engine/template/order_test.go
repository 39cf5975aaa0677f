package template

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func stagesOf(specs ...[]string) []Stage {
	var out []Stage
	for _, s := range specs {
		out = append(out, Stage{Name: s[0], Needs: s[1:], Command: []string{"x"}})
	}
	return out
}

func TestOrder(t *testing.T) {
	cases := []struct {
		name   string
		stages []Stage
		want   []string
	}{
		{"single stage", stagesOf([]string{"a"}), []string{"a"}},
		{"chain in YAML order", stagesOf([]string{"a"}, []string{"b", "a"}, []string{"c", "b"}), []string{"a", "b", "c"}},
		{"chain written backwards", stagesOf([]string{"c", "b"}, []string{"b", "a"}, []string{"a"}), []string{"a", "b", "c"}},
		{"independent stages keep YAML order", stagesOf([]string{"z"}, []string{"a"}, []string{"m"}), []string{"z", "a", "m"}},
		{"diamond", stagesOf([]string{"a"}, []string{"b", "a"}, []string{"c", "a"}, []string{"d", "b", "c"}), []string{"a", "b", "c", "d"}},
		{"diamond with branches in the other YAML order", stagesOf([]string{"a"}, []string{"c", "a"}, []string{"b", "a"}, []string{"d", "b", "c"}), []string{"a", "c", "b", "d"}},
		{"diamond written backwards", stagesOf([]string{"d", "c", "b"}, []string{"c", "a"}, []string{"b", "a"}, []string{"a"}), []string{"a", "c", "b", "d"}},
		{"a ready stage earlier in YAML goes first", stagesOf([]string{"late", "b"}, []string{"a"}, []string{"b", "a"}, []string{"free"}), []string{"a", "b", "late", "free"}},
		{"stage freed later still waits its YAML turn among ready ones", stagesOf([]string{"a"}, []string{"x", "a"}, []string{"b"}), []string{"a", "x", "b"}},
		{"two roots feeding one", stagesOf([]string{"join", "l", "r"}, []string{"r"}, []string{"l"}), []string{"r", "l", "join"}},
		// Hand-built templates Parse would reject still get every stage once.
		{"unknown needs are ignored", stagesOf([]string{"a", "ghost"}, []string{"b", "a"}), []string{"a", "b"}},
		{"self need is ignored", stagesOf([]string{"a", "a"}, []string{"b", "a"}), []string{"a", "b"}},
		{"cycle members follow in YAML order", stagesOf([]string{"a"}, []string{"b", "c"}, []string{"c", "b"}, []string{"d", "a"}), []string{"a", "d", "b", "c"}},
		{"repeated name appears once", stagesOf([]string{"a"}, []string{"a"}, []string{"b", "a"}), []string{"a", "b"}},
		{"no stages", nil, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := &Template{Stages: tc.stages}
			require.Equal(t, tc.want, tp.Order())
		})
	}
}

func TestOrderIsStableAcrossCalls(t *testing.T) {
	tp, err := Parse("t.yaml", []byte(stagesDoc(`  - {name: report, command: [x], needs: [eval, plot]}
  - {name: plot, command: [x], needs: [train]}
  - {name: eval, command: [x], needs: [train]}
  - {name: train, command: [x], needs: [prep]}
  - {name: prep, command: [x]}
  - {name: lint, command: [x]}
`)))
	require.NoError(t, err)
	want := []string{"prep", "train", "plot", "eval", "report", "lint"}
	for range 20 {
		require.Equal(t, want, tp.Order())
	}
}
