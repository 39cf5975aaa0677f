package shepherd

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Policy is a scheduling pass composed of plugins: an order over the queue,
// Filters and Scorers per GPU, and the herd's features switched on or off.
type Policy struct {
	Name    string   // herd, bestfit, fifo
	Filters []Filter // every GPU of a placement passes them all, in order
	Scorers []Scorer // summed; the highest-scoring GPUs (or group) win
	// AgingStep raises a waiting request's priority by one per step waited
	// (0: no aging), so that nothing waits forever behind newer, higher
	// priority runs. With AgingFactor > 0 the step is at least AgingFactor
	// times the request's estimate: a run is promoted after waiting a
	// multiple of its own length, so long runs do not flood the top.
	AgingStep   time.Duration
	AgingFactor float64
	// ByArrival orders the queue by submit time only (fifo); otherwise by
	// aged priority, then (ShortestFirst) by estimated GPU-time.
	ByArrival     bool
	ShortestFirst bool
	// Gang places a multi-GPU request on one topology group when it fits
	// in one.
	Gang bool
	// Reserve keeps GPUs for the highest ranked request that does not fit
	// (the head), letting others backfill them only if they end in time.
	Reserve bool
	// Preempt stops preemptible runs of lower priority for the head; a run
	// is spared until it has run PreemptAfter (to reach a checkpoint, and
	// so that a spot run is not stopped again as soon as it restarts).
	Preempt      bool
	PreemptAfter time.Duration
}

// HerdOptions tune the default policy.
type HerdOptions struct {
	MaxPerGPU int           // runs sharing one GPU; default 2
	MaxTempC  float64       // never place at or above; default 85 °C
	AgingStep time.Duration // one priority level per step waited, at least; default 30 min
	// AgingFactor: one level per AgingFactor × the run's estimate waited,
	// when that is longer than AgingStep; default 2.
	AgingFactor float64
	// PreemptAfter spares a spot run until it has run this long; default 30 min.
	PreemptAfter time.Duration
}

// Herd is the default policy: aged priority, shortest estimated first within
// a priority level, gangs on one NVLink group, bounded sharing, a reservation
// for the head of the queue with backfill around it, preemption of spot
// runs, and the placement that leaves the least unusable fragment.
func Herd(o HerdOptions) Policy {
	if o.MaxPerGPU <= 0 {
		o.MaxPerGPU = 2
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
	return Policy{
		Name:          "herd",
		Filters:       []Filter{Healthy{}, Cool{o.MaxTempC}, Memory{}, Share{o.MaxPerGPU}, Reserved{}},
		Scorers:       []Scorer{FewestTenants{Weight: 1 << 24}, LeastFragment{}},
		AgingStep:     o.AgingStep,
		AgingFactor:   o.AgingFactor,
		ShortestFirst: true,
		Gang:          true,
		Reserve:       true,
		Preempt:       true,
		PreemptAfter:  o.PreemptAfter,
	}
}

// BestFit is the original design's baseline, exactly: waiting runs by
// priority (highest first, then arrival); each goes on the first GPUs, by
// free memory ascending, whose free memory fits. It shares a GPU whenever
// memory fits and never waits for anything but memory (and, like every
// policy here, never uses an unhealthy or overheating GPU).
func BestFit() Policy {
	return Policy{
		Name:    "bestfit",
		Filters: []Filter{Healthy{}, Cool{85}, Memory{}},
		Scorers: []Scorer{LeastFree{}},
	}
}

// FIFO is the reference: arrival order, first fit by GPU index; a run that
// does not fit is skipped, not waited for.
func FIFO() Policy {
	return Policy{
		Name:      "fifo",
		Filters:   []Filter{Healthy{}, Cool{85}, Memory{}},
		Scorers:   []Scorer{LowestIndex{}},
		ByArrival: true,
	}
}

// Policies lists the policy names ByName knows, the default first.
var Policies = []string{"herd", "bestfit", "fifo"}

// ByName returns a policy by its name, or an error that lists the names.
func ByName(name string) (Policy, error) {
	switch name {
	case "herd", "":
		return Herd(HerdOptions{}), nil
	case "bestfit":
		return BestFit(), nil
	case "fifo":
		return FIFO(), nil
	}
	return Policy{}, fmt.Errorf("unknown policy %q: choose one of %s", name, strings.Join(Policies, ", "))
}

// rankKey is a request's place in the queue order.
type rankKey struct {
	i      int
	prio   int   // aged priority
	work   int64 // estimated GPU-seconds, max when unknown
	submit int64
	shape  int32 // index into the pass's shapes
}

// Rank returns the queue's indices in the order the policy considers them.
func (p Policy) Rank(now time.Time, queue []Request) []int {
	keys := p.rank(now, queue, nil)
	order := make([]int, len(keys))
	for j, k := range keys {
		order[j] = k.i
	}
	return order
}

// rank sorts the queue's keys into keys (reused when large enough).
func (p Policy) rank(now time.Time, queue []Request, keys []rankKey) []rankKey {
	keys = keys[:0]
	for i := range queue {
		keys = append(keys, p.key(now, i, &queue[i]))
	}
	slices.SortFunc(keys, func(a, b rankKey) int {
		if p.less(queue, a, b) {
			return -1
		}
		if p.less(queue, b, a) {
			return 1
		}
		return 0
	})
	return keys
}

// less orders two queue keys: aged priority (higher first), estimated
// work (shorter first), submit time, ID, position.
func (p Policy) less(queue []Request, a, b rankKey) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.work != b.work {
		return a.work < b.work
	}
	if a.submit != b.submit {
		return a.submit < b.submit
	}
	if c := strings.Compare(queue[a.i].ID, queue[b.i].ID); c != 0 {
		return c < 0
	}
	return a.i < b.i
}

// keyHeap is a binary min-heap of keys under less.
type keyHeap struct {
	keys  []rankKey
	p     *Policy
	queue []Request
}

func (h *keyHeap) less(a, b rankKey) bool { return h.p.less(h.queue, a, b) }

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
		if r := l + 1; r < n && h.less(h.keys[r], h.keys[l]) {
			j = r
		}
		if !h.less(h.keys[j], h.keys[i]) {
			return
		}
		h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
		i = j
	}
}

func (p Policy) key(now time.Time, i int, r *Request) rankKey {
	k := rankKey{i: i, submit: r.Submit.UnixNano()}
	if p.ByArrival {
		return k
	}
	k.prio = r.Priority
	if p.AgingStep > 0 && now.After(r.Submit) {
		step := p.AgingStep
		if p.AgingFactor > 0 && r.Estimate > 0 {
			step = max(step, time.Duration(p.AgingFactor*float64(r.Estimate)))
		}
		k.prio += int(now.Sub(r.Submit) / step)
	}
	if p.ShortestFirst {
		k.work = 1<<63 - 1
		if r.Estimate > 0 {
			k.work = int64(r.Estimate/time.Second) * int64(max(r.GPUs, 1))
		}
	}
	return k
}

// pass is one scheduling pass in progress.
type pass struct {
	p       *Policy
	st      *State
	slots   []Slot
	byUUID  map[string]int
	running []Running // earlier placements plus this pass's
	minNeed int64
	maxFit  int // most GPUs any one request could ever get at once
	status  []*Status
	scores  []int64
	pick    []int
	// ver counts changes to slots (placements, reservations).
	ver int
	// filters are the policy's; filtersNoRes leave out Reserved (to plan
	// the head's own reservation). lastFit is the request whose per-GPU
	// statuses ps.status holds for the pass's own slots, if any.
	filters, filtersNoRes []Filter
	lastFit               *Request
}

type shape struct {
	gpus  int
	mem   int64
	share bool
}

func effEst(r *Request) time.Duration {
	if r.Estimate <= 0 {
		return 1<<63 - 1
	}
	return r.Estimate
}

// Schedule decides the whole queue in one pass: a Decision per request, in
// the queue's order. Placed decisions are mutually consistent (no GPU gets
// more memory or runs than it has room for); a Decision with Preempt asks
// the caller to stop those runs, after which a later pass places the
// request.
func Schedule(p Policy, st State) []Decision {
	return NewScheduler(p).Schedule(st)
}

// Scheduler runs passes of one policy and reuses its buffers between them:
// the decisions a pass returns are valid until the next. It is not safe for
// concurrent use; the simulator keeps one per replay.
type Scheduler struct {
	p        Policy
	keys     []rankKey
	out      []Decision
	shapes   []shapeInfo
	shapeIdx map[shape]int32
}

// NewScheduler returns a Scheduler for p.
func NewScheduler(p Policy) *Scheduler { return &Scheduler{p: p} }

// Schedule is one pass; see the package function Schedule.
func (sc *Scheduler) Schedule(st State) []Decision {
	p := &sc.p
	ps := newPass(p, &st)
	if cap(sc.out) < len(st.Queue) {
		sc.out = make([]Decision, len(st.Queue), 2*len(st.Queue))
	}
	out := sc.out[:len(st.Queue)]
	for i := range out {
		out[i] = Decision{ID: st.Queue[i].ID}
	}
	// Shapes (GPUs, memory, sharing) group requests that fit alike; a pass
	// remembers per shape what failed, and stops early once every shape in
	// the queue has failed.
	sc.keys = sc.keys[:0]
	sc.shapes = sc.shapes[:0]
	clear(sc.shapeIdx)
	if sc.shapeIdx == nil {
		sc.shapeIdx = map[shape]int32{}
	}
	for i := range st.Queue {
		r := &st.Queue[i]
		k := p.key(st.Now, i, r)
		k.shape = -1
		if r.GPUs <= 0 {
			sc.keys = append(sc.keys, k) // CPU-only: placed at once, never fails
			continue
		}
		sh := shape{r.GPUs, r.MemPerGPUMiB, r.Shareable}
		idx, ok := sc.shapeIdx[sh]
		if !ok {
			idx = int32(len(sc.shapes))
			sc.shapeIdx[sh] = idx
			sc.shapes = append(sc.shapes, shapeInfo{minEst: effEst(r), deadVer: -1, failVer: -1})
		} else {
			sc.shapes[idx].minEst = min(sc.shapes[idx].minEst, effEst(r))
		}
		k.shape = idx
		sc.keys = append(sc.keys, k)
	}
	shapes := sc.shapes
	// Terse passes take the queue in order from a heap and stop as soon as
	// no remaining request can be placed; full passes sort it all, since
	// every wait reason counts the runs ahead.
	var h keyHeap
	if st.Terse {
		h = keyHeap{keys: sc.keys, p: p, queue: st.Queue}
		h.init()
	} else {
		slices.SortFunc(sc.keys, func(a, b rankKey) int {
			if p.less(st.Queue, a, b) {
				return -1
			}
			if p.less(st.Queue, b, a) {
				return 1
			}
			return 0
		})
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
		if req.GPUs <= 0 {
			continue
		}
		if liveVer != ps.ver {
			live, liveVer = len(shapes), ps.ver
		}
		if headDone {
			if fullVer != ps.ver {
				fullVer, full = ps.ver, ps.full()
			}
			if full {
				ps.wait(d, req, "", ahead)
				ahead++
				continue
			}
		}
		si := &shapes[k.shape]
		if si.failVer == ps.ver && effEst(req) >= si.failEst && headDone {
			ps.wait(d, req, "", ahead)
			ahead++
			continue
		}
		c := Cycle{Now: st.Now, Req: req, MinNeedMiB: ps.minNeed}
		if pick := ps.fit(&c, ps.slots, true); pick != nil {
			ps.place(d, req, pick)
			ps.ver++
			continue
		}
		if si.failVer != ps.ver || effEst(req) < si.failEst {
			si.failVer, si.failEst = ps.ver, effEst(req)
		}
		if si.deadVer != ps.ver && si.failEst <= si.minEst {
			si.deadVer = ps.ver
			live--
		}
		extra := ""
		if !headDone && ps.everFits(req) {
			headDone = true
			extra = ps.head(d, &c)
		}
		ps.wait(d, req, extra, ahead)
		ahead++
	}
	if st.Terse {
		for i := range out {
			if !out[i].Placed() || out[i].GPUs != nil || st.Queue[i].GPUs <= 0 {
				continue
			}
			out[i].Wait = "waiting" // left in the heap: nothing could place them
		}
	}
	return out
}

// shapeInfo is what a pass knows about one request shape: the shortest
// estimate among its requests, and the shortest estimate that failed to fit
// at slot version failVer — a request of the same shape with an estimate at
// least as long fails too (see Filter). deadVer: every request of the shape
// is known to fail at that version.
type shapeInfo struct {
	minEst           time.Duration
	failEst          time.Duration
	failVer, deadVer int
}

func newPass(p *Policy, st *State) *pass {
	ps := &pass{p: p, st: st, byUUID: make(map[string]int, len(st.Inventory.GPUs)),
		running: append([]Running(nil), st.Running...)}
	ps.slots = make([]Slot, len(st.Inventory.GPUs))
	for i, g := range st.Inventory.GPUs {
		ps.slots[i] = Slot{GPU: g, Free: g.FreeMiB}
	}
	sort.SliceStable(ps.slots, func(i, j int) bool { return ps.slots[i].Index < ps.slots[j].Index })
	for i, s := range ps.slots {
		ps.byUUID[s.UUID] = i
	}
	for _, r := range st.Running {
		for _, u := range r.GPUs {
			if i, ok := ps.byUUID[u]; ok {
				ps.slots[i].Jobs++
				ps.slots[i].Exclusive = ps.slots[i].Exclusive || !r.Shareable
			}
		}
	}
	ps.minNeed = 1<<63 - 1
	for i := range st.Queue {
		if st.Queue[i].GPUs > 0 {
			ps.minNeed = min(ps.minNeed, st.Queue[i].MemPerGPUMiB)
		}
	}
	groups := map[string]int{}
	for _, s := range ps.slots {
		if s.Healthy {
			groups[s.Group]++
		}
	}
	for _, n := range groups {
		ps.maxFit = max(ps.maxFit, n)
	}
	if !p.Gang {
		ps.maxFit = 0
		for _, s := range ps.slots {
			if s.Healthy {
				ps.maxFit++
			}
		}
	}
	ps.filters = p.Filters
	for _, f := range p.Filters {
		if _, isRes := f.(Reserved); !isRes {
			ps.filtersNoRes = append(ps.filtersNoRes, f)
		}
	}
	ps.status = make([]*Status, len(ps.slots))
	ps.scores = make([]int64, len(ps.slots))
	return ps
}

// full says no GPU has memory left for even the smallest request.
func (ps *pass) full() bool {
	for i := range ps.slots {
		if ps.slots[i].Free >= ps.minNeed && ps.slots[i].Healthy {
			return false
		}
	}
	return true
}

// fit chooses GPUs for c.Req among slots, or returns nil. withReserve=false
// ignores reservations (used to plan the head's own reservation).
func (ps *pass) fit(c *Cycle, slots []Slot, withReserve bool) []int {
	n := c.Req.GPUs
	filters := ps.filters
	if !withReserve {
		filters = ps.filtersNoRes
	}
	ps.lastFit = nil
	if withReserve && len(slots) > 0 && &slots[0] == &ps.slots[0] {
		ps.lastFit = c.Req
	}
	ok := 0
	for i := range slots {
		var st *Status
		for _, f := range filters {
			if st = f.Filter(c, &slots[i]); st != nil {
				break
			}
		}
		ps.status[i] = st
		if !st.IsSuccess() {
			continue
		}
		ok++
		var sc int64
		for _, s := range ps.p.Scorers {
			sc += s.Score(c, &slots[i])
		}
		ps.scores[i] = sc
	}
	if ok < n {
		return nil
	}
	better := func(a, b int) bool { // a ranks before b
		if ps.scores[a] != ps.scores[b] {
			return ps.scores[a] > ps.scores[b]
		}
		return a < b
	}
	if n == 1 {
		best := -1
		for i := range slots {
			if ps.status[i].IsSuccess() && (best < 0 || better(i, best)) {
				best = i
			}
		}
		ps.pick = append(ps.pick[:0], best)
		return ps.pick
	}
	cand := ps.pick[:0]
	for i := range slots {
		if ps.status[i].IsSuccess() {
			cand = append(cand, i)
		}
	}
	slices.SortFunc(cand, func(x, y int) int {
		if better(x, y) {
			return -1
		}
		if better(y, x) {
			return 1
		}
		return 0
	})
	if !ps.p.Gang || n > ps.maxFit {
		ps.pick = cand[:n]
		return ps.pick
	}
	// Gang: the group whose best n GPUs score highest in total.
	var bestGroup string
	var bestSum int64
	found := false
	for _, i := range cand {
		g := slots[i].Group
		var sum int64
		k := 0
		for _, j := range cand {
			if slots[j].Group == g && k < n {
				sum += ps.scores[j]
				k++
			}
		}
		if k == n && (!found || sum > bestSum) {
			bestGroup, bestSum, found = g, sum, true
		}
	}
	ps.pick = cand
	if !found {
		return nil
	}
	out := make([]int, 0, n)
	for _, j := range cand {
		if slots[j].Group == bestGroup && len(out) < n {
			out = append(out, j)
		}
	}
	return out
}

// place commits a placement into the pass.
func (ps *pass) place(d *Decision, req *Request, pick []int) {
	d.GPUs = make([]GPU, len(pick))
	uuids := make([]string, len(pick))
	for k, i := range pick {
		s := &ps.slots[i]
		s.Free -= req.MemPerGPUMiB
		s.Jobs++
		s.Exclusive = s.Exclusive || !req.Shareable
		g := s.GPU
		g.FreeMiB = s.Free
		d.GPUs[k] = g
		uuids[k] = s.UUID
	}
	ps.running = append(ps.running, Running{ID: req.ID, GPUs: uuids, MemPerGPUMiB: req.MemPerGPUMiB,
		Priority: req.Priority, Preemptible: req.Preemptible, Shareable: req.Shareable,
		Start: ps.st.Now, Estimate: req.Estimate})
}

// everFits says whether req could run on this machine once everything else
// has ended; a request that never could must not hold a reservation.
func (ps *pass) everFits(req *Request) bool {
	if req.GPUs > ps.maxFit {
		return false
	}
	empty := ps.emptied()
	c := Cycle{Now: ps.st.Now, Req: req, MinNeedMiB: ps.minNeed}
	return ps.fit(&c, empty, false) != nil
}

// emptied is the slots as they would be with every run gone.
func (ps *pass) emptied() []Slot {
	empty := slices.Clone(ps.slots)
	for _, r := range ps.running {
		release(empty, ps.byUUID, r)
	}
	return empty
}

func release(slots []Slot, byUUID map[string]int, r Running) {
	for _, u := range r.GPUs {
		if i, ok := byUUID[u]; ok {
			slots[i].Free += r.MemPerGPUMiB
			slots[i].Jobs--
		}
	}
	for _, u := range r.GPUs { // recompute exclusivity lazily: a freed GPU with no runs is not exclusive
		if i, ok := byUUID[u]; ok && slots[i].Jobs <= 0 {
			slots[i].Jobs, slots[i].Exclusive = 0, false
		}
	}
}

// head handles the highest ranked request that does not fit: preempt spot
// runs for it, or reserve the GPUs it will get when running runs end. It
// returns words for the wait reason.
func (ps *pass) head(d *Decision, c *Cycle) string {
	req := c.Req
	if ps.p.Preempt && !req.Preemptible {
		if victims, pick := ps.victims(c); pick != nil {
			d.Preempt = victims
			ps.reserve(pick, ps.st.Now, req.ID)
			return fmt.Sprintf("stopping spot run(s) %s to make room", strings.Join(victims, ", "))
		}
	}
	if !ps.p.Reserve {
		return ""
	}
	// Release running runs in order of expected end until the head fits.
	ends := make([]Running, 0, len(ps.running))
	for _, r := range ps.running {
		if r.Estimate > 0 {
			ends = append(ends, r)
		}
	}
	slices.SortStableFunc(ends, func(a, b Running) int { return a.Start.Add(a.Estimate).Compare(b.Start.Add(b.Estimate)) })
	sim := slices.Clone(ps.slots)
	for _, r := range ends {
		release(sim, ps.byUUID, r)
		if pick := ps.fit(c, sim, false); pick != nil {
			at := r.Start.Add(r.Estimate)
			if at.Before(ps.st.Now) {
				at = ps.st.Now
			}
			ps.reserve(pick, at, req.ID)
			return fmt.Sprintf("GPU %s reserved for it from about %s", ps.names(pick), at.UTC().Format("Jan 2 15:04"))
		}
	}
	// Some run has no estimate: keep the GPUs it will get, strictly.
	if pick := ps.fit(c, ps.emptied(), false); pick != nil {
		ps.reserve(pick, ps.st.Now, req.ID)
		return fmt.Sprintf("GPU %s reserved for it", ps.names(pick))
	}
	return ""
}

func (ps *pass) reserve(pick []int, until time.Time, id string) {
	ps.ver++
	for _, i := range pick {
		ps.slots[i].ReservedUntil, ps.slots[i].ReservedFor = until, id
	}
}

func (ps *pass) names(pick []int) string {
	s := make([]string, len(pick))
	for k, i := range pick {
		s[k] = fmt.Sprint(ps.slots[i].Index)
	}
	return strings.Join(s, ",")
}

// victims picks the fewest preemptible, lower priority runs (lowest priority
// first, then the most recently started: the least work lost) whose
// stopping lets the request fit.
func (ps *pass) victims(c *Cycle) ([]string, []int) {
	var cands []Running
	for _, r := range ps.st.Running { // only runs started before this pass
		if r.Preemptible && r.Priority < c.Req.Priority && !r.Start.Add(ps.p.PreemptAfter).After(ps.st.Now) {
			cands = append(cands, r)
		}
	}
	slices.SortStableFunc(cands, func(a, b Running) int {
		if x := cmp.Compare(a.Priority, b.Priority); x != 0 {
			return x
		}
		return b.Start.Compare(a.Start)
	})
	sim := slices.Clone(ps.slots)
	var ids []string
	for _, r := range cands {
		release(sim, ps.byUUID, r)
		ids = append(ids, r.ID)
		if pick := ps.fit(c, sim, false); pick != nil {
			return ids, slices.Clone(pick)
		}
	}
	return nil, nil
}

// wait fills a waiting decision and its reason in words, e.g.
// "needs 2×40 GiB on one NVLink group; largest free is 24 GiB on GPU 1; 3 runs ahead".
func (ps *pass) wait(d *Decision, req *Request, extra string, ahead int) {
	if ps.st.Terse {
		d.Wait = "waiting"
		return
	}
	d.Ahead, d.LargestFreeMiB = ahead, -1
	for _, s := range ps.slots {
		if s.Healthy {
			d.LargestFreeMiB = max(d.LargestFreeMiB, s.Free)
		}
	}
	var b strings.Builder
	b.WriteString("needs ")
	b.WriteString(need(*req))
	if ps.p.Gang && req.GPUs > 1 && req.GPUs <= ps.maxFit {
		b.WriteString(" on one NVLink group")
	}
	b.WriteString("; ")
	switch most := ps.mostMiB(); {
	case len(ps.slots) == 0:
		d.Code = WaitNoGPU
		b.WriteString(noGPUs(ps.st.Inventory))
	case req.GPUs > ps.maxFit || req.MemPerGPUMiB > most:
		d.Code = WaitTooBig
		fmt.Fprintf(&b, "this machine can never hold it (%d usable GPU(s)", ps.maxFit)
		fmt.Fprintf(&b, ", at most %s each)", mib(most))
	default:
		d.Code = WaitGPUsBusy
		if d.LargestFreeMiB < req.MemPerGPUMiB {
			d.Code = WaitGPUMemory
		}
		b.WriteString(ps.blockers(req))
	}
	switch {
	case len(d.Preempt) > 0:
		d.Code = WaitPreempting
	case d.Code != WaitNoGPU && d.Code != WaitTooBig && extra != "":
		d.Code = WaitReserved
	}
	if extra != "" {
		b.WriteString("; ")
		b.WriteString(extra)
	}
	switch ahead {
	case 0:
		b.WriteString("; first in line")
	case 1:
		b.WriteString("; 1 run ahead")
	default:
		fmt.Fprintf(&b, "; %d runs ahead", ahead)
	}
	d.Wait = b.String()
}

// mostMiB is the most memory any one GPU has.
func (ps *pass) mostMiB() int64 {
	var most int64
	for _, s := range ps.slots {
		most = max(most, s.TotalMiB, s.FreeMiB)
	}
	return most
}

// blockers says why the GPUs refuse the request now: the largest free
// memory, then how many GPUs each filter refused.
func (ps *pass) blockers(req *Request) string {
	if ps.lastFit != req {
		c := Cycle{Now: ps.st.Now, Req: req, MinNeedMiB: ps.minNeed}
		ps.fit(&c, ps.slots, true)
	}
	largest, at := int64(-1), -1
	count := map[string]int{}
	var reasons []string
	fits := 0
	for i, s := range ps.slots {
		if s.Healthy && s.Free > largest {
			largest, at = s.Free, s.Index
		}
		st := ps.status[i]
		if st.IsSuccess() {
			fits++
			continue
		}
		if st.Plugin == "Memory" {
			continue // said by "largest free"
		}
		r := st.Reason
		if st.Plugin == "Cool" {
			r = fmt.Sprintf("too hot (%.0f °C)", s.TempC)
		}
		if count[r] == 0 {
			reasons = append(reasons, r)
		}
		count[r]++
	}
	var parts []string
	if at >= 0 {
		parts = append(parts, fmt.Sprintf("largest free is %s on GPU %d", mib(largest), at))
	}
	switch {
	case fits >= req.GPUs && ps.p.Gang:
		parts = append(parts, fmt.Sprintf("%d GPUs fit, but not %d on one group", fits, req.GPUs))
	case fits > 0:
		parts = append(parts, fmt.Sprintf("%d of %d fit now", fits, req.GPUs))
	}
	for _, r := range reasons {
		if count[r] == 1 {
			parts = append(parts, "1 GPU "+r)
		} else {
			parts = append(parts, fmt.Sprintf("%d GPUs %s", count[r], r))
		}
	}
	return strings.Join(parts, "; ")
}
