package sentinel

import (
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// Sentinel runs every detector over the streams it is fed. Each detector
// reports a stream (one metric of one attempt, one run on one GPU, one GPU)
// at most once, so a diverging run yields one divergence anomaly, not one
// per step. It is safe for concurrent use.
type Sentinel struct {
	cfg Config

	mu       sync.Mutex
	streams  map[streamKey]*stream
	attempts map[attemptKey]*attemptState
	gpus     map[string]*gpuState
	queued   map[attemptKey]*queueState // stages waiting in the queue
	goals    map[string]goal            // per-run objective (SetObjective)
	scratch  []float64
	scratch2 []float64
}

// New returns a sentinel with cfg; zero fields of cfg take DefaultConfig's
// values.
func New(cfg Config) *Sentinel {
	d := DefaultConfig()
	fill := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	filli := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	filld := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	if cfg.Objective == "" {
		cfg.Objective, cfg.Maximize = d.Objective, d.Maximize
	}
	filli(&cfg.SpikeWindow, d.SpikeWindow)
	filli(&cfg.SpikeMinPoints, d.SpikeMinPoints)
	fill(&cfg.SpikeZ, d.SpikeZ)
	fill(&cfg.SpikeMinRatio, d.SpikeMinRatio)
	filli(&cfg.DivWindow, d.DivWindow)
	filli(&cfg.DivLevelWindow, d.DivLevelWindow)
	filli(&cfg.DivWarmup, d.DivWarmup)
	fill(&cfg.DivK, d.DivK)
	fill(&cfg.DivH, d.DivH)
	fill(&cfg.DivClip, d.DivClip)
	fill(&cfg.DivFloor, d.DivFloor)
	filli(&cfg.GradWindow, d.GradWindow)
	fill(&cfg.GradFactor, d.GradFactor)
	filli(&cfg.PlateauPatience, d.PlateauPatience)
	filli(&cfg.PlateauSmooth, d.PlateauSmooth)
	fill(&cfg.PlateauMinDelta, d.PlateauMinDelta)
	fill(&cfg.PlateauBand, d.PlateauBand)
	filli(&cfg.ProgressWarmup, d.ProgressWarmup)
	filli(&cfg.ProgressMaxPoints, d.ProgressMaxPoints)
	filli(&cfg.ProgressFirst, d.ProgressFirst)
	fill(&cfg.ProgressZ, d.ProgressZ)
	fill(&cfg.ProgressMinDrop, d.ProgressMinDrop)
	fill(&cfg.ExplodeFactor, d.ExplodeFactor)
	filli(&cfg.AccWarmup, d.AccWarmup)
	fill(&cfg.AccNoise, d.AccNoise)
	fill(&cfg.AccChance, d.AccChance)
	filld(&cfg.HangMin, d.HangMin)
	fill(&cfg.HangFactor, d.HangFactor)
	fill(&cfg.HotMargin, d.HotMargin)
	filli(&cfg.HotSamples, d.HotSamples)
	filli(&cfg.LeakWindow, d.LeakWindow)
	fill(&cfg.LeakT, d.LeakT)
	fill(&cfg.LeakMinGrowthMiB, d.LeakMinGrowthMiB)
	filli(&cfg.StallWindow, d.StallWindow)
	fill(&cfg.StallLow, d.StallLow)
	fill(&cfg.StallShare, d.StallShare)
	fill(&cfg.StallMaxShare, d.StallMaxShare)
	fill(&cfg.StallACF, d.StallACF)
	fill(&cfg.IdleUtil, d.IdleUtil)
	filld(&cfg.IdleAfter, d.IdleAfter)
	filld(&cfg.QueueAfter, d.QueueAfter)
	filld(&cfg.QueueNeverAfter, d.QueueNeverAfter)
	return &Sentinel{
		cfg:      cfg,
		streams:  map[streamKey]*stream{},
		attempts: map[attemptKey]*attemptState{},
		gpus:     map[string]*gpuState{},
		queued:   map[attemptKey]*queueState{},
		goals:    map[string]goal{},
	}
}

// goal is a run's objective metric and its direction.
type goal struct {
	key      string
	maximize bool
}

// SetObjective sets the metric the plateau detector follows for one run
// (its template's objective) instead of Config.Objective. Call it before
// the run's first point.
func (s *Sentinel) SetObjective(run, key string, maximize bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.goals[run] = goal{key, maximize}
}

// EndRun forgets a run's objective.
func (s *Sentinel) EndRun(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.goals, run)
}

// Config returns the configuration in use (with defaults filled in).
func (s *Sentinel) Config() Config { return s.cfg }

type streamKey struct {
	run, stage string
	attempt    int
	key        string
}

type attemptKey struct {
	run, stage string
	attempt    int
}

// role says which detectors a metric key feeds.
type role uint8

const (
	roleLoss      role = 1 << iota // spike, divergence
	roleGrad                       // gradient explosion
	roleObjective                  // plateau
	roleAccuracy                   // no progress: a validation accuracy at chance
)

// roleOf classifies a metric name. Training losses feed the spike and
// divergence detectors; validation losses do not, because a slowly rising
// validation loss is overfitting, not divergence.
func (s *Sentinel) roleOf(run, key string) (role, bool) {
	var r role
	k := strings.ToLower(key)
	held := strings.HasPrefix(k, "val") || strings.HasPrefix(k, "test") || strings.HasPrefix(k, "eval")
	if strings.Contains(k, "loss") && !held {
		r |= roleLoss
	}
	if strings.Contains(k, "acc") && held {
		r |= roleAccuracy
	}
	if strings.Contains(k, "grad") && strings.Contains(k, "norm") {
		r |= roleGrad
	}
	g, ok := s.goals[run]
	if !ok {
		g = goal{s.cfg.Objective, s.cfg.Maximize}
	}
	if key == g.key {
		r |= roleObjective
	}
	return r, g.maximize
}

// stream is the detectors' state for one metric of one attempt.
type stream struct {
	role  role
	fired map[Kind]bool

	// loss: recent log values (spike) and increments (divergence scale)
	logs     ring
	logSteps ring
	prevLog  float64
	hasPrev  bool
	incs     ring
	level    ring    // the last DivLevelWindow values, for the rolling median
	ref      float64 // the best (lowest) rolling median so far
	refStep  int64
	cusum    float64
	cusumAt  int64 // the step the current CUSUM excursion began
	raw      bool  // a non-positive value was seen: work on raw values

	// Running means (Keras logs the mean over the epoch so far, which
	// restarts every epoch) are recognised on the values as they arrive:
	// arrIncs are the recent steps between arrivals, early the sizes of
	// the first steps since the last restart, segN the points since it.
	// Once one restart is seen, the detectors judge only each epoch's
	// final mean (lastY, lastP: the latest arrival).
	arrIncs ring
	arrPrev float64
	hasArr  bool
	early   []float64
	segN    int
	resets  int
	hasRef  bool // ref holds a level
	lastY   float64
	lastP   Point

	// grad
	grads ring

	// progress (loss and validation accuracy)
	prog progress

	// plateau
	maximize  bool
	recent    ring
	best      float64
	bestStep  int64
	sinceBest int
	hasBest   bool
}

type attemptState struct {
	lastWall time.Time
	lastStep int64
	gaps     ring // seconds between metric lines
	ended    bool
	fired    bool // hang
	stuck    bool // no progress: said once per attempt, whichever metric said it first
}

// Observe feeds one metric point and returns the anomalies it tipped.
func (s *Sentinel) Observe(p Point) []Anomaly {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.observe(p, nil)
}

// ObserveAll feeds points in order and returns every anomaly they tipped.
func (s *Sentinel) ObserveAll(pts []Point) []Anomaly {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Anomaly
	for _, p := range pts {
		out = s.observe(p, out)
	}
	return out
}

func (s *Sentinel) observe(p Point, out []Anomaly) []Anomaly {
	ak := attemptKey{p.Run, p.Stage, p.Attempt}
	at := s.attempts[ak]
	if at == nil {
		at = &attemptState{gaps: newRing(20), lastStep: math.MinInt64}
		s.attempts[ak] = at
	}
	if !p.Wall.IsZero() {
		// One metric line carries several points with the same wall time;
		// a gap is the time between lines.
		if !at.lastWall.IsZero() && p.Wall.After(at.lastWall) {
			at.gaps.push(p.Wall.Sub(at.lastWall).Seconds())
		}
		if p.Wall.After(at.lastWall) {
			at.lastWall = p.Wall
		}
	}
	at.lastStep = max(at.lastStep, p.Step)

	k := streamKey{p.Run, p.Stage, p.Attempt, p.Key}
	st := s.streams[k]
	if st == nil {
		st = &stream{fired: map[Kind]bool{}}
		st.role, st.maximize = s.roleOf(p.Run, p.Key)
		if st.role&roleLoss != 0 {
			st.logs, st.logSteps, st.incs = newRing(s.cfg.SpikeWindow), newRing(s.cfg.SpikeWindow), newRing(s.cfg.DivWindow)
			st.level = newRing(s.cfg.DivLevelWindow)
			st.arrIncs = newRing(runningMeanRecent)
		}
		if st.role&roleGrad != 0 {
			st.grads = newRing(s.cfg.GradWindow)
		}
		if st.role&roleObjective != 0 {
			st.recent = newRing(s.cfg.PlateauSmooth)
		}
		s.streams[k] = st
	}
	if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
		if !st.fired[NaN] {
			st.fired[NaN] = true
			out = append(out, s.nanAnomaly(p))
		}
		return out
	}
	if st.role&(roleLoss|roleAccuracy) != 0 {
		// First: a loss that blew up before the spike detector has a
		// window is divergence, and the detectors below then stay quiet.
		out = s.progressDetector(st, at, p, out)
	}
	if st.role&roleLoss != 0 {
		out = s.lossDetectors(st, p, out)
	}
	if st.role&roleGrad != 0 {
		out = s.gradDetector(st, p, out)
	}
	if st.role&roleObjective != 0 {
		out = s.plateauDetector(st, p, out)
	}
	return out
}

func (s *Sentinel) lossDetectors(st *stream, p Point, out []Anomaly) []Anomaly {
	y := p.Value
	if !st.raw && y <= 0 {
		// Log scale needs positive values; a loss that can go negative
		// (an ELBO, a log-likelihood) is judged on its raw values.
		st.raw = true
		st.logs, st.logSteps, st.incs = newRing(s.cfg.SpikeWindow), newRing(s.cfg.SpikeWindow), newRing(s.cfg.DivWindow)
		st.level = newRing(s.cfg.DivLevelWindow)
		st.hasPrev, st.cusum, st.hasRef = false, 0, false
		st.arrIncs, st.hasArr, st.early, st.segN = newRing(runningMeanRecent), false, nil, 0
	}
	if !st.raw {
		y = math.Log(y)
	}
	restart := false
	if st.hasArr {
		d := y - st.arrPrev
		restart = s.restarted(st, math.Abs(d))
		if !restart {
			st.arrIncs.push(d)
			if len(st.early) < runningMeanEarly {
				st.early = append(st.early, math.Abs(d))
			}
		}
	}
	st.arrPrev, st.hasArr = y, true
	st.segN++
	if restart {
		// A running mean restarted with a new epoch: its jump is no spike,
		// and its first points average a handful of batches. From now on
		// the detectors judge each epoch's final mean, the one before the
		// restart, as a point of its own.
		st.resets++
		if st.resets == 1 {
			// What they saw so far were the first epoch's partial means.
			st.logs, st.logSteps, st.incs = newRing(s.cfg.SpikeWindow), newRing(s.cfg.SpikeWindow), newRing(s.cfg.DivWindow)
			st.level = newRing(s.cfg.DivLevelWindow)
			st.hasPrev, st.cusum, st.hasRef = false, 0, false
		}
		endY, endP := st.lastY, st.lastP
		st.lastY, st.lastP = y, p
		return s.judgeLoss(st, endY, endP, out)
	}
	st.lastY, st.lastP = y, p
	if st.resets > 0 {
		return out // inside an epoch of a running mean: wait for its end
	}
	return s.judgeLoss(st, y, p, out)
}

// judgeLoss runs the spike and divergence detectors on one value y (log
// scale unless the stream is raw) of point p.
func (s *Sentinel) judgeLoss(st *stream, y float64, p Point, out []Anomaly) []Anomaly {
	incMAD, hasIncMAD := 0.0, false // the MAD of the recent increments, once per point
	stepMAD := func() float64 {
		if !hasIncMAD {
			s.scratch = st.incs.values(s.scratch[:0])
			_, incMAD, s.scratch2 = medianMAD(s.scratch, s.scratch2)
			hasIncMAD = true
		}
		return incMAD
	}
	// Loss spike: robust z-score against the previous window. Once the
	// stream diverges, every later value is "a spike": say it once.
	if !st.fired[LossSpike] && !st.fired[Divergence] && st.logs.len() >= s.cfg.SpikeMinPoints {
		s.scratch = st.logs.values(s.scratch[:0])
		med, mad, sc := medianMAD(s.scratch, s.scratch2)
		s.scratch2 = sc
		scale := 1.4826 * mad
		if st.incs.len() >= s.cfg.SpikeMinPoints {
			// A loss still falling fast spreads its window by its trend;
			// its steps' spread is its noise (half as much again, since a
			// step is the difference of two noisy values).
			scale = min(scale, 1.4826*stepMAD()/math.Sqrt2)
		}
		scale = max(scale, s.floor(st, med))
		z := (y - med) / scale
		ratioOK := st.raw || y-med >= math.Log(s.cfg.SpikeMinRatio)
		if z >= s.cfg.SpikeZ && ratioOK {
			st.fired[LossSpike] = true
			out = append(out, s.spikeAnomaly(st, p, z, med))
		}
	}
	// Divergence: a one-sided CUSUM of how far the loss sits above the best
	// level it has reached (the lowest rolling median so far), in units of
	// its step-to-step noise, each step clipped so one outlier cannot trip
	// it alone.
	// It waits for DivWarmup increments to know the noise.
	if st.hasPrev && st.hasRef && !st.fired[Divergence] && st.incs.len() >= s.cfg.DivWarmup && !s.converging(st) {
		scale := max(s.floor(st, st.ref), 1.4826*stepMAD()/math.Sqrt2)
		u := min(max((y-st.ref)/scale, -s.cfg.DivClip), s.cfg.DivClip)
		if st.cusum == 0 {
			st.cusumAt = p.Step
		}
		st.cusum = max(0, st.cusum+u-s.cfg.DivK)
		if st.cusum >= s.cfg.DivH {
			st.fired[Divergence] = true
			out = append(out, s.divergenceAnomaly(st, p))
		}
	}
	if st.hasPrev {
		st.incs.push(y - st.prevLog)
	}
	st.level.push(y)
	s.scratch = st.level.values(s.scratch[:0])
	// The reference is a level: a rolling median of at least refMinPoints
	// values (the first points of a running mean average only a batch or
	// two, and one lucky batch would make a level it can never keep).
	if m := median(s.scratch); st.level.len() >= refMinPoints && (!st.hasRef || m < st.ref) {
		st.ref, st.refStep, st.hasRef = m, p.Step, true
	}
	st.prevLog, st.hasPrev = y, true
	st.logs.push(y)
	st.logSteps.push(float64(p.Step))
	return out
}

// Running-mean recognition. A running mean m_n = mean(x_1..x_n) moves by
// (x_n − m_{n−1})/n: its steps shrink like 1/n as the epoch goes on, and
// when the mean restarts with the next epoch it jumps by about one raw
// value's spread. A jump at least runningMeanJump times the recent steps,
// on a stretch whose first steps were at least runningMeanDecay times its
// recent ones, is such a restart. A noisy loss logged point by point has
// steps of one size throughout (that ratio stays near 1), so its spikes
// are never taken for restarts.
const (
	refMinPoints      = 5  // values behind the divergence detector's reference level
	runningMeanEarly  = 10 // steps that measure the start of a stretch
	runningMeanRecent = 20 // steps that measure its present
	runningMeanMinN   = 30 // a stretch this long before a restart counts
	runningMeanJump   = 20
	runningMeanDecay  = 5
)

// converging reports whether a young stream (its first 4·runningMeanMinN
// points, no restart seen yet) is going down in ever smaller steps: its
// recent steps are half its first ones or less, and it has never blown up
// (reached Config.ExplodeFactor times where it started). That is a running
// mean settling (or a loss falling fast): a rise in it is the mean finding
// its level, not divergence. A loss falling back from a blow-up also takes
// ever smaller steps, but it is not converging.
func (s *Sentinel) converging(st *stream) bool {
	if st.resets > 0 || st.segN > 4*runningMeanMinN || len(st.early) < 5 || st.arrIncs.len() < 5 || st.prog.blewUp {
		return false
	}
	s.scratch = st.arrIncs.values(s.scratch[:0])
	last := s.scratch[len(s.scratch)-5:]
	for i, v := range last {
		last[i] = math.Abs(v)
	}
	r := median(last)
	s.scratch2 = append(s.scratch2[:0], st.early[:5]...)
	return median(s.scratch2) >= 2*r
}

// restarted reports whether a step of size d ends a running mean's epoch;
// it starts a new stretch when it does.
func (s *Sentinel) restarted(st *stream, d float64) bool {
	if st.segN < runningMeanMinN || len(st.early) < runningMeanEarly || st.arrIncs.len() < runningMeanRecent {
		return false
	}
	s.scratch = st.arrIncs.values(s.scratch[:0])
	for i, v := range s.scratch {
		s.scratch[i] = math.Abs(v)
	}
	r := median(s.scratch)
	s.scratch2 = append(s.scratch2[:0], st.early...)
	e := median(s.scratch2)
	if r <= 0 || d < runningMeanJump*r || e < runningMeanDecay*r {
		return false
	}
	st.segN, st.early = 0, st.early[:0]
	st.arrIncs = newRing(runningMeanRecent)
	return true
}

// floor is the smallest scale a loss stream's noise is given: DivFloor in
// log units, or that share of the level on raw values.
func (s *Sentinel) floor(st *stream, level float64) float64 {
	if st.raw {
		return max(s.cfg.DivFloor*math.Abs(level), 1e-12)
	}
	return s.cfg.DivFloor
}

func (s *Sentinel) gradDetector(st *stream, p Point, out []Anomaly) []Anomaly {
	if !st.fired[GradExplosion] {
		if s.cfg.GradMax > 0 && p.Value > s.cfg.GradMax {
			st.fired[GradExplosion] = true
			return append(out, s.gradAnomaly(p, math.NaN(), "threshold"))
		}
		if st.grads.len() >= 5 {
			s.scratch = st.grads.values(s.scratch[:0])
			med := median(s.scratch)
			if med > 0 && p.Value >= s.cfg.GradFactor*med {
				st.fired[GradExplosion] = true
				out = append(out, s.gradAnomaly(p, med, "factor"))
			}
		}
	}
	st.grads.push(p.Value)
	return out
}

func (s *Sentinel) plateauDetector(st *stream, p Point, out []Anomaly) []Anomaly {
	st.recent.push(p.Value)
	if st.fired[Plateau] || st.recent.len() < s.cfg.PlateauSmooth {
		return out
	}
	s.scratch = st.recent.values(s.scratch[:0])
	m := median(s.scratch)
	better := func(a, b float64) bool { // a improves on b by the minimum delta
		d := s.cfg.PlateauMinDelta * math.Abs(b)
		if st.maximize {
			return a > b+d
		}
		return a < b-d
	}
	if !st.hasBest || better(m, st.best) {
		st.best, st.bestStep, st.sinceBest, st.hasBest = m, p.Step, 0, true
		return out
	}
	gap := math.Abs(m - st.best)
	if gap > plateauThrownBack*s.cfg.PlateauBand*math.Abs(st.best) {
		// Thrown far back (a bad batch undid the training) and climbing
		// out again: that is progress, so patience starts over.
		st.sinceBest = 0
		return out
	}
	st.sinceBest++
	near := gap <= s.cfg.PlateauBand*math.Abs(st.best)
	if st.sinceBest >= s.cfg.PlateauPatience && near {
		st.fired[Plateau] = true
		out = append(out, s.plateauAnomaly(st, p, m))
	}
	return out
}

// plateauThrownBack is how many PlateauBands above its best an objective
// must be for the plateau detector to count it as thrown back rather than
// noisy (5 × 10 %: half again its best).
const plateauThrownBack = 5

// EndAttempt tells the sentinel an attempt has ended, so the hang detector
// stops watching it, and frees its state.
func (s *Sentinel) EndAttempt(run, stage string, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.attempts, attemptKey{run, stage, attempt})
	for k := range s.streams {
		if k.run == run && k.stage == stage && k.attempt == attempt {
			delete(s.streams, k)
		}
	}
	delete(s.queued, attemptKey{run, stage, 0})
}

// Hold tells the hang detector that the attempts' metrics are held back
// (the engine's readers wait for the database) as of now: every attempt
// that has reported counts as having reported at now, so the silence while
// they wait is never called a hang.
func (s *Sentinel) Hold(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, at := range s.attempts {
		if !at.lastWall.IsZero() && now.After(at.lastWall) {
			at.lastWall = now
		}
	}
}

// Tick runs the time-based metric detector (hang) at now: every attempt that
// has reported metrics and not ended, whose last line is older than
// max(HangMin, HangFactor × its median gap). The engine calls it
// periodically (every few seconds) for attempts whose process is alive.
func (s *Sentinel) Tick(now time.Time) []Anomaly {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Anomaly
	for k, at := range s.attempts {
		if at.fired || at.lastWall.IsZero() {
			continue
		}
		limit := s.cfg.HangMin
		if at.gaps.len() >= 3 {
			s.scratch = at.gaps.values(s.scratch[:0])
			g := time.Duration(median(s.scratch) * s.cfg.HangFactor * float64(time.Second))
			limit = max(limit, g)
		}
		if quiet := now.Sub(at.lastWall); quiet >= limit {
			at.fired = true
			out = append(out, s.hangAnomaly(k, at, now, quiet, limit))
		}
	}
	sort.Slice(out, func(i, j int) bool { // map order is random; reports are not
		a, b := out[i], out[j]
		if a.Run != b.Run {
			return a.Run < b.Run
		}
		if a.Stage != b.Stage {
			return a.Stage < b.Stage
		}
		return a.Attempt < b.Attempt
	})
	return out
}
