package metrics

import (
	"context"
	"sync"
	"time"
)

// lifecycle is the Run/Stop handshake both followers share: Run may be
// called once; Stop asks it to drain what is there and waits until it has
// returned (called before Run, it makes Run drain at once).
type lifecycle struct {
	once    sync.Once
	mu      sync.Mutex
	running bool
	stop    chan struct{}
	stopped sync.Once
	done    chan struct{}
}

func (l *lifecycle) init() {
	l.once.Do(func() {
		l.stop = make(chan struct{})
		l.done = make(chan struct{})
	})
}

// stopAndWait closes stop and waits for a running Run to return.
func (l *lifecycle) stopAndWait() {
	l.init()
	l.stopped.Do(func() { close(l.stop) })
	l.mu.Lock()
	running := l.running
	l.mu.Unlock()
	if running {
		<-l.done
	}
}

// begin marks Run as started; false when it already was. The caller
// closes done when Run returns.
func (l *lifecycle) begin() bool {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		return false
	}
	l.running = true
	return true
}

// follow is both followers' Run loop: scan every poll (DefaultTBPoll when
// <= 0) until ctx ends, or until Stop, after which it scans once more, to
// drain what is there, then calls drained (if not nil) and returns. It
// closes done when it returns.
func (l *lifecycle) follow(ctx context.Context, poll time.Duration, scan func() error, drained func()) error {
	defer close(l.done)
	if poll <= 0 {
		poll = DefaultTBPoll
	}
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		stopping := false
		select {
		case <-l.stop:
			stopping = true
		default:
		}
		if err := scan(); err != nil {
			return err
		}
		if stopping {
			if drained != nil {
				drained()
			}
			return nil
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.stop:
		case <-timer.C:
		}
	}
}
