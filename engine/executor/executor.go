package executor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrGone is returned by Recover when the attempt no longer exists and its
// outcome cannot be known (the process or container vanished).
var ErrGone = errors.New("attempt is gone")

// GPU is one device assigned to an attempt by the shepherd.
type GPU struct {
	Index int
	UUID  string
}

// Job is everything a backend needs to start one attempt of one stage. The
// engine has already expanded the command and assembled the stage contract's
// environment; a backend only translates it into its own terms.
type Job struct {
	RunID   string
	Stage   string
	Attempt int

	Argv []string          // the command, already expanded; never passed to a shell
	Env  map[string]string // NIUMA_* contract variables and the template's env

	RunDir   string // absolute host path of the run directory
	StageDir string // absolute host path of <run dir>/<stage>
	GPUs     []GPU  // assigned devices; empty for a CPU-only stage
	Image    string // container image, for container backends

	// StdoutPath and StderrPath are host files the attempt's output goes
	// to. The engine follows StdoutPath for metrics.
	StdoutPath string
	StderrPath string
}

// Exit is how an attempt ended.
type Exit struct {
	Code      int    // exit status; -1 when there is none (killed by a signal, lost)
	Signal    string // e.g. "killed" when the process died of a signal
	OOMKilled bool   // the kernel's OOM killer ended it
	Lost      bool   // the attempt vanished without an exit status
	Reason    string // plain words, for the user
}

// Success reports whether the attempt exited 0.
func (e Exit) Success() bool { return e.Code == 0 && !e.Lost && !e.OOMKilled && e.Signal == "" }

// Describe says in words how the attempt ended.
func (e Exit) Describe() string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.Lost:
		return "the attempt vanished without an exit status"
	case e.OOMKilled:
		return "killed: out of memory"
	case e.Signal != "":
		return "killed by signal " + e.Signal
	default:
		return fmt.Sprintf("exited with code %d", e.Code)
	}
}

// Handle is one running attempt.
type Handle interface {
	// Ref describes the attempt in a form the engine persists, so that a
	// later process can re-attach with Executor.Recover.
	Ref() string
	// Wait blocks until the attempt ends or ctx is done.
	Wait(ctx context.Context) (Exit, error)
	// Stop asks the attempt to end (SIGTERM: "checkpoint and exit soon"),
	// and forces it (SIGKILL) when it is still alive after grace.
	Stop(ctx context.Context, grace time.Duration) error
}

// Executor starts and re-attaches to attempts on one backend.
type Executor interface {
	// Name is the backend's name as templates and the CLI spell it.
	Name() string
	// Start launches the attempt and returns once it is running.
	Start(ctx context.Context, job Job) (Handle, error)
	// Recover re-attaches to an attempt an earlier Niuma process started,
	// from the Ref it persisted. It returns ErrGone when the attempt no
	// longer exists and its outcome is unknown.
	Recover(ctx context.Context, job Job, ref string) (Handle, error)
}
