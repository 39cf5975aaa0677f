package metrics

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"niuma/metrics/textrule"
	"niuma/storage"
)

// DetectWindow is how many lines detection waits, after the first line a
// preset read, for the evidence it needs (textrule.Detect); then the held
// matches are dropped (the JSON points among them stored) and it looks on
// afresh.
const DetectWindow = 1000

// detector finds the text format of a stream whose stage names none: every
// preset of textrule.Detect reads each line, and the lines from the first
// one any preset read are held back (with the JSON points among them)
// until a preset has its evidence. Then the presets with evidence become
// the stream's rules and the held lines are stored with their records,
// under one cursor. Nothing is stored of a preset without evidence: a
// plain log stores no spurious series.
type detector struct {
	cands   []candidate
	decided bool
	pending []heldLine
	first   int64 // the stream's line number of the first held line
	// this line's records, one per candidate and segment it read, and
	// the segments so far
	recs []heldRecord
	segs int

	settled func(presets []string)
}

type candidate struct {
	d    textrule.Detection
	m    *textrule.Matcher
	seen map[string]int // records per key
	best int            // the most records of one key
}

type heldLine struct {
	end  int64
	wall time.Time
	pts  []storage.MetricPoint // its JSON points
	recs []heldRecord
}

type heldRecord struct {
	cand   int
	seg    int // the segment of its line
	step   int64
	source string
	vals   []KV
}

func newDetector() *detector {
	d := &detector{}
	for _, det := range textrule.Detect {
		m, err := textrule.Compile(textrule.Rule{Preset: det.Preset})
		if err != nil {
			panic("textrule.Detect names an unknown preset: " + det.Preset)
		}
		d.cands = append(d.cands, candidate{d: det, m: m, seen: map[string]int{}})
	}
	return d
}

// read lets every candidate read one segment.
func (d *detector) read(text []byte, line int64) {
	d.segs++
	for i := range d.cands {
		c := &d.cands[i]
		rec, ok := c.m.Match(text, line)
		if !ok {
			continue
		}
		for _, kv := range rec.Values {
			if !c.d.Evidence(rec) {
				break
			}
			if len(c.seen) < 4096 || c.seen[kv.Key] > 0 {
				c.seen[kv.Key]++
				c.best = max(c.best, c.seen[kv.Key])
			}
		}
		d.recs = append(d.recs, heldRecord{cand: i, seg: d.segs, step: rec.Step, source: rec.StepSource, vals: append([]KV(nil), rec.Values...)})
	}
}

// ready returns the candidates with their evidence, in textrule.Detect's
// order, less those that read nothing an earlier one did not (keras'
// lines hold key-value pairs too: key-value adds nothing to keras).
func (d *detector) ready() []int {
	var out []int
	for i, c := range d.cands {
		if c.best < c.d.Records {
			continue
		}
		if len(out) == 0 || d.adds(i, out) {
			out = append(out, i)
		}
	}
	return out
}

// adds reports whether candidate i read a held segment none of kept did.
func (d *detector) adds(i int, kept []int) bool {
	lines := append(d.pending, heldLine{recs: d.recs})
	for _, l := range lines {
		for _, r := range l.recs {
			if r.cand != i {
				continue
			}
			covered := false
			for _, o := range l.recs {
				if o.seg == r.seg && slices.Contains(kept, o.cand) {
					covered = true
				}
			}
			if !covered {
				return true
			}
		}
	}
	return false
}

// SetDetect makes the Ingestor find the stream's text format itself (the
// stage names no rules): see detector. settled, if not nil, is told the
// presets found when detection settles (also when a stored state says it
// had).
func (in *Ingestor) SetDetect(settled func(presets []string)) {
	in.det = newDetector()
	in.det.settled = settled
	in.rules, in.watches = nil, nil
}

// Detected returns the presets a stream's detection settled on, and
// whether it settled, from the state stored with the stream's cursor.
func Detected(state string) (presets []string, settled bool) {
	st, ok := parseDetectState(state)
	if !ok || !st.Settled {
		return nil, false
	}
	return st.Presets, true
}

// detectState is an Ingestor's state while it detects: "D" and this in
// JSON. States are the matchers' (the chosen presets' once settled, the
// candidates' before).
type detectState struct {
	Settled bool     `json:"d,omitempty"`
	Presets []string `json:"p,omitempty"`
	States  []string `json:"s,omitempty"`
}

func parseDetectState(s string) (detectState, bool) {
	var st detectState
	if !strings.HasPrefix(s, "D") || json.Unmarshal([]byte(s[1:]), &st) != nil {
		return st, false
	}
	return st, true
}

func (in *Ingestor) detectState() string {
	st := detectState{Settled: in.det.decided}
	if in.det.decided {
		for _, m := range in.rules {
			st.Presets = append(st.Presets, m.Rule.Preset)
			st.States = append(st.States, m.State())
		}
	} else {
		for _, c := range in.det.cands {
			st.States = append(st.States, c.m.State())
		}
	}
	b, _ := json.Marshal(st)
	return "D" + string(b)
}

func (in *Ingestor) restoreDetect(s string) {
	st, ok := parseDetectState(s)
	if !ok {
		return
	}
	if !st.Settled {
		for i, c := range in.det.cands {
			if i < len(st.States) {
				_ = c.m.Restore(st.States[i])
			}
		}
		return
	}
	in.det.decided, in.det.cands = true, nil
	in.rules = nil
	for i, p := range st.Presets {
		m, err := textrule.Compile(textrule.Rule{Preset: p})
		if err != nil {
			continue // a preset of another version: read on without it
		}
		if i < len(st.States) {
			_ = m.Restore(st.States[i])
		}
		in.rules = append(in.rules, m)
	}
	if in.det.settled != nil {
		in.det.settled(st.Presets)
	}
}

// hold ends a line while detection is open: a line some candidate read,
// and every line after it, are held; it reports whether in.pts is to be
// written now (the line held nothing back, or detection settled).
func (in *Ingestor) hold(end int64) bool {
	d := in.det
	if len(d.recs) == 0 && len(d.pending) == 0 {
		return true
	}
	if len(d.pending) == 0 {
		d.first = in.line
	}
	d.pending = append(d.pending, heldLine{end: end, wall: in.wall, pts: append([]storage.MetricPoint(nil), in.pts...), recs: d.recs})
	d.recs = nil
	in.pts = in.pts[:0]
	chosen := d.ready()
	switch {
	case len(chosen) > 0:
		in.settle(chosen)
	case in.line-d.first >= DetectWindow:
		in.release()
	default:
		return false
	}
	return true
}

// release ends a window without evidence: the held lines' JSON points go
// to in.pts, their text records (matches that never came back) are
// dropped, and detection looks on from the next line, afresh.
func (in *Ingestor) release() {
	d := in.det
	in.pts = in.pts[:0]
	for _, l := range d.pending {
		in.pts = append(in.pts, l.pts...)
	}
	d.pending = nil
	for i := range d.cands {
		clear(d.cands[i].seen)
		d.cands[i].best = 0
	}
}

// settle ends detection with the chosen candidates as the stream's rules
// and puts the held lines' points in in.pts.
func (in *Ingestor) settle(chosen []int) {
	d := in.det
	d.decided = true
	in.rules = nil
	rank := make(map[int]int, len(chosen))
	for r, i := range chosen {
		rank[i] = r
		in.rules = append(in.rules, d.cands[i].m)
	}
	in.pts = in.pts[:0]
	for _, l := range d.pending {
		in.pts = append(in.pts, l.pts...)
		// Per segment, the first chosen preset that read it, as rules are
		// tried.
		for j := 0; j < len(l.recs); {
			k, best := j, -1
			for ; k < len(l.recs) && l.recs[k].seg == l.recs[j].seg; k++ {
				if rr, ok := rank[l.recs[k].cand]; ok && (best < 0 || rr < rank[l.recs[best].cand]) {
					best = k
				}
			}
			if best >= 0 {
				r := l.recs[best]
				in.wall = l.wall
				in.add(r.step, r.source, r.vals)
			}
			j = k
		}
		in.keys.endRecord()
	}
	d.cands, d.pending = nil, nil
	if d.settled != nil {
		var names []string
		for _, m := range in.rules {
			names = append(names, m.Rule.Preset)
		}
		d.settled(names)
	}
}

// End is called when the stream has ended: detection still open settles
// on the presets with their evidence, and the held lines are stored. It
// returns the points added, as Line does.
func (in *Ingestor) End() []storage.MetricPoint {
	d := in.det
	if d == nil || d.decided || len(d.pending) == 0 {
		return nil
	}
	end := d.pending[len(d.pending)-1].end
	in.settle(d.ready())
	in.write(end)
	return in.pts
}

// Format says how a source's points were read, from its name and the
// state stored with its cursor, and where from: for stdout and stderr the
// presets their detection settled on ("hf-trainer", "stdout"), for a file
// its kind and path ("csv", "runs/detect/train/results.csv"); format is
// "" when there is nothing to tell (a template's own rules, JSON lines).
func Format(source, state string) (format, from string) {
	kind, path, _ := strings.Cut(source, ":")
	switch kind {
	case "stdout", "stderr":
		presets, _ := Detected(state)
		return strings.Join(presets, ", "), kind
	case "csv":
		return "csv", path
	case "json":
		return "json lines", path
	case "trainer_state":
		return "trainer_state.json", path
	case "tb":
		return "tensorboard", path
	}
	return "", ""
}
