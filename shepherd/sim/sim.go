package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"niuma/shepherd"
	"niuma/shepherd/predict"
)

// Config is the simulated workstation, the policy under test and the
// estimate regime it is measured under.
type Config struct {
	GPUs      int
	GPUMiB    int64
	GroupSize int // GPUs per linked group; 0 = all GPUs in one group
	Policy    shepherd.Policy
	Estimates Estimates
	// Alpha is the co-location slowdown: a run on a GPU with k runs goes at
	// 1/(1+Alpha·(k−1)) of its solo speed (0.5: two runs each at 2/3, the
	// pair doing 1.33× the work of one).
	Alpha float64
	// PreemptLossSec is the work a preempted run loses (since its last
	// checkpoint), at most what it had done.
	PreemptLossSec float64
	// Teams share the machine (Job.Team says whose each job is): every
	// pass gets them with each team's usage decayed by HalfLife. None: one
	// free queue.
	Teams    []shepherd.Team
	HalfLife time.Duration
}

// DefaultConfig is 8×80 GiB in one linked group, the herd policy with
// predicted estimates, Alpha 0.5 and 5 minutes lost per preemption.
func DefaultConfig() Config {
	return Config{GPUs: 8, GPUMiB: 80 * 1024, Policy: shepherd.Herd(shepherd.HerdOptions{}), Estimates: Predicted,
		Alpha: 0.5, PreemptLossSec: 300}
}

// ParseGPUs reads "8x80GiB" (count × memory per GPU, GiB or MiB).
func ParseGPUs(s string) (n int, mib int64, err error) {
	var m float64
	var unit string
	if _, err := fmt.Sscanf(strings.ToLower(s), "%dx%f%s", &n, &m, &unit); err != nil || n <= 0 || m <= 0 {
		return 0, 0, fmt.Errorf("GPUs %q: write COUNTxMEMORY, e.g. 8x80GiB", s)
	}
	switch unit {
	case "gib", "g", "gb":
		return n, int64(m * 1024), nil
	case "mib", "m", "mb":
		return n, int64(m), nil
	}
	return 0, 0, fmt.Errorf("GPUs %q: memory unit %q: use GiB or MiB, e.g. 8x80GiB", s, unit)
}

// base is the simulated clock's zero.
var base = time.Date(2017, 10, 1, 0, 0, 0, 0, time.UTC)

func at(t float64) time.Time { return base.Add(seconds(t)) }

type sjob struct {
	Job
	mem       int64
	left      float64 // work left, seconds
	rate      float64
	gpus      []int
	start     float64 // of the current attempt
	first     float64 // first start; -1 before
	end       float64
	ran       float64 // wall seconds of earlier attempts
	ready     float64 // when it last joined the queue
	placed    shepherd.Running
	preempted int
	kid       int // the predictor's key, as an index into state.keys
}

// Replay runs jobs (sorted by Submit) to completion on cfg's machine and
// reports what happened. Jobs that can never fit the machine are counted
// as Refused and left out of the figures.
func Replay(jobs []Job, cfg Config) Report {
	r, _ := replay(jobs, cfg, hooks{})
	return r
}

// hooks let a test watch a replay: every request built and every run the
// predictor learns from, in order.
type hooks struct {
	request func(t float64, j *Job, r shepherd.Request)
	learn   func(t float64, r predict.Run)
	pass    func(st shepherd.State) // the State of every pass, before it runs (buffers reused: copy to keep)
}

// replay is Replay, telling hooks what it does.
func replay(jobs []Job, cfg Config, h hooks) (Report, []*sjob) {
	if cfg.GroupSize <= 0 {
		cfg.GroupSize = cfg.GPUs
	}
	inv := shepherd.Inventory{GPUs: make([]shepherd.GPU, cfg.GPUs)}
	for i := range inv.GPUs {
		inv.GPUs[i] = shepherd.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), TotalMiB: cfg.GPUMiB, FreeMiB: cfg.GPUMiB,
			Healthy: true, Group: fmt.Sprintf("link%d", i/cfg.GroupSize)}
	}
	s := &state{cfg: cfg, inv: inv, sched: shepherd.NewScheduler(cfg.Policy), free: make([]int64, cfg.GPUs),
		tenants: make([]int, cfg.GPUs), hooks: h}
	if cfg.Estimates.Mode == "predicted" {
		s.pred = predict.New(predict.Options{})
	}
	if len(cfg.Teams) > 0 {
		s.usage = &shepherd.Usage{HalfLife: cfg.HalfLife}
	}
	for i := range s.free {
		s.free[i] = cfg.GPUMiB
	}
	all := make([]*sjob, 0, len(jobs))
	for _, j := range jobs {
		sj := &sjob{Job: j, mem: int64(math.Ceil(float64(j.MemMilli) / 1000 * float64(cfg.GPUMiB))), left: j.Duration, first: -1}
		if j.GPUs > cfg.GroupSize && cfg.Policy.Gang || j.GPUs > cfg.GPUs {
			s.rep.Refused++
			continue
		}
		if s.pred != nil {
			sj.kid = s.keyID(predictKey(&sj.Job))
		}
		all = append(all, sj)
	}
	ai := 0
	for ai < len(all) || len(s.queue) > 0 || len(s.running) > 0 {
		tn := math.Inf(1)
		if ai < len(all) {
			tn = all[ai].Submit
		}
		for _, r := range s.running {
			tn = min(tn, s.t+r.left/r.rate)
		}
		if math.IsInf(tn, 1) {
			s.rep.Refused += len(s.queue) // nothing runs and nothing arrives: these never fit
			break
		}
		s.advance(tn)
		changed := false
		for k := 0; k < len(s.running); k++ {
			if r := s.running[k]; r.left <= 1e-6 {
				s.stop(k)
				r.end = s.t
				r.ran += s.t - r.start
				s.done = append(s.done, r)
				if s.pred != nil {
					run := predict.Run{Key: s.keys[r.kid].name, Duration: seconds(r.ran)}
					s.pred.Observe(run)
					s.keys[r.kid].learnt = true
					if s.hooks.learn != nil {
						s.hooks.learn(s.t, run)
					}
				}
				k--
				changed = true
			}
		}
		for ai < len(all) && all[ai].Submit <= s.t {
			j := all[ai]
			ai++
			s.enqueue(j)
			changed = changed || s.mightPlace(j)
		}
		if changed {
			s.schedule()
		}
	}
	return s.report(), s.done
}

type state struct {
	cfg     Config
	sched   *shepherd.Scheduler
	pred    *predict.Predictor
	predVer int // the predictor's version the queue's requests were built at
	keys    []predKey
	keyIdx  map[string]int
	hooks   hooks
	inv     shepherd.Inventory
	free    []int64
	tenants []int
	t       float64
	queue   []*sjob
	reqs    []shepherd.Request
	running []*sjob
	runs    []shepherd.Running
	done    []*sjob
	rep     Report
	usage   *shepherd.Usage // with Teams: each team's decayed GPU-time
	// integrals over time
	busyGPU, usedMem, stranded, waitingTime float64
	busyWaiting                             float64 // GPU-time busy while some job waits
}

// advance moves the clock to t, progressing running jobs and the integrals.
func (s *state) advance(t float64) {
	dt := t - s.t
	if dt > 0 {
		for g, n := range s.tenants {
			if n > 0 {
				s.busyGPU += dt
			}
			s.usedMem += dt * float64(s.cfg.GPUMiB-s.free[g])
		}
		if len(s.queue) > 0 {
			for _, n := range s.tenants {
				if n > 0 {
					s.busyWaiting += dt
				}
			}
			need := int64(math.MaxInt64)
			for _, q := range s.queue {
				need = min(need, q.mem)
			}
			for _, f := range s.free {
				if f > 0 && f < need {
					s.stranded += dt * float64(f)
				}
			}
			s.waitingTime += dt
		}
		for _, r := range s.running {
			r.left -= r.rate * dt
			if s.usage != nil {
				s.usage.Add(at(t), r.Team, dt*shepherd.Equiv(len(r.gpus), r.mem, s.cfg.GPUMiB, r.Shareable))
			}
		}
	}
	s.t = t
}

// enqueue puts a job in the queue (again, after a preemption), ready from
// now.
func (s *state) enqueue(j *sjob) {
	j.ready = s.t
	s.queue = append(s.queue, j)
	s.reqs = append(s.reqs, shepherd.Request{})
	s.request(j, &s.reqs[len(s.reqs)-1])
}

// request builds a queued job's request from its need at this moment, as
// the engine builds a ready stage's at every pass: with the predictor's
// latest answer.
func (s *state) request(j *sjob, r *shepherd.Request) {
	n := NeedOf(&j.Job, j.mem, at(j.ready), seconds(j.ran), s.cfg.Estimates, nil)
	if s.pred != nil && s.cfg.Estimates.Mode == "predicted" {
		// The key's latest answer, as NeedOf would ask it (a predKey
		// answers whatever the query) without composing the key.
		n.Predicted = s.answer(j.kid).est
	}
	*r = shepherd.Build(n)
	r.Team = j.Team
	if s.hooks.request != nil {
		s.hooks.request(s.t, &j.Job, *r)
	}
}

// mightPlace says whether an arrival could change anything: some GPU has
// memory for it, or it might preempt (a spot run past its grace period of
// lower priority, or of the same priority and a higher service level).
// Skipping the pass otherwise keeps long queues cheap, and changes nothing:
// such a pass places and stops nothing. Every policy is replayed the same
// way.
func (s *state) mightPlace(j *sjob) bool {
	if s.usage != nil {
		return true // within its team's share, it may reclaim lent GPUs
	}
	for _, f := range s.free {
		if f >= j.mem {
			return true
		}
	}
	p := &s.cfg.Policy
	if !p.Preempt {
		return false
	}
	now := at(s.t)
	for _, r := range s.running {
		if !r.Preemptible || r.placed.Start.Add(p.PreemptAfter).After(now) {
			continue
		}
		if r.Priority < j.Priority {
			return true
		}
		if p.PreemptForService && r.Priority == j.Priority {
			served := seconds(r.ran+s.t-r.start) * time.Duration(max(r.GPUs, 1))
			if len(p.ServiceLevels) > 0 && served >= p.ServiceLevels[0] {
				return true
			}
		}
	}
	return false
}

// stop takes running job k off its GPUs.
func (s *state) stop(k int) {
	r := s.running[k]
	for _, g := range r.gpus {
		s.free[g] += r.mem
		s.tenants[g]--
	}
	s.running = slices.Delete(s.running, k, k+1)
	s.rates(r.gpus)
}

// rates sets the co-location slowdown of every job on the given GPUs.
func (s *state) rates(gpus []int) {
	for _, r := range s.running {
		touch := false
		for _, g := range r.gpus {
			touch = touch || slices.Contains(gpus, g)
		}
		if !touch {
			continue
		}
		k := 1
		for _, g := range r.gpus {
			k = max(k, s.tenants[g])
		}
		r.rate = 1 / (1 + s.cfg.Alpha*float64(k-1))
	}
}

// schedule runs shepherd passes until one preempts nothing.
func (s *state) schedule() {
	for range 4 {
		if len(s.queue) == 0 {
			return
		}
		for g := range s.inv.GPUs {
			s.inv.GPUs[g].FreeMiB = s.free[g]
		}
		s.runs = s.runs[:0]
		for _, r := range s.running {
			s.runs = append(s.runs, r.placed)
		}
		if s.pred != nil && s.predVer != s.pred.Version() {
			// Only jobs whose key the predictor learnt about can get
			// another answer, and only those whose answer moved need
			// their request built again; the rest keep theirs.
			s.predVer = s.pred.Version()
			moved := false
			for k := range s.keys {
				pk := &s.keys[k]
				if !pk.learnt {
					continue
				}
				pk.learnt = false
				old := pk.est
				pk.ver = -1
				e := s.answer(k).est
				pk.moved = e.Median != old.Median || e.High != old.High
				moved = moved || pk.moved
			}
			if moved {
				for i, j := range s.queue {
					if s.keys[j.kid].moved {
						s.request(j, &s.reqs[i])
					}
				}
			}
		}
		s.rep.Passes++
		st := shepherd.State{Inventory: s.inv, Running: s.runs, Queue: s.reqs, Now: at(s.t), Terse: true}
		if s.usage != nil {
			st.Teams = &shepherd.Teams{Teams: s.cfg.Teams, Usage: s.usage.At(at(s.t))}
		}
		if s.hooks.pass != nil {
			s.hooks.pass(st)
		}
		ds := s.sched.Schedule(st)
		var victims []string
		var touched []int
		keep := 0
		for i := range ds {
			d := &ds[i]
			j := s.queue[i]
			if d.Wait != "" { // not placed (d.Placed, without copying the decision)
				victims = append(victims, d.Preempt...)
				if keep != i {
					s.queue[keep], s.reqs[keep] = j, s.reqs[i]
				}
				keep++
				continue
			}
			j.gpus = j.gpus[:0]
			for _, g := range d.GPUs {
				j.gpus = append(j.gpus, g.Index)
				s.free[g.Index] -= j.mem
				s.tenants[g.Index]++
				if s.free[g.Index] < 0 {
					panic(fmt.Sprintf("sim: %s over-committed GPU %d", s.cfg.Policy.Name, g.Index))
				}
			}
			j.start = s.t
			if j.first < 0 {
				j.first = s.t
			}
			j.placed = s.reqs[i].Placement(d.GPUs, d.Host, at(s.t))
			s.running = append(s.running, j)
			touched = append(touched, j.gpus...)
		}
		clear(s.queue[keep:])
		s.queue, s.reqs = s.queue[:keep], s.reqs[:keep]
		s.rates(touched)
		if len(victims) == 0 {
			return
		}
		for _, id := range victims {
			k := slices.IndexFunc(s.running, func(r *sjob) bool { return r.ID == id })
			if k < 0 {
				continue
			}
			r := s.running[k]
			s.stop(k)
			r.ran += s.t - r.start
			r.left = min(r.Duration, r.left+min(s.cfg.PreemptLossSec, s.t-r.start))
			r.preempted++
			s.rep.Preemptions++
			s.enqueue(r)
		}
	}
}

// predKey is one of the predictor's keys in a replay: its latest answer
// (asked again only when the predictor learnt something new about it).
type predKey struct {
	name   string
	est    predict.Estimate
	ver    int  // the predictor's version est was asked at; -1: ask again
	learnt bool // the predictor learnt about it since the queue was rebuilt
	moved  bool // its answer changed at the last rebuild
}

// keyID is the index of a predictor key, added when new.
func (s *state) keyID(name string) int {
	if s.keyIdx == nil {
		s.keyIdx = map[string]int{}
	}
	if i, ok := s.keyIdx[name]; ok {
		return i
	}
	s.keyIdx[name] = len(s.keys)
	s.keys = append(s.keys, predKey{name: name, ver: -1})
	return len(s.keys) - 1
}

// answer is key k's answer at the predictor's version, as a Source: a
// trace's jobs have no parameters, so one answer per key holds for all its
// queued jobs.
func (s *state) answer(k int) *predKey {
	pk := &s.keys[k]
	if v := s.pred.Version(); pk.ver != v {
		pk.est, pk.ver = s.pred.Predict(predict.Query{Key: pk.name}), v
	}
	return pk
}

// Predict implements predict.Source for the key's own queries.
func (pk *predKey) Predict(predict.Query) predict.Estimate { return pk.est }
