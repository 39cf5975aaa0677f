package tuner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxGrid bounds how many combinations one grid may make, so that a typo
// in a range cannot flood the queue.
const MaxGrid = 500

// SweepHint says how to write the values of a sweep of the given kind.
func SweepHint(kind Kind) string {
	switch kind {
	case Int:
		return "values: 32, 64, 128 — or a range: 1..8 or 16..128:16"
	case Float:
		return "values: 0.1, 0.01, 0.001"
	default:
		return "values, separated by commas"
	}
}

// SplitSweep reads the values of a sweep of the parameter called name as
// written: a comma-separated list, or for an Int an inclusive range "a..b"
// with an optional step "a..b:step". It returns the values as text; the
// caller parses each against its schema.
func SplitSweep(name string, kind Kind, text string) ([]string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("%s: give the values to sweep, %s", name, SweepHint(kind))
	}
	if kind == Int && strings.Contains(text, "..") && !strings.Contains(text, ",") {
		lohi, stepText, hasStep := strings.Cut(text, ":")
		a, b, _ := strings.Cut(lohi, "..")
		lo, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
		hi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
		step := int64(1)
		var err3 error
		if hasStep {
			step, err3 = strconv.ParseInt(strings.TrimSpace(stepText), 10, 64)
		}
		if err := errors.Join(err1, err2, err3); err != nil || step <= 0 || hi < lo {
			return nil, fmt.Errorf("%s: %q is not a range: write it as 1..8 or 16..128:16", name, text)
		}
		if uint64(hi-lo)/uint64(step) >= MaxGrid {
			return nil, fmt.Errorf("%s: %q has more than %d values", name, text, MaxGrid)
		}
		var out []string
		for x := lo; ; x += step {
			out = append(out, strconv.FormatInt(x, 10))
			if hi-x < step {
				break
			}
		}
		return out, nil
	}
	var out []string
	for _, s := range strings.Split(text, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: give the values to sweep, %s", name, SweepHint(kind))
	}
	return out, nil
}

// Axis is one parameter's values in a grid, in order.
type Axis struct {
	Name   string
	Values []any
}

// Grid returns every combination of the axes' values on top of base (the
// values of everything else), the first axis varying slowest. A parameter
// that is inactive in a combination (its conditions in s do not hold)
// takes only its first value there, so that a grid never makes two runs
// that differ only in a parameter that does not matter. A condition must
// refer to base or to an earlier axis. More than max combinations is an
// error that says how many there would be.
func Grid(s Space, base Values, axes []Axis, max int) ([]Values, error) {
	out := []Values{base.clone()}
	set := map[string]bool{}
	for k := range base {
		set[k] = true
	}
	for _, ax := range axes {
		if len(ax.Values) == 0 {
			return nil, fmt.Errorf("%s: no values to sweep", ax.Name)
		}
		if p, ok := s.Param(ax.Name); ok {
			for _, c := range p.When {
				if !set[c.Param] {
					return nil, fmt.Errorf("%s: its condition refers to %s, which has no value before it", ax.Name, c.Param)
				}
			}
		}
		var next []Values
		for _, v := range out {
			vals := ax.Values
			if !s.Active(ax.Name, v) {
				vals = vals[:1]
			}
			for _, x := range vals {
				w := v.clone()
				w[ax.Name] = x
				next = append(next, w)
			}
			if len(next) > max {
				return nil, fmt.Errorf("the sweep makes more than %d runs (%s); sweep fewer values", max, gridSize(axes))
			}
		}
		out = next
		set[ax.Name] = true
	}
	return out, nil
}

// gridSize describes the size of a grid for an error message: the product
// of the axes' lengths.
func gridSize(axes []Axis) string {
	parts := make([]string, 0, len(axes))
	n := 1.0
	for _, ax := range axes {
		if len(ax.Values) > 1 {
			parts = append(parts, strconv.Itoa(len(ax.Values)))
			n *= float64(len(ax.Values))
		}
	}
	return fmt.Sprintf("up to %s = %.0f", strings.Join(parts, "×"), n)
}
