package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"niuma/engine/executor"
)

// Config is what a site says about its cluster. Zero values are Slurm's
// defaults (the default partition, the user's default account and QOS)
// and the executor's (below).
type Config struct {
	// Queue is where stages go when their template does not say.
	Queue Queue
	// SharedDirs are directories the site mounts at the same path on every
	// node, in ways the executor cannot tell from the filesystem type (a
	// bind mount of a parallel filesystem, a synced scratch). Run
	// directories on NFS, Lustre, GPFS, BeeGFS, CephFS and the like are
	// recognised without being listed.
	SharedDirs []string
	// ExtraArgs are added to every sbatch (e.g. --constraint=a100,
	// --reservation=lab).
	ExtraArgs []string
	// SignalGrace is how long before a stage's time limit Slurm sends it
	// SIGTERM, the checkpoint warning (--signal=B:TERM@…); less for
	// short limits, since Slurm may send it up to a minute early. Default
	// 60s.
	SignalGrace time.Duration
	// PollMin and PollMax bound the interval between two looks at Slurm
	// (squeue, and sacct where accounting is on): it starts at PollMin
	// after anything changes and doubles while nothing does. Defaults
	// 250ms and 15s.
	PollMin, PollMax time.Duration
	// ExitPoll is how often the stages' exit files are looked at; one
	// that appears brings the next look at Slurm forward. Default 250ms.
	ExitPoll time.Duration
	// Home is the Niuma data directory this executor submits for. Its
	// jobs' comments name it (see homeMark), and Sweep cancels only jobs
	// that name it: never another install's, nor another user's.
	Home string
	// SweepGrace is how old a job must be before Sweep may cancel it: a
	// job submitted since the engine listed the attempts it knows is not
	// on that list. Default 1 min (clocks of the controller and this
	// machine may differ).
	SweepGrace time.Duration
	// Settle is how long a job may be missing from every record (sacct
	// lags the controller; a shared filesystem may show a file late)
	// before the executor decides from what the job left. Default 30s.
	Settle time.Duration
}

func (c *Config) fill() {
	if c.SignalGrace == 0 {
		c.SignalGrace = time.Minute
	}
	if c.PollMin <= 0 {
		c.PollMin = 250 * time.Millisecond
	}
	if c.PollMax < c.PollMin {
		c.PollMax = max(15*time.Second, c.PollMin)
	}
	if c.ExitPoll <= 0 {
		c.ExitPoll = 250 * time.Millisecond
	}
	if c.Settle <= 0 {
		c.Settle = 30 * time.Second
	}
	if c.SweepGrace == 0 {
		c.SweepGrace = time.Minute
	}
}

// Executor submits attempts as Slurm batch jobs and follows them.
type Executor struct {
	cmd Commands
	cfg Config

	mu      sync.Mutex
	watches map[string]*watch // by job id
	polling bool              // the tracker goroutine runs
	kick    chan struct{}
	acct    acctState

	pingAt  time.Time
	pingErr error
	local   map[string]localNodes // per partition: whether every node is this machine
}

// New returns an executor that runs Slurm's tools through cmd.
func New(cmd Commands, cfg Config) *Executor {
	cfg.fill()
	return &Executor{cmd: cmd, cfg: cfg, watches: map[string]*watch{}, kick: make(chan struct{}, 1), local: map[string]localNodes{}}
}

// Name implements executor.Executor.
func (x *Executor) Name() string { return "slurm" }

// PlacesItself implements executor.Placer: Slurm places jobs on its nodes
// and GPUs; this machine's shepherd has no say.
func (x *Executor) PlacesItself() bool { return true }

// pingTTL is how long the controller's answer to a ping is reused: the
// engine asks before every stage it starts.
const pingTTL = 2 * time.Second

// Available implements executor.Availability: the controller answers.
func (x *Executor) Available(ctx context.Context) error {
	x.mu.Lock()
	if time.Since(x.pingAt) < pingTTL {
		err := x.pingErr
		x.mu.Unlock()
		return err
	}
	x.mu.Unlock()
	out, err := x.cmd.Run(ctx, "scontrol", "ping")
	switch {
	case err == nil && strings.Contains(string(out), "is UP"):
	case errors.Is(err, executor.ErrUnavailable):
	default:
		detail := strings.TrimSpace(string(out))
		if err != nil {
			detail = err.Error()
		}
		err = fmt.Errorf("Slurm's controller does not answer (%s): %w", detail, executor.ErrUnavailable)
	}
	x.mu.Lock()
	x.pingAt, x.pingErr = time.Now(), err
	x.mu.Unlock()
	return err
}

// ref is what the engine persists to find the job again.
type ref struct {
	JobID     string `json:"job_id"`
	Token     string `json:"token"`
	Submitted int64  `json:"submitted"`              // unix seconds
	TimeLimit int64  `json:"time_limit_s,omitempty"` // what --time asked, in seconds
	MemoryMiB int64  `json:"memory_mib,omitempty"`
}

// Start implements executor.Executor: it writes the batch script to the
// stage directory, submits it with sbatch and returns once Slurm has
// accepted the job (it may still wait in the queue: see the handle's
// Waiting).
func (x *Executor) Start(ctx context.Context, job executor.Job) (executor.Handle, error) {
	sub, err := buildSubmission(job, x.cfg.Queue, x.cfg.SignalGrace, x.cfg.ExtraArgs, homeMark(x.cfg.Home))
	if err != nil {
		return nil, err
	}
	partition := job.Cluster.Partition
	if partition == "" {
		partition = x.cfg.Queue.Partition
	}
	if err := x.checkShared(ctx, partition, job.RunDir, job.CodeDir, job.DataDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(job.StageDir, 0o755); err != nil {
		return nil, fmt.Errorf("create stage dir: %w", err)
	}
	for _, p := range []string{sub.Files.Exit, sub.Files.Started, sub.Files.JobID} {
		_ = os.Remove(p)
	}
	if err := os.WriteFile(sub.Files.Script, []byte(sub.Script), 0o755); err != nil {
		return nil, fmt.Errorf("write the batch script: %w", err)
	}
	out, err := x.cmd.Run(ctx, "sbatch", sub.Args...)
	if err != nil {
		if errors.Is(err, executor.ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("Slurm refused the job: %w", err)
	}
	// --parsable prints "JOBID" or "JOBID;CLUSTER".
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if !jobID(id) {
		return nil, fmt.Errorf("sbatch answered %q, not a job id", strings.TrimSpace(string(out)))
	}
	// The id next to the attempt's files: a later owner that never learnt
	// the Ref (Niuma died right here) still finds the job by it.
	_ = os.WriteFile(sub.Files.JobID, []byte(id+"\n"), 0o644)
	r := ref{JobID: id, Token: sub.Token, Submitted: time.Now().Unix(),
		TimeLimit: int64(sub.Limits.TimeLimit / time.Second), MemoryMiB: sub.Limits.MemoryMiB}
	h := x.newHandle(job, r)
	h.w = x.follow(h.w)
	return h, nil
}

// Recover implements executor.Executor. With a Ref it follows the job it
// names; without one it looks for the job by its name and comment (the
// attempt's token), then by the job id file next to the attempt's logs.
// A job Slurm still has, pending or running, is followed, never
// submitted again.
func (x *Executor) Recover(ctx context.Context, job executor.Job, refJSON string) (executor.Handle, error) {
	var r ref
	if refJSON != "" {
		if err := json.Unmarshal([]byte(refJSON), &r); err != nil || !jobID(r.JobID) {
			return nil, executor.ErrGone
		}
	} else {
		found, err := x.findByToken(ctx, job)
		if err != nil {
			return nil, err
		}
		if found == nil {
			return nil, executor.ErrNotLaunched
		}
		r = *found
	}
	h := x.newHandle(job, r)
	w := h.w
	v := x.judge(w, x.observe(ctx, []*watch{w}), time.Now())
	switch {
	case v.gone:
		return nil, executor.ErrGone
	case v.done != nil:
		w.finish(*v.done)
		return h, nil
	}
	w.setWaiting(v.waiting)
	h.w = x.follow(w)
	return h, nil
}

// findByToken finds the job an attempt was submitted as, from its name in
// the controller's and accounting's records, else from the files it left.
// nil: nothing was ever submitted under the token.
func (x *Executor) findByToken(ctx context.Context, job executor.Job) (*ref, error) {
	tok := token(job)
	name := jobName(tok)
	f := attemptFiles(job)
	out, err := x.cmd.Run(ctx, "squeue", "--noheader", "--states=all", "--name="+name, "--format="+squeueFormat)
	if err != nil && !unknownJob(err) {
		return nil, fmt.Errorf("look for job %s in Slurm's queue: %w", name, err)
	}
	best, fromAcct := "", false
	for id, r := range parseSqueue(out) {
		if r.Name == name && tokenOf(r.Comment) == tok && newer(id, best) {
			best = id
		}
	}
	if best == "" && x.accounting(ctx) {
		out, err := x.cmd.Run(ctx, "sacct", "--parsable2", "--noheader", "--name="+name, "--starttime=2000-01-01", "-o", sacctFields)
		switch {
		case accountingOff(err):
			x.setAccounting(false)
		case err != nil:
			return nil, fmt.Errorf("look for job %s in Slurm's accounting: %w", name, err)
		}
		for id := range parseSacct(out) {
			if newer(id, best) {
				best, fromAcct = id, true
			}
		}
	}
	if best == "" {
		if b, err := os.ReadFile(f.JobID); err == nil && jobID(strings.TrimSpace(string(b))) {
			best = strings.TrimSpace(string(b))
		}
	}
	if best == "" {
		if m := readStartMark(f.Started); m != nil && jobID(m.Job) {
			best = m.Job
		}
	}
	if best == "" {
		return nil, nil
	}
	// When it was submitted: the job id file's time; a job only
	// accounting remembers may be old.
	r := &ref{JobID: best, Token: tok, Submitted: time.Now().Unix()}
	if fi, err := os.Stat(f.JobID); err == nil {
		r.Submitted = fi.ModTime().Unix()
	} else if fromAcct {
		r.Submitted = time.Now().Add(-30 * 24 * time.Hour).Unix()
	}
	if job.Container.MemoryMiB > 0 {
		r.MemoryMiB = job.Container.MemoryMiB
	}
	if job.Timeout > 0 {
		m, _ := strconv.ParseInt(formatTimeLimit(job.Timeout), 10, 64)
		r.TimeLimit = m * 60
	}
	return r, nil
}

// newer compares job ids as numbers ("" is older than any).
func newer(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// acctState is whether the cluster keeps accounting (sacct works). It is
// asked again now and then: a site may turn it on.
type acctState struct {
	known bool
	on    bool
	at    time.Time
}

const acctRecheck = 5 * time.Minute

// accounting reports whether sacct is worth asking.
func (x *Executor) accounting(ctx context.Context) bool {
	x.mu.Lock()
	a := x.acct
	x.mu.Unlock()
	if a.known && time.Since(a.at) < acctRecheck {
		return a.on
	}
	_, err := x.cmd.Run(ctx, "sacct", "--parsable2", "--noheader", "-j", "1", "-o", "JobIDRaw")
	on := !accountingOff(err)
	if err == nil || accountingOff(err) {
		x.setAccounting(on)
	}
	return on
}

func (x *Executor) setAccounting(on bool) {
	x.mu.Lock()
	x.acct = acctState{known: true, on: on, at: time.Now()}
	x.mu.Unlock()
}

// RecordedJobID is the Slurm job id an attempt of a stage was submitted
// as, from the file Start writes next to the attempt's logs right after
// sbatch answers ("" when there is none: not submitted, or not on Slurm).
// It is there before the engine records the attempt's Ref, so `niuma show`
// can name the job a user looks up with squeue or sacct.
func RecordedJobID(stageDir string, attempt int) string {
	b, err := os.ReadFile(attemptFiles(executor.Job{StageDir: stageDir, Attempt: attempt}).JobID)
	if id := strings.TrimSpace(string(b)); err == nil && jobID(id) {
		return id
	}
	return ""
}
