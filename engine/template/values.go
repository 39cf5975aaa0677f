package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Values maps parameter names to values: float64 for float parameters,
// int64 for int, bool for bool and string for choice and string.
type Values map[string]any

// Resolve returns the template's defaults overridden by sets, CLI-style
// strings keyed by parameter name (niuma run --set lr=0.1). Numbers and
// bools may be surrounded by spaces; bools accept true/false, yes/no, 1/0,
// on/off. Every bad entry is reported, in name order.
func (t *Template) Resolve(sets map[string]string) (Values, error) {
	v := t.Defaults()
	var errs []error
	for _, name := range sortedKeys(sets) {
		p, ok := t.Param(name)
		if !ok {
			errs = append(errs, t.unknownParam(name))
			continue
		}
		x, err := parseValue(p, sets[name])
		if err == nil {
			err = checkValue(p, x)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v[name] = x
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := t.checkNeeds(v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkNeeds checks the values that set stages' GPU needs (a gpu_memory
// parameter must read as a size).
func (t *Template) checkNeeds(v Values) error {
	var errs []error
	for _, st := range t.Stages {
		if _, _, err := t.NeedsOf(st, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Validate checks typed values (e.g. from a UI) against the schema: every
// parameter must be present, of its Go type (float64 — or any Go number —
// for float; any Go integer type for int; bool; string for choice and
// string), within min/max and among the choices; no unknown names. Use
// Normalize to convert looser input first.
func (t *Template) Validate(v Values) error {
	var errs []error
	for _, p := range t.Params {
		x, ok := v[p.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("missing value for parameter %q (%s)", p.Name, describe(p)))
			continue
		}
		c, err := convert(p, x, false)
		if err == nil {
			err = checkValue(p, c)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedKeys(v) {
		if _, ok := t.Param(name); !ok {
			errs = append(errs, t.unknownParam(name))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, t.checkNeeds(v))
	}
	return errors.Join(errs...)
}

// Normalize returns a copy of v holding every parameter — missing ones get
// their defaults — in its canonical Go type (float64, int64, bool, string).
// It accepts any Go number, whole floats for int parameters and strings
// parsed as Resolve does, then checks the result as Validate does.
func (t *Template) Normalize(v Values) (Values, error) {
	out := t.Defaults()
	var errs []error
	for _, p := range t.Params {
		x, ok := v[p.Name]
		if !ok {
			continue
		}
		c, err := convert(p, x, true)
		if err == nil {
			err = checkValue(p, c)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[p.Name] = c
	}
	for _, name := range sortedKeys(v) {
		if _, ok := t.Param(name); !ok {
			errs = append(errs, t.unknownParam(name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Strings formats every value as text: floats with strconv 'g' and the
// shortest exact precision, integers in decimal, bools as true/false.
func (v Values) Strings() map[string]string {
	out := make(map[string]string, len(v))
	for k, x := range v {
		out[k] = FormatValue(x)
	}
	return out
}

// ParamVars returns the values formatted as by Strings, keyed
// "params.NAME", ready to merge with the engine variables for Expand.
func (v Values) ParamVars() map[string]string {
	out := make(map[string]string, len(v))
	for k, x := range v {
		out["params."+k] = FormatValue(x)
	}
	return out
}

// FormatValue formats one parameter value as Strings does.
func FormatValue(x any) string {
	switch x := x.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case json.Number:
		return x.String()
	}
	if i, ok := asInt64(x); ok {
		return strconv.FormatInt(i, 10)
	}
	if u, ok := x.(uint64); ok {
		return strconv.FormatUint(u, 10)
	}
	if u, ok := x.(uint); ok {
		return strconv.FormatUint(uint64(u), 10)
	}
	return fmt.Sprint(x)
}

// JSON encodes the values as canonical JSON: one object, keys sorted, no
// insignificant space, no HTML escaping. NaN, infinities and strings that
// are not valid UTF-8 are errors (JSON cannot carry them exactly).
func (v Values) JSON() ([]byte, error) {
	for _, k := range sortedKeys(v) {
		if s, ok := v[k].(string); ok && !utf8.ValidString(s) {
			return nil, fmt.Errorf("encode parameter values: %s: %q is not valid UTF-8 text", k, s)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	m := map[string]any(v)
	if m == nil {
		m = map[string]any{}
	}
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode parameter values: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ValuesFromJSON decodes a JSON object (such as params.json) into Values,
// giving each number its parameter's Go type (float64 or int64). Unknown
// names, wrong JSON types, values out of range and values not among the
// choices are errors; missing parameters are not (Normalize fills them in).
func ValuesFromJSON(t *Template, data []byte) (Values, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("parameter values are not a JSON object: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parameter values: unexpected data after the JSON object")
	}
	if raw == nil {
		return nil, errors.New("parameter values: want a JSON object, got null")
	}
	v := make(Values, len(raw))
	var errs []error
	for _, name := range sortedKeys(raw) {
		p, ok := t.Param(name)
		if !ok {
			errs = append(errs, t.unknownParam(name))
			continue
		}
		c, err := convert(p, raw[name], false)
		if err == nil {
			err = checkValue(p, c)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v[name] = c
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return v, nil
}

func (t *Template) unknownParam(name string) error {
	names := t.ParamNames()
	if len(names) == 0 {
		return fmt.Errorf("unknown parameter %q (this template has no parameters)", name)
	}
	return fmt.Errorf("unknown parameter %q (known: %s)", name, strings.Join(names, ", "))
}

// parseValue parses CLI-style text for p.
func parseValue(p Param, s string) (any, error) {
	switch p.Type {
	case KindFloat:
		f, err := parseFloat(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number (%s)", p.Name, s, describe(p))
		}
		return f, nil
	case KindInt:
		i, err := parseInt(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a whole number (%s)", p.Name, s, describe(p))
		}
		return i, nil
	case KindBool:
		b, err := parseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not true or false (%s)", p.Name, s, describe(p))
		}
		return b, nil
	case KindChoice, KindString:
		return s, nil
	}
	return nil, fmt.Errorf("%s: parameter has unknown type %q", p.Name, p.Type)
}

// convert turns a Go value into p's canonical type. Strict mode (Validate,
// JSON) takes only unambiguous Go types; lenient mode (Normalize) also
// takes whole floats for ints and strings parsed like CLI values.
func convert(p Param, x any, lenient bool) (any, error) {
	if s, ok := x.(string); ok && lenient {
		return parseValue(p, s)
	}
	bad := func(what string) error {
		return fmt.Errorf("%s: %s %s (%s)", p.Name, show(x), what, describe(p))
	}
	switch p.Type {
	case KindFloat:
		switch x := x.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		case json.Number:
			f, err := parseFloat(x.String())
			if err != nil {
				return nil, bad("is not a number")
			}
			return f, nil
		}
		if i, ok := asInt64(x); ok {
			return float64(i), nil
		}
		return nil, bad("is not a number")
	case KindInt:
		if i, ok := asInt64(x); ok {
			return i, nil
		}
		switch x := x.(type) {
		case json.Number:
			i, err := parseInt(x.String())
			if err != nil {
				return nil, bad("is not a whole number")
			}
			return i, nil
		case float64, float32:
			f := reflect.ValueOf(x).Float()
			if i, ok := wholeInt64(f); ok {
				if lenient {
					return i, nil
				}
				return nil, bad("is a float; int parameters take a Go integer such as int64 (Normalize converts)")
			}
			return nil, bad("is not a whole number")
		}
		return nil, bad("is not a whole number")
	case KindBool:
		if b, ok := x.(bool); ok {
			return b, nil
		}
		return nil, bad("is not true or false")
	case KindChoice, KindString:
		if s, ok := x.(string); ok {
			return s, nil
		}
		return nil, bad("is not a string")
	}
	return nil, fmt.Errorf("%s: parameter has unknown type %q", p.Name, p.Type)
}

// checkValue checks a canonical value against p's range or choices.
func checkValue(p Param, x any) error {
	switch p.Type {
	case KindFloat:
		f, ok := x.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: %s is not a number (%s)", p.Name, show(x), describe(p))
		}
		if p.Min != nil && f < *p.Min {
			return fmt.Errorf("%s: %s is below the minimum (%s)", p.Name, fmtFloat(f), describe(p))
		}
		if p.Max != nil && f > *p.Max {
			return fmt.Errorf("%s: %s is above the maximum (%s)", p.Name, fmtFloat(f), describe(p))
		}
	case KindInt:
		i, ok := x.(int64)
		if !ok {
			return fmt.Errorf("%s: %s is not a whole number (%s)", p.Name, show(x), describe(p))
		}
		if p.Min != nil && intBelow(i, *p.Min) {
			return fmt.Errorf("%s: %d is below the minimum (%s)", p.Name, i, describe(p))
		}
		if p.Max != nil && intAbove(i, *p.Max) {
			return fmt.Errorf("%s: %d is above the maximum (%s)", p.Name, i, describe(p))
		}
	case KindBool:
		if _, ok := x.(bool); !ok {
			return fmt.Errorf("%s: %s is not true or false (%s)", p.Name, show(x), describe(p))
		}
	case KindChoice:
		s, ok := x.(string)
		if !ok || !slices.Contains(p.Choices, s) {
			return fmt.Errorf("%s: %s is not one of the choices (%s)", p.Name, show(x), describe(p))
		}
	case KindString:
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("%s: %s is not a string (%s)", p.Name, show(x), describe(p))
		}
		if why := badText(s); why != "" {
			return fmt.Errorf("%s: %s %s (%s)", p.Name, show(x), why, describe(p))
		}
	default:
		return fmt.Errorf("%s: parameter has unknown type %q", p.Name, p.Type)
	}
	return nil
}

// intBelow reports whether i < bound exactly, for a whole-number bound.
func intBelow(i int64, bound float64) bool {
	if b, ok := wholeInt64(bound); ok {
		return i < b
	}
	return float64(i) < bound
}

// intAbove reports whether i > bound exactly, for a whole-number bound.
func intAbove(i int64, bound float64) bool {
	if b, ok := wholeInt64(bound); ok {
		return i > b
	}
	return float64(i) > bound
}

// describe says what p accepts, e.g. "lr is a float between 1e-05 and 1".
func describe(p Param) string {
	switch p.Type {
	case KindFloat:
		return p.Name + " is a float" + describeRange(p, fmtFloat)
	case KindInt:
		return p.Name + " is an integer" + describeRange(p, fmtBound)
	case KindBool:
		return p.Name + " is true or false (also yes/no, 1/0)"
	case KindChoice:
		return p.Name + " is one of: " + strings.Join(p.Choices, ", ")
	case KindString:
		return p.Name + " is a string"
	}
	return p.Name + " has unknown type " + string(p.Type)
}

func describeRange(p Param, f func(float64) string) string {
	switch {
	case p.Min != nil && p.Max != nil:
		return " between " + f(*p.Min) + " and " + f(*p.Max)
	case p.Min != nil:
		return " of at least " + f(*p.Min)
	case p.Max != nil:
		return " of at most " + f(*p.Max)
	}
	return ""
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// fmtBound formats an int parameter's bound without an exponent.
func fmtBound(f float64) string {
	if i, ok := wholeInt64(f); ok {
		return strconv.FormatInt(i, 10)
	}
	return fmtFloat(f)
}

// show renders a value for a message: strings quoted, numbers plain.
func show(x any) string {
	switch x := x.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "null"
	case json.Number, bool, float64, float32:
		return FormatValue(x)
	}
	if _, ok := asInt64(x); ok {
		return FormatValue(x)
	}
	return fmt.Sprintf("%v (%T)", x, x)
}

// badText says why s cannot be a parameter value, which may end up in a
// command line, an environment variable and params.json; "" if it can.
func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8 text"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL character, which a command line cannot carry"
	}
	return ""
}

// parseFloat parses a finite decimal number, allowing surrounding space.
func parseFloat(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "_xXpP") {
		return 0, errors.New("not a number")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a number")
	}
	return f, nil
}

// parseInt parses a whole decimal number; "1e3" and "64.0" are accepted
// when they are exact whole numbers.
func parseInt(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	f, err := parseFloat(s)
	if err != nil {
		return 0, err
	}
	i, ok := wholeInt64(f)
	if !ok {
		return 0, errors.New("not a whole number")
	}
	return i, nil
}

// parseBool accepts true/false, yes/no, 1/0 and on/off, in any case.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "1", "on":
		return true, nil
	case "false", "no", "0", "off":
		return false, nil
	}
	return false, errors.New("not a bool")
}

// wholeInt64 converts f to int64 when it is a whole number that int64 and
// float64 both represent exactly (|f| <= 2^53).
func wholeInt64(f float64) (int64, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// asInt64 converts any Go integer type to int64 when it fits.
func asInt64(x any) (int64, bool) {
	switch x := x.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return int64(x), uint64(x) <= math.MaxInt64
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	}
	return 0, false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
