package engine

import (
	"slices"

	"niuma/storage"
)

// The loop's indexes of a live run: which of its stages a reconcile pass
// must look at, which run, and how many are done. They are derived from
// the stages' stored states and nothing else: built when a run is loaded
// (at the start of every owner, so after a crash too) and kept by
// transition, the one place a state changes, as it installs a committed
// change. A pass then costs what is ready or running, not the whole run:
// in a chain of 10,000 stages one stage is ready at a time, and a pass
// that walked all of them to find it made the run O(n²).
//
//	ready    queued stages whose needs are all settled (succeeded, failed,
//	         cancelled or missing): the pass starts them, skips them (a
//	         need failed), or holds them (backoff, a wait for the
//	         shepherd). A queued stage with a need still to run is not in
//	         it; the end of its last unsettled need puts it there.
//	running  stages whose state is running: what holds GPUs, CPUs and
//	         memory, what an anomaly or a preemption can be about.
//	done     how many stages are succeeded, failed or cancelled: the run
//	         is closed when all are.

// indexRun builds a freshly loaded run's indexes from its stages' states.
func (lr *liveRun) indexRun() {
	lr.ready, lr.readySorted, lr.done = nil, true, 0
	lr.running = map[*liveStage]struct{}{}
	for i, ls := range lr.stages {
		ls.index, ls.inReady = i, false
		for _, n := range ls.st.Needs {
			if dep := lr.byName[n]; dep != nil {
				dep.dependents = append(dep.dependents, ls)
			}
		}
	}
	for _, ls := range lr.stages {
		lr.track(ls, "")
	}
}

// track updates the indexes for a stage whose state was prev ("" when it
// is first indexed) and is now ls.st.State.
func (lr *liveRun) track(ls *liveStage, prev storage.StageState) {
	now := ls.st.State
	if prev == now {
		return
	}
	if prev == storage.StageRunning {
		delete(lr.running, ls)
	}
	// A done stage stays done (see transition's diagram): done only grows.
	switch {
	case now == storage.StageQueued:
		lr.consider(ls)
	case now == storage.StageRunning:
		lr.running[ls] = struct{}{}
		ls.inReady = false
	case now.Done():
		ls.inReady = false
		lr.done++
		for _, d := range ls.dependents {
			lr.consider(d)
		}
	}
}

// consider puts a queued stage whose needs are all settled in the ready
// set.
func (lr *liveRun) consider(ls *liveStage) {
	if ls.inReady || ls.st.State != storage.StageQueued {
		return
	}
	for _, n := range ls.st.Needs {
		if dep := lr.byName[n]; dep != nil && !dep.st.State.Done() {
			return // the end of that need considers it again
		}
	}
	ls.inReady, ls.readyAt = true, len(lr.ready)
	lr.ready = append(lr.ready, ls)
	lr.readySorted = len(lr.ready) < 2 || (lr.readySorted && lr.ready[len(lr.ready)-2].index < ls.index)
}

// tidyReady drops from the ready set the stages that left it since the
// last call (they started, or were skipped) and puts the rest in the
// run's topological order, the order passes have always seen the stages
// in. A pass walks lr.ready by index after it: stages that a skip during
// the pass makes ready (the dependents of a stage skipped) are appended,
// and seen by the same pass, as a walk over all stages in order saw them.
func (lr *liveRun) tidyReady() {
	kept := lr.ready[:0]
	for i, ls := range lr.ready {
		if lr.isReady(i) {
			kept = append(kept, ls)
		}
	}
	clear(lr.ready[len(kept):])
	lr.ready = kept
	if !lr.readySorted {
		slices.SortFunc(lr.ready, func(a, b *liveStage) int { return a.index - b.index })
		lr.readySorted = true
	}
	for i, ls := range lr.ready {
		ls.readyAt = i
	}
}

// isReady says whether the entry at i of lr.ready stands for its stage: a
// stage that left the set and came back (it ran, and was queued again for
// a retry) before a pass tidied the set has an old entry as well, which
// must not be seen, or the stage would be started twice.
func (lr *liveRun) isReady(i int) bool {
	ls := lr.ready[i]
	return ls.inReady && ls.readyAt == i
}

// runningStages is the running set in the run's topological order (for
// what acts on them one by one, so that the order does not vary).
func (lr *liveRun) runningStages() []*liveStage {
	out := make([]*liveStage, 0, len(lr.running))
	for ls := range lr.running {
		out = append(out, ls)
	}
	slices.SortFunc(out, func(a, b *liveStage) int { return a.index - b.index })
	return out
}

// allDone says whether every stage of the run is done.
func (lr *liveRun) allDone() bool { return lr.done == len(lr.stages) }
