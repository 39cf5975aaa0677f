package sentinel

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Do is what the engine does about an anomaly.
type Do string

// Actions.
const (
	Flag   Do = "flag"   // record and show it (the default)
	Notify Do = "notify" // also tell the user now, even with the window closed
	Stop   Do = "stop"   // also stop the run
	Retry  Do = "retry"  // stop the attempt and start a new one, with changed parameters if set says so
)

// Allowed lists the actions a template may give a kind, in the order the
// error messages name them. What an action does depends on the kind's
// scope: on a run's own anomaly it acts on that attempt; on a GPU's, on the
// attempts of the runs on that GPU (the run the anomaly names, for a leak or
// an idle GPU; every run on it for overheating, a stall or a health event);
// on a queued stage's, on that stage's run, which has no attempt to retry.
func Allowed(k Kind) []Do {
	if k.Scope() == ScopeQueue {
		return []Do{Flag, Notify, Stop}
	}
	return []Do{Flag, Notify, Stop, Retry}
}

func doList(ds []Do) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = string(d)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Action is a template's answer to one kind of anomaly. Set holds parameter
// changes for a retry: "*0.1" multiplies, "/2" divides, "+1" and "-1" add,
// anything else replaces the value (a number, true/false, or a string).
type Action struct {
	Do  Do                `json:"do" yaml:"do"`
	Set map[string]string `json:"set,omitempty" yaml:"set,omitempty"`
	// MaxRetries bounds the attempts a retry may add (0 = 2), so a run
	// that keeps failing ends instead of retrying forever.
	MaxRetries int `json:"max_retries,omitempty" yaml:"max_retries,omitempty"`
}

// Policy maps anomaly kinds to actions; a kind without an entry is flagged.
type Policy map[Kind]Action

// ParsePolicy checks a template's `sentinel:` section (kind → action) and
// returns it as a Policy; errors name the bad entry and the valid words.
func ParsePolicy(spec map[string]Action) (Policy, error) {
	known := map[Kind]bool{}
	for _, k := range append(append([]Kind(nil), Kinds...), FailureKinds...) {
		known[k] = true
	}
	p := Policy{}
	for name, a := range spec {
		k := Kind(name)
		if !known[k] {
			return nil, fmt.Errorf("sentinel: unknown anomaly kind %q: use one of %s", name, kindList())
		}
		if a.Do == "" {
			a.Do = Flag
		}
		allowed := Allowed(k)
		if !slices.Contains(allowed, a.Do) {
			if a.Do == Retry && k.Scope() == ScopeQueue {
				return nil, fmt.Errorf("sentinel: %s: retry needs an attempt, and a stage waiting in the queue has none: use %s",
					name, doList(allowed))
			}
			return nil, fmt.Errorf("sentinel: %s: unknown action %q: use %s", name, a.Do, doList(allowed))
		}
		if a.Do != Retry && len(a.Set) > 0 {
			return nil, fmt.Errorf("sentinel: %s: `set` only applies to retry, not %s", name, a.Do)
		}
		if a.MaxRetries < 0 {
			return nil, fmt.Errorf("sentinel: %s: max_retries %d: give 1 or more (0 means the default, 2)", name, a.MaxRetries)
		}
		if a.Do != Retry && a.MaxRetries != 0 {
			return nil, fmt.Errorf("sentinel: %s: `max_retries` only applies to retry, not %s", name, a.Do)
		}
		for param, expr := range a.Set {
			if _, err := changeValue(1.0, expr); err != nil && isArith(expr) {
				return nil, fmt.Errorf("sentinel: %s: set %s: %w", name, param, err)
			}
		}
		p[k] = a
	}
	return p, nil
}

func kindList() string {
	var s []string
	for _, k := range append(append([]Kind(nil), Kinds...), FailureKinds...) {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Scope says what an anomaly is about.
type Scope int

// Scopes.
const (
	ScopeRun   Scope = iota // a run's metrics: retrying with other parameters can help
	ScopeGPU                // a GPU or a run's use of it
	ScopeQueue              // a stage that waits
)

// Scope returns the scope of a kind.
func (k Kind) Scope() Scope {
	switch k {
	case NaN, LossSpike, Divergence, GradExplosion, NoProgress, Plateau, Hang, CUDAOOM:
		return ScopeRun
	case QueueStuck:
		return ScopeQueue
	}
	return ScopeGPU
}

// Decision is what the engine should do about one anomaly.
type Decision struct {
	Do Do
	// Params holds the new attempt's parameters for Retry (a copy; the
	// input map is not changed), Changes the "name: old → new" lines for
	// the event log.
	Params  map[string]any
	Changes []string
	// Why explains a decision that differs from the policy (e.g. a retry
	// turned into a stop because the retries are used up).
	Why string
}

// Decide applies the policy to an anomaly of a run whose attempt number is
// attempt and whose parameters are params. A retry beyond MaxRetries
// becomes a stop; a retry whose change cannot apply becomes a flag with the
// reason. An anomaly that names no run is only flagged: the engine asks
// again for each run a GPU's anomaly touches, naming it.
func (p Policy) Decide(a Anomaly, attempt int, params map[string]any) Decision {
	act, ok := p[a.Kind]
	if !ok || act.Do == "" || a.Run == "" {
		return Decision{Do: Flag}
	}
	if !slices.Contains(Allowed(a.Kind), act.Do) {
		return Decision{Do: Flag, Why: fmt.Sprintf("%s cannot %s", a.Kind, act.Do)}
	}
	if act.Do != Retry {
		return Decision{Do: act.Do}
	}
	limit := act.MaxRetries
	if limit == 0 {
		limit = 2
	}
	if attempt > limit {
		return Decision{Do: Stop, Why: fmt.Sprintf("the sentinel already retried %d time(s) for %s", attempt-1, a.Kind)}
	}
	next, changes, err := ApplyChanges(params, act.Set)
	if err != nil {
		return Decision{Do: Flag, Why: "cannot retry: " + err.Error()}
	}
	return Decision{Do: Retry, Params: next, Changes: changes}
}

// ApplyChanges returns a copy of params with set applied (see Action.Set)
// and a "name: old → new" line per change, in name order.
func ApplyChanges(params map[string]any, set map[string]string) (map[string]any, []string, error) {
	out := make(map[string]any, len(params)+len(set))
	for k, v := range params {
		out[k] = v
	}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	var changes []string
	for _, name := range names {
		expr := strings.TrimSpace(set[name])
		old, had := out[name]
		var nv any
		if isArith(expr) {
			if !had {
				return nil, nil, fmt.Errorf("parameter %s has no value to change with %q: give a plain value instead", name, expr)
			}
			f, ok := toFloat(old)
			if !ok {
				return nil, nil, fmt.Errorf("parameter %s is %v, not a number: %q needs a number", name, old, expr)
			}
			r, err := changeValue(f, expr)
			if err != nil {
				return nil, nil, fmt.Errorf("parameter %s: %w", name, err)
			}
			nv = r
			if isInt(old) && r == float64(int64(r)) {
				nv = int64(r)
			}
		} else {
			nv = literal(expr)
		}
		out[name] = nv
		if had {
			changes = append(changes, fmt.Sprintf("%s: %v → %v", name, old, nv))
		} else {
			changes = append(changes, fmt.Sprintf("%s: (unset) → %v", name, nv))
		}
	}
	return out, changes, nil
}

// isArith reports whether expr is a relative change ("*0.5", "/2", "+1", "-1").
func isArith(expr string) bool {
	if len(expr) < 2 || !strings.ContainsRune("*/+-", rune(expr[0])) {
		return false
	}
	_, err := strconv.ParseFloat(strings.TrimSpace(expr[1:]), 64)
	// "-1" alone is a literal negative number only when the operand is
	// missing; with a value present we treat it as "subtract", which is the
	// documented meaning.
	return err == nil
}

func changeValue(v float64, expr string) (float64, error) {
	x, err := strconv.ParseFloat(strings.TrimSpace(expr[1:]), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an operator followed by a number (like \"*0.1\")", expr)
	}
	switch expr[0] {
	case '*':
		return tidy(v * x), nil
	case '/':
		if x == 0 {
			return 0, fmt.Errorf("%q divides by zero", expr)
		}
		return tidy(v / x), nil
	case '+':
		return tidy(v + x), nil
	case '-':
		return tidy(v - x), nil
	}
	return 0, fmt.Errorf("%q: unknown operator %q: use *, /, + or -", expr, expr[0])
}

// tidy rounds away binary noise (0.1×0.1 = 0.010000000000000002) to 12
// significant digits, so a changed learning rate reads as a person would
// write it, in params.json, `niuma show` and the anomaly's message.
func tidy(f float64) float64 {
	t, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 12, 64), 64)
	if err != nil {
		return f
	}
	return t
}

func literal(s string) any {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	if b, err := strconv.ParseBool(s); err == nil {
		return b
	}
	return s
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func isInt(v any) bool {
	switch v.(type) {
	case int, int64, int32:
		return true
	}
	return false
}
