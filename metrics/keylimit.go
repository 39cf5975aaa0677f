package metrics

import (
	"sync"
	"sync/atomic"
)

// DefaultMaxKeys is how many distinct metric keys one stage attempt may
// report. A training loop logs tens or hundreds; thousands are per-class or
// per-layer values; beyond this, a workload is printing identifiers (a
// counter, a hash) as keys, and every key is a series the engine holds and
// the archive stores.
const DefaultMaxKeys = 10_000

// KeyLimit bounds the distinct metric keys of one stage attempt, across all
// of its sources (stdout, stderr, metrics.jsonl, TensorBoard, CSV): the
// first Max keys are admitted and keep flowing; points of any later key are
// dropped, and Exceeded is called once, by the first record that had one.
//
// Only admitted keys are remembered, so memory stays bounded whatever the
// workload prints. It is safe for concurrent use; a nil *KeyLimit admits
// everything.
type KeyLimit struct {
	// Max is the number of distinct keys admitted (<= 0: DefaultMaxKeys).
	Max int
	// Exceeded is told once, with the limit and how many distinct keys
	// beyond it the first record over the limit carried.
	Exceeded func(max, ignored int)

	mu      sync.Mutex
	keys    map[string]struct{}
	told    atomic.Bool
	dropped atomic.Int64
}

// NewKeyLimit returns a limit of max keys (<= 0: DefaultMaxKeys) that
// admits the keys already stored for the attempt (an attempt adopted after
// a restart) first.
func NewKeyLimit(max int, stored []string, exceeded func(max, ignored int)) *KeyLimit {
	l := &KeyLimit{Max: max, Exceeded: exceeded}
	for _, k := range stored {
		l.Admit(k)
	}
	return l
}

func (l *KeyLimit) max() int {
	if l.Max <= 0 {
		return DefaultMaxKeys
	}
	return l.Max
}

// Admit reports whether points of key may be kept: key was admitted
// before, or there is room for it.
func (l *KeyLimit) Admit(key string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.keys[key]; ok {
		return true
	}
	if len(l.keys) >= l.max() {
		return false
	}
	if l.keys == nil {
		l.keys = make(map[string]struct{})
	}
	l.keys[key] = struct{}{}
	return true
}

// Dropped is how many points were dropped so far.
func (l *KeyLimit) Dropped() int64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// ignored records that a record's points of ignored distinct keys (points
// of them in all) were dropped, and tells Exceeded the first time.
func (l *KeyLimit) ignored(keys, points int) {
	if l == nil || points == 0 {
		return
	}
	l.dropped.Add(int64(points))
	if !l.told.Swap(true) && l.Exceeded != nil {
		l.Exceeded(l.max(), keys)
	}
}

// keyGate is one source's view of a KeyLimit: the keys it saw admitted are
// kept locally (at most Max of them), so the steady state takes no lock.
// It is used by one goroutine.
type keyGate struct {
	limit *KeyLimit
	known map[string]struct{}
	// Per record: the distinct keys refused and their points.
	refused       map[string]struct{}
	refusedPoints int
}

// admit reports whether a point of key may be kept.
func (g *keyGate) admit(key string) bool {
	if g.limit == nil {
		return true
	}
	if _, ok := g.known[key]; ok {
		return true
	}
	if g.limit.Admit(key) {
		if g.known == nil {
			g.known = make(map[string]struct{})
		}
		g.known[key] = struct{}{}
		return true
	}
	if !g.limit.told.Load() {
		// Only the first record over the limit is counted by key: later
		// ones only add to Dropped, with no set that grows.
		if g.refused == nil {
			g.refused = make(map[string]struct{})
		}
		g.refused[key] = struct{}{}
	}
	g.refusedPoints++
	return false
}

// endRecord reports the record's refused points to the limit.
func (g *keyGate) endRecord() {
	if g.refusedPoints == 0 {
		return
	}
	g.limit.ignored(len(g.refused), g.refusedPoints)
	clear(g.refused)
	g.refused = nil
	g.refusedPoints = 0
}
