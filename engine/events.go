package engine

import (
	"sync"
	"time"
)

// EventKind names what happened.
type EventKind string

// The kinds of events the engine publishes.
const (
	RunSubmitted  EventKind = "run_submitted"
	RunChanged    EventKind = "run_changed"   // a run's state changed
	StageChanged  EventKind = "stage_changed" // a stage's state or reason changed
	Metrics       EventKind = "metrics"       // a stage reported metric points
	AnomalyRaised EventKind = "anomaly"       // the sentinel saw trouble, or the engine acted on it
	// Notified: a template's sentinel answer is notify: tell the user now,
	// even with no window open (Reason says what happened).
	Notified EventKind = "notified"
)

// Event is one thing that happened, for live views. Subscribers that fall
// behind lose events (they are told through Lagged) and re-read the state
// they show from the engine's read API; storage is the source of truth.
type Event struct {
	Kind   EventKind
	RunID  string
	Stage  string
	State  State
	Reason string
	// Severity is an anomaly's: "info", "warning" or "critical".
	Severity string
	Points   []Point
	At       time.Time
}

// Broker fans events out to subscribers without ever blocking the
// publisher. The zero value is ready to use.
type Broker struct {
	mu   sync.Mutex
	next int
	subs map[int]*subscriber
}

type subscriber struct {
	ch     chan Event
	lagged bool
}

// Subscription is one subscriber's view of the event stream.
type Subscription struct {
	C      <-chan Event
	id     int
	b      *Broker
	closed sync.Once
}

// Lagged reports, and clears, whether events were dropped because the
// subscriber did not keep up.
func (s *Subscription) Lagged() bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	sub, ok := s.b.subs[s.id]
	if !ok {
		return false
	}
	l := sub.lagged
	sub.lagged = false
	return l
}

// Close unsubscribes; C is closed.
func (s *Subscription) Close() {
	s.closed.Do(func() {
		s.b.mu.Lock()
		defer s.b.mu.Unlock()
		if sub, ok := s.b.subs[s.id]; ok {
			delete(s.b.subs, s.id)
			close(sub.ch)
		}
	})
}

// Subscribe adds a subscriber with a buffer of buf events.
func (b *Broker) Subscribe(buf int) *Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[int]*subscriber{}
	}
	b.next++
	sub := &subscriber{ch: make(chan Event, buf)}
	b.subs[b.next] = sub
	return &Subscription{C: sub.ch, id: b.next, b: b}
}

// Publish hands e to every subscriber that has room for it.
func (b *Broker) Publish(e Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sub := range b.subs {
		select {
		case sub.ch <- e:
		default:
			sub.lagged = true
		}
	}
}
