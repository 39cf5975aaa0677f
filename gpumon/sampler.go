package gpumon

import (
	"context"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"
)

// Point is one sample of one GPU in the in-memory history. A float field
// the GPU did not report is NaN.
type Point struct {
	At         time.Time
	Util       float32 // %
	MemUsedMiB int64
	TempC      float32
	PowerW     float32
}

// Minute is one minute of one GPU, downsampled for storage. A float field
// the GPU never reported during the minute is NaN. Simulated marks pretend
// telemetry (a simulated source), so that no stored record can pass for a
// measurement; the app stores it as storage.GPUSample (and the GPU's
// identity, Index to PowerLimitW, in the inventory of GPUs ever seen).
type Minute struct {
	GPU       string // UUID
	Minute    time.Time
	Simulated bool
	Samples   int // readings the minute is made of

	Index       int
	Name        string
	MemTotalMiB int64
	PowerLimitW float64 // NaN when not reported

	UtilMin, UtilMean, UtilMax          float64
	MemUsedMin, MemUsedMean, MemUsedMax int64
	TempMean, TempMax                   float64
	PowerMean, PowerMax                 float64
	// Throttled counts the readings whose clocks a limit held down (thermal,
	// power, a hardware slowdown; idleness is no limit), and
	// ThrottleReasons names those limits, sorted.
	Throttled       int
	ThrottleReasons []string
	// XIDs are the XID errors reported during the minute, oldest first.
	XIDs []uint64
	// Owners is the memory each run's stage held on the GPU during the
	// minute, by run then stage.
	Owners []OwnerMinute
}

// OwnerMinute is the GPU memory one stage of one run held during a minute:
// the mean over the readings in which it held any, and the peak.
type OwnerMinute struct {
	Owner
	Samples               int
	MemMeanMiB, MemMaxMiB int64
}

// SamplerOptions tunes a Sampler. The zero value samples at 1 Hz, keeps an
// hour of history and stores nothing.
type SamplerOptions struct {
	Interval time.Duration // default 1 s
	History  int           // points kept per GPU; default one hour at Interval
	// Store receives each finished minute of every GPU (nil: not stored).
	Store func(ctx context.Context, m []Minute) error
	// Prune, when set, deletes stored minutes older than before; the
	// sampler calls it at start and then hourly with now - Retention.
	Prune     func(ctx context.Context, before time.Time) error
	Retention time.Duration // default 30 days
	// OnSample, when set, sees every successful snapshot (the sentinel's
	// feed), on the sampler's goroutine: it must not block for long.
	OnSample func(Snapshot)
	Logger   *slog.Logger
	Now      func() time.Time // nil is time.Now
}

// Sampler polls a Source, keeps the latest snapshot and a ring of history
// per GPU, and hands per-minute aggregates to Store. It is itself a Source
// (returning the latest snapshot, so the engine's scheduling passes cost
// nothing) and an Assigner (forwarding to the source, if it is one).
type Sampler struct {
	src  Source
	opts SamplerOptions

	mu      sync.Mutex
	last    Snapshot
	lastErr error
	have    bool
	hist    map[string]*ring
	minute  time.Time
	agg     map[string]*minuteAgg
	pending []Minute // finished minutes not yet stored
	pruned  time.Time
}

// NewSampler returns a sampler over src. Call Run to start sampling.
func NewSampler(src Source, o SamplerOptions) *Sampler {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.History <= 0 {
		o.History = int(time.Hour / o.Interval)
	}
	if o.Retention <= 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sampler{src: src, opts: o, hist: map[string]*ring{}, agg: map[string]*minuteAgg{}}
}

// Run samples every Interval until ctx is done, then stores what it has of
// the current minute. It returns nil when ctx ends.
func (s *Sampler) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		if _, err := s.Sample(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("GPU sample failed", "err", err)
		}
		s.store(ctx)
		s.prune(ctx)
		select {
		case <-ctx.Done():
			s.flush()
			s.store(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
		}
	}
}

// Sample takes one snapshot from the source now and records it.
func (s *Sampler) Sample(ctx context.Context) (Snapshot, error) {
	snap, err := s.src.Snapshot(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.have, s.lastErr = true, err
	if err != nil {
		return snap, err
	}
	s.last = snap
	at := snap.At
	if at.IsZero() {
		at = s.opts.Now()
	}
	if m := at.Truncate(time.Minute); !m.Equal(s.minute) {
		s.finishMinute()
		s.minute = m
	}
	for _, g := range snap.GPUs {
		if g.UUID == "" {
			continue
		}
		p := pointOf(at, g)
		r := s.hist[g.UUID]
		if r == nil {
			r = &ring{buf: make([]Point, s.opts.History)}
			s.hist[g.UUID] = r
		}
		r.add(p)
		a := s.agg[g.UUID]
		if a == nil {
			a = newMinuteAgg()
			s.agg[g.UUID] = a
		}
		a.add(p, g, snap.Simulated)
	}
	if s.opts.OnSample != nil {
		s.opts.OnSample(snap)
	}
	return snap, nil
}

// Snapshot implements Source: the latest sample, or a fresh one when the
// sampler has not sampled yet.
func (s *Sampler) Snapshot(ctx context.Context) (Snapshot, error) {
	s.mu.Lock()
	have, last, err := s.have, s.last, s.lastErr
	s.mu.Unlock()
	if !have {
		return s.Sample(ctx)
	}
	return last, err
}

// History returns the points of one GPU, oldest first.
func (s *Sampler) History(uuid string) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.hist[uuid]; r != nil {
		return r.points()
	}
	return nil
}

// Assign implements Assigner by forwarding to the source, when it is one.
func (s *Sampler) Assign(uuid, holder string, memMiB int64) {
	if a, ok := s.src.(Assigner); ok {
		a.Assign(uuid, holder, memMiB)
	}
}

// Release implements Assigner by forwarding to the source, when it is one.
func (s *Sampler) Release(uuid, holder string) {
	if a, ok := s.src.(Assigner); ok {
		a.Release(uuid, holder)
	}
}

// finishMinute moves the current minute's aggregates to pending. The
// caller holds s.mu.
func (s *Sampler) finishMinute() {
	for uuid, a := range s.agg {
		if a.n > 0 {
			s.pending = append(s.pending, a.minute(uuid, s.minute))
		}
	}
	clear(s.agg)
}

// flush finishes the current minute early (at shutdown).
func (s *Sampler) flush() {
	s.mu.Lock()
	s.finishMinute()
	s.mu.Unlock()
}

// store hands pending minutes to Store; on failure they are kept for the
// next try, up to a day of them.
func (s *Sampler) store(ctx context.Context) {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(batch) == 0 || s.opts.Store == nil {
		return
	}
	if err := s.opts.Store(ctx, batch); err != nil {
		s.opts.Logger.Warn("storing GPU samples failed; will retry", "minutes", len(batch), "err", err)
		s.mu.Lock()
		s.pending = append(batch, s.pending...)
		if n := len(s.pending); n > 24*60*8 {
			s.pending = s.pending[n-24*60*8:]
		}
		s.mu.Unlock()
	}
}

// prune applies the retention at most once an hour.
func (s *Sampler) prune(ctx context.Context) {
	now := s.opts.Now()
	if s.opts.Prune == nil || (!s.pruned.IsZero() && now.Sub(s.pruned) < time.Hour) {
		return
	}
	s.pruned = now
	if err := s.opts.Prune(ctx, now.Add(-s.opts.Retention)); err != nil {
		s.opts.Logger.Warn("pruning old GPU samples failed", "err", err)
	}
}

func pointOf(at time.Time, g GPU) Point {
	return Point{At: at, Util: opt32(g.UtilPercent), MemUsedMiB: g.MemUsedMiB, TempC: opt32(g.TempC), PowerW: opt32(g.PowerW)}
}

func opt32(p *float64) float32 {
	if p == nil {
		return float32(math.NaN())
	}
	return float32(*p)
}

// ring is a fixed-size history, overwriting the oldest point.
type ring struct {
	buf  []Point
	next int
	full bool
}

func (r *ring) add(p Point) {
	r.buf[r.next] = p
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

func (r *ring) points() []Point {
	if !r.full {
		return append([]Point(nil), r.buf[:r.next]...)
	}
	out := make([]Point, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// minuteAgg accumulates one GPU's minute. NaN values (not reported) are
// left out of their field's statistics.
type minuteAgg struct {
	n                      int
	last                   GPU // the identity of the GPU (name, index, memory) as last seen
	simulated              bool
	util                   stat
	memMin, memMax, memSum int64
	temp                   stat
	power                  stat
	throttled              int
	reasons                map[string]bool
	xids                   []uint64
	owners                 map[Owner]*ownerAgg
}

type ownerAgg struct {
	n        int
	sum, max int64
}

type stat struct {
	n             int
	min, max, sum float64
}

func (s *stat) add(v float32) {
	if math.IsNaN(float64(v)) {
		return
	}
	f := float64(v)
	if s.n == 0 || f < s.min {
		s.min = f
	}
	if s.n == 0 || f > s.max {
		s.max = f
	}
	s.n++
	s.sum += f
}

func (s stat) mean() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	return s.sum / float64(s.n)
}

func (s stat) lo() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	return s.min
}

func (s stat) hi() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	return s.max
}

func newMinuteAgg() *minuteAgg {
	return &minuteAgg{reasons: map[string]bool{}, owners: map[Owner]*ownerAgg{}}
}

// notLimits are the clock event reasons that hold no work back: an idle
// GPU, clocks set on purpose, boost kept in step across GPUs.
var notLimits = map[string]bool{"gpu_idle": true, "applications_clocks_setting": true,
	"display_clock_setting": true, "sync_boost": true}

// IsLimit reports whether a clock event reason (GPU.ThrottleReasons) is a
// limit holding work back: a thermal or power limit, a hardware slowdown.
func IsLimit(reason string) bool { return !notLimits[reason] }

func (a *minuteAgg) add(p Point, g GPU, simulated bool) {
	if a.n == 0 || p.MemUsedMiB < a.memMin {
		a.memMin = p.MemUsedMiB
	}
	if a.n == 0 || p.MemUsedMiB > a.memMax {
		a.memMax = p.MemUsedMiB
	}
	a.memSum += p.MemUsedMiB
	a.n++
	a.last, a.simulated = g, a.simulated || simulated
	a.util.add(p.Util)
	a.power.add(p.PowerW)
	a.temp.add(p.TempC)
	held := false
	for _, r := range g.ThrottleReasons {
		if IsLimit(r) {
			a.reasons[r], held = true, true
		}
	}
	if held {
		a.throttled++
	}
	a.xids = append(a.xids, g.XIDs...)
	here := map[Owner]int64{}
	for _, pr := range g.Processes {
		if pr.Owner != nil && pr.Owner.RunID != "" {
			here[Owner{RunID: pr.Owner.RunID, Stage: pr.Owner.Stage}] += pr.MemMiB
		}
	}
	for o, mib := range here {
		oa := a.owners[o]
		if oa == nil {
			oa = &ownerAgg{}
			a.owners[o] = oa
		}
		oa.n++
		oa.sum += mib
		oa.max = max(oa.max, mib)
	}
}

func (a *minuteAgg) minute(uuid string, m time.Time) Minute {
	out := Minute{GPU: uuid, Minute: m, Simulated: a.simulated, Samples: a.n,
		Index: a.last.Index, Name: a.last.Name, MemTotalMiB: a.last.MemTotalMiB, PowerLimitW: math.NaN(),
		UtilMin: a.util.lo(), UtilMean: a.util.mean(), UtilMax: a.util.hi(),
		MemUsedMin: a.memMin, MemUsedMean: a.memSum / int64(a.n), MemUsedMax: a.memMax,
		TempMean: a.temp.mean(), TempMax: a.temp.hi(), PowerMean: a.power.mean(), PowerMax: a.power.hi(),
		Throttled: a.throttled, XIDs: a.xids}
	if a.last.PowerLimitW != nil {
		out.PowerLimitW = *a.last.PowerLimitW
	}
	for r := range a.reasons {
		out.ThrottleReasons = append(out.ThrottleReasons, r)
	}
	sort.Strings(out.ThrottleReasons)
	for o, oa := range a.owners {
		out.Owners = append(out.Owners, OwnerMinute{Owner: o, Samples: oa.n, MemMeanMiB: oa.sum / int64(oa.n), MemMaxMiB: oa.max})
	}
	sort.Slice(out.Owners, func(i, j int) bool {
		x, y := out.Owners[i], out.Owners[j]
		if x.RunID != y.RunID {
			return x.RunID < y.RunID
		}
		return x.Stage < y.Stage
	})
	return out
}
