package engine

import (
	"fmt"
	"time"

	"niuma/storage"
)

// State is where a run or a stage is in its life.
type State string

// The states of runs and stages. A stage moves queued → running →
// succeeded / failed / cancelled, and back to queued between retries. A
// run ends as one of those or, when a study's pruner stopped it, pruned.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	// Pruned is a run's only: a study's pruner stopped it early.
	Pruned State = "pruned"
)

// States are every state a run can be in, in the order the window and
// the metrics list them.
var States = []State{Running, Queued, Succeeded, Failed, Cancelled, Pruned}

// Done reports whether the state is final.
func (s State) Done() bool { return s == Succeeded || s == Failed || s == Cancelled || s == Pruned }

// RunInfo is the read model of one run, for the window and the CLI.
type RunInfo struct {
	ID              string         `json:"id"`
	Template        string         `json:"template"`
	TemplateVersion string         `json:"template_version"`
	TemplateSource  string         `json:"template_source"`
	Params          map[string]any `json:"params"`
	Seed            int64          `json:"seed"`
	Priority        int            `json:"priority"`
	Executor        string         `json:"executor"`
	State           State          `json:"state"`
	Error           string         `json:"error"`
	CancelRequested bool           `json:"cancel_requested"`
	Fingerprint     string         `json:"fingerprint"`
	Dir             string         `json:"dir"`
	CreatedAt       time.Time      `json:"created_at,omitzero"`
	StartedAt       time.Time      `json:"started_at,omitzero"`
	FinishedAt      time.Time      `json:"finished_at,omitzero"`
	Stages          []StageInfo    `json:"stages"`
	// Sweep is shared by the runs one sweep launched ("" for a single run).
	Sweep string `json:"sweep,omitempty"`
	// Spot: the shepherd may preempt the run (it resumes); Share: it may
	// share a GPU when memory fits.
	Spot  bool `json:"spot,omitempty"`
	Share bool `json:"share,omitempty"`
	// FlagOnly: the sentinel only flags the run's anomalies, never
	// retries or stops it.
	FlagOnly bool `json:"flag_only,omitempty"`
	// ExecutorNote, set by Submit only, says what the user should know
	// about where the run goes: that it waits for its image or Docker (and
	// how to get them), or what a run on the host goes without.
	ExecutorNote string `json:"executor_note,omitempty"`
	// MetricsWaiting, set by Run, says how many of the run's metric points
	// wait to be stored and why ("" when none): see Engine.MetricsWaiting.
	MetricsWaiting string `json:"metrics_waiting,omitempty"`
	// ObjectiveMissing, set by Run for a finished run, says that its
	// template's objective metric never appeared ("" when it did, or the
	// run has no objective).
	ObjectiveMissing string `json:"objective_missing,omitempty"`
}

// StageInfo is the read model of one stage of a run.
type StageInfo struct {
	Name        string   `json:"name"`
	Needs       []string `json:"needs"`
	State       State    `json:"state"`
	Attempts    int      `json:"attempts"`     // started so far
	MaxAttempts int      `json:"max_attempts"` // 1 + retries + free attempts
	// SentinelAttempts counts the attempts the sentinel asked for (they
	// spend none of the template's retries).
	SentinelAttempts int    `json:"sentinel_attempts,omitempty"`
	ExitCode         *int   `json:"exit_code"`
	Reason           string `json:"reason"`
	// ReasonCode is Reason's code: a shepherd.ReasonCode (cpu, gpu_memory,
	// ...) or the engine's own (executor, preempted); "" when none.
	ReasonCode   string        `json:"reason_code,omitempty"`
	GPUs         int           `json:"gpus"`
	GPUMemoryMiB int64         `json:"gpu_memory_mib,omitempty"`
	CPUMilli     int64         `json:"cpu_milli,omitempty"`
	MemMiB       int64         `json:"mem_mib,omitempty"`
	Estimate     time.Duration `json:"estimate,omitempty"` // the user's
	StartedAt    time.Time     `json:"started_at,omitzero"`
	FinishedAt   time.Time     `json:"finished_at,omitzero"`
	History      []AttemptInfo `json:"history"`
	// Failure, for a failed stage, is why its last attempt failed (set by
	// Engine.Run).
	Failure *FailureInfo `json:"failure,omitempty"`
	// MetricsRead, set by Engine.Run, says how the last attempt's metrics
	// were read: the presets found in its output, the files read.
	MetricsRead []MetricsRead `json:"metrics_read,omitempty"`
	// PointsLost counts its metric points that could never be stored: a
	// stage with any is no plain success (its Reason says so).
	PointsLost int64 `json:"points_lost"`
	// Usage, for a running stage, is what it uses of the host now (in the
	// owner's process, where the executor can tell).
	Usage *StageUsage `json:"usage,omitempty"`
}

// MetricsRead is one way a stage's metrics were read: Format (presets
// such as "hf-trainer", or a file's kind: "csv", "json lines",
// "trainer_state.json", "tensorboard") from From (stdout, stderr, or the
// file's path in the run's folder).
type MetricsRead struct {
	Format string `json:"format"`
	From   string `json:"from"`
}

// String is how the CLI and the run view say it.
func (m MetricsRead) String() string {
	return "metrics read as " + m.Format + ", from " + m.From
}

// AttemptsText says how many attempts a stage has had of how many it may
// have, and how many of them the sentinel asked for: "2 of 2, 1 by the
// sentinel".
func (s StageInfo) AttemptsText() string {
	t := fmt.Sprintf("%d of %d", s.Attempts, s.MaxAttempts)
	if s.SentinelAttempts > 0 {
		t += fmt.Sprintf(", %d by the sentinel", s.SentinelAttempts)
	}
	return t
}

// AttemptInfo is one attempt of a stage.
type AttemptInfo struct {
	Number     int       `json:"number"`
	State      string    `json:"state"`
	Executor   string    `json:"executor"`
	GPUs       []string  `json:"gpus"`
	ExitCode   *int      `json:"exit_code"`
	Reason     string    `json:"reason"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Point is one metric value a stage reported.
type Point struct {
	Stage   string    `json:"stage"`
	Attempt int       `json:"attempt"`
	Key     string    `json:"key"`
	Step    int64     `json:"step"`
	Value   float64   `json:"value"`
	Wall    time.Time `json:"wall,omitzero"`
	// Seq is the point's place in its series' arrival order (1, 2, ...):
	// points that share a step are all kept, and Seq tells them apart.
	Seq int64 `json:"seq,omitempty"`
}

// ParamPairs lists the run's parameters as "name=value", sorted by name.
func (r RunInfo) ParamPairs() []string {
	out := make([]string, 0, len(r.Params))
	for _, k := range sortedKeys(r.Params) {
		out = append(out, fmt.Sprintf("%s=%v", k, r.Params[k]))
	}
	return out
}

// Elapsed is how long the run has taken so far (or took).
func (r RunInfo) Elapsed(now time.Time) time.Duration {
	if r.StartedAt.IsZero() {
		return 0
	}
	if !r.FinishedAt.IsZero() {
		return r.FinishedAt.Sub(r.StartedAt)
	}
	return now.Sub(r.StartedAt)
}

func runInfo(r storage.Run, params map[string]any, stages []storage.Stage, attempts []storage.Attempt) RunInfo {
	info := RunInfo{
		ID: r.ID, Template: r.Template, TemplateVersion: r.TemplateVersion, TemplateSource: r.TemplateSource,
		Params: params, Seed: r.Seed, Priority: r.Priority, Executor: r.Executor,
		State: State(r.State), Error: r.Error, CancelRequested: r.CancelRequested,
		Fingerprint: r.Fingerprint, Dir: r.Dir,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Sweep: r.Sweep,
		Spot: r.Spot, Share: r.Share, FlagOnly: r.FlagOnly,
	}
	for _, s := range stages {
		si := StageInfo{
			Name: s.Name, Needs: s.Needs, State: State(s.State), Attempts: s.Attempts, MaxAttempts: s.MaxAttempts(),
			SentinelAttempts: s.SentinelAttempts,
			ExitCode:         s.ExitCode, Reason: s.Reason, GPUs: s.GPUs, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
			ReasonCode: s.ReasonCode, GPUMemoryMiB: s.GPUMemoryMiB, CPUMilli: s.CPUMilli, MemMiB: s.MemMiB, Estimate: s.Estimate,
			PointsLost: s.PointsLost,
		}
		for _, a := range attempts {
			if a.Stage == s.Name {
				si.History = append(si.History, AttemptInfo{
					Number: a.Number, State: a.State, Executor: a.Executor, GPUs: a.GPUs, ExitCode: a.ExitCode,
					Reason: a.Reason, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt,
				})
			}
		}
		info.Stages = append(info.Stages, si)
	}
	return info
}

func pointFrom(p storage.MetricPoint) Point {
	return Point{Stage: p.Stage, Attempt: p.Attempt, Key: p.Key, Step: p.Step, Value: p.Value, Wall: p.Wall, Seq: p.Seq}
}
