package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"

	"niuma/engine/executor"
)

// logsGrace bounds how long a finished attempt waits for the rest of its
// output to reach the log files.
const logsGrace = 30 * time.Second

// handle is one attempt's container.
type handle struct {
	x       *Executor
	id      string
	job     executor.Job
	adopted bool

	ctx     context.Context // ends with Release: this process lets go of the container
	release context.CancelFunc

	stopped atomic.Bool // Stop was called: a SIGKILL is ours, not the OOM killer's

	pidsLimit   atomic.Int64 // the process limit, once the container was seen at it
	pidsStopped atomic.Bool  // stopped for staying at its process limit

	logsDone chan struct{} // closed when the output has been copied to the end
	done     chan struct{}
	exit     executor.Exit // set before done is closed
}

func newHandle(x *Executor, id string, job executor.Job) *handle {
	ctx, cancel := context.WithCancel(context.Background())
	return &handle{x: x, id: id, job: job, ctx: ctx, release: cancel, logsDone: make(chan struct{}), done: make(chan struct{})}
}

// Release implements executor.Releaser: output copying and waiting stop;
// the container runs on for the next owner to adopt.
// It returns once this process has stopped writing the attempt's log files,
// so the next owner's count of what they hold is exact.
func (h *handle) Release() {
	h.release()
	select {
	case <-h.logsDone:
	case <-time.After(logsGrace):
	}
}

func (h *handle) Ref() string {
	b, _ := json.Marshal(ref{ID: h.id})
	return string(b)
}

func (h *handle) Wait(ctx context.Context) (executor.Exit, error) {
	select {
	case <-h.done:
		return h.exit, nil
	case <-ctx.Done():
		return executor.Exit{}, ctx.Err()
	}
}

// Stop asks the daemon to stop the container: the stop signal (SIGTERM),
// then SIGKILL after grace. The init in the container passes the signal on
// to the workload.
func (h *handle) Stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-h.done:
		return nil
	default:
	}
	h.stopped.Store(true)
	err := h.x.api.Stop(ctx, h.id, grace)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// logFiles opens the attempt's log files for appending.
func (h *handle) logFiles() (out, errf *os.File, err error) {
	out, err = os.OpenFile(h.job.StdoutPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open stdout log: %w", err)
	}
	errf, err = os.OpenFile(h.job.StderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		out.Close()
		return nil, nil, fmt.Errorf("open stderr log: %w", err)
	}
	return out, errf, nil
}

// follow copies the container's output into the attempt's log files until
// the container stops. attached, when set, is the copy of a stream
// attached before the start; when it ends cleanly the container has
// stopped. Otherwise, and for an adopted attempt, follow reads the
// daemon's log: it sends the whole log again and the bytes the files
// already hold are dropped, so no line, and no metric point, appears
// twice. When the daemon goes away mid-stream follow tries again.
func (h *handle) follow(out, errf *os.File, so, se *skipWriter, attached func() error) {
	defer close(h.logsDone)
	defer out.Close()
	defer errf.Close()
	defer h.endLogs(so, se)
	if attached != nil {
		err := attached()
		if h.ctx.Err() != nil {
			return
		}
		if err == nil {
			// The stream also ends cleanly when the daemon goes away; a
			// container that still runs (live-restore), or that the daemon
			// cannot tell about yet, is read on below.
			st, ierr := h.x.api.Inspect(h.ctx, h.id)
			if errors.Is(ierr, ErrNotFound) || ierr == nil && !st.Running {
				return
			}
		}
	}
	for {
		so.skip, se.skip = max(so.skip, so.seen), max(se.skip, se.seen)
		so.seen, se.seen = 0, 0
		err := h.x.api.Logs(h.ctx, h.id, true, so, se)
		if err == nil || errors.Is(err, ErrNotFound) || h.ctx.Err() != nil {
			return
		}
		select {
		case <-h.done:
			return
		case <-h.ctx.Done():
			return
		case <-time.After(h.x.RetryInterval):
		}
	}
}

// skipWriter drops the first skip bytes written to it.
type skipWriter struct {
	w    io.Writer
	skip int64
	seen int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	start := s.seen
	s.seen += int64(n)
	if s.seen <= s.skip {
		return n, nil
	}
	if start < s.skip {
		p = p[s.skip-start:]
	}
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// monitor waits for the container to stop, through daemon restarts, and
// records how it ended. first is the wait registered before Start.
//
// away is set when the daemon stopped answering (a wait broke, an inspect
// failed) and cleared when the container is seen running again (it
// survived, as with live-restore). A container that is gone, or was
// killed, after the daemon went away was taken down by the restart: the
// attempt is reported Interrupted so that the engine runs it again
// without spending a retry.
func (h *handle) monitor(first <-chan WaitResult) {
	away := false
	if first != nil {
		select { // whatever it says, inspect below has the facts
		case r := <-first:
			away = h.brokeOff(r.Err)
		case <-h.ctx.Done():
			return
		}
	}
	for {
		if h.ctx.Err() != nil {
			return // released: the next owner records the end
		}
		st, err := h.x.api.Inspect(h.ctx, h.id)
		switch {
		case errors.Is(err, ErrNotFound):
			ex := executor.Exit{Code: -1, Lost: true, Reason: "the container was removed before Niuma saw it end"}
			if away && !h.stopped.Load() {
				ex = executor.Exit{Code: -1, Interrupted: true,
					Reason: "interrupted: the container vanished while the Docker daemon was away"}
			}
			h.finish(ex, false)
			return
		case err != nil:
			away = away || h.brokeOff(err)
			h.pause()
			continue
		case !st.Running:
			ex := exitAfter(st, h.job.Container.MemoryMiB, h.stopped.Load(), away)
			if why := h.pidsReason(ex.Code); why != "" && !ex.OOMKilled && !ex.Interrupted && (!ex.Success() || h.pidsStopped.Load()) {
				ex.Reason = why
				if ex.Code == 0 {
					ex.Code = -1 // stopped for its limit, whatever its own exit said
				}
			}
			h.finish(ex, true)
			return
		}
		away = false // it survived whatever happened to the daemon
		r := <-h.x.api.Wait(h.ctx, h.id, container.WaitConditionNotRunning)
		if r.Err != nil {
			away = away || h.brokeOff(r.Err)
			h.pause()
		}
	}
}

// brokeOff says whether err means the daemon went away: the call failed,
// and not because the container is gone or this process let go of it.
func (h *handle) brokeOff(err error) bool {
	return err != nil && !errors.Is(err, ErrNotFound) && h.ctx.Err() == nil
}

// exitAfter is exitFromState, knowing whether the daemon went away while
// the container ran. A daemon that shuts down stops its containers
// (SIGTERM, then SIGKILL); one that comes back from a crash kills those it
// cannot restore. Such an end, when Niuma sent no stop and the kernel
// reported no OOM, is the restart's, not the workload's.
func exitAfter(st State, memMiB int64, stopped, away bool) executor.Exit {
	killed := st.ExitCode == 128+int(syscall.SIGKILL) || st.ExitCode == 128+int(syscall.SIGTERM)
	if away && !stopped && !st.OOMKilled && killed {
		return executor.Exit{Code: st.ExitCode, Interrupted: true, Reason: "interrupted: the Docker daemon restarted and " +
			"stopped the container (exit code " + strconv.Itoa(st.ExitCode) + ")"}
	}
	return exitFromState(st, memMiB, stopped)
}

// pause waits before trying the daemon again.
func (h *handle) pause() {
	select {
	case <-h.ctx.Done():
	case <-time.After(h.x.RetryInterval):
	}
}

func (h *handle) finish(ex executor.Exit, exists bool) {
	select {
	case <-h.logsDone:
	case <-time.After(logsGrace):
	}
	tok := token(h.job)
	m := attemptMarks(h.job)
	if prior := readExit(m.Exit, tok); !exists && prior != nil {
		// An earlier owner saw the end and removed the container.
		ex = prior.Exit
	}
	// The status outlives the container: it is recorded before the
	// container goes. When it cannot be (a full disk), the container stays,
	// and with it the status, for the next owner to read.
	recorded := writeMark(m.Exit, exitMark{Token: tok, Container: h.id, Exit: ex}) == nil
	if exists && recorded && !h.job.Container.Keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = h.x.api.Remove(ctx, h.id)
		cancel()
	}
	h.exit = ex
	close(h.done)
	h.release()
}

// exitFromState reads how a stopped container ended. The daemon's
// OOMKilled flag comes from a cgroup event it can miss when the killed
// process is not PID 1 (here the init's child); a SIGKILL nobody sent, under
// a memory limit, is the OOM killer's too.
func exitFromState(st State, memMiB int64, stopped bool) executor.Exit {
	ex := executor.Exit{Code: st.ExitCode}
	if st.ExitCode == 137 && memMiB > 0 && !stopped {
		st.OOMKilled = true
	}
	switch {
	case st.OOMKilled:
		ex.OOMKilled = true
		ex.Reason = "killed: out of memory"
		if memMiB > 0 {
			ex.Reason = fmt.Sprintf("killed: out of memory (the container's limit is %d MiB; raise runtime: memory in the template)", memMiB)
		}
	case st.Error != "":
		ex.Reason = "the container failed: " + st.Error
		if ex.Code == 0 {
			ex.Code = -1
		}
	case st.ExitCode > 128 && st.ExitCode < 128+65:
		ex.Reason = "exited with code " + strconv.Itoa(st.ExitCode) + " (" + syscall.Signal(st.ExitCode-128).String() + ")"
	}
	return ex
}
