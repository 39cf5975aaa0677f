package tuner

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSpaceValidate(t *testing.T) {
	cases := []struct {
		name  string
		space Space
		err   string
	}{
		{"ok", benchSpace, ""},
		{"no name", Space{Params: []Param{{Kind: Bool}}}, "parameter 1 has no name"},
		{"twice", Space{Params: []Param{{Name: "a", Kind: Bool}, {Name: "a", Kind: Bool}}}, `parameter "a" is listed twice`},
		{"min above max", Space{Params: []Param{{Name: "a", Kind: Float, Min: 2, Max: 1}}}, "a: min 2 is above max 1"},
		{"log from 0", Space{Params: []Param{{Name: "a", Kind: Float, Min: 0, Max: 1, Log: true}}}, "a: a log scale needs min above 0"},
		{"int bounds", Space{Params: []Param{{Name: "a", Kind: Int, Min: 0.5, Max: 3}}}, "a: an int's bounds must be whole numbers"},
		{"no choices", Space{Params: []Param{{Name: "a", Kind: Choice}}}, "a: a choice needs at least one choice"},
		{"bad kind", Space{Params: []Param{{Name: "a", Kind: "complex"}}}, `a: unknown kind "complex"`},
		{"default outside", Space{Params: []Param{{Name: "a", Kind: Float, Min: 0, Max: 1, Default: 2.0}}}, "default: a: 2 is not a float in [0, 1]"},
		{"condition on itself", Space{Params: []Param{{Name: "a", Kind: Bool, When: []Condition{{Param: "a", Values: []string{"true"}}}}}}, "a: its condition refers to itself"},
		{"condition on a later one", Space{Params: []Param{
			{Name: "m", Kind: Bool, When: []Condition{{Param: "o", Values: []string{"sgd"}}}},
			{Name: "o", Kind: Choice, Choices: []string{"sgd"}},
		}}, "m: its condition refers to o, which comes after it"},
		{"condition without values", Space{Params: []Param{{Name: "a", Kind: Bool, When: []Condition{{Param: "fixed"}}}}}, "a: its condition on fixed lists no values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.space.Validate()
			if c.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.err)
		})
	}
	open := Space{Params: []Param{{Name: "n", Kind: Int, Min: 1, Max: math.Inf(1)}}}
	require.NoError(t, open.Validate(), "a grid may list an unbounded parameter")
	require.ErrorContains(t, open.Searchable(), "n: a searched int needs both bounds")
	require.ErrorContains(t, Space{Params: []Param{{Name: "s", Kind: String}}}.Searchable(), "s: a string parameter cannot be searched")
	require.ErrorContains(t, Space{}.Searchable(), "no parameters to search")
}

func TestActiveFollowsChains(t *testing.T) {
	s := Space{Params: []Param{
		{Name: "opt", Kind: Choice, Choices: []string{"adam", "sgd"}},
		{Name: "nesterov", Kind: Bool, When: []Condition{{Param: "opt", Values: []string{"sgd"}}}},
		{Name: "lookahead", Kind: Int, Min: 1, Max: 9, When: []Condition{{Param: "nesterov", Values: []string{"true"}}, {Param: "layers", Values: []string{"2", "3"}}}},
	}}
	require.NoError(t, s.Validate())
	v := Values{"opt": "adam", "nesterov": true, "layers": int64(2)}
	require.True(t, s.Active("opt", v))
	require.True(t, s.Active("layers", v), "a fixed parameter is always active")
	require.False(t, s.Active("nesterov", v))
	require.False(t, s.Active("lookahead", v), "nesterov is true but does not apply")
	v["opt"] = "sgd"
	require.True(t, s.Active("lookahead", v))
	v["layers"] = int64(1)
	require.False(t, s.Active("lookahead", v))
	delete(v, "layers")
	require.False(t, s.Active("lookahead", v), "a missing value never satisfies a condition")
}

func TestSplitSweep(t *testing.T) {
	cases := []struct {
		kind Kind
		in   string
		want []string
		err  string
	}{
		{Int, "1, 2 ,3", []string{"1", "2", "3"}, ""},
		{Int, "1..4", []string{"1", "2", "3", "4"}, ""},
		{Int, "16..64:16", []string{"16", "32", "48", "64"}, ""},
		{Int, "1..10:4", []string{"1", "5", "9"}, ""},
		{Int, "-2..2:2", []string{"-2", "0", "2"}, ""},
		{Int, "7..7", []string{"7"}, ""},
		{Float, "1e-3, ,1e-2,", []string{"1e-3", "1e-2"}, ""},
		{Float, "1..4", []string{"1..4"}, ""}, // not a range for a float: the template rejects the value
		{Choice, "a,b", []string{"a", "b"}, ""},
		{Int, "", nil, "n: give the values to sweep, values: 32, 64, 128 — or a range: 1..8 or 16..128:16"},
		{Float, " , ", nil, "n: give the values to sweep, values: 0.1, 0.01, 0.001"},
		{Int, "8..1", nil, `n: "8..1" is not a range: write it as 1..8 or 16..128:16`},
		{Int, "1..8:0", nil, "is not a range"},
		{Int, "1..x", nil, "is not a range"},
		{Int, "1..100000", nil, `n: "1..100000" has more than 500 values`},
		{Int, "-9223372036854775808..9223372036854775807", nil, "has more than 500 values"},
	}
	for _, c := range cases {
		got, err := SplitSweep("n", c.kind, c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}

func TestGrid(t *testing.T) {
	s := Space{Params: []Param{
		{Name: "opt", Kind: Choice, Choices: []string{"adam", "sgd"}},
		{Name: "momentum", Kind: Float, Min: 0, Max: 1, When: []Condition{{Param: "opt", Values: []string{"sgd"}}}},
		{Name: "layers", Kind: Int, Min: 1, Max: 4},
	}}
	axes := []Axis{
		{Name: "opt", Values: []any{"adam", "sgd"}},
		{Name: "momentum", Values: []any{0.5, 0.9}},
		{Name: "layers", Values: []any{int64(1), int64(2)}},
	}
	got, err := Grid(s, Values{"lr": 0.1}, axes, MaxGrid)
	require.NoError(t, err)
	// adam × (momentum does not apply: its first value) × 2 layers, then
	// sgd × 2 momenta × 2 layers: the last axis varies fastest.
	require.Equal(t, []Values{
		{"lr": 0.1, "opt": "adam", "momentum": 0.5, "layers": int64(1)},
		{"lr": 0.1, "opt": "adam", "momentum": 0.5, "layers": int64(2)},
		{"lr": 0.1, "opt": "sgd", "momentum": 0.5, "layers": int64(1)},
		{"lr": 0.1, "opt": "sgd", "momentum": 0.5, "layers": int64(2)},
		{"lr": 0.1, "opt": "sgd", "momentum": 0.9, "layers": int64(1)},
		{"lr": 0.1, "opt": "sgd", "momentum": 0.9, "layers": int64(2)},
	}, got)

	_, err = Grid(s, nil, axes[1:], MaxGrid)
	require.EqualError(t, err, "momentum: its condition refers to opt, which has no value before it")
	_, err = Grid(s, nil, []Axis{{Name: "layers"}}, MaxGrid)
	require.EqualError(t, err, "layers: no values to sweep")
	_, err = Grid(s, nil, axes, 5)
	require.EqualError(t, err, "the sweep makes more than 5 runs (up to 2×2×2 = 8); sweep fewer values")
	none, err := Grid(s, Values{"opt": "adam"}, nil, MaxGrid)
	require.NoError(t, err)
	require.Equal(t, []Values{{"opt": "adam"}}, none, "no axes: one run of the base values")
}

func TestEncoderRoundTrip(t *testing.T) {
	s := Space{Params: []Param{
		{Name: "lr", Kind: Float, Min: 1e-5, Max: 1, Log: true},
		{Name: "bs", Kind: Int, Min: 4, Max: 256, Log: true},
		{Name: "depth", Kind: Int, Min: 1, Max: 3},
		{Name: "opt", Kind: Choice, Choices: []string{"adam", "sgd"}},
		{Name: "momentum", Kind: Float, Min: 0, Max: 0.99, Default: 0.9, When: []Condition{{Param: "opt", Values: []string{"sgd"}}}},
		{Name: "bn", Kind: Bool},
	}}
	e := newEncoder(s, nil)
	v := Values{"lr": 3e-3, "bs": int64(64), "depth": int64(3), "opt": "sgd", "momentum": 0.5, "bn": true}
	x := e.encode(v)
	for i, u := range x {
		if !e.cat[i] {
			require.True(t, u >= 0 && u <= 1, "coordinate %d = %g", i, u)
		}
	}
	back := e.decode(append([]float64(nil), x...))
	require.InDelta(t, 3e-3, back["lr"].(float64), 1e-12)
	back["lr"] = 3e-3
	require.Equal(t, v, back)

	// Inactive: momentum keeps its default whatever the point says.
	v["opt"] = "adam"
	x = e.encode(v)
	require.Equal(t, 0.9, e.decode(x)["momentum"])
	y := append([]float64(nil), x...)
	y[4] = 0.1
	require.Equal(t, 0.9, e.decode(y)["momentum"])
	require.Equal(t, x, y, "decode makes the point canonical")

	// Every int of a range gets an equal share of the unit interval.
	counts := map[int64]int{}
	for i := 0; i < 3000; i++ {
		counts[value(s.Params[2], (float64(i)+0.5)/3000).(int64)]++
	}
	require.Equal(t, map[int64]int{1: 1000, 2: 1000, 3: 1000}, counts)
}
