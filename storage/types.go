package storage

import (
	"errors"
	"time"
)

// ErrNotFound is returned (wrapped) when a requested row does not exist.
var ErrNotFound = errors.New("not found")

// ErrAmbiguous is returned (wrapped) by ResolveRunID when a prefix matches
// more than one run.
var ErrAmbiguous = errors.New("ambiguous")

// ErrSchemaTooNew is returned (wrapped) by Open when the database was written
// by a newer Niuma whose schema this binary does not know.
var ErrSchemaTooNew = errors.New("database schema is newer than this build of Niuma")

// RunState is the lifecycle state of a run.
type RunState string

// Run states.
const (
	RunQueued    RunState = "queued"
	RunRunning   RunState = "running"
	RunSucceeded RunState = "succeeded"
	RunFailed    RunState = "failed"
	RunCancelled RunState = "cancelled"
	// RunPruned: a study's pruner stopped it early (the evidence is in
	// run_prunes); it neither failed nor was cancelled by anyone.
	RunPruned RunState = "pruned"
)

// Done reports whether the run has reached a final state.
func (s RunState) Done() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled || s == RunPruned
}

// StageState is the lifecycle state of a stage.
type StageState string

// Stage states.
const (
	StageQueued    StageState = "queued"
	StageRunning   StageState = "running"
	StageSucceeded StageState = "succeeded"
	StageFailed    StageState = "failed"
	StageCancelled StageState = "cancelled"
)

// Done reports whether the stage has reached a final state.
func (s StageState) Done() bool {
	return s == StageSucceeded || s == StageFailed || s == StageCancelled
}

// Attempt states (Attempt.State is a plain string).
const (
	// AttemptStarting: recorded, with its Token, before it is launched;
	// it may or may not run yet. A new owner asks the executor by the
	// token (see executor.Executor.Recover).
	AttemptStarting  = "starting"
	AttemptRunning   = "running"
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
	AttemptCancelled = "cancelled"
	AttemptLost      = "lost"
	// AttemptInterrupted: its backend went away mid-attempt (a Docker
	// daemon restart); it runs again without spending a retry.
	AttemptInterrupted = "interrupted"
	// AttemptPreempted: the shepherd stopped it (a spot run) to make room
	// for other work; the stage runs again, resumed, without spending a
	// retry.
	AttemptPreempted = "preempted"
	// AttemptNotStarted: its backend was away; it never ran.
	AttemptNotStarted = "not started"
)

// Pending actions: what the engine decided about a stage's current attempt
// while it runs, applied when it ends.
const (
	PendingStop    = "stop"    // the sentinel stops the run: fail without retries
	PendingRetry   = "retry"   // the sentinel retries, maybe with new parameters, spending no retry
	PendingPreempt = "preempt" // stopped for another run's GPUs: queued again, spending no retry
)

// Pending is a decision about a stage's current attempt (see Pending*).
type Pending struct {
	Action string // "" = none
	Note   string // what the user reads about it
	Params string // PendingRetry: the run's new parameters (JSON); "" = unchanged
}

// Run is one experiment: a template snapshot with chosen parameters, run as
// a DAG of stages.
type Run struct {
	ID              string // e.g. "20261129-175700-3f2a", chosen by the engine
	Template        string // template name
	TemplateVersion string
	TemplateSource  string // where the template came from (bundled name or file path)
	TemplateYAML    string // full snapshot of the template text
	Params          string // JSON object of parameter values
	Seed            int64
	Priority        int
	Executor        string // "local", "docker", ...
	State           RunState
	Error           string // why it failed, one sentence; "" otherwise
	CancelRequested bool
	Fingerprint     string
	Dir             string // absolute run directory
	CodeDir         string // the template's folder: ${code} in its commands
	Sweep           string // shared by the runs one sweep launched; "" for a single run
	// Spot: the run may be preempted (SIGTERM, requeued, resumed with
	// NIUMA_RESUME). Share: it may share a GPU with other runs when
	// memory fits.
	Spot, Share bool
	// FlagOnly: the sentinel only flags (and notifies) its anomalies,
	// never retries or stops it.
	FlagOnly bool

	// Zero = NULL in the database. CreateRun fills a zero CreatedAt with
	// the current time.
	CreatedAt, StartedAt, FinishedAt time.Time
}

// Stage is one node of a run's DAG.
type Stage struct {
	RunID, Name   string
	Position      int      // topological order index, for display
	Needs         []string // stored as JSON; empty reads back as nil
	GPUs          int
	GPUMemoryMiB  int64
	CPUMilli      int64         // host CPUs, thousandths; 0 = not asked
	MemMiB        int64         // host memory; 0 = not asked
	Estimate      time.Duration // the user's estimate of its run time; 0 = none
	Retries       int
	TimeoutSec    int64 // 0 = none
	State         StageState
	Attempts      int       // attempts started so far
	ExitCode      *int      // of the last finished attempt; nil = none
	Reason        string    // why it waits / failed / was cancelled, plain words
	ReasonCode    string    // Reason's code (a shepherd.ReasonCode or the engine's own); "" = none
	NextAttemptAt time.Time // backoff: not before this
	StartedAt     time.Time
	FinishedAt    time.Time
	// FreeAttempts counts attempts that spent none of Retries (the
	// sentinel's retries, a backend that was away); SentinelAttempts how
	// many of them the sentinel asked for.
	FreeAttempts     int
	SentinelAttempts int
	// Pending is what happens when the current attempt ends, decided
	// while it runs.
	Pending Pending
	// PointsLost counts the metric points of its attempts that could
	// never be stored.
	PointsLost int64
}

// MaxAttempts is how many attempts the stage may have: one, its retries
// and the free ones.
func (s Stage) MaxAttempts() int { return 1 + s.Retries + s.FreeAttempts }

// Attempt is one execution of a stage.
type Attempt struct {
	RunID, Stage string
	Number       int    // 1-based
	State        string // AttemptRunning, AttemptSucceeded, ...
	Executor     string
	Handle       string   // executor-specific JSON to re-attach after restart
	Token        string   // the identity it is launched under (see AttemptStarting)
	Params       string   // the run's parameters (JSON) it started with; "" when not recorded
	GPUs         []string // GPU UUIDs, stored as JSON; empty reads back as nil
	ExitCode     *int
	Reason       string
	StartedAt    time.Time
	FinishedAt   time.Time
}

// MetricPoint is one value of one metric key at one step of one attempt.
// Points that share a step are all kept: Seq numbers a series' points in
// the order they were stored (1, 2, ...), and is assigned by the insert.
type MetricPoint struct {
	RunID, Stage string
	Attempt      int
	Key          string
	Step         int64
	Value        float64   // NaN and ±Inf round-trip
	Wall         time.Time // stored as unix nanoseconds; zero = NULL
	// Seq is the point's place in its series' arrival order; set when read
	// back (ignored on insert).
	Seq int64
	// StepSource names what gave the step ("step", "epoch", "global_step",
	// "counter", "line", "tensorboard", ...); the series keeps the latest
	// one given. Empty on insert keeps the series' own.
	StepSource string
}

// MetricCursor is how far one source of an attempt's metrics (its stdout,
// its stderr, one TensorBoard or CSV file) has been read into stored
// points: a byte offset, and the reader's state at that offset (opaque to
// storage). It is stored in the same transaction as the points it covers.
type MetricCursor struct {
	RunID, Stage string
	Attempt      int
	Source       string
	Offset       int64
	State        string
}

// SeriesSummary is what storage keeps about one metric of one attempt as
// its points are written, so that reading it never scans the points.
type SeriesSummary struct {
	Stage, Key string
	Attempt    int
	Points     int64 // how many points
	// Repeats counts points that arrived at a step not above an earlier
	// point's (a step shared, or a counter that went back).
	Repeats   int64
	NonFinite int64   // NaN and ±Inf values
	Min, Max  float64 // over the finite values; NaN when there are none
	// Last is the point with the highest step (the latest of those that
	// share it).
	Last       MetricPoint
	StepSource string
}

// Event is an anomaly or another notable happening.
type Event struct {
	ID       int64
	RunID    string // "" = machine-wide event (NULL in the database)
	Stage    string
	GPU      string
	Kind     string // e.g. "nan", "stage_failed"
	Severity string // "info", "warning", "critical"
	Message  string
	Fix      string
	Evidence string    // JSON
	At       time.Time // AddEvent fills a zero At with the current time
	// DismissedAt is when the user dismissed it; zero while it stands.
	DismissedAt time.Time
}

// Event severities.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// GPUSample is one minute of downsampled telemetry of one GPU. A NaN float
// field (a value the GPU did not report) round-trips as NaN.
type GPUSample struct {
	GPU                                 string    // UUID
	Minute                              time.Time // truncated to the minute on write
	Simulated                           bool      // a simulated GPU: pretend telemetry
	Samples                             int       // readings the minute is made of
	UtilMin, UtilMean, UtilMax          float64
	MemUsedMin, MemUsedMean, MemUsedMax int64 // MiB
	TempMean, TempMax                   float64
	PowerMean, PowerMax                 float64
	// Throttled counts the readings whose clocks were held down by a limit
	// (thermal, power, hardware slowdown; idleness does not count), and
	// ThrottleReasons names those limits (gpumon's names), sorted.
	Throttled       int
	ThrottleReasons []string
	// XIDs are the XID errors the driver reported during the minute.
	XIDs []uint64
	// Runs is the memory each run's processes held on the GPU during the
	// minute (stored in gpu_run_samples).
	Runs []GPURunSample
}

// GPURunSample is the GPU memory one stage of one run held on a GPU during
// one minute: the mean over the readings in which it held any, and the peak.
type GPURunSample struct {
	RunID, Stage string
	Samples      int
	MemMeanMiB   int64
	MemMaxMiB    int64
}

// GPUUse is one minute of one run's use of one GPU: the run's memory there
// (summed over its stages) beside the GPU's own record of that minute.
type GPUUse struct {
	GPUSample
	RunMemMeanMiB, RunMemMaxMiB int64
}

// GPUInfo is a GPU as last sampled: what names it in reports long after.
type GPUInfo struct {
	UUID        string
	Index       int
	Name        string
	Simulated   bool
	MemTotalMiB int64
	PowerLimitW float64 // NaN when unknown
	FirstSeen   time.Time
	LastSeen    time.Time
}

// RunFilter selects runs for ListRuns.
type RunFilter struct {
	States      []RunState // empty = all
	Fingerprint string     // "" = any
	Limit       int        // 0 = no limit
}
