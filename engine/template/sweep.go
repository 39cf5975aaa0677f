package template

import (
	"errors"
	"fmt"
	"math"

	"niuma/tuner"
)

// Space returns the parameters called names (all of them when none are
// named) as a tuner search space, with their bounds, scales, choices,
// defaults and conditions. A numeric parameter without a bound gets an
// infinite one, which a grid accepts and a search refuses.
func (t *Template) Space(names ...string) tuner.Space {
	var s tuner.Space
	for _, p := range t.Params {
		if len(names) > 0 && !contains(names, p.Name) {
			continue
		}
		q := tuner.Param{Name: p.Name, Kind: tuner.Kind(p.Type), Min: math.Inf(-1), Max: math.Inf(1), Log: p.Log,
			Choices: p.Choices, Default: p.Default}
		if p.Min != nil {
			q.Min = *p.Min
		}
		if p.Max != nil {
			q.Max = *p.Max
		}
		for _, c := range p.When {
			q.When = append(q.When, tuner.Condition{Param: c.Param, Values: c.Values})
		}
		s.Params = append(s.Params, q)
	}
	return s
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// Applies reports whether parameter name matters for values v: its when:
// conditions hold (and those of the parameters they name).
func (t *Template) Applies(name string, v Values) bool {
	return t.Space().Active(name, tuner.Values(v))
}

// ParseSweep reads the values of a sweep of parameter name as the wizard
// and `niuma run --sweep NAME=...` take them: "a, b, c", or for an int an
// inclusive range "a..b" or "a..b:step". Each value is checked against the
// schema; repeats are dropped. The values come back as text that Resolve
// reads.
func (t *Template) ParseSweep(name, text string) ([]string, error) {
	p, ok := t.Param(name)
	if !ok {
		return nil, t.unknownParam(name)
	}
	raw, err := tuner.SplitSweep(name, tuner.Kind(p.Type), text)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range raw {
		x, err := parseValue(p, s)
		if err == nil {
			err = checkValue(p, x)
		}
		if err != nil {
			return nil, err
		}
		if k := FormatValue(x); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// Sweep turns single values (sets, as --set gives them) and swept ones
// (sweeps: several values per parameter, as ParseSweep returns them) into
// the values of each run: every combination, in the template's parameter
// order with the last parameter varying fastest. A parameter that does
// not apply in a combination (its when: does not hold) is not swept
// there: it keeps its first listed value, so that no two runs differ only
// in a parameter that does not matter. More than tuner.MaxGrid runs is an
// error. The wizard and the CLI both launch sweeps through here.
func (t *Template) Sweep(sets map[string]string, sweeps map[string][]string) ([]Values, error) {
	var errs []error
	for _, name := range sortedKeys(sweeps) {
		if _, ok := t.Param(name); !ok {
			errs = append(errs, t.unknownParam(name))
		} else if _, both := sets[name]; both {
			errs = append(errs, fmt.Errorf("%s: it is both set and swept; give one value or a sweep", name))
		}
	}
	base, err := t.Resolve(sets)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var axes []tuner.Axis
	for _, p := range t.Params {
		texts, ok := sweeps[p.Name]
		if !ok {
			continue
		}
		if len(texts) == 0 {
			return nil, fmt.Errorf("%s: give the values to sweep, %s", p.Name, tuner.SweepHint(tuner.Kind(p.Type)))
		}
		ax := tuner.Axis{Name: p.Name}
		seen := map[string]bool{}
		for _, s := range texts {
			x, err := parseValue(p, s)
			if err == nil {
				err = checkValue(p, x)
			}
			if err != nil {
				return nil, err
			}
			if k := FormatValue(x); !seen[k] {
				seen[k] = true
				ax.Values = append(ax.Values, x)
			}
		}
		axes = append(axes, ax)
	}
	grid, err := tuner.Grid(t.Space(), tuner.Values(base), axes, tuner.MaxGrid)
	if err != nil {
		return nil, err
	}
	out := make([]Values, len(grid))
	for i, v := range grid {
		out[i] = Values(v)
	}
	return out, nil
}
