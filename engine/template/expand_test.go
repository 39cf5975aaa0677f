package template

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{
		"code":      "/opt/t",
		"run_dir":   "/runs/42",
		"params.lr": "0.01",
		"empty":     "",
		"dollar":    "${code}",
	}
	cases := []struct {
		name    string
		arg     string
		want    string
		wantErr string
	}{
		{name: "no references", arg: "train.py", want: "train.py"},
		{name: "empty argument", arg: "", want: ""},
		{name: "whole argument", arg: "${params.lr}", want: "0.01"},
		{name: "inside text", arg: "${code}/train.py", want: "/opt/t/train.py"},
		{name: "several", arg: "--out=${run_dir}/lr-${params.lr}", want: "--out=/runs/42/lr-0.01"},
		{name: "adjacent", arg: "${code}${run_dir}", want: "/opt/t/runs/42"},
		{name: "empty value", arg: "a${empty}b", want: "ab"},
		{name: "replacement is not expanded again", arg: "${dollar}", want: "${code}"},
		{name: "double dollar is a literal dollar", arg: "cost$$", want: "cost$"},
		{name: "escaped reference stays literal", arg: "$${code}", want: "${code}"},
		{name: "triple dollar then reference", arg: "$$${code}", want: "$/opt/t"},
		{name: "lone dollar is kept", arg: "$HOME and $", want: "$HOME and $"},
		{name: "dollar before closing brace", arg: "a$}", want: "a$}"},
		{name: "unicode around", arg: "→${code}←", want: "→/opt/t←"},

		{name: "unknown variable", arg: "${workdir}/x", wantErr: `unknown variable ${workdir} in "${workdir}/x"`},
		{name: "unknown parameter", arg: "${params.lrr}", wantErr: "unknown variable ${params.lrr}"},
		{name: "unterminated", arg: "a${code", wantErr: `unterminated "${" in "a${code"`},
		{name: "empty name", arg: "${}", wantErr: `empty ${} in "${}"`},
		{name: "nested braces name the inner text", arg: "${a${b}}", wantErr: "unknown variable ${a${b}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Expand(tc.arg, vars)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReferences(t *testing.T) {
	names, err := References("$${skip} ${code}/${params.lr}-$x-${seed}")
	require.NoError(t, err)
	require.Equal(t, []string{"code", "params.lr", "seed"}, names)

	names, err = References("plain")
	require.NoError(t, err)
	require.Empty(t, names)

	_, err = References("${oops")
	require.Error(t, err)
}

// TestExpandStageCommand shows how the engine puts the pieces together.
func TestExpandStageCommand(t *testing.T) {
	tp := exampleTemplate(t)
	v, err := tp.Resolve(map[string]string{"lr": "0.1"})
	require.NoError(t, err)
	vars := v.ParamVars()
	for _, name := range EngineVars {
		vars[name] = "<" + name + ">"
	}
	s, ok := tp.Stage("train")
	require.True(t, ok)
	var argv []string
	for _, a := range s.Command {
		x, err := Expand(a, vars)
		require.NoError(t, err)
		argv = append(argv, x)
	}
	require.Equal(t, []string{"/usr/bin/python3", "<code>/train.py", "--lr", "0.1"}, argv)
}
