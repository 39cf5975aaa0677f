package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"niuma/engine/executor"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/machine"
	"niuma/metrics"
	"niuma/sentinel"
	"niuma/shepherd"
	"niuma/shepherd/predict"
	"niuma/storage"
)

// Options configure an Engine. Home and Store are required.
type Options struct {
	Home      string      // the data directory: runs/<id>/ and the owner lock live here
	Store     *storage.DB // the source of truth
	Executors []executor.Executor
	GPUs      gpumon.Source // nil: a machine without GPUs

	// Backoff is the wait before attempt n+1 after n failed attempts.
	// Default: 2s, doubling, at most one minute.
	Backoff func(failures int) time.Duration
	// StopGrace is how long a cancelled attempt has between SIGTERM and
	// SIGKILL. Default 10s.
	StopGrace time.Duration
	// PollInterval is how often the engine looks in storage for work that
	// other processes submitted or cancelled. Default 1s.
	PollInterval time.Duration
	Logger       *slog.Logger
	// Policy places stages on GPUs. Default (zero value): the shepherd's herd.
	Policy shepherd.Policy
	// Host is the CPUs and memory of this machine that stages may have
	// (local and docker stages; a cluster's are its own). Default (zero
	// value): ThisMachine().
	Host shepherd.Host
	// Owners, when set, is told which process group runs which attempt
	// (for handles that have one: local stages), so that a GPU process of
	// a local stage is shown as its run's, not as another process.
	// gpumon.Owners satisfies it.
	Owners GroupTracker
	// Machine, when set, is the machine service every placement on this
	// machine goes through (several users share it); nil: this Niuma
	// places alone (a single user).
	Machine machine.Arbiter
}

// GroupTracker learns which process group belongs to which attempt.
type GroupTracker interface {
	TrackGroup(pgid int, o gpumon.Owner)
	UntrackGroup(pgid int)
}

// processGroup is implemented by handles whose attempt runs in a process
// group of its own (the local executor's).
type processGroup interface{ ProcessGroup() int }

// Engine runs experiments. Create it with New, then call Drive in a goroutine
// to make this process the owner of the data directory when it can; every
// other method works whether or not this process is the owner.
type Engine struct {
	opts    Options
	store   *storage.DB
	execs   map[string]executor.Executor
	log     *slog.Logger
	events  Broker
	wake    chan struct{}
	results chan result
	owner   atomic.Bool
	active  atomic.Int64
	ready   chan struct{} // closed once this process owns the data dir and has loaded its work
	writer  *metrics.Writer
	usage   sync.Map       // usageKey -> StageUsage of the attempts this process follows
	host    hostBook       // their finished minutes of host use, until stored
	wg      sync.WaitGroup // attempt goroutines

	sent  *sentinel.Sentinel
	waits waitBook // the shepherd's wait codes, for Queue

	// Owned by the loop goroutine.
	pred    *predict.Predictor // run times learnt from the archive; nil until first asked
	runs    map[string]*liveRun
	unswept map[string]bool // executors whose leftovers are still to be swept
	// unrecorded are attempt ends that could not be recorded yet (the
	// database was full or locked); they are recorded again on each tick.
	unrecorded []result
	// dirty says that a reconcile pass may decide something new: a stage
	// or run changed state (transition sets it), or a tick or a wake came
	// (time passed, other processes wrote). An attempt's launch or a
	// reason's new words change nothing a pass decides on, and a wide
	// DAG's pass costs its whole queue.
	dirty bool
	// askedMachine is when the loop last asked the machine service.
	askedMachine time.Time
	// wordsEvery is how often, at least, a waiting stage's reason is
	// written again when only its words change (see waitFor).
	wordsEvery time.Duration
}

// New returns an engine over a data directory.
func New(opts Options) (*Engine, error) {
	if opts.Home == "" || opts.Store == nil {
		return nil, errors.New("engine: Home and Store are required")
	}
	if opts.Backoff == nil {
		opts.Backoff = DefaultBackoff
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.GPUs == nil {
		opts.GPUs = gpumon.Absent{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Policy.Name == "" {
		opts.Policy = shepherd.Herd(shepherd.HerdOptions{})
	}
	if opts.Host == (shepherd.Host{}) {
		opts.Host = ThisMachine()
	}
	e := &Engine{
		opts:    opts,
		store:   opts.Store,
		execs:   map[string]executor.Executor{},
		log:     opts.Logger,
		wake:    make(chan struct{}, 1),
		results: make(chan result, 64),
		ready:   make(chan struct{}),
		runs:    map[string]*liveRun{},
		sent:    sentinel.New(sentinel.Config{}),
	}
	for _, x := range opts.Executors {
		e.execs[x.Name()] = x
	}
	return e, nil
}

// DefaultBackoff waits 2s after the first failure, doubling, at most 1 min.
func DefaultBackoff(failures int) time.Duration {
	d := 2 * time.Second
	for i := 1; i < failures && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// Home is the data directory.
func (e *Engine) Home() string { return e.opts.Home }

// Owner reports whether this process runs the reconciler.
func (e *Engine) Owner() bool { return e.owner.Load() }

// Ready is closed once this process owns the data directory and has loaded
// the work it found there.
func (e *Engine) Ready() <-chan struct{} { return e.ready }

// Active is the number of unfinished runs the owner is driving (0 when this
// process is not the owner).
func (e *Engine) Active() int { return int(e.active.Load()) }

// Executors lists the names of the available executors.
func (e *Engine) Executors() []string { return sortedKeys(e.execs) }

// Subscribe follows the engine's events. Close the subscription when done.
func (e *Engine) Subscribe(buf int) *Subscription { return e.events.Subscribe(buf) }

// GPUs returns the current GPU snapshot.
func (e *Engine) GPUs(ctx context.Context) (gpumon.Snapshot, error) { return e.opts.GPUs.Snapshot(ctx) }

func lockPath(home string) string { return filepath.Join(home, "engine.lock") }

func (e *Engine) nudge() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Submit validates a run spec and writes the run and its stages to storage.
// Nothing is written when the spec is invalid. The owner starts it.
func (e *Engine) Submit(ctx context.Context, spec RunSpec) (RunInfo, error) {
	t := spec.Template
	if t == nil {
		return RunInfo{}, errors.New("submit: no template")
	}
	values := spec.Values
	if values == nil {
		values = t.Defaults()
	}
	if err := t.Validate(values); err != nil {
		return RunInfo{}, err
	}
	if err := spec.Needs.check(); err != nil {
		return RunInfo{}, err
	}
	exName, note := e.chooseExecutor(ctx, spec.Executor, t.Runtime)
	if _, ok := e.execs[exName]; !ok {
		return RunInfo{}, fmt.Errorf("executor %q is not available here (available: %s)", exName, strings.Join(e.Executors(), ", "))
	}
	if err := e.checkSandbox(exName, t); err != nil {
		return RunInfo{}, err
	}
	for _, st := range t.Stages {
		if _, err := expandArgv(st.Command, vars("x", "/x", st.Name, t.Dir, dataDir(t), 1, values)); err != nil {
			return RunInfo{}, fmt.Errorf("stage %s: %w", st.Name, err)
		}
	}
	params, err := values.JSON()
	if err != nil {
		return RunInfo{}, fmt.Errorf("encode parameters: %w", err)
	}
	// The fingerprint is taken before anything is written, so that a run is
	// stored with it from the start; a spec without a seed gets one derived
	// from its inputs (see Provenance).
	prov, err := e.provenance(ctx, t, values, exName, spec.Seed)
	if err != nil {
		return RunInfo{}, err
	}
	seed := prov.Seed
	now := time.Now()
	id := newRunID(now)
	dir := filepath.Join(e.opts.Home, "runs", id)
	// From its folder to its row, a run is a submission in flight (see
	// ReconcileFolders).
	releaseSubmit, err := holdSubmitLock(e.opts.Home)
	if err != nil {
		return RunInfo{}, fmt.Errorf("submit: %w", err)
	}
	defer releaseSubmit()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return RunInfo{}, fmt.Errorf("create run dir: %w", err)
	}
	if err := writeRunFiles(dir, params, t.YAML); err != nil {
		os.RemoveAll(dir)
		return RunInfo{}, err
	}
	if err := writeInterpreters(dir, prov.Inputs.Runtime.Interpreters); err != nil {
		os.RemoveAll(dir)
		return RunInfo{}, fmt.Errorf("write the run's interpreters: %w", err)
	}
	run := storage.Run{
		ID: id, Template: t.Name, TemplateVersion: t.Version, TemplateSource: t.Source,
		TemplateYAML: string(t.YAML), CodeDir: t.Dir, Params: string(params), Seed: seed,
		Priority: spec.Priority, Executor: exName, State: storage.RunQueued, Dir: dir, CreatedAt: now,
		Fingerprint: prov.Fingerprint, Sweep: spec.Sweep, Spot: spec.Spot || t.Spot, Share: spec.Share || t.Share,
		FlagOnly: spec.FlagOnly,
	}
	var stages []storage.Stage
	for i, name := range t.Order() {
		st, _ := t.Stage(name)
		// Validate checked the values these come from.
		gpus, mem, _ := t.NeedsOf(st, values)
		s := storage.Stage{
			RunID: id, Name: name, Position: i, Needs: st.Needs, GPUs: gpus, GPUMemoryMiB: mem,
			Retries: st.Retries, TimeoutSec: int64(st.Timeout / time.Second), State: storage.StageQueued,
		}
		if len(st.Needs) > 0 {
			s.Reason = "waiting for " + strings.Join(st.Needs, ", ")
		}
		stages = append(stages, s)
	}
	if err := stageNeeds(t, values, spec.Needs, stages); err != nil {
		os.RemoveAll(dir)
		return RunInfo{}, err
	}
	if err := e.checkHost(exName, stages); err != nil {
		os.RemoveAll(dir)
		return RunInfo{}, err
	}
	if err := e.checkGPUs(ctx, exName, run, stages); err != nil {
		os.RemoveAll(dir)
		return RunInfo{}, err
	}
	if err := writeRunRecord(dir, run, stages); err != nil {
		os.RemoveAll(dir)
		return RunInfo{}, err
	}
	if err := e.store.CreateRun(ctx, run, stages); err != nil {
		os.RemoveAll(dir)
		return RunInfo{}, fmt.Errorf("save run: %w", err)
	}
	e.events.Publish(Event{Kind: RunSubmitted, RunID: id, State: Queued})
	e.nudge()
	info := runInfo(run, paramMap(params), stages, nil)
	info.ExecutorNote = note
	return info, nil
}

// withoutContainer is what a run on the host does without, for notes.
const withoutContainer = "without the container's isolation: its network, memory and process limits, " +
	"dropped capabilities and read-only code and data do not apply"

// chooseExecutor picks the executor of a run, and says in note what the
// user should know about the choice. A name the user gave wins. A docker
// template runs in a container: while its image is not here or Docker
// cannot be reached, its stages wait, and note says why and what to do,
// unless the template allows the host (fallback: local), which it then
// gets, and note says what it goes without. A local template runs on the
// host. Isolation is never given up silently.
func (e *Engine) chooseExecutor(ctx context.Context, asked string, rt template.Runtime) (name, note string) {
	switch {
	case asked == "local" && rt.Kind == "docker":
		return asked, "runs on the host as asked (--executor local), " + withoutContainer
	case asked != "":
		return asked, ""
	case rt.Kind != "docker":
		return rt.Kind, ""
	}
	var why error
	switch x := e.execs["docker"].(type) {
	case nil:
		why = errors.New("the docker executor is not available in this process (is DOCKER_HOST valid?)")
	case executor.ImageChecker:
		why = x.CheckImage(ctx, rt.Image)
	case executor.Availability:
		why = x.Available(ctx)
	}
	if why == nil {
		return "docker", ""
	}
	reason := waitReason(why)
	if _, local := e.execs["local"]; local && rt.Fallback == "local" {
		return "local", reason + "; so it runs on the host, as the template allows (fallback: local), " + withoutContainer
	}
	return "docker", reason + "; the run waits for it (or runs on the host with --executor local, " + withoutContainer + ")"
}

// checkSandbox refuses, before anything is written, a run whose executor's
// rules would refuse its stages (a container's mounts, capabilities, user
// and process limit).
func (e *Engine) checkSandbox(exName string, t *template.Template) error {
	c, ok := e.execs[exName].(executor.Checker)
	if !ok {
		return nil
	}
	job := executor.Job{CodeDir: t.Dir, DataDir: dataDir(t), Image: t.Runtime.Image, Container: containerOf(t.Runtime)}
	if err := c.Check(job); err != nil {
		return fmt.Errorf("template %s cannot run in a container here: %w", t.Name, err)
	}
	return nil
}

func writeRunFiles(dir string, params, tmpl []byte) error {
	if err := os.WriteFile(filepath.Join(dir, "params.json"), append(params, '\n'), 0o644); err != nil {
		return fmt.Errorf("write params.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "template.yaml"), tmpl, 0o644); err != nil {
		return fmt.Errorf("write template snapshot: %w", err)
	}
	return nil
}

func paramMap(js []byte) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(js, &m)
	return m
}

// Cancel asks for a run to be cancelled: queued stages never start, running
// ones get SIGTERM and, after the grace period, SIGKILL. The request goes
// through storage, so it works from any process.
func (e *Engine) Cancel(ctx context.Context, idOrPrefix string) error {
	info, err := e.Run(ctx, idOrPrefix)
	if err != nil {
		return err
	}
	if info.State.Done() {
		return &EndedError{ID: info.ID, State: info.State}
	}
	if err := e.store.RequestCancel(ctx, info.ID); err != nil {
		return err
	}
	e.nudge()
	return nil
}

// EndedError is the answer of Cancel and Prune for a run that has already
// ended: there is nothing to stop (a request that raced the run's end, or
// came late). Callers tell it from a failure with errors.As.
type EndedError struct {
	ID    string
	State State
}

func (e *EndedError) Error() string {
	switch e.State {
	case Cancelled, Pruned: // what was done to it
		return fmt.Sprintf("run %s has already been %s", e.ID, e.State)
	}
	return fmt.Sprintf("run %s has already %s", e.ID, e.State)
}

// NoRunError is ResolveID's answer for a reference that names no run of
// this archive; it wraps storage.ErrNotFound.
type NoRunError struct{ Ref string }

func (e *NoRunError) Error() string {
	return fmt.Sprintf("no run %q: `niuma ls` lists the runs", e.Ref)
}

// Unwrap makes errors.Is(err, storage.ErrNotFound) hold.
func (e *NoRunError) Unwrap() error { return storage.ErrNotFound }

// ResolveID turns a run ID, a unique prefix or a unique end of one into
// the full ID.
func (e *Engine) ResolveID(ctx context.Context, idOrPrefix string) (string, error) {
	id, err := e.store.ResolveRunID(ctx, idOrPrefix)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "", &NoRunError{Ref: idOrPrefix}
	case err != nil:
		return "", err
	}
	return id, nil
}

// Run returns one run, by ID or unique prefix, with its stages and attempts.
func (e *Engine) Run(ctx context.Context, idOrPrefix string) (RunInfo, error) {
	id, err := e.ResolveID(ctx, idOrPrefix)
	if err != nil {
		return RunInfo{}, err
	}
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return RunInfo{}, err
	}
	stages, err := e.store.Stages(ctx, id)
	if err != nil {
		return RunInfo{}, err
	}
	attempts, err := e.store.Attempts(ctx, id)
	if err != nil {
		return RunInfo{}, err
	}
	info := runInfo(r, paramMap([]byte(r.Params)), stages, attempts)
	info.MetricsWaiting = e.MetricsWaiting(id)
	for i, s := range info.Stages {
		if u, ok := e.stageUsage(id, s.Name); ok && s.State == Running {
			info.Stages[i].Usage = &u
		}
	}
	e.failures(ctx, &info)
	if err := e.metricsRead(ctx, &info); err != nil {
		return RunInfo{}, err
	}
	if r.State.Done() {
		if sums, err := e.store.MetricSummaries(ctx, id); err == nil {
			info.ObjectiveMissing = objectiveMissing(r, sums)
		}
	}
	return info, nil
}

// Runs lists runs, newest first; limit 0 means all.
func (e *Engine) Runs(ctx context.Context, limit int) ([]RunInfo, error) {
	rs, err := e.store.ListRuns(ctx, storage.RunFilter{Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]RunInfo, 0, len(rs))
	for _, r := range rs {
		stages, err := e.store.Stages(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, runInfo(r, paramMap([]byte(r.Params)), stages, nil))
	}
	return out, nil
}

// LastMetrics returns the latest value of every metric of a run, per stage.
func (e *Engine) LastMetrics(ctx context.Context, runID string) ([]Point, error) {
	pts, err := e.store.LastMetrics(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]Point, len(pts))
	for i, p := range pts {
		out[i] = pointFrom(p)
	}
	return out, nil
}

// Series returns one metric of one stage of a run, by step, from the latest
// attempt that reported it.
func (e *Engine) Series(ctx context.Context, runID, stage, key string) ([]Point, error) {
	pts, err := e.store.MetricSeries(ctx, runID, stage, key)
	if err != nil {
		return nil, err
	}
	out := make([]Point, len(pts))
	for i, p := range pts {
		out[i] = pointFrom(p)
	}
	return out, nil
}

// MetricCount is the number of metric points stored for a run.
func (e *Engine) MetricCount(ctx context.Context, runID string) (int, error) {
	return e.store.CountMetricPoints(ctx, runID)
}

// LogPaths returns the stdout and stderr files of one attempt of a stage.
func LogPaths(run RunInfo, stage string, attempt int) (stdout, stderr string) {
	return stageLogPaths(run.Dir, stage, attempt)
}

// sortRuns orders live runs for the reconciler: higher priority first, then
// older first.
func sortRuns(runs map[string]*liveRun) []*liveRun {
	out := make([]*liveRun, 0, len(runs))
	for _, r := range runs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].run, out[j].run
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	return out
}

// AttemptSeries returns one metric of one stage of a run from every
// attempt that reported it, ordered by attempt and step (Point.Attempt
// tells them apart): the run view draws a diverged first attempt under
// its retry.
func (e *Engine) AttemptSeries(ctx context.Context, runID, stage, key string) ([]Point, error) {
	pts, err := e.store.MetricSeriesAllAttempts(ctx, runID, stage, key)
	if err != nil {
		return nil, err
	}
	out := make([]Point, len(pts))
	for i, p := range pts {
		out[i] = pointFrom(p)
	}
	return out, nil
}
