package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"niuma/engine/executor"
)

// handle is one attempt submitted as a Slurm job.
type handle struct {
	x *Executor
	w *watch
}

func (x *Executor) newHandle(job executor.Job, r ref) *handle {
	submitted := time.Unix(r.Submitted, 0)
	if r.Submitted == 0 {
		submitted = time.Now()
	}
	w := &watch{
		ref: r, files: attemptFiles(job), stderr: job.StderrPath, submitted: submitted,
		lim:  limits{MemoryMiB: r.MemoryMiB, TimeLimit: time.Duration(r.TimeLimit) * time.Second},
		done: make(chan struct{}),
	}
	return &handle{x: x, w: w}
}

// Ref implements executor.Handle.
func (h *handle) Ref() string {
	b, _ := json.Marshal(h.w.ref)
	return string(b)
}

// JobID is the Slurm job id.
func (h *handle) JobID() string { return h.w.id() }

// Wait implements executor.Handle.
func (h *handle) Wait(ctx context.Context) (executor.Exit, error) {
	select {
	case <-h.w.done:
		h.w.mu.Lock()
		defer h.w.mu.Unlock()
		return h.w.exit, nil
	case <-ctx.Done():
		return executor.Exit{}, ctx.Err()
	}
}

// Waiting implements executor.Waiter: why the job is still in Slurm's
// queue, "" once it runs.
func (h *handle) Waiting() string {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.w.waiting
}

// Release implements executor.Releaser: the engine no longer owns the
// attempt, so this process stops following it.
func (h *handle) Release() { h.x.unfollow(h.w) }

// Stop implements executor.Handle, as for a local stage: SIGTERM first
// ("checkpoint and exit soon"), to the batch shell, which passes it once to
// the stage's command; after grace, SIGKILL to the batch shell (Slurm then
// kills everything the job started) and a cancel. A job still pending is
// simply cancelled: nothing of it ran.
func (h *handle) Stop(ctx context.Context, grace time.Duration) error {
	if h.w.isDone() {
		return nil
	}
	waiting := h.Waiting() != ""
	id := h.w.id()
	defer h.x.nudge()
	if waiting {
		return h.cancel(ctx, id)
	}
	_, err := h.x.cmd.Run(ctx, "scancel", "--batch", "--signal=TERM", id)
	switch {
	case err == nil:
	case errors.Is(err, executor.ErrUnavailable):
		return err
	case ended(err):
		return nil
	default:
		// Not yet running (pending, or its batch step is still being
		// launched): cancel it outright.
		return h.cancel(ctx, id)
	}
	h.x.nudge()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-h.w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	if _, err := h.x.cmd.Run(ctx, "scancel", "--batch", "--signal=KILL", id); errors.Is(err, executor.ErrUnavailable) {
		return err
	}
	return h.cancel(ctx, id)
}

func (h *handle) cancel(ctx context.Context, id string) error {
	_, err := h.x.cmd.Run(ctx, "scancel", id)
	if err != nil && !ended(err) {
		return err
	}
	return nil
}

// ended reports whether scancel's error says there is nothing left to
// signal: the job has ended, or Slurm has forgotten it.
func ended(err error) bool {
	var ce *CommandError
	if !errors.As(err, &ce) {
		return false
	}
	s := strings.ToLower(ce.Stderr)
	return strings.Contains(s, "already completing or completed") || strings.Contains(s, "invalid job id")
}
