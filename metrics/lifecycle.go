package metrics

import "sync"

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
