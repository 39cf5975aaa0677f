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

// ErrUnavailable marks an error from a backend whose service (the Docker
// daemon) cannot be reached. The engine keeps such a stage queued, with the
// error as its reason, instead of failing it.
var ErrUnavailable = errors.New("backend not reachable")

// Waiting is an error that keeps a stage queued instead of failing it:
// the backend cannot start it now, for Reason, which the stage shows while
// it waits (plain words that say what to do). It matches ErrUnavailable.
type Waiting struct{ Reason string }

func (w *Waiting) Error() string { return w.Reason }

// Is makes errors.Is(w, ErrUnavailable) hold.
func (w *Waiting) Is(target error) bool { return target == ErrUnavailable }

// ErrNotLaunched is returned by Recover when nothing carrying the attempt's
// Token exists and nothing ever ran under it (no pid file, no container, no
// job): the engine may launch the attempt now, exactly once.
var ErrNotLaunched = errors.New("attempt was never launched")

// GPU is one device assigned to an attempt by the shepherd.
type GPU struct {
	Index int
	UUID  string
}

// TokenEnv is the environment variable that carries an attempt's Token
// into every process of it, on the host and on a Slurm node: what finds
// the attempt's processes, and what they left behind, when it ends. A
// backend's own helpers (the log capper) do not carry it.
const TokenEnv = "NIUMA_ATTEMPT_TOKEN"

// Job is everything a backend needs to start one attempt of one stage. The
// engine has already expanded the command and assembled the stage contract's
// environment; a backend only translates it into its own terms.
type Job struct {
	RunID   string
	Stage   string
	Attempt int
	// Token is the attempt's identity, chosen and stored by the engine
	// before the attempt is launched. A backend names what it launches by
	// it (a container name, a Slurm job name, an environment variable its
	// processes inherit), so that a later owner can find the attempt even
	// when Niuma died before it learnt the attempt's Ref.
	Token string

	Argv []string          // the command, already expanded; never passed to a shell
	Env  map[string]string // NIUMA_* contract variables and the template's env

	RunDir   string // absolute host path of the run directory
	StageDir string // absolute host path of <run dir>/<stage>
	GPUs     []GPU  // assigned devices; empty for a CPU-only stage
	CodeDir  string // absolute host path of the template's directory ("" for none)
	DataDir  string // host path of the template's data directory ("" for none)
	Image    string // container image, for container backends

	// Container tunes a container backend's sandbox; others ignore it.
	Container Container
	// Limits are what the stage's memory: and cpus: say, for a backend
	// that enforces them on the host (local: the attempt's cgroup).
	Limits Limits

	// StdoutPath and StderrPath are host files the attempt's output goes
	// to. The engine follows StdoutPath for metrics.
	StdoutPath string
	StderrPath string

	// What the stage asks for, for backends whose own scheduler places
	// the attempt (a cluster's, see Placer): the shepherd assigned nothing
	// then, and GPUs is empty. Other backends go by GPUs.
	GPUCount     int
	GPUMemoryMiB int64 // per GPU; 0 = unspecified
	// Timeout is the stage's timeout (0 = none). The engine enforces it;
	// a backend that can also make its scheduler enforce it (a Slurm time
	// limit) does, so that it holds while Niuma is away.
	Timeout time.Duration
	// Cluster is what the template says about a cluster job; a backend
	// without a cluster ignores it.
	Cluster Cluster
}

// Cluster is where a template asks a cluster backend to submit its stages
// (runtime: {kind: slurm, partition: …}). "" means the backend's settings.
type Cluster struct {
	Partition string
	Account   string
	QOS       string
}

// Limits cap what one attempt may use of the host; zero fields are
// unlimited.
type Limits struct {
	MemoryMiB int64
	CPUMilli  int64 // thousandths of a CPU
}

// Container is what a template may say about a stage's container. Zero
// values mean the backend's defaults.
type Container struct {
	ShmSizeMiB int64
	MemoryMiB  int64
	CPUs       float64
	User       string
	Network    string // "bridge" or "none"
	Keep       bool   // leave the finished container in place
	CapAdd     []string
	PidsLimit  int64 // at most this many processes and threads; 0 = the backend's limit
}

// Exit is how an attempt ended.
type Exit struct {
	Code      int    // exit status; -1 when there is none (killed by a signal, lost)
	Signal    string // e.g. "killed" when the process died of a signal
	OOMKilled bool   // the kernel's OOM killer ended it
	Lost      bool   // the attempt vanished without an exit status
	// Interrupted: the backend went away mid-attempt (the Docker daemon
	// restarted and took the container down). The workload did not fail;
	// the engine runs the stage again without spending a retry.
	Interrupted bool
	Reason      string // plain words, for the user
}

// Success reports whether the attempt exited 0.
func (e Exit) Success() bool {
	return e.Code == 0 && !e.Lost && !e.OOMKilled && !e.Interrupted && e.Signal == ""
}

// Describe says in words how the attempt ended.
func (e Exit) Describe() string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.Interrupted:
		return "interrupted: its backend went away mid-attempt"
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
	// from the Ref it persisted, or from job.Token alone when ref is "" (the
	// owner died between recording the attempt and learning its Ref). It
	// returns ErrNotLaunched when nothing was ever launched under the token,
	// and ErrGone when the attempt existed but is gone without a status.
	// An error matching ErrUnavailable (the backend's service is away)
	// decides nothing: ask again when it is back.
	Recover(ctx context.Context, job Job, ref string) (Handle, error)
}

// Availability is implemented by backends that depend on a service that
// may be away. The engine asks before starting a stage and keeps the stage
// queued, with the error as its reason, while it fails.
type Availability interface {
	Available(ctx context.Context) error
}

// PathMapper is implemented by backends whose attempts see the run, code
// and data directories at other paths than the host's (a container's
// mounts). The engine expands ${run_dir}, ${stage_dir}, ${code} and
// ${data}, and sets NIUMA_RUN_DIR, with the mapped paths. "" maps to "".
type PathMapper interface {
	MapPaths(runDir, codeDir, dataDir string) (run, code, data string)
}

// ImageChecker is implemented by container backends. CheckImage says
// whether image can run here without a registry (it is present locally);
// the engine uses it to choose a default executor.
type ImageChecker interface {
	CheckImage(ctx context.Context, image string) error
}

// Checker is implemented by backends whose sandbox has rules a job may
// break (a container's mounts, capabilities, user and process limit).
// Check says whether Start would accept job, without starting anything:
// the engine calls it when a run is submitted, with RunDir "" (the run's
// directory does not exist yet), so a refused job is refused before
// anything is written. Start checks again.
type Checker interface {
	Check(job Job) error
}

// ImagePreparer is implemented by container backends. The engine asks
// before it starts a stage whose run names an image: nil when the image is
// here; otherwise a *Waiting that says what is missing and what to do,
// which the stage shows while it waits. It may fetch the image in the
// background meanwhile.
type ImagePreparer interface {
	PrepareImage(ctx context.Context, image string) error
}

// Sweeper is implemented by backends whose attempts outlive Niuma as
// objects of their own (containers, cluster jobs). owned is the Token of
// every attempt the archive knows, finished or not: Sweep never touches
// what carries one of them (that is the engine's to recover), nor, for a
// backend whose attempts it cannot stop safely, anything still running.
// It removes or cancels what else the backend finds labelled as this
// install's, and reports what, in words. Each backend says exactly what it
// sweeps. A Ref in owned (what engines before tokens passed) names the one
// attempt it refers to.
type Sweeper interface {
	Sweep(ctx context.Context, owned []string) (removed []string, err error)
}

// Releaser is implemented by handles that hold resources in this process
// (log streams, waits). The engine calls Release when it stops owning the
// attempt without it having ended, so that the next owner alone follows it.
type Releaser interface {
	Release()
}

// Placer is implemented by backends with a scheduler of their own (a
// cluster's). The engine does not ask the shepherd to place their stages
// on this machine's GPUs: it starts a ready stage at once with Job.GPUCount
// set and no GPUs assigned, and the backend's queue places it.
type Placer interface {
	PlacesItself() bool
}

// Waiter is implemented by handles whose attempt may wait in a backend's
// queue after Start (a cluster job that is pending). Waiting says why in
// words while it waits, and "" once it runs or has ended. The engine shows
// the reason on the stage, and counts the stage's timeout from when the
// waiting ends.
type Waiter interface {
	Waiting() string
}

// Pauser is implemented by handles whose attempt the backend may pause
// while it runs (the local executor freezes an attempt's cgroup while its
// disk is full, so that nothing it writes is lost). Paused says why in
// words, e.g. "paused: disk full, 412 KiB free", and "" while it runs: the
// engine shows it as the stage's reason.
type Pauser interface {
	Paused() string
}

// Usage is what an attempt uses of the host now.
type Usage struct {
	MemoryBytes int64   // memory in use (RAM and page cache charged to it)
	PeakBytes   int64   // the most it has used
	LimitBytes  int64   // its memory limit; 0 = none
	CPUSeconds  float64 // CPU time it has used, user and system
	// CPULimitMilli is its CPU limit in thousandths of a CPU; 0 = none.
	CPULimitMilli int64
}

// Meter is implemented by handles that can tell what their attempt uses
// (the local executor, from the attempt's cgroup): false when it cannot
// be told now. Once the attempt has ended (Wait returned), Usage gives
// its last reading, taken as it ended, if it has one.
type Meter interface {
	Usage() (Usage, bool)
}
