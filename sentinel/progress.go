package sentinel

import (
	"fmt"
	"math"
	"slices"
)

// progress is the progress detector's state for one training loss or one
// validation accuracy: its values (up to Config.ProgressMaxPoints), its
// worst, and whether it has been judged.
type progress struct {
	vals      []float64 // a loss's on log scale, an accuracy's as fractions
	worst     float64   // the highest loss, or the lowest accuracy, so far (as reported)
	worstStep int64
	percent   bool // an accuracy given in percent (a value above 1 was seen)
	judged    bool // it made progress, or was said to make none
	blewUp    bool // a loss reached Config.ExplodeFactor times where it started
	// A per-epoch running mean (Keras' batch loss) rises and falls in its
	// first points while it finds its level: those points average a batch
	// or two and say nothing of where training started. The mean of k
	// batches, m_k, implies its k-th batch's value, k·m_k − (k−1)·m_{k−1},
	// a loss, so positive; any other series implies a value at or below
	// zero within a few points once it moves (a flat noisy one, or one
	// that falls), and only then is a loss judged here.
	prev    float64 // the last value, as reported
	notMean bool    // it implied a batch value at or below zero: no running mean
}

// quietSpread is the spread (a robust standard deviation, log scale) below
// which a loss that could be a running mean is judged all the same: 1%.
const quietSpread = 0.01

// start is where a loss started (log scale): the lowest of its first
// Config.ProgressFirst values, so that a blow-up among them does not count
// as its start. NaN before the first value.
func (s *Sentinel) start(pr *progress) float64 {
	n := min(len(pr.vals), s.cfg.ProgressFirst)
	if n == 0 {
		return math.NaN()
	}
	m := pr.vals[0]
	for _, v := range pr.vals[1:n] {
		m = min(m, v)
	}
	return m
}

// progressDetector judges whether a run learns at all (Config's Progress
// fields say how). A training loss that blows up before the spike detector
// has a window is divergence, at once; a loss that, after its warm-up, has
// surely not dropped below where it started, or a validation accuracy at
// chance, is no progress, said once per attempt. A loss that can be zero
// or negative has no log scale and is not judged.
func (s *Sentinel) progressDetector(st *stream, at *attemptState, p Point, out []Anomaly) []Anomaly {
	pr := &st.prog
	acc := st.role&roleLoss == 0
	v := p.Value
	if len(pr.vals) == 0 || (!acc && v > pr.worst) || (acc && v < pr.worst) {
		pr.worst, pr.worstStep = v, p.Step
	}
	if acc {
		if v > 1 {
			pr.percent = true
		}
		if pr.percent {
			v /= 100
		}
	} else {
		if !(v > 0) {
			pr.judged, pr.vals = true, nil // no log scale: not judged
			return out
		}
		if k := float64(len(pr.vals)); k > 0 && (k+1)*v-k*pr.prev <= 0 {
			pr.notMean = true
		}
		pr.prev = v
		v = math.Log(v)
		// Judged or not, a blow-up is remembered: a loss falling back from
		// one is not converging.
		if len(pr.vals) > 0 && v-s.start(pr) >= math.Log(s.cfg.ExplodeFactor) {
			pr.blewUp = true
		}
	}
	if pr.judged || len(pr.vals) >= s.cfg.ProgressMaxPoints {
		return out
	}
	pr.vals = append(pr.vals, v)
	n := len(pr.vals)
	if acc {
		if n != s.cfg.AccWarmup {
			return out
		}
		pr.judged = true
		b := min(n, max(2, n/3))
		s.scratch = append(s.scratch[:0], pr.vals[:b]...)
		start := median(s.scratch)
		s.scratch = append(s.scratch[:0], pr.vals[n-b:]...)
		level := median(s.scratch)
		// Its noise: the spread of its steps (robust to a trend).
		s.scratch = s.scratch[:0]
		for i := 1; i < n; i++ {
			s.scratch = append(s.scratch, pr.vals[i]-pr.vals[i-1])
		}
		_, mad, sc := medianMAD(s.scratch, s.scratch2)
		s.scratch2 = sc
		noise := max(s.cfg.AccNoise, 3*1.4826*mad/math.Sqrt2)
		// At chance, or frozen: not one prediction changed its answer (and
		// not because every one was right from the start).
		frozen := slices.Min(pr.vals) == slices.Max(pr.vals) && level < 1-s.cfg.AccNoise
		if !at.stuck && level <= start+noise && (level <= s.cfg.AccChance || frozen) {
			at.stuck = true
			out = append(out, s.noProgressAnomaly(st, p, start, level))
		}
		return out
	}
	start := s.start(pr)
	if v-start >= math.Log(s.cfg.ExplodeFactor) && !st.fired[Divergence] && n <= s.cfg.SpikeMinPoints {
		st.fired[Divergence] = true
		out = append(out, s.explodedAnomaly(st, p, math.Exp(start), n))
	}
	if n < s.cfg.ProgressWarmup {
		return out
	}
	if !pr.notMean && !pr.blewUp {
		// It may be a running mean, unless it is quiet: a mean of a batch
		// or two swings by the batches' noise, a flat loss barely moves.
		s.scratch = append(s.scratch[:0], pr.vals...)
		_, mad, sc := medianMAD(s.scratch, s.scratch2)
		s.scratch2 = sc
		if 1.4826*mad >= quietSpread {
			return out
		}
	}
	// Where it started: the first quarter, blow-ups left out; where it is:
	// the last quarter.
	b := min(n, max(s.cfg.ProgressFirst, n/4))
	s.scratch = s.scratch[:0]
	for _, x := range pr.vals[:b] {
		if x-start < math.Log(s.cfg.ExplodeFactor) {
			s.scratch = append(s.scratch, x)
		}
	}
	first, firstMAD, sc := medianMAD(s.scratch, s.scratch2)
	s.scratch2 = sc
	nFirst := len(s.scratch)
	s.scratch = append(s.scratch[:0], pr.vals[n-b:]...)
	level, levelMAD, sc := medianMAD(s.scratch, s.scratch2)
	s.scratch2 = sc
	// The standard error of a median is about 1.25 σ/√n; σ ≈ 1.4826 MAD.
	se := 1.2533 * 1.4826 * math.Sqrt(firstMAD*firstMAD/float64(nFirst)+levelMAD*levelMAD/float64(b))
	drop := first - level
	switch {
	case drop-s.cfg.ProgressZ*se > s.cfg.ProgressMinDrop:
		pr.judged = true // it surely went down
	case drop+s.cfg.ProgressZ*se < s.cfg.ProgressMinDrop:
		pr.judged = true
		if !at.stuck {
			at.stuck = true
			out = append(out, s.noProgressAnomaly(st, p, math.Exp(first), math.Exp(level)))
		}
	}
	return out
}

func (s *Sentinel) explodedAnomaly(st *stream, p Point, start float64, n int) Anomaly {
	ev := Evidence{FromStep: p.Step, ToStep: p.Step, Steps: []int64{p.Step}, Values: []Num{Num(p.Value)},
		Stats: map[string]Num{"first_level": Num(start), "worst": Num(st.prog.worst),
			"worst_step": Num(st.prog.worstStep), "level": Num(p.Value), "factor": Num(p.Value / start)}}
	return s.metricAnomaly(Divergence, Critical, p, ev, fmt.Sprintf(
		"%s blew up at step %d, its point %d: %s, %s× where it started (%s).",
		p.Key, p.Step, n, g4(p.Value), g4(p.Value/start), g4(start)))
}

// noProgressAnomaly says that a loss (or an accuracy) is no better than
// where it started after the warm-up; where it started, its level now and
// its worst point are the evidence. A loss that blew up on the way gets
// the fix for a learning rate too high; one that never moved, the fix for
// a model that does not learn.
func (s *Sentinel) noProgressAnomaly(st *stream, p Point, start, level float64) Anomaly {
	pr := &st.prog
	n := len(pr.vals)
	ev := Evidence{FromStep: p.Step, ToStep: p.Step, Steps: []int64{pr.worstStep, p.Step},
		Values: []Num{Num(pr.worst), Num(p.Value)},
		Stats: map[string]Num{"first_level": Num(start), "level": Num(level), "worst": Num(pr.worst),
			"worst_step": Num(pr.worstStep), "points": Num(n)}}
	var msg string
	blewUp := false
	if st.role&roleLoss != 0 {
		blewUp = pr.worst >= s.cfg.ExplodeFactor*start
		msg = fmt.Sprintf("%s makes no progress: after %d points its level is %s, not below where it started (%s)",
			p.Key, n, g4(level), g4(start))
		if blewUp {
			msg += fmt.Sprintf("; it blew up to %s at step %d on the way", g4(pr.worst), pr.worstStep)
		}
		msg += "."
	} else {
		msg = fmt.Sprintf("%s sits at chance: after %d points it is %s, no better than where it started (%s) "+
			"or than a coin.", p.Key, n, g4(level), g4(start))
	}
	a := s.metricAnomaly(NoProgress, Warning, p, ev, msg)
	if blewUp {
		a.Fix = blewUpFix
	}
	return a
}
