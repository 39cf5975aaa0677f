package textrule

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The streams a rule reads.
const (
	Stdout = "stdout"
	Stderr = "stderr"
	Both   = "both"
)

// Step sources of a pattern besides a group name.
const (
	StepCounter = "counter" // 0, 1, 2, ... one per matching line
	StepLine    = "line"    // the line number in the stream (from 1)
)

// Presets are the formats a rule can name instead of a pattern.
var Presets = []string{"key-value", "pytorch-examples", "keras", "tqdm",
	"python", "hf-trainer", "gbdt", "sklearn", "skorch", "fairseq", "caffe"}

// StepNames are the names (of a key, a group or a column) that are taken
// as the step, in this order of preference.
var StepNames = []string{"step", "global_step", "iteration", "iter", "epoch"}

// Rule is one way to read metrics from text lines, as a template's stage
// declares it under `metrics:`.
type Rule struct {
	// Preset names a built-in format (one of Presets); or
	Preset string
	// Pattern is a regular expression (Go syntax) whose named groups
	// ((?P<loss>...) or (?<loss>...)) are metric values.
	Pattern string
	// Step says where a pattern's step comes from: the name of one of its
	// groups, "counter" or "line". Default: a group named as one of
	// StepNames, else "counter". Presets choose their own step.
	Step string
	// Stream is "stdout", "stderr" or "both" (the default).
	Stream string
}

// Name is how messages name the rule.
func (r Rule) Name() string {
	if r.Preset != "" {
		return "preset " + r.Preset
	}
	return fmt.Sprintf("pattern %q", r.Pattern)
}

// Reads reports whether the rule applies to the stream ("stdout" or
// "stderr").
func (r Rule) Reads(stream string) bool {
	return r.Stream == "" || r.Stream == Both || r.Stream == stream
}

// Validate checks a rule and says what to fix.
func (r Rule) Validate() error {
	_, err := Compile(r)
	return err
}

// KV is one metric value of a record.
type KV struct {
	Key   string
	Value float64
}

// Record is what a rule read from one segment of a line.
type Record struct {
	Step       int64
	StepSource string // what gave the step: a key or group name, "counter", "line", "epoch/batch"
	Values     []KV
}

// Matcher is a compiled rule with its state (counters, the epoch a
// progress format is in). It is not safe for concurrent use.
type Matcher struct {
	Rule  Rule
	re    *regexp.Regexp
	names []string // group names, "" for unnamed
	step  int      // group index of the step, or -1
	match func(m *Matcher, seg []byte, line int64) (Record, bool)
	st    state
	vals  []KV
	prev  []byte // the segment before (a table's header)
}

// state is what a Matcher carries from line to line; it travels with a
// metrics cursor so that a log read again after a restart gives the same
// steps.
type state struct {
	Count int64 `json:"n,omitempty"` // records so far (counter steps)
	Epoch int64 `json:"e,omitempty"` // the epoch a progress format is in
	Total int64 `json:"t,omitempty"` // batches per epoch, once known
	// Keys and Spans are a table's columns (names, and each one's byte
	// range in its rows), or the keys of the step so far.
	Keys  []string `json:"k,omitempty"`
	Spans []int    `json:"s,omitempty"`
}

func (s state) zero() bool {
	return s.Count == 0 && s.Epoch == 0 && s.Total == 0 && len(s.Keys) == 0 && len(s.Spans) == 0
}

// Compile checks a rule and returns its matcher.
func Compile(r Rule) (*Matcher, error) {
	switch r.Stream {
	case "", Stdout, Stderr, Both:
	default:
		return nil, fmt.Errorf("stream must be stdout, stderr or both (got %q)", r.Stream)
	}
	m := &Matcher{Rule: r, step: -1}
	switch {
	case r.Preset != "" && r.Pattern != "":
		return nil, errors.New("give a preset or a pattern, not both")
	case r.Preset != "":
		if r.Step != "" {
			return nil, fmt.Errorf("preset %s chooses its own step; step applies to patterns", r.Preset)
		}
		switch r.Preset {
		case "key-value":
			m.match = (*Matcher).keyValue
		case "pytorch-examples":
			m.match = (*Matcher).pytorchExamples
		case "keras":
			m.match = (*Matcher).keras
		case "tqdm":
			m.match = (*Matcher).tqdm
		case "python":
			m.match = (*Matcher).python
		case "hf-trainer":
			m.match = (*Matcher).hfTrainer
		case "gbdt":
			m.match = (*Matcher).gbdt
		case "sklearn":
			m.match = (*Matcher).sklearn
		case "skorch":
			m.match = (*Matcher).skorch
		case "fairseq":
			m.match = (*Matcher).fairseq
		case "caffe":
			m.match = (*Matcher).caffe
		default:
			return nil, fmt.Errorf("unknown preset %q: use one of %s, or a pattern", r.Preset, strings.Join(Presets, ", "))
		}
		return m, nil
	case r.Pattern == "":
		return nil, fmt.Errorf("a metrics rule needs a preset (%s) or a pattern with named groups, e.g. pattern: 'loss (?P<loss>[0-9.]+)'", strings.Join(Presets, ", "))
	}
	re, err := regexp.Compile(r.Pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern %q is not a valid regular expression: %v", r.Pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	m.re, m.names = re, re.SubexpNames()
	named := 0
	for i, n := range m.names {
		if n == "" {
			continue
		}
		named++
		if r.Step == n {
			m.step = i
		}
	}
	if named == 0 {
		return nil, fmt.Errorf("pattern %q has no named group: name each value, e.g. (?P<loss>[0-9.]+)", r.Pattern)
	}
	switch r.Step {
	case StepCounter, StepLine:
	case "":
		for _, s := range StepNames {
			if i := re.SubexpIndex(s); i > 0 {
				m.step = i
				break
			}
		}
	default:
		if m.step < 0 {
			return nil, fmt.Errorf("step %q is not a group of pattern %q: use one of its groups, counter or line", r.Step, r.Pattern)
		}
	}
	if m.step > 0 && named == 1 {
		return nil, fmt.Errorf("pattern %q captures only its step; name the values too, e.g. (?P<loss>[0-9.]+)", r.Pattern)
	}
	m.match = (*Matcher).pattern
	return m, nil
}

// Match reads one segment (see Segments; log prefixes already stripped)
// at line number line of its stream. The record's Values are reused by
// the next call.
func (m *Matcher) Match(seg []byte, line int64) (Record, bool) {
	m.vals = m.vals[:0]
	rec, ok := m.match(m, seg, line)
	if !ok || len(rec.Values) == 0 {
		return Record{}, false
	}
	return rec, true
}

// State returns the matcher's state for a cursor ("" for the initial one).
func (m *Matcher) State() string {
	if m.st.zero() {
		return ""
	}
	b, _ := json.Marshal(m.st)
	return string(b)
}

// Restore sets the state State returned; "" resets it.
func (m *Matcher) Restore(s string) error {
	m.st = state{}
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), &m.st)
}

// counter returns the next counter step.
func (m *Matcher) counter() int64 {
	n := m.st.Count
	m.st.Count++
	return n
}

func (m *Matcher) pattern(seg []byte, line int64) (Record, bool) {
	idx := m.re.FindSubmatchIndex(seg)
	if idx == nil {
		return Record{}, false
	}
	rec := Record{}
	for i, name := range m.names {
		if name == "" || i == m.step || idx[2*i] < 0 {
			continue
		}
		if v, ok := ParseNumber(seg[idx[2*i]:idx[2*i+1]]); ok {
			m.vals = append(m.vals, KV{name, v})
		}
	}
	if len(m.vals) == 0 {
		return Record{}, false
	}
	switch {
	case m.step > 0:
		if idx[2*m.step] < 0 {
			return Record{}, false
		}
		s, ok := parseStep(seg[idx[2*m.step]:idx[2*m.step+1]])
		if !ok {
			return Record{}, false
		}
		rec.Step, rec.StepSource = s, m.names[m.step]
	case m.Rule.Step == StepLine:
		rec.Step, rec.StepSource = line, StepLine
	default:
		rec.Step, rec.StepSource = m.counter(), StepCounter
	}
	rec.Values = m.vals
	return rec, true
}

// ParseNumber reads a metric value written as text: a decimal number
// (optionally signed, with a fraction or exponent), or nan / inf /
// infinity in any case. Thousands separators and units are not numbers.
func ParseNumber(b []byte) (float64, bool) {
	s := strings.TrimSpace(string(b))
	if s == "" || len(s) > 64 {
		return 0, false
	}
	w := strings.TrimLeft(s, "+-")
	if len(s)-len(w) > 1 {
		return 0, false
	}
	switch strings.ToLower(w) {
	case "nan":
		return math.NaN(), true
	case "inf", "infinity":
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(isDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, false
		}
	}
	if w == "" || !(isDigit(w[0]) || (w[0] == '.' && len(w) > 1 && isDigit(w[1]))) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

// parseStep reads a step: a whole number in [0, 2^63), also written as an
// integral float ("12.0").
func parseStep(b []byte) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n >= 0
	}
	f, ok := ParseNumber([]byte(s))
	if !ok || !(f >= 0 && f < 1<<63) || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// isStepName reports whether a key names the step, and its rank in
// StepNames (lower is preferred).
func isStepName(key string) (int, bool) {
	for i, s := range StepNames {
		if strings.EqualFold(key, s) {
			return i, true
		}
	}
	return 0, false
}

// Detection is a preset tried on a stage that names none (see Detect),
// with the evidence it needs: Records of its records that share a key,
// counting only records with at least MinValues values (a step read from
// the line counts as one).
type Detection struct {
	Preset    string
	Records   int
	MinValues int
}

// Evidence reports whether a record counts towards the preset's evidence.
func (d Detection) Evidence(rec Record) bool {
	n := len(rec.Values)
	if rec.StepSource != StepCounter && rec.StepSource != StepLine {
		n++
	}
	return n >= d.MinValues
}

// Detect are the presets tried, in this order, on the output of a stage
// whose template has no `metrics:`: the formats of libraries first (their
// lines are specific: one is evidence enough), then the generic ones,
// which need a key seen on several lines before they are believed (and
// key-value lines with two values at least), so that a log line that
// happens to hold "name: 3" stores nothing.
var Detect = []Detection{
	{"hf-trainer", 1, 0}, {"gbdt", 1, 0}, {"caffe", 1, 0}, {"sklearn", 1, 0}, {"skorch", 1, 0}, {"fairseq", 1, 0},
	{"keras", 1, 0}, {"tqdm", 1, 0}, {"pytorch-examples", 2, 0}, {"python", 2, 0}, {"key-value", 3, 2},
}

// DetectedPresets are the names of the presets of Detect, in order.
func DetectedPresets() []string {
	out := make([]string, len(Detect))
	for i, d := range Detect {
		out[i] = d.Preset
	}
	return out
}
