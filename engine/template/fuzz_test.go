package template

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse checks that Parse never panics, that everything it rejects
// comes back as one-line problems naming the file, and that everything it
// accepts is usable: an acyclic Order covering every stage, defaults that
// pass Validate and survive the CLI-string and JSON round trips, and
// commands whose references all expand.
func FuzzParse(f *testing.F) {
	seeds := []string{
		example,
		strings.Replace(example, "needs: [preprocess]", "needs: [analyze]", 1), // cycle
		strings.Replace(example, "needs: [train]", "need: [train]", 1),         // typo
		strings.Replace(example, "needs: [validate]", "needs: [prep]", 1),      // unknown stage
		strings.Replace(example, "default: 0.01", "default: 5", 1),             // out of range
		strings.Replace(example, "min: 0.00001", "min: 0", 1),                  // log with min 0
		strings.Replace(example, "gpu_memory: 2GiB", "gpu_memory: 2 gigs", 1),  // bad size
		strings.Replace(example, "timeout: 30m", "timeout: 30", 1),             // no unit
		strings.Replace(example, "${params.lr}", "${params.lrr}", 1),           // unknown param
		strings.Replace(example, "${code}/train.py", "${code/train.py", 1),     // unterminated
		strings.Replace(example, "kind: local", "kind: docker", 1),             // docker without image
		strings.Replace(example, "command: [/usr/bin/python3, \"${code}/validate.py\"]", "command: []", 1),
		strings.Replace(example, "  - name: analyze", "  - name: train", 1), // duplicate stage
		strings.Replace(example, "choices: [adam, sgd]", "choices: []", 1),  // no choices
		strings.Replace(example, "    gpus: 0", "\tgpus: 0", 1),             // tab
		example[:len(example)/2], // truncated
		"",
		"name: t\nstages: [{name: a, command: [x]}]\n",
		"name: t\nstages:\n  - &s {name: a, command: [x, '${seed}'], retries: 1}\n  - {<<: *s, name: b, needs: [a]}\n",
		"name: t\nstages:\n  - {name: a, command: [x], needs: [c]}\n  - {name: b, command: [x], needs: [a]}\n  - {name: c, command: [x], needs: [b]}\n",
		"a: &a [*a]\n",
		"name: t\nx: &x {<<: *x}\n",
		"name: t\nstages: [{name: a, command: [x], <<: [{retries: 1}, {gpus: 2}]}]\n",
		"name: t\nparams: {p: {type: int, default: 9007199254740993, max: 9007199254740992}}\nstages: [{name: a, command: [\"${params.p}\"]}]\n",
		"name: t\nparams: {p: {type: float, default: -0, min: -0, max: 0}}\nstages: [{name: a, command: [x]}]\n",
		"name: t\n---\nname: u\n",
		"- 1\n- 2\n",
		"name: t\nstages: [{name: a, command: [x], env: {A: \"$$${run_dir}\"}}]\n",
		// More accepted shapes, so mutations explore the accepting paths.
		"name: t\nruntime: {kind: docker, image: img}\nobjective: {metric: loss, goal: min}\nparams:\n  f: {type: float, default: 1e-3, min: 1e-9, log: true}\n  i: {type: int, default: -3, max: 0}\n  b: {type: bool, default: yes}\n  c: {type: choice, choices: [x, y, z]}\n  s: {type: string, default: hi}\nstages:\n  - {name: z, command: [\"${params.f}\", \"${params.i}${params.b}\", \"${params.c}$$${params.s}\"], gpus: 8, gpu_memory: 80GB, timeout: 1h30m}\n  - {name: y, needs: z, command: [x], env: {A: \"${stage_dir}\"}}\n",
		"name: t\nstages:\n  - {name: d, command: [x], needs: [b, c]}\n  - {name: c, command: [x], needs: [a]}\n  - {name: b, command: [x], needs: [a]}\n  - {name: a, command: [x]}\n",
		"name: t\nstages:\n  - &d {name: a, command: [x], retries: 2}\n  - {<<: *d, name: b, timeout: 5m}\n",
		"name: t\nparams:\n  o: {type: choice, choices: [a, b, c]}\n  m: {type: float, default: 0.9, min: 0, max: 1, when: {o: [b, c]}}\n  n: {type: bool, when: {o: b}}\n  k: {type: int, default: 1, min: 1, max: 3, when: {n: yes, o: [b]}}\nstages: [{name: a, command: [x, \"${params.m}\"]}]\n",
		"name: t\nparams:\n  o: {type: choice, choices: [a, b]}\n  m:\n    type: int\n    default: 2\n    when:\n      o:\n        - b\n        - a\nstages: [{name: a, command: [x]}]\n",
		"name: t\nparams:\n  m: {type: int, default: 2, when: {o: b}}\n  o: {type: choice, choices: [a, b]}\nstages: [{name: a, command: [x]}]\n", // condition on a later parameter
		"name: t\nruntime: {kind: docker, image: i, shm_size: 2GiB, memory: 16m, cpus: 1.5, user: \"1000:1000\", network: none, keep: true, cap_add: [SYS_PTRACE]}\nstages: [{name: a, command: [x]}]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := Parse("f.yaml", data)
		if err != nil {
			require.Nil(t, tp)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "rejections are *ValidationError: %v", err)
			require.NotEmpty(t, ve.Problems)
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, len(ve.Problems), "one line per problem")
			for _, l := range lines {
				require.True(t, strings.HasPrefix(l, "f.yaml:"), "names the file: %q", l)
			}
			return
		}
		require.NotNil(t, tp)
		require.NotEmpty(t, tp.Name)
		require.NotEmpty(t, tp.Stages)

		// Order: every stage exactly once, each after all of its needs.
		order := tp.Order()
		require.Len(t, order, len(tp.Stages))
		pos := map[string]int{}
		for i, name := range order {
			_, dup := pos[name]
			require.False(t, dup, "stage %q ordered twice", name)
			pos[name] = i
		}
		for _, s := range tp.Stages {
			require.NotEmpty(t, s.Command)
			for _, n := range s.Needs {
				pn, ok := pos[n]
				require.True(t, ok, "stage %q needs %q, which is not a stage", s.Name, n)
				require.Less(t, pn, pos[s.Name], "stage %q is ordered before its need %q", s.Name, n)
			}
		}

		// Defaults are valid and survive the round trips.
		d := tp.Defaults()
		require.NoError(t, tp.Validate(d))
		r, err := tp.Resolve(nil)
		require.NoError(t, err)
		require.Equal(t, d, r)
		r, err = tp.Resolve(d.Strings())
		require.NoError(t, err, "defaults as CLI strings: %v", d.Strings())
		require.Equal(t, d, r)
		js, err := d.JSON()
		require.NoError(t, err)
		back, err := ValuesFromJSON(tp, js)
		require.NoError(t, err, "JSON %s", js)
		require.Equal(t, d, back)
		n, err := tp.Normalize(nil)
		require.NoError(t, err)
		require.Equal(t, d, n)

		// Every reference in commands and env expands.
		vars := d.ParamVars()
		for _, name := range EngineVars {
			vars[name] = name
		}
		for _, s := range tp.Stages {
			for _, a := range s.Command {
				_, err := Expand(a, vars)
				require.NoError(t, err)
			}
			for _, v := range s.Env {
				_, err := Expand(v, vars)
				require.NoError(t, err)
			}
		}

		// Conditions name parameters declared above, with values they can
		// take; the space is well formed; a sweep of nothing, or of
		// every default, is the one run of the defaults.
		for i, p := range tp.Params {
			for _, c := range p.When {
				j := slices.IndexFunc(tp.Params, func(q Param) bool { return q.Name == c.Param })
				require.True(t, j >= 0 && j < i, "%s depends on %s, declared above it", p.Name, c.Param)
				require.NotEmpty(t, c.Values)
				for _, v := range c.Values {
					_, err := tp.Resolve(map[string]string{c.Param: v})
					require.NoError(t, err)
				}
			}
		}
		require.NoError(t, tp.Space().Validate())
		runs, err := tp.Sweep(nil, nil)
		require.NoError(t, err)
		require.Equal(t, []Values{d}, runs)
		single := map[string][]string{}
		for k, v := range d.Strings() {
			single[k] = []string{v}
		}
		runs, err = tp.Sweep(nil, single)
		require.NoError(t, err)
		require.Equal(t, []Values{d}, runs)

		// Parsing is deterministic.
		again, err := Parse("f.yaml", tp.YAML)
		require.NoError(t, err)
		require.Equal(t, tp, again)
	})
}

// FuzzParamSpec builds one parameter from fuzzed field texts and checks,
// for every spec Parse accepts, that its default is valid and that any
// value Resolve accepts passes Validate and survives the CLI-string and
// JSON round trips.
func FuzzParamSpec(f *testing.F) {
	f.Add("float", "0.01", "0.00001", "1", true, "", "0.5")
	f.Add("int", "64", "8", "1024", false, "", "1e3")
	f.Add("int", "9007199254740993", "", "9007199254740992", false, "", "9007199254740993")
	f.Add("float", "-0", "-0", "0", false, "", "-0")
	f.Add("bool", "yes", "", "", false, "", "off")
	f.Add("choice", "sgd", "", "", false, "adam,sgd", "adam")
	f.Add("choice", "", "", "", false, "a,b,a", "b")
	f.Add("string", "", "", "", false, "", "${code}")
	f.Add("float", "1e308", "", "", false, "", "1e309")
	f.Add("int", "-9223372036854775808", "", "", false, "", "9223372036854775807")
	f.Fuzz(func(t *testing.T, typ, def, min, max string, log bool, choices, set string) {
		var b strings.Builder
		b.WriteString("name: t\nparams:\n  p:\n    type: " + strconv.Quote(typ) + "\n")
		if def != "" {
			b.WriteString("    default: " + strconv.Quote(def) + "\n")
		}
		if min != "" {
			b.WriteString("    min: " + strconv.Quote(min) + "\n")
		}
		if max != "" {
			b.WriteString("    max: " + strconv.Quote(max) + "\n")
		}
		if log {
			b.WriteString("    log: true\n")
		}
		if choices != "" {
			b.WriteString("    choices: [")
			for i, c := range strings.Split(choices, ",") {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(strconv.Quote(c))
			}
			b.WriteString("]\n")
		}
		b.WriteString("stages: [{name: a, command: [x, \"${params.p}\"]}]\n")

		tp, err := Parse("f.yaml", []byte(b.String()))
		if err != nil {
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			return
		}
		p, ok := tp.Param("p")
		require.True(t, ok)
		if p.Log {
			require.NotNil(t, p.Min)
			require.Greater(t, *p.Min, 0.0)
		}
		d := tp.Defaults()
		require.NoError(t, tp.Validate(d))

		v, err := tp.Resolve(map[string]string{"p": set})
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "p: "), err.Error())
			return
		}
		require.NoError(t, tp.Validate(v))
		again, err := tp.Resolve(v.Strings())
		require.NoError(t, err, "%v", v.Strings())
		require.Equal(t, v, again)
		js, err := v.JSON()
		require.NoError(t, err)
		back, err := ValuesFromJSON(tp, js)
		require.NoError(t, err, "%s", js)
		require.Equal(t, v, back)
		n, err := tp.Normalize(v)
		require.NoError(t, err)
		require.Equal(t, v, n)
		_, err = Expand("${params.p}", v.ParamVars())
		require.NoError(t, err)
	})
}
