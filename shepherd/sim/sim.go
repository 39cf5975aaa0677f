package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"niuma/shepherd"
)

// Config is the simulated workstation and the policy under test.
type Config struct {
	GPUs      int
	GPUMiB    int64
	GroupSize int // GPUs per NVLink group; 0 = all GPUs in one group
	Policy    shepherd.Policy
	// Alpha is the co-location slowdown: a run on a GPU with k runs goes at
	// 1/(1+Alpha·(k−1)) of its solo speed (0.5: two runs each at 2/3, the
	// pair doing 1.33× the work of one).
	Alpha float64
	// PreemptLossSec is the work a preempted run loses (since its last
	// checkpoint), at most what it had done.
	PreemptLossSec float64
}

// DefaultConfig is 8×80 GiB in one NVLink group, the herd policy, Alpha 0.5
// and 5 minutes lost per preemption.
func DefaultConfig() Config {
	return Config{GPUs: 8, GPUMiB: 80 * 1024, Policy: shepherd.Herd(shepherd.HerdOptions{}), Alpha: 0.5, PreemptLossSec: 300}
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

func at(t float64) time.Time { return base.Add(time.Duration(t * float64(time.Second))) }

type sjob struct {
	Job
	mem       int64
	left      float64 // work left, seconds
	rate      float64
	gpus      []int
	start     float64 // of the current placement
	first     float64 // first start; -1 before
	end       float64
	preempted int
}

// Replay runs jobs (sorted by Submit) to completion on cfg's machine and
// reports what happened. Jobs that can never fit the machine are counted
// as Refused and left out of the figures.
func Replay(jobs []Job, cfg Config) Report {
	r, _ := replayDone(jobs, cfg)
	return r
}

func replayDone(jobs []Job, cfg Config) (Report, []*sjob) {
	if cfg.GroupSize <= 0 {
		cfg.GroupSize = cfg.GPUs
	}
	inv := shepherd.Inventory{GPUs: make([]shepherd.GPU, cfg.GPUs)}
	for i := range inv.GPUs {
		inv.GPUs[i] = shepherd.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), TotalMiB: cfg.GPUMiB, FreeMiB: cfg.GPUMiB,
			Healthy: true, Group: fmt.Sprintf("nvlink%d", i/cfg.GroupSize)}
	}
	s := &state{cfg: cfg, inv: inv, sched: shepherd.NewScheduler(cfg.Policy), free: make([]int64, cfg.GPUs), tenants: make([]int, cfg.GPUs)}
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
				s.done = append(s.done, r)
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
	inv     shepherd.Inventory
	free    []int64
	tenants []int
	t       float64
	queue   []*sjob
	reqs    []shepherd.Request
	running []*sjob
	done    []*sjob
	rep     Report
	// integrals over time
	busyGPU, usedMem, stranded, waitingTime float64
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
		}
	}
	s.t = t
}

// enqueue puts a job in the queue (again, after a preemption).
func (s *state) enqueue(j *sjob) {
	s.queue = append(s.queue, j)
	est := time.Duration(0)
	if j.Estimate > 0 {
		est = time.Duration(j.Estimate * j.left / j.Duration * float64(time.Second))
	}
	s.reqs = append(s.reqs, shepherd.Request{ID: j.ID, GPUs: j.GPUs, MemPerGPUMiB: j.mem, Priority: j.Priority,
		Submit: at(j.Submit), Preemptible: j.Preemptible, Estimate: est, Shareable: j.Shareable})
}

// mightPlace says whether an arrival could change anything: some GPU has
// memory for it, or it might preempt. Skipping the pass otherwise keeps long
// queues cheap; every policy is replayed the same way.
func (s *state) mightPlace(j *sjob) bool {
	for _, f := range s.free {
		if f >= j.mem {
			return true
		}
	}
	if s.cfg.Policy.Preempt && !j.Preemptible {
		for _, r := range s.running {
			if r.Preemptible && r.Priority < j.Priority {
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
		running := make([]shepherd.Running, len(s.running))
		for k, r := range s.running {
			uu := make([]string, len(r.gpus))
			for i, g := range r.gpus {
				uu[i] = s.inv.GPUs[g].UUID
			}
			running[k] = shepherd.Running{ID: r.ID, GPUs: uu, MemPerGPUMiB: r.mem, Priority: r.Priority,
				Preemptible: r.Preemptible, Shareable: r.Shareable, Start: at(r.start),
				Estimate: time.Duration(r.Estimate * (r.left + (s.t-r.start)*r.rate) / r.Duration * float64(time.Second))}
		}
		s.rep.Passes++
		ds := s.sched.Schedule(shepherd.State{Inventory: s.inv, Running: running, Queue: s.reqs, Now: at(s.t), Terse: true})
		var victims []string
		var touched []int
		keep := 0
		for i, d := range ds {
			j := s.queue[i]
			if !d.Placed() {
				victims = append(victims, d.Preempt...)
				s.queue[keep], s.reqs[keep] = j, s.reqs[i]
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
			r.left = min(r.Duration, r.left+min(s.cfg.PreemptLossSec, s.t-r.start))
			r.preempted++
			s.rep.Preemptions++
			s.enqueue(r)
		}
	}
}
