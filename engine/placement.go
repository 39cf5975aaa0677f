package engine

import (
	"context"
	"time"

	"niuma/engine/executor"
	"niuma/shepherd"
	"niuma/storage"
)

// placement is what the loop keeps about a stage for the shepherd, besides
// its stored row: the placement it holds while it runs, the run time its
// preempted attempts already had, and whether the shepherd is stopping it.
type placement struct {
	held     *shepherd.Running // set while an attempt holds GPUs, CPUs or memory
	attained time.Duration     // run time of its preempted attempts, which the next resumes
	resume   bool              // the current attempt resumes a preempted one: NIUMA_RESUME is set
	// reasonSaved is when its wait reason was last written (see
	// reasonRefresh).
	reasonSaved time.Time
	// token is the token its next attempt will carry, chosen when it first
	// asks the machine service to place it (the key of its lease there);
	// kept until the attempt is recorded, so asking again is idempotent.
	token string
	// grace is the stop's grace the machine service asked for with a
	// reclaim (0: the engine's own).
	grace time.Duration
}

// reasonRefresh is how often a waiting stage's reason is written again when
// only its words change ("3 runs ahead" becoming "2 runs ahead"), not its
// code: a wide DAG waiting for CPU slots would otherwise rewrite every
// waiting stage at every pass. A new code is written at once.
const reasonRefresh = time.Second

// maxWordWrites bounds how many waiting stages a second have their reason
// written again for new words only (a new code is written at once).
const maxWordWrites = 200

// WaitPreempted is the code of a stage whose attempt was preempted, until
// the shepherd's next pass says why it waits.
const WaitPreempted = "preempted"

// need is what a ready stage asks of the shepherd, read from its stored
// row and its run: the one description shepherd.Build turns into a
// request, as the simulator's trace jobs are.
func (e *Engine) need(lr *liveRun, ls *liveStage) shepherd.Need {
	var needsEnd []time.Time
	for _, n := range ls.st.Needs {
		if dep := lr.stage(n); dep != nil {
			needsEnd = append(needsEnd, dep.st.FinishedAt)
		}
	}
	// Aging counts from when the stage became ready: its run was made, its
	// needs succeeded, its last attempt ended (a preemption) or its backoff
	// ran out.
	ready := waitStart(lr.run.CreatedAt, ls.attempt.FinishedAt, append(needsEnd, ls.st.NextAttemptAt)...)
	return shepherd.Need{
		ID: stageKey(lr, ls), GPUs: ls.st.GPUs, GPUMemMiB: ls.st.GPUMemoryMiB,
		CPUMilli: ls.st.CPUMilli, MemMiB: ls.st.MemMiB, Priority: lr.run.Priority,
		Spot: lr.run.Spot, Share: lr.run.Share, ReadySince: ready, Attained: ls.place.attained,
		Estimate: ls.st.Estimate, Predicted: e.predict(lr, ls.st.Name),
	}
}

// request is the shepherd's request for a ready stage.
func (e *Engine) request(lr *liveRun, ls *liveStage) shepherd.Request {
	return shepherd.Build(e.need(lr, ls))
}

// placements are the running stages as the shepherd sees them: what each
// holds of the GPUs and the host.
func (e *Engine) placements() []shepherd.Running {
	var out []shepherd.Running
	for _, lr := range e.runs {
		for ls := range lr.running { // only a running stage holds anything
			if ls.place.held != nil {
				out = append(out, *ls.place.held)
			}
		}
	}
	return out
}

// holdPlacement records what a starting (or adopted) attempt holds, for
// the shepherd's next passes. A stage that a cluster's scheduler places
// holds nothing of this machine.
func (e *Engine) holdPlacement(lr *liveRun, ls *liveStage, gpus []executor.GPU) {
	start := time.Now()
	if ls.attempt.Number == ls.st.Attempts && !ls.attempt.StartedAt.IsZero() {
		start = ls.attempt.StartedAt // an adopted attempt
	}
	if p, ok := e.execs[lr.run.Executor].(executor.Placer); ok && p.PlacesItself() {
		ls.place.held = nil
		return
	}
	sg := make([]shepherd.GPU, len(gpus))
	for i, g := range gpus {
		sg[i] = shepherd.GPU{Index: g.Index, UUID: g.UUID}
	}
	r := e.request(lr, ls).Placement(sg, "", start)
	ls.place.held = &r
}

// inventory is the devices and the host as the shepherd needs them. A GPU
// in MIG mode is offered as its slices, never whole (gpumon's Devices).
// Free memory excludes what running stages were given; a stage's memory
// already visible in the snapshot (its processes, or a simulated GPU's
// holders) is not subtracted twice: only the part of its reservation not
// yet in use.
func (e *Engine) inventory(ctx context.Context) shepherd.Inventory {
	inv := shepherd.Inventory{Hosts: []shepherd.Host{e.opts.Host}}
	snap, err := e.opts.GPUs.Snapshot(ctx)
	if err != nil {
		inv.Reason = "GPU telemetry failed: " + err.Error()
		return inv
	}
	inv.Reason = snap.Reason
	visible := map[string]int64{} // "uuid holder" -> MiB in use
	for _, d := range snap.Devices() {
		sg := shepherd.GPU{Index: d.Index, UUID: d.UUID, Model: d.Name, TotalMiB: d.MemTotalMiB,
			FreeMiB: d.MemTotalMiB - d.MemUsedMiB, Healthy: d.Healthy, Group: d.Group, Parent: d.Parent}
		if d.Parent != "" {
			sg.Label = d.Label
		}
		if d.UtilPercent != nil {
			sg.UtilPct = *d.UtilPercent
		}
		if d.TempC != nil {
			sg.TempC = *d.TempC
		}
		inv.GPUs = append(inv.GPUs, sg)
		for _, p := range d.Processes {
			if p.Owner != nil {
				visible[d.UUID+" "+p.Owner.RunID+"/"+p.Owner.Stage] += p.MemMiB
			}
		}
	}
	for _, lr := range e.runs {
		for ls := range lr.running {
			for _, g := range ls.gpus {
				reserve(&inv, g.UUID, max(0, ls.st.GPUMemoryMiB-visible[g.UUID+" "+stageKey(lr, ls)]))
			}
		}
	}
	return inv
}

func reserve(inv *shepherd.Inventory, uuid string, mib int64) {
	for i := range inv.GPUs {
		if inv.GPUs[i].UUID == uuid {
			inv.GPUs[i].FreeMiB -= mib
		}
	}
}

// preempt stops a running spot stage so that the run the shepherd chose can
// have what it holds. The request is recorded first (a pending decision,
// through transition), so that its end is recorded as preempted and the
// stage queued again, resumed and spending no retry, even when the end is
// seen by the next owner.
func (e *Engine) preempt(ctx context.Context, key, why string) {
	for _, lr := range e.runs {
		for _, ls := range lr.runningStages() {
			if stageKey(lr, ls) != key || ls.st.State != storage.StageRunning || ls.handle == nil {
				continue // not started yet: a later pass asks again
			}
			if ls.st.Pending.Action == "" {
				e.log.Info("preempt stage", "stage", key, "why", why)
				if e.transition(ctx, lr, ls, evDecide{pending: storage.Pending{Action: storage.PendingPreempt, Note: why}}) != nil {
					continue // not recorded: a later pass asks again
				}
			}
			if ls.st.Pending.Action == storage.PendingPreempt {
				e.stopAttempt(ls)
			}
		}
	}
}

// restorePlacement rebuilds, after a restart, the run time of a stage's
// preempted attempts, which the shepherd counts as service it already had.
// (The retries they spent none of are stored: Stage.FreeAttempts.)
func restorePlacement(ls *liveStage, attempts []storage.Attempt) {
	for _, a := range attempts {
		if a.Stage != ls.st.Name || a.State != storage.AttemptPreempted {
			continue
		}
		if !a.StartedAt.IsZero() && a.FinishedAt.After(a.StartedAt) {
			ls.place.attained += a.FinishedAt.Sub(a.StartedAt)
		}
	}
}

// waitFor records why a queued stage waits, with its code (a
// shepherd.ReasonCode, or the engine's WaitExecutor while its executor is
// away). A new code is written at once; when only the words move ("3 runs
// ahead" becoming "2 runs ahead") they are written at most every
// reasonRefresh.
func (e *Engine) waitFor(ctx context.Context, lr *liveRun, ls *liveStage, code, text string) {
	st, now := &ls.st, time.Now()
	switch {
	case st.Reason == text && st.ReasonCode == code:
	case st.ReasonCode == code && st.Reason != "" && now.Sub(ls.place.reasonSaved) < max(reasonRefresh, e.wordsEvery):
		// Only the words moved: written at a later pass.
	default:
		if e.transition(ctx, lr, ls, evWait{why: text, code: code}) == nil {
			ls.place.reasonSaved = now
		}
	}
}

// resumeEnv tells an attempt that resumes a preempted one where its
// checkpoint is: NIUMA_RESUME is the stage directory it kept (as the
// workload sees it).
func resumeEnv(ls *liveStage, env map[string]string, stageDir string) {
	if ls.place.resume {
		env["NIUMA_RESUME"] = stageDir
	}
}
