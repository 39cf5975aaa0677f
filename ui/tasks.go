package ui

import (
	"context"
	"sync"
	"sync/atomic"
)

// tasks are the goroutines of one view: refreshers, tickers and the reads
// a tap starts. Each gets a context that ends when the view closes (or
// when the caller's context of GoUnder ends first); Close ends them all.
// A view's goroutine reaches its widgets through onUI, so one left
// running after its view has gone would draw into whatever window and
// app came next: every goroutine of a view is started here, and counted.
// The zero value is ready to use.
type tasks struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

// running counts the goroutines of every view that have not returned yet
// (what a test waits on to see that none outlives it); following counts
// those of them that follow something for as long as their view lives
// (Follow's), so that a test can wait for the others: a test's own
// goroutine and a view's fill must not draw at once.
var running, following atomic.Int64

// Go runs f in its own goroutine under the view's context; after Close,
// it does not run at all.
func (t *tasks) Go(f func(ctx context.Context)) { t.GoUnder(context.Background(), f) }

// GoUnder runs f in its own goroutine under a context that ends with
// parent or with the view, whichever comes first.
func (t *tasks) GoUnder(parent context.Context, f func(ctx context.Context)) {
	t.start(parent, false, f)
}

// Follow is GoUnder for a goroutine that runs until its context ends: a
// refresher, a ticker, a timer.
func (t *tasks) Follow(parent context.Context, f func(ctx context.Context)) {
	t.start(parent, true, f)
}

func (t *tasks) start(parent context.Context, follows bool, f func(ctx context.Context)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	if t.ctx.Err() != nil {
		return // the view is closed
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(t.ctx, cancel)
	running.Add(1)
	if follows {
		following.Add(1)
	}
	go func() {
		defer func() {
			stop()
			cancel()
			if follows {
				following.Add(-1)
			}
			running.Add(-1)
		}()
		f(ctx)
	}()
}

// Close ends the context of every goroutine started here, and keeps new
// ones from starting. It does not wait: a goroutine may be waiting on
// Fyne's thread (fyne.DoAndWait), which may be the caller's.
func (t *tasks) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	t.cancel()
}

func (t *tasks) init() {
	if t.ctx == nil {
		t.ctx, t.cancel = context.WithCancel(context.Background())
	}
}
