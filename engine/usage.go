package engine

import (
	"sort"
	"time"

	"niuma/engine/executor"
)

// StageUsage is what a running stage's attempt uses of the host, as its
// executor last told (the local executor: from the attempt's cgroup).
type StageUsage struct {
	RunID   string `json:"run_id"`
	Stage   string `json:"stage"`
	Attempt int    `json:"attempt"`
	executor.Usage
	At time.Time `json:"at"` // when it was read
}

// usageKey names a stage in the usage map.
type usageKey struct{ run, stage string }

// setUsage records what a running attempt uses; zero At forgets it.
func (e *Engine) setUsage(u StageUsage) {
	if u.At.IsZero() {
		e.usage.Delete(usageKey{u.RunID, u.Stage})
		return
	}
	e.usage.Store(usageKey{u.RunID, u.Stage}, u)
}

// Usage lists what the running stages this process follows use of the
// host (memory, CPU time), by run and stage; empty in a process that owns
// no attempts, and for stages whose executor cannot tell.
func (e *Engine) Usage() []StageUsage {
	var out []StageUsage
	e.usage.Range(func(_, v any) bool {
		out = append(out, v.(StageUsage))
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].RunID != out[j].RunID {
			return out[i].RunID < out[j].RunID
		}
		return out[i].Stage < out[j].Stage
	})
	return out
}

// stageUsage is what Usage says of one stage, if anything.
func (e *Engine) stageUsage(run, stage string) (StageUsage, bool) {
	v, ok := e.usage.Load(usageKey{run, stage})
	if !ok {
		return StageUsage{}, false
	}
	return v.(StageUsage), true
}
