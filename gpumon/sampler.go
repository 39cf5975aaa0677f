package gpumon

import (
	"context"
	"log/slog"
	"math"
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
// the GPU never reported during the minute is NaN. It mirrors
// storage.GPUSample field for field, so the app converts it in one line.
type Minute struct {
	GPU                                 string // UUID
	Minute                              time.Time
	UtilMin, UtilMean, UtilMax          float64
	MemUsedMin, MemUsedMean, MemUsedMax int64
	TempMax                             float64
	PowerMean                           float64
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
		a.add(p)
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
	util                   stat
	memMin, memMax, memSum int64
	tempMax                float64
	power                  stat
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

func newMinuteAgg() *minuteAgg { return &minuteAgg{tempMax: math.NaN()} }

func (a *minuteAgg) add(p Point) {
	if a.n == 0 || p.MemUsedMiB < a.memMin {
		a.memMin = p.MemUsedMiB
	}
	if a.n == 0 || p.MemUsedMiB > a.memMax {
		a.memMax = p.MemUsedMiB
	}
	a.memSum += p.MemUsedMiB
	a.n++
	a.util.add(p.Util)
	a.power.add(p.PowerW)
	if t := float64(p.TempC); !math.IsNaN(t) && (math.IsNaN(a.tempMax) || t > a.tempMax) {
		a.tempMax = t
	}
}

func (a *minuteAgg) minute(uuid string, m time.Time) Minute {
	return Minute{GPU: uuid, Minute: m,
		UtilMin: a.util.lo(), UtilMean: a.util.mean(), UtilMax: a.util.hi(),
		MemUsedMin: a.memMin, MemUsedMean: a.memSum / int64(a.n), MemUsedMax: a.memMax,
		TempMax: a.tempMax, PowerMean: a.power.mean()}
}
