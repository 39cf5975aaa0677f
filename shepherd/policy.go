package shepherd

import (
	"fmt"
	"strings"
	"time"
)

// Policy is a scheduling pass composed of plugins: an order over the queue,
// Filters and Scorers per GPU, and the herd's features switched on or off.
type Policy struct {
	Name    string   // herd, bestfit, las, fifo
	Filters []Filter // every GPU of a placement passes them all, in order
	Scorers []Scorer // summed; the highest-scoring GPUs (or group) win
	// AgingStep raises a waiting request's priority by one per step waited
	// since it became ready (0: no aging), so that nothing waits forever
	// behind newer, higher priority runs. With AgingFactor > 0 the step is
	// at least AgingFactor times the request's estimate: a run is promoted
	// after waiting a multiple of its own length, so long runs do not flood
	// the top.
	AgingStep   time.Duration
	AgingFactor float64
	// AgeBelowTop caps aging just below the highest priority waiting: the
	// most urgent runs are never overtaken by older ones, and the rest age
	// up to just under them, where the shorter (or smaller) goes first —
	// aging bounds a run's wait without letting an old, large run jump
	// every short one.
	AgeBelowTop bool
	// ByArrival orders the queue by ready time only (fifo); otherwise by
	// aged priority, then least attained service (ServiceLevels), then
	// (ShortestFirst) by estimated GPU-time.
	ByArrival     bool
	ShortestFirst bool
	// FewerGPUsFirst breaks ties of estimated work (all unknown, say) by
	// GPU count: a smaller request first.
	FewerGPUsFirst bool
	// ServiceLevels are the thresholds of attained GPU-time (GPUs × run
	// time of earlier attempts, and of the current one for running runs)
	// that split runs into least-attained-service levels, as Tiresias's
	// discretised 2D-LAS does: a run in a lower level goes first. Empty:
	// no such ordering.
	ServiceLevels []time.Duration
	// Gang places a multi-GPU request on one topology group when it fits
	// in one.
	Gang bool
	// Reserve keeps GPUs for the highest ranked request that does not fit
	// (the head), letting others backfill them only if they end in time.
	Reserve bool
	// HoldLimit bounds a reservation: GPUs are held for the head only when
	// it is expected to start within HoldLimit; further out, others use
	// them freely (0: no bound). With runs of unknown length an expected
	// start is a guess, and holding GPUs idle on a guess is what starves a
	// queue.
	HoldLimit time.Duration
	// Preempt stops preemptible runs of lower priority for the head; a run
	// is spared until it has run PreemptAfter (to reach a checkpoint, and
	// so that a spot run is not stopped again as soon as it restarts).
	// With PreemptForService, a spot run of the same priority in a higher
	// service level than the head is stopped too (Tiresias).
	Preempt           bool
	PreemptAfter      time.Duration
	PreemptForService bool
	// PreemptLonger stops spot runs only for a run with no more work
	// (GPUs × estimated time) than they are expected to have left — and,
	// for a run of unknown length, only in place of a run of at least as
	// many GPUs. A run that may not itself be stopped holds its GPUs to its
	// end, so a large one must not push out many small ones, which is what
	// costs a busy queue most.
	PreemptLonger bool
	// PreemptMostServed picks victims by most attained service first
	// (within the lowest priority) rather than the most recently started:
	// under heavy-tailed run times the run that has run longest is expected
	// to run longest yet. Off in herd: measured worse on Philly
	// (docs/BENCHMARKS.md, ablation victimlas).
	PreemptMostServed bool
	// PreemptLowerServed stops a spot run of lower priority only once it
	// is in a higher service level than the head, as for one of the same
	// priority. Off in herd: measured worse on Philly (docs/BENCHMARKS.md,
	// ablation lowerserved).
	PreemptLowerServed bool
	// PreemptibleFirst orders a spot request before one that may not be
	// stopped when they tie on aged priority, service level and estimated
	// work: a spot run that turns out long is stopped again when others
	// wait (least attained service), while one that may not be stopped
	// holds its GPUs to its end whatever its length. Under heavy-tailed run
	// times the run that can be stopped is the better one to try first
	// (its Gittins index is higher), which is what a queue with no
	// estimates has left to go by.
	PreemptibleFirst bool
	// SpareGPUHosts places a CPU-only request on the host whose GPUs have
	// the least free memory (then best fit by CPU), keeping the CPUs of
	// hosts with free GPUs for GPU stages.
	SpareGPUHosts bool
}

// HerdOptions tune the default policy.
type HerdOptions struct {
	MaxPerGPU int           // runs sharing one GPU; default 3
	MaxTempC  float64       // never place at or above; default 85 °C
	AgingStep time.Duration // one priority level per step waited, at least; default 30 min
	// AgingFactor: one level per AgingFactor × the run's estimate waited,
	// when that is longer than AgingStep; default 2.
	AgingFactor float64
	// PreemptAfter spares a spot run until it has run this long; default 30 min.
	PreemptAfter time.Duration
	// Reserve holds GPUs for the head of the queue (see Policy.Reserve),
	// bounded by HoldLimit (default 2 h). Off by default: measured on every
	// Philly window, holding GPUs for a large run costs more waiting for
	// the many small ones than it saves the large one, under every estimate
	// regime (docs/BENCHMARKS.md).
	Reserve   bool
	HoldLimit time.Duration
	// ServiceLevel is the attained GPU-time that moves a run behind fresh
	// ones (see Policy.ServiceLevels); default 1 GPU-hour.
	ServiceLevel time.Duration
}

// Herd is the default policy, built to hold up when estimates are missing
// or wrong (see the package documentation): priority aged up to just below
// the most urgent waiting; least attained service; shortest estimated
// GPU-time, then spot runs first, then fewest GPUs; preemption of spot runs that weighs
// the work it displaces; gangs on one linked group; placement that keeps
// free memory usable (Fragmentation), at most three runs on a GPU; and, when
// asked for, a bounded reservation for the head with backfill by high
// estimates.
func Herd(o HerdOptions) Policy {
	if o.MaxPerGPU <= 0 {
		o.MaxPerGPU = 3
	}
	if o.MaxTempC <= 0 {
		o.MaxTempC = 85
	}
	if o.AgingStep <= 0 {
		o.AgingStep = 30 * time.Minute
	}
	if o.PreemptAfter <= 0 {
		o.PreemptAfter = 30 * time.Minute
	}
	if o.AgingFactor <= 0 {
		o.AgingFactor = 2
	}
	if o.HoldLimit <= 0 {
		o.HoldLimit = 2 * time.Hour
	}
	if o.ServiceLevel <= 0 {
		o.ServiceLevel = time.Hour
	}
	return Policy{
		Name:              "herd",
		Filters:           []Filter{Healthy{}, Cool{o.MaxTempC}, Memory{}, HostRoom{}, Share{o.MaxPerGPU}, Reserved{}},
		Scorers:           []Scorer{Fragmentation{}, FewestTenants{Weight: 1}},
		AgingStep:         o.AgingStep,
		AgingFactor:       o.AgingFactor,
		AgeBelowTop:       true,
		ShortestFirst:     true,
		FewerGPUsFirst:    true,
		ServiceLevels:     []time.Duration{o.ServiceLevel},
		Gang:              true,
		Reserve:           o.Reserve,
		HoldLimit:         o.HoldLimit,
		Preempt:           true,
		PreemptAfter:      o.PreemptAfter,
		PreemptForService: true,
		PreemptLonger:     true,
		PreemptibleFirst:  true,
		SpareGPUHosts:     true,
	}
}

// BestFit is the original design's baseline, exactly: waiting runs by
// priority (highest first, then arrival); each goes on the first GPUs, by
// free memory ascending, whose free memory fits. It shares a GPU whenever
// memory fits and never waits for anything but memory (and, like every
// policy here, never uses an unhealthy or overheating GPU, nor more CPUs or
// host memory than there are).
func BestFit() Policy {
	return Policy{
		Name:    "bestfit",
		Filters: []Filter{Healthy{}, Cool{85}, Memory{}, HostRoom{}},
		Scorers: []Scorer{LeastFree{}},
	}
}

// LAS is the Tiresias-style baseline (discretised two-dimensional least
// attained service): within a priority, runs that have had less GPU-time
// go first — two levels split at one GPU-hour — and first-come within a
// level; a waiting run has spot runs of a higher level (or lower priority)
// stopped for it; gangs go on one group, best fit; at most two runs share a
// GPU. It uses no estimates at all.
func LAS() Policy {
	return Policy{
		Name:              "las",
		Filters:           []Filter{Healthy{}, Cool{85}, Memory{}, HostRoom{}, Share{2}},
		Scorers:           []Scorer{LeastFree{}},
		ServiceLevels:     []time.Duration{time.Hour},
		Gang:              true,
		Preempt:           true,
		PreemptAfter:      30 * time.Minute,
		PreemptForService: true,
	}
}

// FIFO is the reference: arrival order, first fit by GPU index; a run that
// does not fit is skipped, not waited for.
func FIFO() Policy {
	return Policy{
		Name:      "fifo",
		Filters:   []Filter{Healthy{}, Cool{85}, Memory{}, HostRoom{}},
		Scorers:   []Scorer{LowestIndex{}},
		ByArrival: true,
	}
}

// Policies lists the policy names ByName knows, the default first.
var Policies = []string{"herd", "bestfit", "las", "fifo"}

// ByName returns a policy by its name, or an error that lists the names.
func ByName(name string) (Policy, error) {
	switch name {
	case "herd", "":
		return Herd(HerdOptions{}), nil
	case "bestfit":
		return BestFit(), nil
	case "las":
		return LAS(), nil
	case "fifo":
		return FIFO(), nil
	}
	return Policy{}, fmt.Errorf("unknown policy %q: choose one of %s", name, strings.Join(Policies, ", "))
}

// rankKey is a request's place in the queue order.
// Its fields are laid out to fill one 64-byte cache line (a pass's heap
// moves keys about many times per request).
type rankKey struct {
	// packed holds prio, level, work and gpus in one number that orders
	// as they do (see pack); exact says it could hold them.
	packed uint64
	submit int64
	i      int
	prio   int   // aged priority
	level  int   // attained-service level, lower first
	work   int64 // estimated GPU-seconds, max when unknown
	gpus   int   // with FewerGPUsFirst; 0 otherwise
	shape  int32 // index into the pass's shapes
	fixed  bool  // with PreemptibleFirst: may not be stopped
	exact  bool
	tier   int16 // Request.Tier; a key with one is compared field by field
}

// pack fills k.packed so that comparing it compares (prio descending,
// level, work, fixed, gpus): a pass compares keys many times per request,
// and one integer compares faster than five fields. Values out of its range
// (a priority beyond ±127, say) leave exact false and the fields are
// compared.
func (k *rankKey) pack() {
	const maxWork = 1<<43 - 1
	work := uint64(maxWork)
	if k.work != 1<<63-1 {
		if k.work < 0 || k.work >= maxWork {
			return
		}
		work = uint64(k.work)
	}
	if k.tier != 0 || k.prio < -128 || k.prio > 127 || k.level < 0 || k.level > 15 || k.gpus < 0 || k.gpus > 255 {
		return
	}
	var fixed uint64
	if k.fixed {
		fixed = 1
	}
	k.packed = uint64(127-k.prio)<<56 | uint64(k.level)<<52 | work<<9 | fixed<<8 | uint64(k.gpus)
	k.exact = true
}

// Rank returns the queue's indices in the order the policy considers them.
func (p Policy) Rank(now time.Time, queue []Request) []int {
	keys := make([]rankKey, len(queue))
	top := topPriority(queue)
	for i := range queue {
		keys[i] = p.key(now.UnixNano(), i, &queue[i], top)
	}
	sortKeys(keys, &p, queue)
	order := make([]int, len(keys))
	for j, k := range keys {
		order[j] = k.i
	}
	return order
}

// less orders two queue keys: aged priority (higher first), service level
// (lower first), estimated work (shorter first), spot before not (with
// PreemptibleFirst), GPUs (fewer first), ready time, ID, position.
func (p *Policy) less(queue []Request, a, b *rankKey) bool {
	if a.exact && b.exact {
		if a.packed != b.packed {
			return a.packed < b.packed
		}
		if a.submit != b.submit {
			return a.submit < b.submit
		}
		return p.tie(queue, a, b)
	}
	if a.tier != b.tier {
		return a.tier > b.tier
	}
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.level != b.level {
		return a.level < b.level
	}
	if a.work != b.work {
		return a.work < b.work
	}
	if a.fixed != b.fixed {
		return !a.fixed
	}
	if a.gpus != b.gpus {
		return a.gpus < b.gpus
	}
	if a.submit != b.submit {
		return a.submit < b.submit
	}
	return p.tie(queue, a, b)
}

// tie orders keys equal in everything but the request: by ID, then position.
func (p *Policy) tie(queue []Request, a, b *rankKey) bool {
	if c := strings.Compare(queue[a.i].ID, queue[b.i].ID); c != 0 {
		return c < 0
	}
	return a.i < b.i
}

// level is the service level of attained GPU-time.
func (p *Policy) level(gpus int, attained time.Duration) int {
	gt := attained * time.Duration(max(gpus, 1))
	l := 0
	for _, t := range p.ServiceLevels {
		if gt >= t {
			l++
		}
	}
	return l
}

// topPriority is the highest priority in the queue.
func topPriority(queue []Request) int {
	top := 0
	for i := range queue {
		if i == 0 || queue[i].Priority > top {
			top = queue[i].Priority
		}
	}
	return top
}

func (p *Policy) key(now int64, i int, r *Request, top int) rankKey {
	var k rankKey
	p.keyInto(&k, now, i, r, top)
	return k
}

// keyInto computes request i's key into k (zero).
func (p *Policy) keyInto(k *rankKey, now int64, i int, r *Request, top int) {
	k.i, k.submit, k.tier = i, r.Submit.UnixNano(), int16(min(max(r.Tier, -1<<15), 1<<15-1))
	if !p.ByArrival {
		p.fields(k, now, r, top)
	}
	k.pack()
}

// fields sets the key's priority, level, work and GPUs.
func (p *Policy) fields(k *rankKey, now int64, r *Request, top int) {
	k.prio = r.Priority
	if p.AgingStep > 0 && now > k.submit {
		step := p.AgingStep
		if p.AgingFactor > 0 && r.Estimate > 0 {
			step = max(step, time.Duration(p.AgingFactor*float64(r.Estimate)))
		}
		k.prio += int((now - k.submit) / int64(step))
		if p.AgeBelowTop {
			k.prio = min(k.prio, max(top-1, r.Priority))
		}
	}
	k.level = p.level(r.GPUs, r.Attained)
	if p.FewerGPUsFirst {
		k.gpus = r.GPUs
	}
	k.fixed = p.PreemptibleFirst && !r.Preemptible
	if p.ShortestFirst {
		k.work = 1<<63 - 1
		if r.Estimate > 0 {
			k.work = int64(r.Estimate/time.Second) * int64(max(r.GPUs, 1))
		}
	}
}

// Schedule decides the whole queue in one pass: a Decision per request, in
// the queue's order. Placed decisions are mutually consistent (no GPU gets
// more memory or runs than it has room for, no host more CPUs or memory); a
// Decision with Preempt asks the caller to stop those runs, after which a
// later pass places the request.
func Schedule(p Policy, st State) []Decision {
	// A Scheduler for one pass: its decisions and keys are sized to the
	// queue at once (a reused one keeps room to grow).
	sc := &Scheduler{p: p, out: make([]Decision, len(st.Queue)), keys: make([]rankKey, 0, len(st.Queue))}
	return sc.Schedule(st)
}

// Scheduler runs passes of one policy and reuses its buffers between them:
// the decisions a pass returns are valid until the next, and are not to be
// modified (a terse pass rewrites only what the previous one changed). It
// is not safe for concurrent use; the simulator keeps one per replay.
type Scheduler struct {
	p    Policy
	keys []rankKey
	out  []Decision
	// After a terse pass, out[:clean] are plain waiting decisions but for
	// their IDs and the indices in dirty (placed, or a head's).
	clean    int
	dirty    []int
	shapes   []shapeInfo
	shapeIdx shapeTable
	ps       pass
	// inner runs a sharing pass's placements (the policy with OneTeam);
	// probe tries what a reclaim would free.
	inner, probe *Scheduler
}

// NewScheduler returns a Scheduler for p.
func NewScheduler(p Policy) *Scheduler { return &Scheduler{p: p} }

// Policy is the scheduler's policy.
func (sc *Scheduler) Policy() Policy { return sc.p }

// Schedule is one pass; see the package function Schedule.
func (sc *Scheduler) Schedule(st State) []Decision {
	if st.Teams != nil {
		return sc.scheduleTeams(st)
	}
	p := &sc.p
	ps := &sc.ps
	ps.reset(p, &st)
	if cap(sc.out) < len(st.Queue) {
		sc.out = make([]Decision, len(st.Queue), 2*len(st.Queue))
		sc.clean = 0
	}
	out := sc.out[:len(st.Queue)]
	if st.Terse {
		// Every request waits until the pass places it: most of a long
		// queue is never looked at once the machine is full. Decisions
		// the previous terse pass left waiting need only their IDs.
		all := sc.out[:cap(sc.out)]
		for _, i := range sc.dirty {
			if i < sc.clean {
				all[i] = waitingDecision
			}
		}
		sc.dirty = sc.dirty[:0]
		n := min(sc.clean, len(out))
		for i := range n {
			out[i].ID = st.Queue[i].ID
		}
		for i := n; i < len(out); i++ {
			out[i] = waitingDecision
			out[i].ID = st.Queue[i].ID
		}
		sc.clean = len(out)
	} else {
		for i := range out {
			out[i] = Decision{ID: st.Queue[i].ID}
		}
		sc.clean, sc.dirty = 0, sc.dirty[:0]
	}
	// Shapes (GPUs, memory, CPUs, host memory, sharing) group requests that
	// fit alike; a pass remembers per shape what failed, and stops early
	// once every shape in the queue has failed.
	sc.keys = sc.keys[:0]
	sc.shapes = sc.shapes[:0]
	sc.shapeIdx.reset()
	top, now := topPriority(st.Queue), st.Now.UnixNano()
	for i := range st.Queue {
		r := &st.Queue[i]
		sc.keys = append(sc.keys, rankKey{})
		k := &sc.keys[len(sc.keys)-1]
		p.keyInto(k, now, i, r, top)
		sh := shape{r.GPUs, r.MemPerGPUMiB, r.CPUMilli, r.MemMiB, r.Shareable, r.Team}
		idx, ok := sc.shapeIdx.find(sh, sc.shapes)
		if !ok {
			idx = int32(len(sc.shapes))
			sc.shapeIdx.add(sh, idx)
			sc.shapes = append(sc.shapes, shapeInfo{key: sh, minEst: effEst(r), deadVer: -1, failVer: -1, whyVer: -1,
				rep: Request{GPUs: r.GPUs, MemPerGPUMiB: r.MemPerGPUMiB, CPUMilli: r.CPUMilli, MemMiB: r.MemMiB, Shareable: r.Shareable,
					Team: r.Team}})
		} else {
			sc.shapes[idx].minEst = min(sc.shapes[idx].minEst, effEst(r))
		}
		sc.shapes[idx].n++
		k.shape = idx
	}
	shapes := sc.shapes
	ps.setDemand(shapes)
	if !st.Terse && cap(ps.whys) < len(shapes) {
		ps.whys = make([]Reason, 0, len(shapes))
	}
	// Terse passes take the queue in order from a heap and stop as soon as
	// no remaining request can be placed; full passes sort it all, since
	// every wait reason counts the runs ahead.
	var h keyHeap
	if st.Terse {
		h = keyHeap{keys: sc.keys, p: p, queue: st.Queue}
		h.init()
	} else {
		sortKeys(sc.keys, p, st.Queue)
	}
	live, liveVer := len(shapes), 0
	headDone := !p.Reserve && !p.Preempt
	ahead := 0
	fullVer, full := -1, false
	for n := 0; n < len(st.Queue); n++ {
		var k rankKey
		if st.Terse {
			if headDone && (live == 0 || full && fullVer == ps.ver) {
				break
			}
			k = h.pop()
		} else {
			k = sc.keys[n]
		}
		req := &st.Queue[k.i]
		d := &out[k.i]
		if liveVer != ps.ver {
			live, liveVer = len(shapes), ps.ver
		}
		if headDone {
			if fullVer != ps.ver {
				fullVer, full = ps.ver, ps.full() || st.Terse && !ps.anyShapeFits(shapes)
			}
			if full {
				ps.wait(d, req, ahead, &shapes[k.shape])
				ahead++
				continue
			}
		}
		si := &shapes[k.shape]
		if si.failVer == ps.ver && effEst(req) >= si.failEst && headDone {
			ps.wait(d, req, ahead, si)
			ahead++
			continue
		}
		ps.mainC = ps.cycle(req)
		c := &ps.mainC
		if pick, host := ps.fit(c, ps.slots, ps.hosts, true); host >= 0 {
			ps.place(d, req, pick, host)
			sc.dirty = append(sc.dirty, k.i)
			continue
		}
		if si.failVer != ps.ver || effEst(req) < si.failEst {
			si.failVer, si.failEst = ps.ver, effEst(req)
		}
		if si.deadVer != ps.ver && si.failEst <= si.minEst {
			si.deadVer = ps.ver
			live--
		}
		if !headDone && req.GPUs > 0 && ps.everFits(req) {
			headDone = true
			ps.head(d, c)
			sc.dirty = append(sc.dirty, k.i)
		}
		ps.wait(d, req, ahead, si)
		ahead++
	}
	return out
}

// waitingDecision is a terse pass's decision for a request it has not
// placed (its ID apart).
var waitingDecision = Decision{Reason: Reason{Code: WaitQueued, Text: "waiting"}, Wait: "waiting"}

// shape is what decides whether a request fits, besides its estimate.
type shape struct {
	gpus       int
	mem        int64
	cpu, hostM int64
	share      bool
	team       string // OneTeam's answer depends on it
}

// shapeTable finds a shape's index in a pass's shapes: an open-addressing
// hash table of indices, which costs a fraction of a map lookup per queued
// request (the pass looks up every one).
type shapeTable struct {
	slots  []int32  // index+1 into the shapes; 0 = empty
	hashes []uint64 // per shape index
}

func (t *shapeTable) reset() {
	if len(t.slots) == 0 {
		t.slots = make([]int32, 64)
	}
	clear(t.slots)
	t.hashes = t.hashes[:0]
}

func (sh shape) hash() uint64 {
	h := uint64(sh.gpus)*0x9E3779B97F4A7C15 ^ uint64(sh.mem)*0xC2B2AE3D27D4EB4F ^
		uint64(sh.cpu)*0x165667B19E3779F9 ^ uint64(sh.hostM)*0x27D4EB2F165667C5
	if sh.share {
		h ^= 0x85EBCA77C2B2AE63
	}
	for i := 0; i < len(sh.team); i++ { // FNV-1a
		h = (h ^ uint64(sh.team[i])) * 0x100000001B3
	}
	return h ^ h>>29
}

func (t *shapeTable) find(sh shape, shapes []shapeInfo) (int32, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := sh.hash() & mask; ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return 0, false
		}
		if shapes[v-1].key == sh {
			return v - 1, true
		}
	}
}

// add records shape idx (the next index); the table doubles at half full.
func (t *shapeTable) add(sh shape, idx int32) {
	t.hashes = append(t.hashes, sh.hash())
	if 2*len(t.hashes) > len(t.slots) {
		t.slots = make([]int32, 2*len(t.slots))
		for k := range t.hashes[:len(t.hashes)-1] {
			t.insert(t.hashes[k], int32(k))
		}
	}
	t.insert(t.hashes[idx], idx)
}

func (t *shapeTable) insert(h uint64, idx int32) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = idx + 1
}

// shapeInfo is what a pass knows about one request shape: the shortest
// estimate among its requests, and the shortest estimate that failed to fit
// at slot version failVer — a request of the same shape with an estimate at
// least as long fails too (see Filter). deadVer: every request of the shape
// is known to fail at that version.
type shapeInfo struct {
	key              shape
	minEst           time.Duration
	failEst          time.Duration
	failVer, deadVer int
	n                int // requests of the shape
	// rep stands for the shape's requests when asking whether any could
	// fit; its estimate is the shape's shortest (set when asked).
	rep Request
	// why is the reason its requests wait (index+1 into the pass's whys;
	// 0: none yet), composed at version whyVer (for those that end before
	// the pass's reservation, or not). Kept aside: a terse pass needs none.
	why          int32
	whyVer       int
	whyBeforeRes bool
}

// effEst is the estimate the Reserved filter judges by: the high estimate
// when there is one, the estimate otherwise, unknown as the longest.
func effEst(r *Request) time.Duration {
	switch {
	case r.EstimateHigh > 0:
		return r.EstimateHigh
	case r.Estimate > 0:
		return r.Estimate
	}
	return 1<<63 - 1
}

func sortKeys(keys []rankKey, p *Policy, queue []Request) {
	h := keyHeap{keys: keys, p: p, queue: queue}
	// Heap sort into ascending order: pop repeatedly to the end, then
	// reverse. slices.SortFunc would do, but its comparator allocates a
	// closure per pass.
	h.init()
	n := len(keys)
	for end := n - 1; end > 0; end-- {
		keys[0], keys[end] = keys[end], keys[0]
		h.keys = keys[:end]
		h.down(0)
	}
	for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
		keys[i], keys[j] = keys[j], keys[i]
	}
}

// keyHeap is a binary min-heap of keys under less.
type keyHeap struct {
	keys  []rankKey
	p     *Policy
	queue []Request
}

func (h *keyHeap) less(a, b int) bool { return h.p.less(h.queue, &h.keys[a], &h.keys[b]) }

func (h *keyHeap) init() {
	for i := len(h.keys)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *keyHeap) pop() rankKey {
	top := h.keys[0]
	last := len(h.keys) - 1
	h.keys[0] = h.keys[last]
	h.keys = h.keys[:last]
	h.down(0)
	return top
}

func (h *keyHeap) down(i int) {
	n := len(h.keys)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			return
		}
		h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
		i = j
	}
}
