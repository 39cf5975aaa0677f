package shepherd

import (
	"time"
)

// Code says whether a plugin let a request through.
type Code int

const (
	// Success: the GPU may take the request.
	Success Code = iota
	// Unschedulable: the GPU may not take the request now; Reason says why.
	Unschedulable
)

// Status is a filter's refusal for one GPU: Unschedulable, the plugin's
// name and a short reason in plain words ("unhealthy"). As in the
// Kubernetes scheduler framework, a nil *Status is Success. Filters return
// shared, constant statuses so that a pass over a long queue allocates
// nothing; the wait reason a user reads is composed from them afterwards.
type Status struct {
	Code   Code
	Plugin string
	Reason string
}

// IsSuccess reports whether s lets the request through (s is nil or Success).
func (s *Status) IsSuccess() bool { return s == nil || s.Code == Success }

// Slot is one GPU during a scheduling pass: the snapshot plus what the pass
// has placed on it so far.
type Slot struct {
	GPU
	Free      int64 // free memory left for this pass
	Jobs      int   // runs on it: running placements plus those placed in this pass
	Exclusive bool  // holds a run that may not share its GPU
	// ReservedUntil is set while the GPU is kept for the head of the queue
	// (ReservedFor): only runs expected to end by then may use it.
	ReservedUntil time.Time
	ReservedFor   string
}

// Cycle is what plugins see besides the GPU: the request being placed and
// the pass it is part of.
type Cycle struct {
	Now time.Time
	Req *Request
	// MinNeedMiB is the smallest per-GPU memory need in the queue: free
	// memory below it is a fragment no waiting run can use.
	MinNeedMiB int64
}

// Filter is a plugin that says whether one GPU may take the request. Its
// answer may depend only on the slot, the pass's Now and the request's GPUs,
// memory, Shareable flag and Estimate — where a longer (or unknown)
// estimate may only fail more — because a pass remembers which request
// shapes failed and does not ask again until a GPU changes.
type Filter interface {
	Name() string
	Filter(c *Cycle, s *Slot) *Status
}

// Scorer is a plugin that ranks the GPUs that passed every filter: higher is
// better. Scores of all a policy's scorers are summed.
type Scorer interface {
	Name() string
	Score(c *Cycle, s *Slot) int64
}

// Running is an earlier placement that still holds its GPUs.
type Running struct {
	ID           string
	GPUs         []string // UUIDs
	MemPerGPUMiB int64
	Priority     int
	Preemptible  bool
	Shareable    bool
	Start        time.Time
	Estimate     time.Duration // 0 = unknown
}

// State is everything one scheduling pass decides over. Inventory.GPUs
// FreeMiB must already exclude what Running holds (as the engine's snapshot
// does); Running tells the shepherd who shares a GPU, who may be preempted
// and when GPUs are expected to free up.
type State struct {
	Inventory Inventory
	Running   []Running
	Queue     []Request
	Now       time.Time
	// Terse skips composing wait reasons in words (every waiting request
	// gets "waiting"): the simulator's hot path. Decisions are otherwise
	// identical.
	Terse bool
}
