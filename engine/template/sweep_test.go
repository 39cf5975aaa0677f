package template

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// conditional is a template with conditions: momentum applies to sgd and
// rmsprop, nesterov to sgd, and dropout2 only with a second layer and
// nesterov (a chain: it needs nesterov to apply, too).
const conditional = `name: cond
params:
  optimizer: {type: choice, default: adam, choices: [adam, sgd, rmsprop]}
  lr:        {type: float, default: 0.01, min: 1e-5, max: 1, log: true}
  momentum:  {type: float, default: 0.9, min: 0, max: 0.99, when: {optimizer: [sgd, rmsprop]}}
  nesterov:  {type: bool, when: {optimizer: sgd}}
  layers:    {type: int, default: 2, min: 1, max: 4}
  dropout2:
    type: float
    default: 0
    min: 0
    max: 0.5
    when:
      layers: [2, 3, 4]
      nesterov: yes
stages: [{name: a, command: [x]}]
`

func TestParseConditions(t *testing.T) {
	tp, err := Parse("c.yaml", []byte(conditional))
	require.NoError(t, err)
	p, _ := tp.Param("momentum")
	require.Equal(t, []Condition{{Param: "optimizer", Values: []string{"sgd", "rmsprop"}, Line: 5}}, p.When)
	p, _ = tp.Param("nesterov")
	require.Equal(t, []Condition{{Param: "optimizer", Values: []string{"sgd"}, Line: 6}}, p.When)
	p, _ = tp.Param("dropout2")
	require.Equal(t, []Condition{
		{Param: "layers", Values: []string{"2", "3", "4"}, Line: 14},
		{Param: "nesterov", Values: []string{"true"}, Line: 15}, // "yes" as FormatValue writes it
	}, p.When)

	v := tp.Defaults() // adam
	require.False(t, tp.Applies("momentum", v))
	require.True(t, tp.Applies("lr", v))
	v["optimizer"] = "rmsprop"
	require.True(t, tp.Applies("momentum", v))
	require.False(t, tp.Applies("nesterov", v))
	v["nesterov"] = true
	require.False(t, tp.Applies("dropout2", v), "nesterov is set but does not apply, so neither does dropout2")
	v["optimizer"] = "sgd"
	require.True(t, tp.Applies("dropout2", v))
	v["layers"] = int64(1)
	require.False(t, tp.Applies("dropout2", v))
}

func TestParseConditionProblems(t *testing.T) {
	doc := func(spec string) string {
		return "name: t\nparams:\n  opt: {type: choice, choices: [adam, sgd]}\n  f: {type: float, default: 1}\n  m: " + spec + "\n  z: {type: bool}\nstages: [{name: a, command: [x]}]\n"
	}
	cases := []struct {
		name, spec string
		line       int
		phrase     string
	}{
		{"not a mapping", "{type: bool, when: sgd}", 5, "when must map other parameters to the values"},
		{"unknown parameter", "{type: bool, when: {optimizer: sgd}}", 5, `parameter "m": when: unknown parameter "optimizer" (parameters are: opt, f, m, z)`},
		{"itself", "{type: bool, when: {m: true}}", 5, "cannot depend on itself"},
		{"declared below", "{type: bool, when: {z: true}}", 5, "z is declared below m; declare it above"},
		{"a float", "{type: bool, when: {f: 1}}", 5, "f is a float, which cannot be compared exactly"},
		{"not a choice", "{type: bool, when: {opt: adamw}}", 5, `opt: "adamw" is not a value opt can take (opt is one of: adam, sgd)`},
		{"no values", "{type: bool, when: {opt: []}}", 5, "when: opt needs a value or a list of values"},
		{"a mapping as value", "{type: bool, when: {opt: [{a: b}]}}", 5, "when: opt must list single values, not a mapping"},
		{"twice", "{type: bool, when: {opt: [sgd, sgd]}}", 5, `opt: "sgd" is listed twice`},
		{"block list value line", "\n    type: bool\n    when:\n      opt:\n        - sgd\n        - adamw", 10, `"adamw" is not a value opt can take`},
		{"typo in the field", "{type: bool, wehn: {opt: sgd}}", 5, `unknown field "wehn"; did you mean "when"?`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(doc(c.spec)))
			require.Error(t, err)
			var found bool
			for _, p := range err.(*ValidationError).Problems {
				if strings.Contains(p.Msg, c.phrase) {
					require.Equal(t, c.line, p.Line, "line of %q", p.Msg)
					found = true
				}
			}
			require.True(t, found, "want %q in:\n%v", c.phrase, err)
		})
	}
}

func TestSpaceFromTemplate(t *testing.T) {
	tp, err := Parse("c.yaml", []byte(conditional))
	require.NoError(t, err)
	s := tp.Space("optimizer", "lr", "momentum")
	require.Equal(t, []string{"optimizer", "lr", "momentum"}, s.Names())
	require.NoError(t, s.Searchable())
	m, _ := s.Param("momentum")
	require.Equal(t, 0.0, m.Min)
	require.Equal(t, 0.99, m.Max)
	require.Equal(t, 0.9, m.Default)
	require.Len(t, m.When, 1)
	lr, _ := s.Param("lr")
	require.True(t, lr.Log)

	// A parameter without bounds can be listed in a grid, never searched.
	tp, err = Parse("u.yaml", []byte("name: u\nparams: {n: {type: int, default: 3}}\nstages: [{name: a, command: [x]}]\n"))
	require.NoError(t, err)
	require.NoError(t, tp.Space().Validate())
	require.ErrorContains(t, tp.Space().Searchable(), "n: a searched int needs both bounds")
}

func TestParseSweep(t *testing.T) {
	tp, err := Parse("c.yaml", []byte(conditional))
	require.NoError(t, err)
	got, err := tp.ParseSweep("layers", "1..4:2")
	require.NoError(t, err)
	require.Equal(t, []string{"1", "3"}, got)
	got, err = tp.ParseSweep("lr", "1e-3, 0.001, 1e-2")
	require.NoError(t, err)
	require.Equal(t, []string{"1e-3", "1e-2"}, got, "the same number twice is one value")
	_, err = tp.ParseSweep("lr", "1e-3, 3")
	require.EqualError(t, err, "lr: 3 is above the maximum (lr is a float between 1e-05 and 1)")
	_, err = tp.ParseSweep("layers", "1..x")
	require.ErrorContains(t, err, `layers: "1..x" is not a range`)
	_, err = tp.ParseSweep("lrr", "1")
	require.ErrorContains(t, err, `unknown parameter "lrr"`)
	_, err = tp.ParseSweep("lr", " ")
	require.ErrorContains(t, err, "lr: give the values to sweep")
}

func TestSweep(t *testing.T) {
	tp, err := Parse("c.yaml", []byte(conditional))
	require.NoError(t, err)
	runs, err := tp.Sweep(map[string]string{"lr": "0.1"}, map[string][]string{
		"optimizer": {"adam", "sgd"},
		"momentum":  {"0.5", "0.9"},
		"layers":    {"1", "2"},
	})
	require.NoError(t, err)
	// adam: momentum does not apply, so it is not swept there:
	// 1 (adam) × 2 layers + 2 momenta × 2 layers (sgd) = 6 runs, not 8.
	var got []string
	for _, v := range runs {
		require.NoError(t, tp.Validate(v))
		require.Equal(t, 0.1, v["lr"])
		got = append(got, FormatValue(v["optimizer"])+" m="+FormatValue(v["momentum"])+" l="+FormatValue(v["layers"]))
	}
	require.Equal(t, []string{
		"adam m=0.5 l=1", "adam m=0.5 l=2",
		"sgd m=0.5 l=1", "sgd m=0.5 l=2", "sgd m=0.9 l=1", "sgd m=0.9 l=2",
	}, got)

	_, err = tp.Sweep(map[string]string{"lr": "0.1"}, map[string][]string{"lr": {"0.1", "0.2"}})
	require.ErrorContains(t, err, "lr: it is both set and swept")
	_, err = tp.Sweep(nil, map[string][]string{"nope": {"1"}})
	require.ErrorContains(t, err, `unknown parameter "nope"`)
	_, err = tp.Sweep(nil, map[string][]string{"layers": {"1", "9"}})
	require.ErrorContains(t, err, "layers: 9 is above the maximum")

	// Too many runs: the error says so before anything is made.
	lrs, layers := []string{}, []string{"1", "2", "3", "4"}
	for i := 1; i <= 200; i++ {
		lrs = append(lrs, FormatValue(float64(i)/1000))
	}
	_, err = tp.Sweep(nil, map[string][]string{"lr": lrs, "layers": layers, "optimizer": {"adam", "sgd"}})
	require.ErrorContains(t, err, "the sweep makes more than 500 runs (up to 2×200×4 = 1600)")
}
