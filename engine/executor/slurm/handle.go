package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"niuma/engine/executor"
)

// signalTimeout bounds scancel --signal, which retries while a job's batch
// script is being launched; after it the job is cancelled instead.
const signalTimeout = 10 * time.Second

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
	id := h.w.id()
	defer h.x.nudge()
	// Only a running job can be signalled (scancel retries for a minute
	// and more on one that has not started): ask the controller now, the
	// tracker's last look may be old.
	out, err := h.x.cmd.Run(ctx, "squeue", "--noheader", "--states=all", "--jobs="+id, "--format="+squeueFormat)
	if err == nil {
		if r := parseSqueue(out)[id]; r != nil && (pending(r.State) || r.State == "SUSPENDED") {
			return h.cancel(ctx, id)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, signalTimeout)
	_, err = h.x.cmd.Run(sctx, "scancel", "--batch", "--signal=TERM", id)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, executor.ErrUnavailable):
		return err
	case ended(err):
		return nil
	default:
		// Not running yet (pending, or its batch script not yet started:
		// "Job can not be altered now"): nothing of it ran; cancel it.
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
	// Slurm ends the job with its batch shell, killing what the job
	// started; a cancel is the backstop (it waits the site's KillWait).
	h.x.nudge()
	t.Reset(killSettle)
	select {
	case <-h.w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return h.cancel(ctx, id)
}

// killSettle is how long Stop waits for a killed batch shell to end its
// job before it cancels the job.
const killSettle = 3 * time.Second

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
