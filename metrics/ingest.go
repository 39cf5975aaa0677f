package metrics

import (
	"sync/atomic"
	"time"

	"niuma/metrics/textrule"
	"niuma/storage"
)

// Ingestor turns the output lines of one stream (stdout, stderr, a
// metrics.jsonl file) of one stage attempt into metric points and adds them
// to a Writer, each line's points together with the stream's read position
// (a cursor), so that a line is stored exactly once however often the
// stream is read again.
//
// Every line is split into its '\r'-separated segments (progress bars
// redraw themselves that way), terminal escape codes are dropped, and each
// segment is read as
//
//  1. a JSON metric line (Parser with Lenient), also after a log prefix
//     (textrule.StripLogPrefix: "INFO:root:", timestamps, levels);
//  2. otherwise by the stream's text rules (presets and patterns), the
//     first that matches.
//
// It is fed by one reader and is not safe for concurrent use.
type Ingestor struct {
	w       *Writer
	runID   string
	stage   string
	attempt int
	source  string
	skip    map[string]int64
	maxSkip int64

	rules   []*textrule.Matcher
	watches []*RuleWatch
	det     *detector // the stream's format is found from its lines (no rules)
	line    int64     // lines seen in the stream so far

	keys keyGate // the stage's limit on distinct keys

	p       Parser
	scratch []byte
	pts     []storage.MetricPoint
	wall    time.Time
}

// NewIngestor returns an Ingestor of JSON lines for attempt of stage of run
// runID that adds points to w (w may be nil: points are then only
// returned).
//
// skip holds, per key, the highest step already stored (storage's MaxSteps):
// a point whose step is <= skip[key] is dropped. It is only for an attempt
// whose points were stored before read positions were (they make skipping
// unnecessary); keys absent from skip are never dropped. The map is copied.
func NewIngestor(w *Writer, runID, stage string, attempt int, skip map[string]int64) *Ingestor {
	in := &Ingestor{w: w, runID: runID, stage: stage, attempt: attempt, p: Parser{Lenient: true}}
	if len(skip) > 0 {
		in.skip = make(map[string]int64, len(skip))
		first := true
		for k, s := range skip {
			in.skip[k] = s
			if first || s > in.maxSkip {
				in.maxSkip, first = s, false
			}
		}
	}
	return in
}

// SetSource names the stream for cursors ("stdout", "stderr", ...): every
// line's points are then stored with the stream's position after it, and
// the state of its rules. line is the number of lines before the position
// reading starts at (0 from the start of the stream).
func (in *Ingestor) SetSource(source string, line int64) {
	in.source, in.line = source, line
}

// SetRules sets the stream's text rules, tried in order, and a watch per
// rule (nil entries allowed) that counts lines to tell when a rule matches
// nothing.
func (in *Ingestor) SetRules(rules []*textrule.Matcher, watches []*RuleWatch) {
	in.rules, in.watches = rules, watches
}

// SetKeyLimit makes the stream's points count against the stage's limit
// on distinct keys, shared with its other sources.
func (in *Ingestor) SetKeyLimit(l *KeyLimit) { in.keys = keyGate{limit: l} }

// Line handles one output line read at wall. isMetric reports whether it
// gave points or was a metric line. pts are the points added to the
// writer, for fan-out to live subscribers; the slice is reused by the next
// call, so copy what must outlive it.
func (in *Ingestor) Line(line []byte, wall time.Time) (pts []storage.MetricPoint, isMetric bool) {
	return in.LineAt(line, -1, wall)
}

// LineAt is Line for a line that ends at byte offset end of its stream:
// with a source set, the points are stored together with that position.
func (in *Ingestor) LineAt(line []byte, end int64, wall time.Time) (pts []storage.MetricPoint, isMetric bool) {
	in.line++
	in.pts = in.pts[:0]
	in.wall = wall
	rest := textrule.StripEscapes(line, &in.scratch)
	for rest != nil {
		var seg []byte
		seg, rest = textrule.NextSegment(rest)
		if len(seg) == 0 {
			continue
		}
		if in.json(seg) {
			isMetric = true
			continue
		}
		if in.det != nil && !in.det.decided {
			n := len(in.det.recs)
			in.det.read(textrule.StripLogPrefix(seg), in.line)
			isMetric = isMetric || len(in.det.recs) > n
			continue
		}
		if len(in.rules) > 0 {
			text := textrule.StripLogPrefix(seg)
			for i, m := range in.rules {
				rec, ok := m.Match(text, in.line)
				if !ok {
					continue
				}
				if i < len(in.watches) && in.watches[i] != nil {
					in.watches[i].Matched()
				}
				in.add(rec.Step, rec.StepSource, rec.Values)
				isMetric = true
				break
			}
		}
	}
	in.keys.endRecord()
	for _, wt := range in.watches {
		if wt != nil {
			wt.Line()
		}
	}
	if in.det != nil && !in.det.decided && !in.hold(end) {
		return nil, isMetric
	}
	in.write(end)
	return in.pts, isMetric
}

// write hands in.pts to the writer, with the stream's position end.
func (in *Ingestor) write(end int64) {
	if in.w != nil && len(in.pts) > 0 {
		if in.source != "" && end >= 0 {
			in.w.AddWith(&storage.MetricCursor{RunID: in.runID, Stage: in.stage, Attempt: in.attempt,
				Source: in.source, Offset: end, State: in.state()}, in.pts...)
		} else {
			in.w.Add(in.pts...)
		}
	}
}

// json reads seg as a JSON metric line, also after a log prefix.
func (in *Ingestor) json(seg []byte) bool {
	js := seg
	if js[0] != '{' {
		js = textrule.StripLogPrefix(seg)
		if len(js) == 0 || js[0] != '{' {
			return false
		}
	}
	rec, ok := in.p.Parse(js)
	if !ok {
		return false
	}
	in.add(rec.Step, rec.StepKey, rec.Values)
	return true
}

// add turns one record's values into points. It is the one place where
// every point read from a stream is born (the TensorBoard and CSV
// followers' emit and row are the other births): the stage's limit on
// distinct keys is applied here.
func (in *Ingestor) add(step int64, source string, vals []KV) {
	// A step above every skip mark cannot be skipped: no map lookups.
	checkSkip := in.skip != nil && step <= in.maxSkip
	for _, v := range vals {
		if checkSkip {
			if s, ok := in.skip[v.Key]; ok && step <= s {
				continue
			}
		}
		if !in.keys.admit(v.Key) {
			continue
		}
		in.pts = append(in.pts, storage.MetricPoint{
			RunID: in.runID, Stage: in.stage, Attempt: in.attempt,
			Key: v.Key, Step: step, Value: v.Value, Wall: in.wall, StepSource: source,
		})
	}
}

// state is the rules' state for a cursor: "" when no rule carries any.
func (in *Ingestor) state() string {
	if in.det != nil {
		return in.detectState()
	}
	if len(in.rules) == 0 {
		return ""
	}
	s := ""
	for i, m := range in.rules {
		if st := m.State(); st != "" {
			s += string(rune('0'+i%10)) + st + "\n"
		}
	}
	return s
}

// Restore sets the rules' state from a cursor's State.
func (in *Ingestor) Restore(state string) {
	if in.det != nil {
		in.restoreDetect(state)
		return
	}
	for _, part := range splitLines(state) {
		if len(part) < 2 {
			continue
		}
		i := int(part[0] - '0')
		if i >= 0 && i < len(in.rules) {
			_ = in.rules[i].Restore(part[1:])
		}
	}
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

// RuleWatch counts the lines a text rule has seen and its matches, across
// the streams it reads, and calls Unmatched once when the first Limit lines
// went by without a match. It is safe for concurrent use (stdout and stderr
// are read by two goroutines).
type RuleWatch struct {
	Rule      textrule.Rule
	Limit     int64
	Unmatched func(rule textrule.Rule, lines int64)

	lines, matches atomic.Int64
	told           atomic.Bool
}

// DefaultRuleWatchLines is how many lines a rule may go without a match
// before it is reported.
const DefaultRuleWatchLines = 1000

// Line counts one line read.
func (w *RuleWatch) Line() {
	if n := w.lines.Add(1); n == w.Limit && w.matches.Load() == 0 {
		w.tell(n)
	}
}

// Matched counts one match.
func (w *RuleWatch) Matched() { w.matches.Add(1) }

// End reports a rule that matched nothing in a stream that ended before
// Limit lines (if it saw any line at all).
func (w *RuleWatch) End() {
	if n := w.lines.Load(); n > 0 && n < w.Limit && w.matches.Load() == 0 {
		w.tell(n)
	}
}

func (w *RuleWatch) tell(n int64) {
	if w.Unmatched != nil && !w.told.Swap(true) {
		w.Unmatched(w.Rule, n)
	}
}
