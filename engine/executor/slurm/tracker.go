package slurm

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"

	"niuma/engine/executor"
)

// watch is one job the executor follows until it ends.
type watch struct {
	ref       ref
	files     files
	stderr    string
	lim       limits
	submitted time.Time

	// Judge's memory, touched only by the tracker goroutine (and by
	// Recover before the watch is followed).
	known        bool      // a record has shown the job
	missingSince time.Time // the first look that found it in no record
	endedSince   time.Time // the controller said it ended; accounting did not yet
	exitSeen     time.Time // when the exit file was first seen

	mu      sync.Mutex
	waiting string
	done    chan struct{}
	once    sync.Once
	exit    executor.Exit
}

func (w *watch) id() string { return w.ref.JobID }

func (w *watch) finish(ex executor.Exit) {
	w.once.Do(func() {
		w.mu.Lock()
		w.exit, w.waiting = ex, ""
		w.mu.Unlock()
		close(w.done)
	})
}

func (w *watch) setWaiting(why string) (changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed = w.waiting != why
	w.waiting = why
	return changed
}

func (w *watch) isDone() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// observation is one look at Slurm for a batch of jobs.
type observation struct {
	queue   map[string]*record // what the controller knows (squeue)
	queueOK bool               // squeue answered
	acct    map[string]*record // what accounting knows (sacct)
	acctOn  bool               // the cluster keeps accounting
	acctOK  bool               // sacct answered
}

// batchSize is how many job ids go in one squeue or sacct call.
const batchSize = 400

// observe asks the controller, and accounting where the cluster keeps it,
// about every job in ws: one squeue and one sacct per batch of ids.
func (x *Executor) observe(ctx context.Context, ws []*watch) observation {
	obs := observation{queue: map[string]*record{}, acct: map[string]*record{}, queueOK: true}
	obs.acctOn = x.accounting(ctx)
	obs.acctOK = obs.acctOn
	for start := 0; start < len(ws); start += batchSize {
		ids := make([]string, 0, batchSize)
		since := time.Now()
		for _, w := range ws[start:min(start+batchSize, len(ws))] {
			ids = append(ids, w.id())
			if w.submitted.Before(since) {
				since = w.submitted
			}
		}
		list := strings.Join(ids, ",")
		out, err := x.cmd.Run(ctx, "squeue", "--noheader", "--states=all", "--jobs="+list, "--format="+squeueFormat)
		switch {
		case err == nil, unknownJob(err):
			for id, r := range parseSqueue(out) {
				obs.queue[id] = r
			}
		default:
			obs.queueOK = false
		}
		if !obs.acctOn {
			continue
		}
		// Jobs active since the earliest submission (a day's slack for
		// clocks): an older job that once had the same id (a cluster
		// reinstalled over its accounting) does not answer for ours.
		out, err = x.cmd.Run(ctx, "sacct", "--parsable2", "--noheader", "-j", list,
			"--starttime="+since.Add(-24*time.Hour).Format("2006-01-02T15:04:05"), "-o", sacctFields)
		switch {
		case err == nil:
			for id, r := range parseSacct(out) {
				obs.acct[id] = r
			}
		case accountingOff(err):
			x.setAccounting(false)
			obs.acctOn, obs.acctOK = false, false
		default:
			obs.acctOK = false
		}
	}
	return obs
}

// verdict is what one observation means for one job.
type verdict struct {
	waiting string         // pending in the queue: why, in words
	done    *executor.Exit // it ended: how
	gone    bool           // it ended without a trace of how (done says so too)
	hurry   bool           // an end is near: look again soon
}

// judge decides what an observation means for a job. Slurm's word comes
// first: accounting's final record, else the controller's; when neither
// knows the job any more (no accounting, and MinJobAge has passed), the
// files the job left decide, once they have had Settle to show.
func (x *Executor) judge(w *watch, obs observation, now time.Time) verdict {
	settle := x.cfg.Settle
	q := obs.queue[w.id()]
	a := obs.acct[w.id()]
	if a != nil && terminal(a.State) {
		ex := exitOf(a, x.evidence(w, true), w.lim)
		return verdict{done: &ex}
	}
	if q != nil {
		w.known, w.missingSince = true, time.Time{}
		switch {
		case terminal(q.State):
			// Accounting has the exit code and the steps' states; give it
			// a moment to catch up with the controller.
			if obs.acctOn {
				if w.endedSince.IsZero() {
					w.endedSince = now
				}
				if now.Sub(w.endedSince) < settle {
					return verdict{hurry: true}
				}
			}
			ex := exitOf(q, x.evidence(w, true), w.lim)
			return verdict{done: &ex}
		case pending(q.State):
			return verdict{waiting: "in Slurm's queue as job " + w.id() + ": " + pendingReason(q.Reason)}
		default:
			return verdict{hurry: w.ending(now, settle) || q.State == "COMPLETING"}
		}
	}
	if a != nil {
		// Accounting has it, unfinished, and the controller does not
		// answer or lost it: go by accounting.
		w.known, w.missingSince = true, time.Time{}
		if pending(a.State) {
			return verdict{waiting: "in Slurm's queue as job " + w.id() + ": " + pendingReason(a.Reason)}
		}
		return verdict{hurry: w.ending(now, settle)}
	}
	ev := x.evidence(w, false)
	if !obs.queueOK && !obs.acctOK {
		// No one answered: nothing is learnt, unless the job has long
		// recorded its exit and Slurm stays away.
		if ev.exit != nil {
			if w.missingSince.IsZero() {
				w.missingSince = now
			}
			if now.Sub(w.missingSince) >= settle {
				ex := exitOf(nil, x.evidence(w, true), w.lim)
				return verdict{done: &ex}
			}
		}
		return verdict{}
	}
	// In no record: it ended and was forgotten (MinJobAge), or was never
	// recorded (accounting lags a fresh submission).
	if w.missingSince.IsZero() {
		w.missingSince = now
		if !w.known && now.Sub(w.submitted) >= settle {
			// Recovered long after its submission: there is no lag to
			// wait for.
			w.missingSince = now.Add(-settle)
		}
	}
	if ev.exit != nil && !obs.acctOn {
		ex := exitOf(nil, x.evidence(w, true), w.lim)
		return verdict{done: &ex}
	}
	if now.Sub(w.missingSince) < settle {
		return verdict{hurry: ev.exit != nil}
	}
	ev = x.evidence(w, true)
	ex := exitOf(nil, ev, w.lim)
	sign := ev.exit != nil || ev.log.OOM || ev.log.TimeLimit || ev.log.Preempted || ev.log.NodeFail || ev.log.Cancelled
	return verdict{done: &ex, gone: !sign}
}

// ending reports whether the job's exit file appeared lately: Slurm's final
// word on it is due, and worth looking for often (but not forever: a job
// whose processes will not die stays COMPLETING).
func (w *watch) ending(now time.Time, settle time.Duration) bool {
	return !w.exitSeen.IsZero() && now.Sub(w.exitSeen) < settle
}

// evidence reads the marks a job left, and with log its stderr's
// slurmstepd lines.
func (x *Executor) evidence(w *watch, log bool) evidence {
	ev := evidence{started: readStartMark(w.files.Started), exit: readExitMark(w.files.Exit)}
	if log {
		ev.log = readLogSigns(w.stderr)
	}
	return ev
}

// follow adds a watch to the tracker, starting it if it sleeps. A job
// already followed keeps its watch (two handles on one job see the same
// end): the one to use is returned.
func (x *Executor) follow(w *watch) *watch {
	x.mu.Lock()
	if old := x.watches[w.id()]; old != nil && !old.isDone() {
		x.mu.Unlock()
		return old
	}
	x.watches[w.id()] = w
	start := !x.polling
	x.polling = true
	x.mu.Unlock()
	if start {
		go x.track()
	}
	x.nudge()
	return w
}

// unfollow stops following a watch (the engine let go of the attempt).
func (x *Executor) unfollow(w *watch) {
	x.mu.Lock()
	if x.watches[w.id()] == w {
		delete(x.watches, w.id())
	}
	x.mu.Unlock()
}

// nudge brings the next look at Slurm forward.
func (x *Executor) nudge() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// track is the one goroutine that follows every job: it looks at Slurm
// for all of them at once, often after a change and less often (doubling
// up to PollMax) while nothing changes, and in between looks at their
// exit files, the cheap sign that a job is about to end. It returns when
// no job is left.
func (x *Executor) track() {
	interval := x.cfg.PollMin
	next := time.Now().Add(x.cfg.PollMin)
	for {
		x.mu.Lock()
		ws := make([]*watch, 0, len(x.watches))
		for _, w := range x.watches {
			ws = append(ws, w)
		}
		if len(ws) == 0 {
			x.polling = false
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()

		now := time.Now()
		for _, w := range ws {
			if w.exitSeen.IsZero() {
				if _, err := os.Stat(w.files.Exit); err == nil {
					w.exitSeen = now
					next, interval = now, x.cfg.PollMin
				}
			}
		}
		if now.Before(next) {
			t := time.NewTimer(min(x.cfg.ExitPoll, next.Sub(now)))
			select {
			case <-t.C:
			case <-x.kick:
				t.Stop()
				next, interval = time.Now(), x.cfg.PollMin
			}
			continue
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		obs := x.observe(ctx, ws)
		cancel()
		now = time.Now()
		changed := false
		for _, w := range ws {
			v := x.judge(w, obs, now)
			if v.hurry {
				changed = true
			}
			if v.done != nil {
				x.unfollow(w)
				w.finish(*v.done)
				changed = true
				continue
			}
			if w.setWaiting(v.waiting) {
				changed = true
			}
		}
		if changed {
			interval = x.cfg.PollMin
		} else {
			interval = min(2*interval, x.cfg.PollMax)
		}
		next = now.Add(interval)
	}
}
