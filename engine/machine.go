package engine

import (
	"context"
	"errors"
	"time"

	"niuma/engine/executor"
	"niuma/machine"
	"niuma/shepherd"
)

// ErrNoMachine is MachineStatus's answer where no machine service is
// installed: this Niuma places runs on its own, as the only user.
var ErrNoMachine = errors.New("no machine service: this Niuma places runs on its own, as the only user (niuma serve --system shares the machine among users)")

// WaitMachine is the code of a stage that waits because the machine
// service does not answer: it is never placed alone meanwhile, since
// another user's stage may hold the GPU it would take.
const WaitMachine = "machine"

// Shared says whether this Niuma places through a machine service (the
// machine is shared among users).
func (e *Engine) Shared() bool { return e.machine() != nil }

// machine is the machine service to place through now: Options.Machine
// while it is installed (a service installed or removed while this Niuma
// runs is followed at the next pass), nil where this Niuma places alone.
func (e *Engine) machine() machine.Arbiter {
	if e.opts.Machine == nil {
		return nil
	}
	if p, ok := e.opts.Machine.(machine.Present); ok && !p.Present() {
		return nil
	}
	return e.opts.Machine
}

// MachineStatus is the whole machine as the machine service shows it to
// any user: every user's leases and queued stages by run name and GPUs,
// the teams' shares and what they lend, every GPU process by user.
func (e *Engine) MachineStatus(ctx context.Context) (machine.Status, error) {
	m := e.machine()
	if m == nil {
		return machine.Status{}, ErrNoMachine
	}
	return m.Status(ctx)
}

// CancelElsewhere asks the machine service to cancel a run this archive
// does not hold: another user's (an admin may; anyone else is refused,
// with the owner named) or one of this user's other data directories.
func (e *Engine) CancelElsewhere(ctx context.Context, ref string) (machine.CancelResult, error) {
	m := e.machine()
	if m == nil {
		return machine.CancelResult{}, ErrNoMachine
	}
	return m.Cancel(ctx, ref)
}

// machineTimeout bounds one call of the loop to the machine service: a
// service that hangs holds queued stages back, never the loop.
const machineTimeout = 3 * time.Second

// machineEvery is how often, at least, the loop asks the service with
// nothing queued: its running attempts' leases stay its own, and it hears
// of reclaims and cancels.
const machineEvery = time.Second

// placeShared asks the machine service to place the ready stages, with
// the attempts this Niuma follows, and applies the answer: starts what is
// placed, records why the rest waits, preempts what the machine wants
// back and cancels what an admin cancelled.
func (e *Engine) placeShared(ctx context.Context, m machine.Arbiter, ready []candidate, queue []shepherd.Request, now time.Time) {
	if len(queue) == 0 && now.Sub(e.askedMachine) < machineEvery {
		return
	}
	e.askedMachine = now
	ask := machine.Ask{Home: e.opts.Home, Queue: make([]machine.Entry, len(ready))}
	for i, c := range ready {
		if c.ls.place.token == "" {
			c.ls.place.token = newToken()
		}
		ask.Queue[i] = machine.Entry{Token: c.ls.place.token, Run: c.lr.run.ID, RunName: c.lr.run.Template,
			Stage: c.ls.st.Name, Request: queue[i]}
	}
	for _, lr := range sortRuns(e.runs) {
		for _, ls := range lr.runningStages() {
			if ls.place.held != nil && ls.attempt.Token != "" {
				ask.Running = append(ask.Running, machine.Held{Token: ls.attempt.Token, Run: lr.run.ID,
					RunName: lr.run.Template, Stage: ls.st.Name, Placement: *ls.place.held})
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, machineTimeout)
	ans, err := m.Place(cctx, ask)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		why := "waits for the machine service, which places every user's runs on this machine: " + err.Error()
		for _, c := range ready {
			e.waitFor(ctx, c.lr, c.ls, WaitMachine, why)
		}
		return
	}
	for _, r := range ans.Reclaim {
		e.reclaim(ctx, r)
	}
	for _, o := range ans.Cancel {
		e.cancelOrdered(ctx, o)
	}
	for i, d := range ans.Decisions {
		if i >= len(ready) {
			break
		}
		lr, ls := ready[i].lr, ready[i].ls
		if !d.Placed() {
			e.waitFor(ctx, lr, ls, string(d.Reason.Code), d.Wait)
			e.observeQueue(ctx, lr, ls, d, now)
			continue
		}
		gpus := make([]executor.GPU, len(d.GPUs))
		for k, g := range d.GPUs {
			gpus[k] = executor.GPU{Index: g.Index, UUID: g.UUID}
		}
		e.start(ctx, lr, ls, gpus)
	}
}

// reclaim preempts the attempt whose lease the machine wants back, as a
// spot run is preempted: SIGTERM, the service's grace, then the next
// attempt resumes with NIUMA_RESUME.
func (e *Engine) reclaim(ctx context.Context, r machine.Reclaim) {
	for _, lr := range e.runs {
		for _, ls := range lr.runningStages() {
			if ls.attempt.Token != r.Token {
				continue
			}
			if r.Grace > 0 {
				ls.place.grace = r.Grace
			}
			e.preempt(ctx, stageKey(lr, ls), r.Why)
			return
		}
	}
}

// cancelOrdered cancels a run an admin cancelled at the machine service.
func (e *Engine) cancelOrdered(ctx context.Context, o machine.CancelOrder) {
	lr := e.runs[o.Run]
	if lr == nil || lr.run.CancelRequested {
		return
	}
	if err := e.store.RequestCancel(ctx, o.Run); err != nil {
		e.logWarn(ctx, "record an admin's cancel; trying again at the next pass", "run", o.Run, "by", o.By, "err", err)
		return
	}
	e.log.Warn("run cancelled by an admin", "run", o.Run, "by", o.By)
	e.cancel(ctx, lr)
}

// claimOf is what an attempt about to launch claims at the machine
// service: nil without one, and for a stage a cluster's scheduler places.
func (e *Engine) claimOf(lr *liveRun, ls *liveStage) *machine.Claim {
	if e.machine() == nil || ls.place.held == nil {
		return nil
	}
	return &machine.Claim{Home: e.opts.Home, Token: ls.attempt.Token, Run: lr.run.ID, RunName: lr.run.Template,
		Stage: ls.st.Name, Placement: *ls.place.held}
}

// claim confirms the attempt's lease just before it launches. When the
// service refuses (the GPUs were given to someone else meanwhile) or does
// not answer, the attempt is not launched: it is recorded as not started
// and the stage queued again, spending no retry. It reports whether the
// attempt may launch.
func (e *Engine) claim(ctx context.Context, c machine.Claim, job executor.Job) bool {
	cctx, cancel := context.WithTimeout(ctx, machineTimeout)
	err := e.opts.Machine.Claim(cctx, c)
	cancel()
	if err == nil {
		return true
	}
	if ctx.Err() == nil {
		e.report(ctx, result{runID: job.RunID, stage: job.Stage, attempt: job.Attempt,
			requeue: errors.Join(errors.New("the machine service did not confirm its GPUs"), err)})
	}
	return false
}

// release gives up an ended attempt's lease at the machine service, off
// the loop. Should it not arrive, the service gives the lease up itself
// once this Niuma stops naming it and no process carries its token.
func (e *Engine) release(token string) {
	m := e.machine()
	if m == nil || token == "" {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), machineTimeout)
		defer cancel()
		if err := m.Release(ctx, token); err != nil {
			e.log.Debug("release a lease at the machine service", "token", token, "err", err)
		}
	}()
}
