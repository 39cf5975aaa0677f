package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"niuma/engine/executor"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/metrics"
	"niuma/sentinel"
	"niuma/shepherd"
	"niuma/storage"
)

// liveRun is the loop's view of one unfinished run.
type liveRun struct {
	run    storage.Run
	tmpl   *template.Template
	values template.Values
	stages []*liveStage // in topological order
	// byName finds a stage by name: a need is looked up at every pass,
	// and a run may have thousands of stages.
	byName map[string]*liveStage

	// The indexes a pass works from (see index.go): kept by transition,
	// rebuilt by load.
	ready       []*liveStage // queued, needs settled; may hold stages with inReady false
	readySorted bool         // ready is in topological order
	running     map[*liveStage]struct{}
	done        int // stages succeeded, failed or cancelled
}

// liveStage is the loop's view of one stage.
type liveStage struct {
	st      storage.Stage
	attempt storage.Attempt // the current or last attempt
	handle  executor.Handle // set while an attempt runs and has started
	gpus    []executor.GPU  // held while running
	stop    bool            // a stop was requested for the current attempt
	place   placement       // what the shepherd needs to know about it

	// notBefore holds off starting the stage again after its attempt
	// could not be recorded (the database was full or locked): not a
	// state, a pause between tries.
	notBefore time.Time
	// diagnosed is the attempt whose failure was diagnosed, so that an end
	// recorded again (after a storage fault) is not diagnosed twice.
	diagnosed int
	// unresolved: the executor could not say what became of the attempt
	// an earlier owner left (its service did not answer); adoption is
	// tried again on every tick, and the stage stays running meanwhile.
	unresolved bool

	index      int          // position in liveRun.stages
	dependents []*liveStage // the stages that need this one
	inReady    bool         // in liveRun.ready
	readyAt    int          // where in liveRun.ready, while inReady
}

func (lr *liveRun) stage(name string) *liveStage { return lr.byName[name] }

// result is what an attempt goroutine reports to the loop.
type result struct {
	runID    string
	stage    string
	attempt  int
	handle   executor.Handle // set when the attempt has started
	waiting  *string         // the attempt waits in its backend's queue: why ("" once it runs)
	requeue  error           // the backend was away: the attempt never ran
	finished bool
	exit     executor.Exit
	lost     int64             // the attempt's metric points the store refused for good
	decided  *storage.Pending  // the diagnosis of its failure asks for a retry
	anomaly  *sentinel.Anomaly // the sentinel saw trouble in the attempt
}

// Drive makes this process the owner of the data directory as soon as no
// other process is, and then drives every unfinished run until ctx ends.
// Attempts that are running when ctx ends keep running; the next owner
// adopts them.
func (e *Engine) Drive(ctx context.Context) error {
	lock, err := e.acquire(ctx)
	if err != nil {
		return err
	}
	defer lock.release()
	if err := e.takeArchive(ctx); err != nil {
		return err
	}
	e.owner.Store(true)
	defer e.owner.Store(false)

	e.writer = metrics.NewWriter(e.store, metrics.WriterOptions{Logger: e.log, StatusPath: metricsStatusPath(e.opts.Home)})
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.storeHostEveryMinute(ctx) }()
	defer func() {
		e.wg.Wait()
		e.storeHostLeft()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.writer.Close(cctx); err != nil {
			e.log.Warn("metrics writer did not close cleanly", "err", err)
		}
	}()

	e.sync(ctx)
	e.sweep(ctx)
	close(e.ready)
	tick := time.NewTicker(e.opts.PollInterval)
	defer tick.Stop()
	e.dirty = true
	for {
		if e.dirty {
			// What the pass itself changes it has decided on already
			// (a skip's dependents are seen by the same pass).
			e.reconcile(ctx)
			e.dirty = false
		}
		e.active.Store(int64(len(e.runs)))
		select {
		case <-ctx.Done():
			return nil
		case r := <-e.results:
			if ctx.Err() != nil {
				return nil // stopping: what is left is the next owner's
			}
			e.handle(ctx, r)
		case <-e.wake:
			e.dirty = true
			e.sync(ctx)
		case <-tick.C:
			e.dirty = true
			e.retryUnrecorded(ctx)
			e.resolveAgain(ctx)
			e.sync(ctx)
			e.tickSentinel(ctx)
			if len(e.unswept) > 0 {
				e.sweep(ctx)
			}
		}
	}
}

// sweep removes what backends left behind that no run owns (containers of
// attempts that ended or were never recorded while Niuma was down). A
// backend that is away is swept when it comes back.
func (e *Engine) sweep(ctx context.Context) {
	if e.unswept == nil {
		e.unswept = map[string]bool{}
		for name, x := range e.execs {
			if _, ok := x.(executor.Sweeper); ok {
				e.unswept[name] = true
			}
		}
	}
	for name := range e.unswept {
		sw := e.execs[name].(executor.Sweeper)
		// The token of every attempt the archive knows, finished or not
		// (an attempt is recorded with its token before it is launched, so
		// nothing of a recorded attempt is ever swept), and the refs of the
		// attempts driven now (for attempts recorded before tokens).
		owned, err := e.store.AttemptTokens(ctx, name)
		if err != nil {
			e.logWarn(ctx, "list the attempts' tokens; sweeping later", "executor", name, "err", err)
			continue
		}
		starting := false
		for _, lr := range e.runs {
			for _, ls := range lr.stages {
				switch {
				case ls.attempt.Executor != name:
				case ls.attempt.Handle != "":
					owned = append(owned, ls.attempt.Handle)
				case ls.st.State == storage.StageRunning && ls.attempt.Token == "":
					starting = true // its container may exist, unrecorded yet
				}
			}
		}
		if starting {
			continue // sweep on a later tick
		}
		var removed []string
		removed, err = sw.Sweep(ctx, owned)
		for _, r := range removed {
			e.log.Warn("removed a container no run owns", "executor", name, "container", r)
		}
		switch {
		case errors.Is(err, executor.ErrUnavailable):
			continue // try again on a later tick
		case err != nil:
			e.logWarn(ctx, "sweep leftover attempts", "executor", name, "err", err)
		}
		delete(e.unswept, name)
	}
}

// acquire waits until this process holds the owner lock.
func (e *Engine) acquire(ctx context.Context) (*ownerLock, error) {
	for {
		l, err := tryLock(lockPath(e.opts.Home))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errLocked) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(e.opts.PollInterval):
		}
	}
}

// sync loads unfinished runs that are not yet in memory (submitted by this
// or another process, or left by an earlier owner) and picks up cancel
// requests.
func (e *Engine) sync(ctx context.Context) {
	runs, err := e.store.ListRuns(ctx, storage.RunFilter{States: []storage.RunState{storage.RunQueued, storage.RunRunning}})
	if err != nil {
		e.logError(ctx, "list unfinished runs", "err", err)
		return
	}
	for _, r := range runs {
		lr, ok := e.runs[r.ID]
		if !ok {
			lr, err = e.load(ctx, r)
			if ctx.Err() != nil {
				return // stopping: the next owner loads it
			}
			if err != nil {
				e.failRun(ctx, r, err.Error())
				continue
			}
			e.runs[r.ID] = lr
			e.events.Publish(Event{Kind: RunChanged, RunID: r.ID, State: State(r.State)})
			if r.CancelRequested {
				e.cancel(ctx, lr)
			}
			continue
		}
		if r.CancelRequested && !lr.run.CancelRequested {
			e.cancel(ctx, lr)
		}
	}
}

// load rebuilds the loop's view of a run from storage, re-attaching to
// attempts that an earlier process left running.
func (e *Engine) load(ctx context.Context, r storage.Run) (*liveRun, error) {
	t, err := template.Parse(r.TemplateSource, []byte(r.TemplateYAML))
	if err != nil {
		return nil, fmt.Errorf("the run's template no longer parses: %w", err)
	}
	t.Dir = r.CodeDir
	values, err := template.ValuesFromJSON(t, []byte(r.Params))
	if err != nil {
		return nil, fmt.Errorf("the run's parameters no longer fit its template: %w", err)
	}
	stages, err := e.store.Stages(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	attempts, err := e.store.Attempts(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	lr := &liveRun{run: r, tmpl: t, values: values, byName: make(map[string]*liveStage, len(stages))}
	e.sent.SetObjective(r.ID, t.Objective.Metric, t.Objective.Goal == "max")
	byStage := map[string][]storage.Attempt{}
	for _, a := range attempts {
		byStage[a.Stage] = append(byStage[a.Stage], a)
	}
	for _, st := range stages {
		ls := &liveStage{st: st}
		for _, a := range byStage[st.Name] {
			if a.Number == st.Attempts {
				ls.attempt = a
			}
		}
		restorePlacement(ls, byStage[st.Name])
		lr.stages = append(lr.stages, ls)
		lr.byName[st.Name] = ls
	}
	lr.indexRun()
	for _, ls := range lr.runningStages() {
		e.adopt(ctx, lr, ls)
	}
	return lr, nil
}

// adopt resolves an attempt an earlier owner recorded as starting or
// running, by its handle or, when it had none yet, by its token: a process
// that is alive is adopted; one that ended while no one owned it is
// finished with the exit status it left; one that was never launched is
// launched now; only one provably gone without a status is lost (and then
// retried if it may be).
func (e *Engine) adopt(ctx context.Context, lr *liveRun, ls *liveStage) {
	a := ls.attempt
	lost := func(why string) {
		e.log.Info("attempt lost", "run", lr.run.ID, "stage", ls.st.Name, "attempt", ls.st.Attempts, "why", why)
		e.finish(ctx, lr, ls, result{runID: lr.run.ID, stage: ls.st.Name, attempt: ls.st.Attempts, finished: true,
			exit: executor.Exit{Code: -1, Lost: true, Reason: why}})
	}
	x, ok := e.execs[a.Executor]
	switch {
	case a.Number == 0:
		lost("no attempt was recorded for the running stage")
		return
	case !ok:
		lost(fmt.Sprintf("its executor %q is not available in this process", a.Executor))
		return
	}
	gpus := ls.gpusFromAttempt()
	job := e.job(lr, ls, gpus)
	h, err := x.Recover(ctx, job, a.Handle)
	switch {
	case errors.Is(err, executor.ErrNotLaunched):
		e.log.Info("launching an attempt recorded before the last owner stopped", "run", lr.run.ID, "stage", ls.st.Name, "attempt", a.Number)
		e.hold(lr, ls, gpus)
		e.launchAttempt(ctx, lr, ls, gpus)
		return
	case errors.Is(err, executor.ErrGone):
		lost("the process was gone when Niuma restarted")
		return
	case err != nil:
		// Not proof that it is gone: it may still run. Ask again later.
		e.logWarn(ctx, "could not resolve an attempt; trying again", "run", lr.run.ID, "stage", ls.st.Name, "attempt", a.Number, "err", err)
		ls.unresolved = true
		return
	}
	ls.handle = h
	e.hold(lr, ls, job.GPUs)
	if a.State == storage.AttemptStarting {
		_ = e.transition(ctx, lr, ls, evLaunched{ref: h.Ref()})
	}
	e.log.Info("adopted attempt", "run", lr.run.ID, "stage", ls.st.Name, "attempt", a.Number)
	if lr.run.CancelRequested || ls.st.Pending.Action != "" {
		e.stopAttempt(ls) // decided before the last owner stopped
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.watch(ctx, h, job, ls.st.TimeoutSec, time.Since(a.StartedAt))
	}()
}

func (ls *liveStage) gpusFromAttempt() []executor.GPU {
	var gpus []executor.GPU
	for i, u := range ls.attempt.GPUs {
		gpus = append(gpus, executor.GPU{Index: i, UUID: u})
	}
	return gpus
}

// reconcile starts what may start, skips what can no longer run, and
// closes runs whose stages are all done.
func (e *Engine) reconcile(ctx context.Context) {
	now := time.Now()
	away := map[string]error{} // per executor, asked once per pass
	var ready []candidate
	var queue []shepherd.Request
	for _, lr := range sortRuns(e.runs) {
		if lr.run.CancelRequested {
			continue
		}
		// Only the ready set: a pass costs what may start, not the run.
		// Indexed, not ranged: a skip appends the stages it makes ready.
		lr.tidyReady()
		for i := 0; i < len(lr.ready); i++ {
			ls := lr.ready[i]
			if !lr.isReady(i) || ls.st.State != storage.StageQueued {
				continue
			}
			ok, blocked := needsMet(lr, ls)
			if blocked != "" {
				_ = e.transition(ctx, lr, ls, evSkip{why: blocked})
				continue
			}
			if !ok || now.Before(ls.st.NextAttemptAt) || now.Before(ls.notBefore) {
				continue
			}
			if err := e.notReady(ctx, lr, away); err != nil {
				e.waitFor(ctx, lr, ls, WaitExecutor, waitReason(err))
				continue
			}
			if p, ok := e.execs[lr.run.Executor].(executor.Placer); ok && p.PlacesItself() {
				// A cluster's scheduler places it, not this machine's shepherd.
				e.start(ctx, lr, ls, nil)
				continue
			}
			ready = append(ready, candidate{lr, ls})
			queue = append(queue, e.request(lr, ls))
		}
	}
	// A reason whose words alone change ("3 runs ahead" becoming "2 runs
	// ahead") is written at most every reasonRefresh, and, in a long
	// queue, at most maxWordWrites times a second in all: otherwise the
	// 10,000 waiting stages of a wide DAG are each written every second.
	e.wordsEvery = max(reasonRefresh, time.Duration(len(queue))*time.Second/maxWordWrites)
	switch m := e.machine(); {
	case m != nil:
		// The machine service places everyone's stages together.
		e.placeShared(ctx, m, ready, queue, now)
	case len(queue) > 0:
		// One pass of the policy over everything ready, so that priority,
		// reservations and backfill see the whole queue at once.
		decisions := shepherd.Schedule(e.opts.Policy, shepherd.State{
			Inventory: e.inventory(ctx), Running: e.placements(), Queue: queue, Now: now})
		for i, d := range decisions {
			lr, ls := ready[i].lr, ready[i].ls
			for _, victim := range d.Preempt {
				e.preempt(ctx, victim, "preempted for run "+lr.run.ID)
			}
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
	for _, lr := range sortRuns(e.runs) {
		if lr.allDone() {
			e.complete(ctx, lr)
		}
	}
}

// candidate is a ready stage a pass asks the shepherd to place.
type candidate struct {
	lr *liveRun
	ls *liveStage
}

// stageKey names a stage in the shepherd's queue and placements, and as
// the holder of GPU memory in gpumon.
func stageKey(lr *liveRun, ls *liveStage) string { return lr.run.ID + "/" + ls.st.Name }

// unavailable asks an executor that depends on a service whether it can
// start attempts now; memo holds the answers of this pass.
func (e *Engine) unavailable(ctx context.Context, name string, memo map[string]error) error {
	if err, ok := memo[name]; ok {
		return err
	}
	var err error
	if av, ok := e.execs[name].(executor.Availability); ok {
		err = av.Available(ctx)
	}
	memo[name] = err
	return err
}

// waitReason is the reason a queued stage shows while its executor is away.
func waitReason(err error) string {
	if w := (*executor.Waiting)(nil); errors.As(err, &w) {
		return w.Reason
	}
	msg := err.Error()
	if i := strings.Index(msg, "Docker daemon not reachable"); i >= 0 {
		return msg[i:]
	}
	return "waiting for the executor: " + msg
}

// needsMet says whether a stage's needs have all succeeded, or why it can
// never run.
func needsMet(lr *liveRun, ls *liveStage) (ready bool, blocked string) {
	ready = true
	for _, n := range ls.st.Needs {
		dep := lr.stage(n)
		if dep == nil {
			return false, fmt.Sprintf("skipped: stage %s does not exist", n)
		}
		switch dep.st.State {
		case storage.StageSucceeded:
		case storage.StageFailed:
			return false, fmt.Sprintf("skipped: stage %s failed", n)
		case storage.StageCancelled:
			return false, fmt.Sprintf("skipped: stage %s was cancelled", n)
		default:
			ready = false
		}
	}
	return ready, ""
}

// start records a new attempt, as starting with its token, and only then
// launches it: an attempt that could not be recorded is never launched
// (the stage stays queued and is tried again shortly).
func (e *Engine) start(ctx context.Context, lr *liveRun, ls *liveStage, gpus []executor.GPU) {
	// The attempt before this one was preempted: this one resumes it.
	ls.place.resume = ls.attempt.State == storage.AttemptPreempted
	token := ls.place.token // the machine service's lease is under it
	if token == "" {
		token = newToken()
	}
	if err := e.transition(ctx, lr, ls, evStart{gpus: gpus, token: token}); err != nil {
		ls.notBefore = time.Now().Add(time.Second)
		return
	}
	ls.place.token, ls.place.grace = "", 0
	ls.handle, ls.stop = nil, false
	e.hold(lr, ls, gpus)
	e.launchAttempt(ctx, lr, ls, gpus)
}

// launchAttempt launches the stage's current attempt, recorded as starting.
func (e *Engine) launchAttempt(ctx context.Context, lr *liveRun, ls *liveStage, gpus []executor.GPU) {
	job := e.job(lr, ls, gpus)
	x := e.execs[lr.run.Executor]
	timeout := ls.st.TimeoutSec
	claim := e.claimOf(lr, ls)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if claim != nil && !e.claim(ctx, *claim, job) {
			return
		}
		e.launch(ctx, x, job, timeout)
	}()
}

// job assembles what the executor needs for the stage's current attempt.
func (e *Engine) job(lr *liveRun, ls *liveStage, gpus []executor.GPU) executor.Job {
	name := ls.st.Name
	r := lr.run
	stdout, stderr := stageLogPaths(r.Dir, name, ls.st.Attempts)
	rt := lr.tmpl.Runtime
	job := executor.Job{
		RunID: r.ID, Stage: name, Attempt: ls.st.Attempts, Token: ls.attempt.Token,
		RunDir: r.Dir, StageDir: stdoutDir(stdout), GPUs: gpus, CodeDir: lr.tmpl.Dir, DataDir: dataDir(lr.tmpl),
		Image: rt.Image, StdoutPath: stdout, StderrPath: stderr,
		GPUCount: ls.st.GPUs, GPUMemoryMiB: ls.st.GPUMemoryMiB, Timeout: time.Duration(ls.st.TimeoutSec) * time.Second,
		Cluster:   executor.Cluster{Partition: rt.Partition, Account: rt.Account, QOS: rt.QOS},
		Container: containerOf(rt),
	}
	st, _ := lr.tmpl.Stage(name)
	// What the stage says it uses, a backend on the host enforces; the
	// CPU the shepherd counts for a stage that says nothing is no limit.
	job.Limits = executor.Limits{MemoryMiB: st.MemMiB, CPUMilli: st.CPUMilli}
	// The workload sees the run and code directories where its executor
	// puts them (a container's mounts), and so do its ${...} and env.
	runDir, codeDir, data := r.Dir, job.CodeDir, job.DataDir
	if pm, ok := e.execs[r.Executor].(executor.PathMapper); ok {
		runDir, codeDir, data = pm.MapPaths(runDir, codeDir, data)
	}
	v := vars(r.ID, runDir, name, codeDir, data, r.Seed, lr.values)
	env := make(map[string]string, len(st.Env))
	for k, val := range st.Env {
		if x, err := template.Expand(val, v); err == nil {
			env[k] = x
		}
	}
	job.Env = contractEnv(r.ID, runDir, name, ls.st.Attempts, r.Seed, lr.values, env)
	resumeEnv(ls, job.Env, v["stage_dir"])
	// Submit checked that the command expands; an empty Argv fails the
	// attempt with a clear reason should that ever change.
	if argv, err := expandArgv(st.Command, v); err == nil {
		job.Argv = argv
	}
	return job
}

func stdoutDir(p string) string { return p[:strings.LastIndexByte(p, '/')] }

// handle applies what an attempt goroutine reported.
func (e *Engine) handle(ctx context.Context, r result) {
	if r.anomaly != nil {
		e.onAnomaly(ctx, *r.anomaly)
		return
	}
	lr := e.runs[r.runID]
	if lr == nil {
		return
	}
	ls := lr.stage(r.stage)
	if ls == nil || ls.st.Attempts != r.attempt || ls.st.State != storage.StageRunning {
		return
	}
	if r.requeue != nil {
		e.requeue(ctx, lr, ls, r)
		return
	}
	if r.waiting != nil {
		if ls.st.Reason != *r.waiting {
			_ = e.transition(ctx, lr, ls, evWait{why: *r.waiting})
		}
		return
	}
	if !r.finished {
		ls.handle = r.handle
		// Should this fail, the attempt stays recorded as starting, with
		// its token: the next owner finds it by that.
		_ = e.transition(ctx, lr, ls, evLaunched{ref: r.handle.Ref()})
		if lr.run.CancelRequested || ls.st.Pending.Action != "" {
			e.stopAttempt(ls)
		}
		return
	}
	e.finish(ctx, lr, ls, r)
}

// finish records the end of a stage's current attempt and what follows.
// When that cannot be recorded (the database is full or locked), the end
// is kept and recorded again later: an exit status is never dropped, nor
// guessed by a later owner.
func (e *Engine) finish(ctx context.Context, lr *liveRun, ls *liveStage, r result) {
	var decided *storage.Pending
	if ls.diagnosed != r.attempt {
		ls.diagnosed = r.attempt
		decided = e.diagnose(ctx, lr, ls, r.exit) // why it failed; may ask for a retry (cuda_oom)
		r.decided = decided
	}
	params := lr.run.Params
	if err := e.transition(ctx, lr, ls, evEnded{exit: r.exit, decided: r.decided, lost: r.lost}); err != nil {
		e.unrecorded = append(e.unrecorded, r)
		return
	}
	ls.handle = nil
	e.letGo(lr, ls)
	if a := ls.attempt; a.State == storage.AttemptPreempted && !a.StartedAt.IsZero() {
		ls.place.attained += a.FinishedAt.Sub(a.StartedAt) // the run time the next attempt resumes
	}
	if lr.run.Params != params {
		e.paramsChanged(lr)
	}
}

// requeue puts a stage whose attempt could not start because its backend
// was away back in the queue. The attempt is recorded as not started and
// does not count against the stage's retries.
func (e *Engine) requeue(ctx context.Context, lr *liveRun, ls *liveStage, r result) {
	if err := e.transition(ctx, lr, ls, evNotStarted{why: r.requeue}); err != nil {
		e.unrecorded = append(e.unrecorded, r)
		return
	}
	ls.handle = nil
	e.letGo(lr, ls)
}

// resolveAgain asks again what became of the attempts adopt could not
// resolve.
func (e *Engine) resolveAgain(ctx context.Context) {
	for _, lr := range e.runs {
		for _, ls := range lr.runningStages() {
			if ls.unresolved && ls.st.State == storage.StageRunning {
				ls.unresolved = false
				e.adopt(ctx, lr, ls)
			}
		}
	}
}

// retryUnrecorded records again the attempt ends that could not be
// recorded when they happened.
func (e *Engine) retryUnrecorded(ctx context.Context) {
	pending := e.unrecorded
	e.unrecorded = nil
	for _, r := range pending {
		e.handle(ctx, r)
	}
}

// cancel stops a run: queued stages are cancelled, running ones stopped.
func (e *Engine) cancel(ctx context.Context, lr *liveRun) {
	lr.run.CancelRequested = true // as stored by RequestCancel
	for _, ls := range lr.stages {
		switch ls.st.State {
		case storage.StageQueued:
			_ = e.transition(ctx, lr, ls, evSkip{why: "cancelled before it started"})
		case storage.StageRunning:
			if ls.handle != nil {
				e.stopAttempt(ls)
			}
		}
	}
}

// stopAttempt asks the running attempt to end, in the background: Stop
// waits through the grace period.
func (e *Engine) stopAttempt(ls *liveStage) {
	if ls.stop || ls.handle == nil {
		return
	}
	ls.stop = true
	h, grace := ls.handle, e.opts.StopGrace
	if ls.place.grace > 0 {
		grace = ls.place.grace // the machine service's, for a reclaim
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace+30*time.Second)
		defer cancel()
		if err := h.Stop(ctx, grace); err != nil {
			e.log.Warn("stop attempt", "err", err)
		}
	}()
}

// complete closes a run whose stages are all done.
func (e *Engine) complete(ctx context.Context, lr *liveRun) {
	stages := make([]storage.Stage, len(lr.stages))
	for i, ls := range lr.stages {
		stages[i] = ls.st
	}
	var prune *storage.Prune
	if lr.run.CancelRequested {
		p, err := e.store.RunPrune(ctx, lr.run.ID)
		switch {
		case err == nil:
			prune = &p
		case !errors.Is(err, storage.ErrNotFound):
			e.log.Warn("read prune decision", "run", lr.run.ID, "err", err)
			return // closed on a later pass, once it can be told
		}
	}
	state, why := outcome(stages, lr.run.CancelRequested, prune)
	if state == "" {
		return
	}
	if e.transition(ctx, lr, nil, evRunEnded{state: state, why: why}) != nil {
		return // closed on a later pass
	}
	delete(e.runs, lr.run.ID)
	e.sent.EndRun(lr.run.ID)
	e.learn(ctx, lr)
	if state == storage.RunSucceeded && lr.run.Fingerprint != "" {
		// Compare with earlier runs of the same fingerprint off the loop:
		// it reads their metrics.
		id := lr.run.ID
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if _, err := e.CheckReproducible(context.WithoutCancel(ctx), id); err != nil {
				e.log.Warn("check reproducibility", "run", id, "err", err)
			}
		}()
	}
}

// outcome is a run's final state once all its stages are done ("" before).
// A run stopped by a study's pruner (prune, its stored decision) ends as
// pruned unless every stage got to succeed first.
func outcome(stages []storage.Stage, cancelRequested bool, prune *storage.Prune) (storage.RunState, string) {
	var failed []string
	for _, s := range stages {
		if !s.State.Done() {
			return "", ""
		}
		if s.State == storage.StageFailed {
			failed = append(failed, fmt.Sprintf("stage %s failed: %s", s.Name, s.Reason))
		}
	}
	switch {
	case len(failed) > 0:
		return storage.RunFailed, strings.Join(failed, "; ")
	case cancelRequested:
		for _, s := range stages {
			if s.State != storage.StageSucceeded && prune != nil {
				return storage.RunPruned, "stopped early by its study's pruner: " + prune.Evidence
			}
			if s.State != storage.StageSucceeded {
				return storage.RunCancelled, "cancelled by request"
			}
		}
		return storage.RunSucceeded, ""
	default:
		for _, s := range stages {
			if s.State != storage.StageSucceeded {
				return storage.RunCancelled, "some stages were cancelled"
			}
		}
		return storage.RunSucceeded, ""
	}
}

// failRun closes a run that cannot be driven at all.
func (e *Engine) failRun(ctx context.Context, r storage.Run, why string) {
	e.log.Error("cannot drive run", "run", r.ID, "why", why)
	_ = e.transition(ctx, &liveRun{run: r}, nil, evRunEnded{state: storage.RunFailed, why: why})
}

// hold records that a stage has its GPUs, and tells a GPU source that
// models memory use (the simulated one) who holds what.
func (e *Engine) hold(lr *liveRun, ls *liveStage, gpus []executor.GPU) {
	ls.gpus = gpus
	e.holdPlacement(lr, ls, gpus)
	if a, ok := e.opts.GPUs.(gpumon.Assigner); ok {
		for _, g := range gpus {
			a.Assign(g.UUID, stageKey(lr, ls), ls.st.GPUMemoryMiB)
		}
	}
}

// letGo is the end of hold: the attempt's lease at the machine service
// is given up too.
func (e *Engine) letGo(lr *liveRun, ls *liveStage) {
	if ls.place.held != nil {
		e.release(ls.attempt.Token)
	}
	if a, ok := e.opts.GPUs.(gpumon.Assigner); ok {
		for _, g := range ls.gpus {
			a.Release(g.UUID, stageKey(lr, ls))
		}
	}
	ls.gpus, ls.place.held = nil, nil
}
