package shepherd

import (
	"slices"
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
// name, a short reason in plain words ("unhealthy") and the wait reason
// code it stands for. As in the Kubernetes scheduler framework, a nil
// *Status is Success. Filters return shared, constant statuses so that a
// pass over a long queue allocates nothing; the wait reason a user reads is
// composed from them afterwards.
type Status struct {
	Code   Code
	Plugin string
	Reason string
	Cause  ReasonCode
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
	// HostIdx is the slot's host in Cycle.Hosts.
	HostIdx int
	// Whole marks a physical GPU split into MIG slices: never placeable
	// itself.
	Whole bool
	// Team is the team of the runs on it ("" while it has none): on a
	// machine shared among teams, runs of one team only share a GPU.
	Team string
}

// HostSlot is one host during a pass: its capacity and what is left.
type HostSlot struct {
	Host
	FreeCPUMilli, FreeMemMiB int64
	tracked                  bool // listed in the inventory
}

// Cycle is what plugins see besides the GPU: the request being placed and
// the pass it is part of.
type Cycle struct {
	Now time.Time
	Req *Request
	// MinNeedMiB is the smallest per-GPU memory need in the queue: free
	// memory below it is a fragment no waiting run can use.
	MinNeedMiB int64
	// Hosts are the pass's hosts, by Slot.HostIdx.
	Hosts []HostSlot
	// Demand is the mix of per-GPU memory needs the machine serves (the
	// queue's and the running placements'): what a GPU's free memory is
	// worth to the runs to come. Set when a policy's scorer asks for it.
	Demand *DemandMix
}

// DemandMix is how often each per-GPU memory need occurs among a machine's
// requests.
type DemandMix struct {
	mem   []int64   // distinct needs, ascending
	above []float64 // above[i]: the share of requests needing mem[i] or more
}

// Unusable is the share of requests that could not use a GPU with free
// MiB: those needing more.
func (d *DemandMix) Unusable(free int64) float64 {
	if d == nil {
		return 0
	}
	i, _ := slices.BinarySearch(d.mem, free+1)
	if i >= len(d.mem) {
		return 0
	}
	return d.above[i]
}

// set computes the mix from needs and their counts.
func (d *DemandMix) set(counts map[int64]int) {
	d.mem, d.above = d.mem[:0], d.above[:0]
	total := 0
	for m, n := range counts {
		d.mem = append(d.mem, m)
		total += n
	}
	slices.Sort(d.mem)
	d.above = append(d.above, make([]float64, len(d.mem))...)
	acc := 0
	for i := len(d.mem) - 1; i >= 0; i-- {
		acc += counts[d.mem[i]]
		d.above[i] = float64(acc) / float64(max(total, 1))
	}
}

// Filter is a plugin that says whether one GPU may take the request. Its
// answer may depend only on the slot (and its host), the pass's Now and the
// request's GPUs, memory, CPUs, host memory, Shareable flag and Estimate —
// where a longer (or unknown) estimate may only fail more — because a pass
// remembers which request shapes failed and does not ask again until a GPU
// changes.
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

// Running is an earlier placement that still holds its GPUs (and CPUs and
// memory). Request.Placement builds one.
type Running struct {
	ID           string
	GPUs         []string // UUIDs
	Host         string
	MemPerGPUMiB int64
	CPUMilli     int64
	MemMiB       int64
	Priority     int
	Preemptible  bool
	Shareable    bool
	Start        time.Time     // of the current attempt
	Estimate     time.Duration // how long it was expected to run from Start; 0 = unknown
	Attained     time.Duration // run time of its attempts before this one
	Team         string        // whose share it counts against (State.Teams)
	// Kept marks a run within its team's share (a sharing pass sets it):
	// only a request of its own team may preempt it, as on a partition of
	// the team's own.
	Kept bool
}

// State is everything one scheduling pass decides over. Inventory.GPUs
// FreeMiB must already exclude what Running holds (as the engine's snapshot
// does); host capacities do not (the pass subtracts Running's CPUs and
// memory). Running tells the shepherd who shares a GPU, who may be
// preempted and when GPUs are expected to free up.
type State struct {
	Inventory Inventory
	Running   []Running
	Queue     []Request
	Now       time.Time
	// Terse skips composing wait reasons in words (every waiting request
	// gets code WaitQueued, "waiting"): the simulator's hot path. Decisions
	// are otherwise identical.
	Terse bool
	// Teams shares the machine among teams (see Teams); nil: one free
	// queue.
	Teams *Teams
}
