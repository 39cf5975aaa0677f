package sentinel

import (
	"math"
	"sort"
	"time"
)

// gpuState is the detectors' state for one GPU.
type gpuState struct {
	hot      int // samples in a row near the slowdown threshold
	hotFired bool
	hotTemps ring
	util     ring
	stallOn  bool // a stall was reported and the pattern has not cleared
	ecc      int64
	runs     map[string]*runOnGPU
}

// runOnGPU is one run's footprint on one GPU.
type runOnGPU struct {
	mem       ring
	memT      ring // seconds since first
	t0        time.Time
	leakFired bool
	idleSince time.Time
	idleFired bool
}

// ObserveGPU feeds one telemetry sample and returns the anomalies it tipped.
func (s *Sentinel) ObserveGPU(g GPUSample) []Anomaly {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.gpus[g.UUID]
	if st == nil {
		st = &gpuState{hotTemps: newRing(s.cfg.HotSamples), util: newRing(s.cfg.StallWindow),
			ecc: -1, runs: map[string]*runOnGPU{}}
		s.gpus[g.UUID] = st
	}
	var out []Anomaly

	// Health: XIDs and new uncorrected ECC errors, immediately.
	if len(g.XIDs) > 0 {
		out = append(out, s.xidAnomaly(g))
	}
	if g.ECCUncorrected >= 0 {
		if st.ecc >= 0 && g.ECCUncorrected > st.ecc {
			out = append(out, s.eccAnomaly(g, st.ecc))
		}
		st.ecc = g.ECCUncorrected
	}

	// Overheating.
	if !math.IsNaN(g.TempC) {
		st.hotTemps.push(g.TempC)
		near := g.SlowdownTempC > 0 && g.TempC >= g.SlowdownTempC-s.cfg.HotMargin
		if near {
			st.hot++
		} else {
			st.hot = 0
		}
		if !st.hotFired && (g.Throttle.Thermal() || st.hot >= s.cfg.HotSamples) {
			st.hotFired = true
			out = append(out, s.hotAnomaly(g, st))
		}
		if !near && !g.Throttle.Thermal() && st.hot == 0 && st.hotFired && g.SlowdownTempC > 0 &&
			g.TempC < g.SlowdownTempC-2*s.cfg.HotMargin {
			st.hotFired = false // cooled well down: a new episode may be reported
		}
	}

	// Per-run memory: leak and idle.
	runs := make([]string, 0, len(g.RunMemMiB))
	for r := range g.RunMemMiB {
		runs = append(runs, r)
	}
	sort.Strings(runs)
	for _, run := range runs {
		ro := st.runs[run]
		if ro == nil {
			ro = &runOnGPU{mem: newRing(s.cfg.LeakWindow), memT: newRing(s.cfg.LeakWindow), t0: g.Time}
			st.runs[run] = ro
		}
		mem := g.RunMemMiB[run]
		if !math.IsNaN(mem) {
			ro.mem.push(mem)
			ro.memT.push(g.Time.Sub(ro.t0).Seconds())
			if !ro.leakFired {
				if a, ok := s.leakCheck(g, run, ro); ok {
					ro.leakFired = true
					out = append(out, a)
				}
			}
		}
		if !math.IsNaN(g.UtilPercent) && g.UtilPercent <= s.cfg.IdleUtil {
			if ro.idleSince.IsZero() {
				ro.idleSince = g.Time
			}
			if !ro.idleFired && g.Time.Sub(ro.idleSince) >= s.cfg.IdleAfter {
				ro.idleFired = true
				out = append(out, s.idleAnomaly(g, run, ro))
			}
		} else {
			ro.idleSince, ro.idleFired = time.Time{}, false
		}
	}
	for run := range st.runs {
		if _, ok := g.RunMemMiB[run]; !ok {
			delete(st.runs, run) // the run let go of the GPU
		}
	}

	// Data-pipeline stall: judged only while a run holds the GPU.
	if !math.IsNaN(g.UtilPercent) && len(g.RunMemMiB) > 0 {
		st.util.push(g.UtilPercent)
		if st.util.len() == s.cfg.StallWindow {
			if a, ok := s.stallCheck(g, st, runs); ok {
				out = append(out, a)
			}
		}
	} else if len(g.RunMemMiB) == 0 {
		st.util, st.stallOn = newRing(s.cfg.StallWindow), false
	}
	return out
}

// leakCheck fits a line to the run's memory over the window and both its
// halves; a single jump has a flat half and fails.
func (s *Sentinel) leakCheck(g GPUSample, run string, ro *runOnGPU) (Anomaly, bool) {
	n := s.cfg.LeakWindow
	if ro.mem.len() < n {
		return Anomaly{}, false
	}
	y := ro.mem.values(nil)
	x := ro.memT.values(nil)
	b, se := slope(x, y)
	if b-s.cfg.LeakT*se <= 0 {
		return Anomaly{}, false
	}
	growth := b * (x[n-1] - x[0])
	if growth < s.cfg.LeakMinGrowthMiB {
		return Anomaly{}, false
	}
	// Not a single jump (an allocator growing its cache, a bigger batch):
	// the median of every quarter of the window must sit above the one
	// before by at least a quarter of the pace the fit implies.
	q := n / 4
	step := growth / 4 / 4
	prev := math.Inf(-1)
	for k := range 4 {
		m := median(append([]float64(nil), y[k*q:(k+1)*q]...))
		if m < prev+step {
			return Anomaly{}, false
		}
		prev = m
	}
	return s.leakAnomaly(g, run, x, y, b, se, growth), true
}

// stallCheck looks for a repeating pattern of near-zero utilisation.
func (s *Sentinel) stallCheck(g GPUSample, st *gpuState, runs []string) (Anomaly, bool) {
	u := st.util.values(nil)
	low := make([]float64, len(u))
	var nLow float64
	for i, v := range u {
		if v < s.cfg.StallLow {
			low[i] = 1
			nLow++
		}
	}
	share := nLow / float64(len(u))
	if share < s.cfg.StallShare || share > s.cfg.StallMaxShare {
		if share < s.cfg.StallShare/2 {
			st.stallOn = false
		}
		return Anomaly{}, false
	}
	acf, lag := periodicity(low, 0.3)
	if acf < s.cfg.StallACF || st.stallOn {
		return Anomaly{}, false
	}
	if len(g.Stage) > 0 {
		training := false
		for _, r := range runs {
			if isTraining(g.Stage[r]) {
				training = true
			}
		}
		if !training {
			return Anomaly{}, false
		}
	}
	st.stallOn = true
	return s.stallAnomaly(g, runs, u, share, acf, lag), true
}

// isTraining reports whether a stage name looks like training (or is unknown).
func isTraining(stage string) bool {
	return stage == "" || containsAny(stage, "train", "fit", "finetune", "pretrain", "sft")
}

// queueState is what the stuck-in-queue detector knows of a waiting stage.
type queueState struct {
	since    time.Time // the wait this state is about
	ahead    int       // runs ahead at the last observation; negative = unknown
	moved    time.Time // when it last moved up
	reported bool
}

// ObserveQueue judges one queued stage at now and returns a stuck-in-queue
// anomaly the first time it has gone QueueAfter without progress: waiting
// that long, and not moving up in the queue for that long either (a long
// queue that keeps moving is not stuck). A stage the shepherd says can
// never start here (codes never_fits and no_gpus) is stuck after
// QueueNeverAfter: waiting longer changes nothing.
func (s *Sentinel) ObserveQueue(q QueueObservation, now time.Time) []Anomaly {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.WaitingSince.IsZero() {
		return nil
	}
	k := attemptKey{q.Run, q.Stage, 0}
	st := s.queued[k]
	if st == nil || !st.since.Equal(q.WaitingSince) { // a new wait (after an attempt)
		st = &queueState{since: q.WaitingSince, ahead: q.Ahead, moved: q.WaitingSince}
		s.queued[k] = st
	}
	if q.Ahead >= 0 && st.ahead >= 0 && q.Ahead < st.ahead {
		st.moved = now
	}
	st.ahead = q.Ahead
	if st.reported {
		return nil
	}
	limit := s.cfg.QueueAfter
	if q.Code == "never_fits" || q.Code == "no_gpus" {
		limit = min(limit, s.cfg.QueueNeverAfter)
	}
	if still := now.Sub(st.moved); still >= limit {
		st.reported = true
		return []Anomaly{s.queueAnomaly(q, now, now.Sub(q.WaitingSince), still)}
	}
	return nil
}
