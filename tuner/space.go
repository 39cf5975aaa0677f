package tuner

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kind is the type of a searched parameter. The names match the template
// schema's types.
type Kind string

// The parameter kinds. String parameters can only be listed in a grid:
// there is no space to sample them from.
const (
	Float  Kind = "float"
	Int    Kind = "int"
	Choice Kind = "choice"
	Bool   Kind = "bool"
	String Kind = "string"
)

// Values maps parameter names to values: float64 for Float, int64 for Int,
// string for Choice and String, bool for Bool (as template.Values does).
type Values map[string]any

// Param is one parameter of a search space.
type Param struct {
	Name     string
	Kind     Kind
	Min, Max float64  // Float and Int: the bounds, inclusive
	Log      bool     // Float and Int: search in log space (needs Min > 0)
	Choices  []string // Choice
	// Default is the value the parameter keeps when it is inactive (and the
	// template's default in general).
	Default any
	// When lists the conditions under which the parameter matters; all
	// must hold. An inactive parameter keeps its Default and is not
	// searched.
	When []Condition
}

// Condition makes a parameter active only when another parameter (one
// listed before it) has one of the given values, written as FormatValue
// writes them ("sgd", "true").
type Condition struct {
	Param  string
	Values []string
}

// Space is the parameters a search varies, in order. Conditions may refer
// to parameters outside the space (fixed for the search): their values
// come from the fixed values a caller gives.
type Space struct {
	Params []Param
}

// Param returns the parameter called name.
func (s Space) Param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Names returns the parameters' names in order.
func (s Space) Names() []string {
	out := make([]string, len(s.Params))
	for i, p := range s.Params {
		out[i] = p.Name
	}
	return out
}

// Validate checks that the space is well formed: unique names, numeric
// bounds in order (above 0 for log; infinite ones are allowed for a
// grid), choices present, defaults inside the space, conditions that
// refer to a parameter listed earlier. Every problem is reported.
func (s Space) Validate() error {
	var errs []error
	seen := map[string]int{}
	for i, p := range s.Params {
		if p.Name == "" {
			errs = append(errs, fmt.Errorf("parameter %d has no name", i+1))
		}
		if _, dup := seen[p.Name]; dup {
			errs = append(errs, fmt.Errorf("parameter %q is listed twice", p.Name))
		}
		seen[p.Name] = i
		switch p.Kind {
		case Float, Int:
			switch {
			case math.IsNaN(p.Min) || math.IsNaN(p.Max):
				errs = append(errs, fmt.Errorf("%s: its bounds are not numbers", p.Name))
			case p.Min > p.Max:
				errs = append(errs, fmt.Errorf("%s: min %g is above max %g", p.Name, p.Min, p.Max))
			case p.Log && p.Min <= 0:
				errs = append(errs, fmt.Errorf("%s: a log scale needs min above 0, not %g", p.Name, p.Min))
			case p.Kind == Int && (!whole(p.Min) || !whole(p.Max)):
				errs = append(errs, fmt.Errorf("%s: an int's bounds must be whole numbers (%g..%g)", p.Name, p.Min, p.Max))
			}
		case Choice:
			if len(p.Choices) == 0 {
				errs = append(errs, fmt.Errorf("%s: a choice needs at least one choice", p.Name))
			}
		case Bool, String:
		default:
			errs = append(errs, fmt.Errorf("%s: unknown kind %q", p.Name, p.Kind))
		}
		if p.Default != nil && p.Kind != String {
			if err := p.check(p.Default); err != nil {
				errs = append(errs, fmt.Errorf("default: %w", err))
			}
		}
		for _, c := range p.When {
			switch {
			case c.Param == p.Name:
				errs = append(errs, fmt.Errorf("%s: its condition refers to itself", p.Name))
			case slices.ContainsFunc(s.Params[i+1:], func(q Param) bool { return q.Name == c.Param }):
				errs = append(errs, fmt.Errorf("%s: its condition refers to %s, which comes after it; list %s first", p.Name, c.Param, c.Param))
			case len(c.Values) == 0:
				errs = append(errs, fmt.Errorf("%s: its condition on %s lists no values", p.Name, c.Param))
			}
		}
	}
	return errors.Join(errs...)
}

// Searchable reports whether random and Bayesian search can sample the
// space: Validate passes, every number has finite bounds and no parameter
// is a String.
func (s Space) Searchable() error {
	if err := s.Validate(); err != nil {
		return err
	}
	for _, p := range s.Params {
		switch {
		case p.Kind == String:
			return fmt.Errorf("%s: a string parameter cannot be searched; list its values in a sweep or fix it", p.Name)
		case (p.Kind == Float || p.Kind == Int) && (math.IsInf(p.Min, 0) || math.IsInf(p.Max, 0)):
			return fmt.Errorf("%s: a searched %s needs both bounds (min and max in the template)", p.Name, p.Kind)
		}
	}
	if len(s.Params) == 0 {
		return errors.New("the space has no parameters to search")
	}
	return nil
}

// Active reports whether the parameter called name matters for values v:
// its conditions hold and the parameters they refer to are active
// themselves. A name outside the space (a fixed parameter) is active.
func (s Space) Active(name string, v Values) bool {
	return s.active(name, v, 0)
}

func (s Space) active(name string, v Values, depth int) bool {
	p, ok := s.Param(name)
	if !ok || depth > len(s.Params) {
		return true
	}
	for _, c := range p.When {
		x, ok := v[c.Param]
		if !ok || !slices.Contains(c.Values, FormatValue(x)) {
			return false
		}
		if !s.active(c.Param, v, depth+1) {
			return false
		}
	}
	return true
}

// whole reports whether f is a whole number or infinite (an open bound).
func whole(f float64) bool { return math.IsInf(f, 0) || f == math.Trunc(f) }

// check reports whether x is a valid value of p.
func (p Param) check(x any) error {
	switch p.Kind {
	case Float:
		f, ok := x.(float64)
		if !ok || math.IsNaN(f) || f < p.Min || f > p.Max {
			return fmt.Errorf("%s: %s is not a float in [%g, %g]", p.Name, FormatValue(x), p.Min, p.Max)
		}
	case Int:
		i, ok := x.(int64)
		if !ok || float64(i) < p.Min || float64(i) > p.Max {
			return fmt.Errorf("%s: %s is not an int in [%g, %g]", p.Name, FormatValue(x), p.Min, p.Max)
		}
	case Choice:
		s, ok := x.(string)
		if !ok || !slices.Contains(p.Choices, s) {
			return fmt.Errorf("%s: %s is not one of %s", p.Name, FormatValue(x), strings.Join(p.Choices, ", "))
		}
	case Bool:
		if _, ok := x.(bool); !ok {
			return fmt.Errorf("%s: %s is not true or false", p.Name, FormatValue(x))
		}
	case String:
		if _, ok := x.(string); !ok {
			return fmt.Errorf("%s: %s is not a string", p.Name, FormatValue(x))
		}
	}
	return nil
}

// FormatValue writes a value as text: floats in the shortest form that
// reads back exactly, ints in decimal, bools as true/false. Conditions
// compare values in this form.
func FormatValue(x any) string {
	switch x := x.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case nil:
		return ""
	}
	return fmt.Sprint(x)
}

// clone copies v.
func (v Values) clone() Values {
	out := make(Values, len(v))
	for k, x := range v {
		out[k] = x
	}
	return out
}
