package metrics

import (
	"time"

	"niuma/storage"
)

// Ingestor turns the output lines of one stage attempt into metric points:
// it parses each line, drops points already stored (see NewIngestor) and
// adds the rest to a Writer. It is meant to be fed by one reader (a Follower's
// OnLine, or a stream from an executor) and is not safe for concurrent use.
type Ingestor struct {
	w       *Writer
	runID   string
	stage   string
	attempt int
	skip    map[string]int64
	maxSkip int64

	p   Parser
	pts []storage.MetricPoint
}

// NewIngestor returns an Ingestor for attempt of stage of run runID that
// adds points to w (w may be nil: points are then only returned).
//
// skip holds, per key, the highest step already stored (storage's MaxSteps):
// a point whose step is <= skip[key] is dropped, so that reading a log again
// after a restart does not write its points twice. Keys absent from skip
// are never dropped. The map is copied.
func NewIngestor(w *Writer, runID, stage string, attempt int, skip map[string]int64) *Ingestor {
	in := &Ingestor{w: w, runID: runID, stage: stage, attempt: attempt}
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

// Line handles one output line read at wall. isMetric reports whether it is
// a metric line (otherwise it is log text and nothing happens). pts are the
// points added to the writer, for fan-out to live subscribers; the slice is
// reused by the next call, so copy what must outlive it.
func (in *Ingestor) Line(line []byte, wall time.Time) (pts []storage.MetricPoint, isMetric bool) {
	rec, ok := in.p.Parse(line)
	if !ok {
		return nil, false
	}
	// A step above every skip mark cannot be skipped: no map lookups.
	checkSkip := in.skip != nil && rec.Step <= in.maxSkip
	in.pts = in.pts[:0]
	for _, v := range rec.Values {
		if checkSkip {
			if s, ok := in.skip[v.Key]; ok && rec.Step <= s {
				continue
			}
		}
		in.pts = append(in.pts, storage.MetricPoint{
			RunID:   in.runID,
			Stage:   in.stage,
			Attempt: in.attempt,
			Key:     v.Key,
			Step:    rec.Step,
			Value:   v.Value,
			Wall:    wall,
		})
	}
	if in.w != nil && len(in.pts) > 0 {
		in.w.Add(in.pts...)
	}
	return in.pts, true
}
