package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/template"
	"niuma/storage"
)

// fakeDaemon is a scripted Docker daemon for what the real one cannot be
// made to do in a test: go away and come back. It keeps containers as
// states; the test moves them on and restarts the daemon.
type fakeDaemon struct {
	mu    sync.Mutex
	cond  *sync.Cond
	down  bool
	cs    map[string]*fakeContainer
	order []string      // container ids in creation order
	gone  chan struct{} // closed when the daemon goes down; then replaced

	pending int // waits not answered yet
	refused int // calls refused because the daemon was down
}

type fakeContainer struct {
	labels  map[string]string
	running bool
	exited  bool
	code    int
	oom     bool
	removed bool
	waits   int           // waits registered so far
	ended   chan struct{} // closed when the container stops
}

var errConnRefused = errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")

func newFakeDaemon() *fakeDaemon {
	d := &fakeDaemon{cs: map[string]*fakeContainer{}, gone: make(chan struct{})}
	d.cond = sync.NewCond(&d.mu)
	return d
}

// until waits, holding the lock, until cond holds; every change to the
// fake broadcasts.
func (d *fakeDaemon) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	done := make(chan struct{})
	defer close(done)
	expired := false
	go func() { // a failing test must not hang
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			d.mu.Lock()
			expired = true
			d.cond.Broadcast()
			d.mu.Unlock()
		}
	}()
	d.mu.Lock()
	defer d.mu.Unlock()
	for !cond() {
		if expired {
			t.Fatalf("never happened: %s", what)
		}
		d.cond.Wait()
	}
}

// c returns container n (1-based, in creation order) once it exists and
// runs with at least waits waits registered on it, so that what the test
// does next reaches a handle that is watching.
func (d *fakeDaemon) c(t *testing.T, n, waits int) string {
	t.Helper()
	var id string
	d.until(t, fmt.Sprintf("container %d runs with %d waits", n, waits), func() bool {
		if len(d.order) < n {
			return false
		}
		id = d.order[n-1]
		c := d.cs[id]
		return c.running && c.waits >= waits
	})
	return id
}

// exit ends a running container with code.
func (d *fakeDaemon) exit(id string, code int, oom bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked(id, code, oom)
}

func (d *fakeDaemon) stopLocked(id string, code int, oom bool) {
	c := d.cs[id]
	if c == nil || !c.running {
		return
	}
	c.running, c.exited, c.code, c.oom = false, true, code, oom
	close(c.ended)
	d.cond.Broadcast()
}

// goDown makes the daemon unreachable: every wait and stream breaks. It
// returns once the broken waits have answered.
func (d *fakeDaemon) goDown(t *testing.T) {
	d.mu.Lock()
	d.down = true
	close(d.gone)
	d.gone = make(chan struct{})
	d.mu.Unlock()
	d.until(t, "the waits broke", func() bool { return d.pending == 0 })
}

// shutDown is a daemon shutting down in the order dockerd does: the API
// stops taking requests, then the container is stopped, and a wait
// already in flight may still get its exit code. It returns once the
// handle has found the daemon gone.
func (d *fakeDaemon) shutDown(t *testing.T, id string, code int) {
	d.mu.Lock()
	d.down = true
	refused := d.refused
	d.stopLocked(id, code, false)
	d.mu.Unlock()
	// The handle's follower inspects once when its stream ends; a second
	// refusal is the monitor's.
	d.until(t, "the monitor was refused", func() bool { return d.refused >= refused+2 })
	d.mu.Lock()
	close(d.gone)
	d.gone = make(chan struct{})
	d.mu.Unlock()
}

// comeBack makes the daemon answer again; then is applied first, as a
// restarting daemon does to its containers before it serves the API.
func (d *fakeDaemon) comeBack(then func(d *fakeDaemon)) {
	d.mu.Lock()
	if then != nil {
		then(d)
	}
	d.down = false
	d.cond.Broadcast()
	d.mu.Unlock()
}

func (d *fakeDaemon) Ping(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return errConnRefused
	}
	return nil
}

func (d *fakeDaemon) ImageExists(context.Context, string) (bool, error) {
	return true, d.Ping(context.Background())
}

func (d *fakeDaemon) ImageID(context.Context, string) (string, error) {
	return "sha256:" + fmt.Sprintf("%064d", 1), d.Ping(context.Background())
}

func (d *fakeDaemon) Pull(context.Context, string, func(PullProgress)) error { return nil }

func (d *fakeDaemon) Create(_ context.Context, opts client.ContainerCreateOptions) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return "", errConnRefused
	}
	id := fmt.Sprintf("%064d", len(d.order)+1)
	d.cs[id] = &fakeContainer{labels: opts.Config.Labels, ended: make(chan struct{})}
	d.order = append(d.order, id)
	return id, nil
}

// Wait answers when the container stops (NextExit: the next time it does)
// or breaks when the daemon goes down.
func (d *fakeDaemon) Wait(ctx context.Context, id string, cond container.WaitCondition) <-chan WaitResult {
	out := make(chan WaitResult, 1)
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.cs[id]
	switch {
	case d.down:
		out <- WaitResult{Code: -1, Err: errConnRefused}
		return out
	case c == nil || c.removed:
		out <- WaitResult{Code: -1, Err: ErrNotFound}
		return out
	case cond == container.WaitConditionNotRunning && !c.running:
		out <- WaitResult{Code: c.code}
		return out
	}
	c.waits++
	d.pending++
	d.cond.Broadcast()
	ended, gone := c.ended, d.gone
	go func() {
		var r WaitResult
		select {
		case <-ended:
			d.mu.Lock()
			r = WaitResult{Code: c.code}
			d.mu.Unlock()
		case <-gone:
			r = WaitResult{Code: -1, Err: errors.New("unexpected EOF")}
		case <-ctx.Done():
			r = WaitResult{Code: -1, Err: ctx.Err()}
		}
		out <- r
		d.mu.Lock()
		d.pending--
		d.cond.Broadcast()
		d.mu.Unlock()
	}()
	return out
}

// Attach's stream ends, cleanly, when the container stops or the daemon
// goes down. The fake workloads print nothing.
func (d *fakeDaemon) Attach(ctx context.Context, id string, _, _ io.Writer) (func() error, error) {
	d.mu.Lock()
	c, gone := d.cs[id], d.gone
	d.mu.Unlock()
	return func() error {
		select {
		case <-c.ended:
		case <-gone:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}, nil
}

func (d *fakeDaemon) Start(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return errConnRefused
	}
	d.cs[id].running = true
	d.cond.Broadcast()
	return nil
}

func (d *fakeDaemon) Inspect(_ context.Context, id string) (State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.cs[id]
	switch {
	case d.down:
		d.refused++
		d.cond.Broadcast()
		return State{}, errConnRefused
	case c == nil || c.removed:
		return State{}, fmt.Errorf("%w: no such container %s", ErrNotFound, id)
	}
	return State{ID: id, Running: c.running, ExitCode: c.code, OOMKilled: c.oom, Labels: c.labels}, nil
}

func (d *fakeDaemon) Logs(context.Context, string, bool, io.Writer, io.Writer) error {
	return d.Ping(context.Background())
}

// Stop is the daemon's stop: the workload ends on SIGTERM.
func (d *fakeDaemon) Stop(_ context.Context, id string, _ time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return errConnRefused
	}
	d.stopLocked(id, 143, false)
	return nil
}

func (d *fakeDaemon) Remove(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return errConnRefused
	}
	if c := d.cs[id]; c != nil {
		d.stopLocked(id, 137, false)
		c.removed = true
	}
	return nil
}

func (d *fakeDaemon) Pids(context.Context, string) (int64, int64, error) { return 1, 0, nil }

func (d *fakeDaemon) List(_ context.Context, labels map[string]string) ([]Summary, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return nil, errConnRefused
	}
	var out []Summary
	for _, id := range d.order {
		c := d.cs[id]
		match := !c.removed
		for k, v := range labels {
			match = match && c.labels[k] == v
		}
		if match {
			out = append(out, Summary{ID: id, Name: "/" + id, Labels: c.labels})
		}
	}
	return out, nil
}

func fakeJob(home string) executor.Job {
	dir := filepath.Join(home, "runs", "r1")
	return executor.Job{
		RunID: "r1", Stage: "a", Attempt: 1, Argv: []string{"/w"}, Image: "fake:1",
		RunDir: dir, StageDir: filepath.Join(dir, "a"),
		StdoutPath: filepath.Join(dir, "a", "out"), StderrPath: filepath.Join(dir, "a", "err"),
	}
}

func TestDaemonRestartInterruptsTheAttempt(t *testing.T) {
	sigterm := func(id string) func(*fakeDaemon) {
		return func(d *fakeDaemon) { d.stopLocked(id, 143, false) }
	}
	tests := []struct {
		name        string
		memMiB      int64
		adopted     bool // through Recover rather than Start
		stopped     bool // Niuma stopped it before the daemon went away
		script      func(t *testing.T, d *fakeDaemon, id string)
		interrupted bool
		code        int
	}{
		{name: "stopped by a daemon shutdown", interrupted: true, code: 143,
			script: func(t *testing.T, d *fakeDaemon, id string) { d.goDown(t); d.comeBack(sigterm(id)) }},
		{name: "killed by a daemon shutdown, under a memory limit, is no OOM", memMiB: 16, interrupted: true, code: 137,
			script: func(t *testing.T, d *fakeDaemon, id string) {
				d.goDown(t)
				d.comeBack(func(d *fakeDaemon) { d.stopLocked(id, 137, false) })
			}},
		{name: "removed while the daemon was away", interrupted: true, code: -1,
			script: func(t *testing.T, d *fakeDaemon, id string) {
				d.goDown(t)
				d.comeBack(func(d *fakeDaemon) { d.stopLocked(id, 137, false); d.cs[id].removed = true })
			}},
		{name: "stopped by a daemon shutdown, the exit seen before the API went", interrupted: true, code: 143,
			script: func(t *testing.T, d *fakeDaemon, id string) { d.shutDown(t, id, 143); d.comeBack(nil) }},
		{name: "adopted, then stopped by a daemon shutdown", adopted: true, interrupted: true, code: 143,
			script: func(t *testing.T, d *fakeDaemon, id string) { d.goDown(t); d.comeBack(sigterm(id)) }},
		{name: "the daemon's OOM report still counts", memMiB: 16, code: 137,
			script: func(t *testing.T, d *fakeDaemon, id string) {
				d.goDown(t)
				d.comeBack(func(d *fakeDaemon) { d.stopLocked(id, 137, true) })
			}},
		{name: "a workload failing on its own while the daemon was away", code: 1,
			script: func(t *testing.T, d *fakeDaemon, id string) {
				d.goDown(t)
				d.comeBack(func(d *fakeDaemon) { d.stopLocked(id, 1, false) })
			}},
		{name: "a SIGTERM without any daemon trouble", code: 143,
			script: func(t *testing.T, d *fakeDaemon, id string) { d.exit(id, 143, false) }},
		{name: "a stop Niuma sent", stopped: true, code: 143,
			script: func(t *testing.T, d *fakeDaemon, id string) { d.goDown(t); d.comeBack(sigterm(id)) }},
		{name: "survived a restart (live-restore), then killed later", code: 137,
			script: func(t *testing.T, d *fakeDaemon, id string) {
				d.goDown(t)
				d.comeBack(nil)
				d.c(t, 1, 2) // the handle saw it running and waits again
				d.exit(id, 137, false)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDaemon()
			home := t.TempDir()
			x := New(d, home)
			x.RetryInterval = time.Millisecond
			job := fakeJob(home)
			job.Container.MemoryMiB = tc.memMiB
			h, err := x.Start(context.Background(), job)
			require.NoError(t, err)
			waits := 1 // the wait registered before the start
			if tc.adopted {
				ref := h.Ref()
				h.(executor.Releaser).Release()
				h, err = x.Recover(context.Background(), job, ref)
				require.NoError(t, err)
				waits = 2 // and the adopter's
			}
			id := d.c(t, 1, waits)
			if tc.stopped {
				h.(*handle).stopped.Store(true) // as Stop does, before its request reaches the daemon
			}
			tc.script(t, d, id)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ex, err := h.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.interrupted, ex.Interrupted, ex.Describe())
			require.Equal(t, tc.code, ex.Code, ex.Describe())
			require.False(t, ex.Success())
			if tc.interrupted {
				require.Contains(t, ex.Describe(), "Docker daemon")
				require.False(t, ex.Lost || ex.OOMKilled, "%+v", ex)
			}
		})
	}
}

// The engine, over the docker executor, runs an attempt the daemon's
// restart took down again, without spending a retry, and says so.
func TestEngineRunsAnInterruptedAttemptAgain(t *testing.T) {
	d := newFakeDaemon()
	home := t.TempDir()
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	x := New(d, home)
	x.RetryInterval = time.Millisecond
	e, err := engine.New(engine.Options{Home: home, Store: db, Executors: []executor.Executor{x},
		Backoff: func(int) time.Duration { return time.Millisecond }, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	drove := make(chan struct{})
	go func() { defer close(drove); _ = e.Drive(ctx) }()
	t.Cleanup(func() { stop(); <-drove })
	<-e.Ready()

	tm, err := template.Parse("t.yaml", []byte("name: d\nruntime: {kind: docker, image: fake:1}\nstages:\n  - {name: a, command: [/w]}\n"))
	require.NoError(t, err)
	info, err := e.Submit(context.Background(), engine.RunSpec{Template: tm, Executor: "docker"})
	require.NoError(t, err)

	first := d.c(t, 1, 1)
	d.shutDown(t, first, 143)
	d.comeBack(nil)
	second := d.c(t, 2, 1) // attempt 2, although the template allows no retry
	d.exit(second, 0, false)

	sub := e.Subscribe(64)
	defer sub.Close()
	var r engine.RunInfo
	for deadline := time.After(30 * time.Second); ; {
		r, err = e.Run(context.Background(), info.ID)
		require.NoError(t, err)
		if r.State.Done() {
			break
		}
		select {
		case <-sub.C:
		case <-deadline:
			t.Fatalf("the run did not end: %+v", r)
		}
	}
	require.Equal(t, engine.Succeeded, r.State, "%+v", r.Stages)
	require.Equal(t, 2, r.Stages[0].Attempts)
	as, err := db.Attempts(context.Background(), info.ID)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, "interrupted", as[0].State)
	require.Contains(t, as[0].Reason, "Docker daemon restarted")
	require.Equal(t, "succeeded", as[1].State)
}
