package shepherd

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
)

// pass is one scheduling pass in progress.
type pass struct {
	p       *Policy
	st      *State
	slots   []Slot
	hosts   []HostSlot
	running []Running // earlier placements plus this pass's
	minNeed int64     // smallest per-GPU memory need of a GPU request
	minCPU  int64     // smallest CPU need of a CPU-only request; -1 when none
	// groupOf and hostOf number each slot's linked group (within its host)
	// and host; a placement stays within one host, and a gang within one
	// group when it fits in one.
	groupOf, hostOf   []int
	maxGroup, maxHost int // most healthy GPUs in one group, one host
	groups            int // groups with a healthy GPU
	status            []*Status
	scores            []int64
	pick, cand        []int
	// ver counts changes to slots (placements, reservations).
	ver int
	// filters are the policy's; filtersNoRes leave out Reserved (to plan
	// the head's own reservation). lastFit is the request whose per-GPU
	// statuses ps.status holds for the pass's own slots, if any.
	filters, filtersNoRes []Filter
	lastFit               *Request
	reservedUntil         time.Time // of the pass's reservation (one head per pass)
	demand                DemandMix
	hasDemand             bool
	needCount             map[int64]int
	// Buffers reused from pass to pass.
	byUUID, hostIdx   map[string]int
	groupID           map[[2]string]int
	parents           map[string]bool
	perGroup, perHost []int
	order             []int // placeable GPUs of the inventory, by index
	layoutGPUs        []gpuKey
	layoutHosts       []Host
	sSlots            []Slot
	sHosts            []HostSlot
	ends              []ending
	hostGPUFree       []int64
	text              []byte   // the wait reason being composed
	whys              []Reason // the shapes' reasons (shapeInfo.why)
	refs, refArena    []Refusal
	blockC, mainC     Cycle // blockers' and the pass loop's (not to escape per request)
	// Per-pass figures of wait reasons, worked out once: the largest free
	// memory (as of version lfVer), the most memory of one GPU, the
	// never-fits details, and each slot's "too hot" words.
	lf                     Reason
	lfVer                  int
	most                   int64
	detailGPUs, detailHost string
	hotWords               []string
}

// ending is a running placement and when it is expected to end.
type ending struct {
	at    time.Time
	i     int  // into pass.running
	guess bool // no estimate said so (see expectedEnd)
}

// reset readies the pass for a new State, reusing its buffers. The
// machine's layout (which GPUs, on which hosts and groups) is worked out
// again only when it changed since the previous pass.
func (ps *pass) reset(p *Policy, st *State) {
	ps.p, ps.st, ps.ver, ps.lastFit, ps.reservedUntil = p, st, 0, nil, time.Time{}
	ps.running = append(ps.running[:0], st.Running...)
	ps.minCPU = -1
	if !ps.sameLayout(st.Inventory) {
		ps.layout(st.Inventory)
	}
	for k, i := range ps.order {
		g := &st.Inventory.GPUs[i]
		ps.slots[k] = Slot{GPU: *g, Free: g.FreeMiB, HostIdx: ps.hostOf[k]}
	}
	for i := range ps.hosts {
		h := &ps.hosts[i]
		h.FreeCPUMilli, h.FreeMemMiB = h.CPUMilli, h.MemMiB
	}
	for _, r := range st.Running {
		for _, u := range r.GPUs {
			if i, ok := ps.byUUID[u]; ok {
				ps.slots[i].Jobs++
				ps.slots[i].Exclusive = ps.slots[i].Exclusive || !r.Shareable
				if ps.slots[i].Team == "" {
					ps.slots[i].Team = r.Team
				}
			}
		}
		if r.CPUMilli != 0 || r.MemMiB != 0 {
			if i, ok := ps.hostIdx[r.Host]; ok {
				ps.hosts[i].FreeCPUMilli -= r.CPUMilli
				ps.hosts[i].FreeMemMiB -= r.MemMiB
			}
		}
	}
	ps.lfVer, ps.most, ps.detailGPUs, ps.detailHost = -1, 0, "", ""
	clear(ps.whys)
	ps.whys, ps.refArena = ps.whys[:0], nil
	for i := range ps.slots {
		ps.most = max(ps.most, ps.slots[i].TotalMiB, ps.slots[i].FreeMiB)
	}
	ps.hotWords = grow(ps.hotWords, len(ps.slots))
	clear(ps.hotWords)
	ps.minNeed = 1<<63 - 1
	for i := range st.Queue {
		q := &st.Queue[i]
		if q.GPUs > 0 {
			ps.minNeed = min(ps.minNeed, q.MemPerGPUMiB)
		} else if ps.minCPU < 0 || q.CPUMilli < ps.minCPU {
			ps.minCPU = q.CPUMilli
		}
	}
	ps.filters = p.Filters
	ps.filtersNoRes = ps.filtersNoRes[:0]
	for _, f := range p.Filters {
		if _, isRes := f.(Reserved); !isRes {
			ps.filtersNoRes = append(ps.filtersNoRes, f)
		}
	}
}

// gpuKey is what of a GPU decides the machine's layout.
type gpuKey struct {
	uuid, host, group, parent string
	index                     int
	healthy                   bool
}

// sameLayout says whether inv has the GPUs and hosts of the last layout.
func (ps *pass) sameLayout(inv Inventory) bool {
	if len(inv.GPUs) != len(ps.layoutGPUs) || len(inv.Hosts) != len(ps.layoutHosts) || ps.byUUID == nil {
		return false
	}
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if (gpuKey{g.UUID, g.Host, g.Group, g.Parent, g.Index, g.Healthy}) != ps.layoutGPUs[i] {
			return false
		}
	}
	for i := range inv.Hosts {
		if inv.Hosts[i] != ps.layoutHosts[i] {
			return false
		}
	}
	return true
}

// layout works out the machine's placeable GPUs in index order, its hosts,
// and the groups and hosts each GPU belongs to.
func (ps *pass) layout(inv Inventory) {
	if ps.byUUID == nil {
		ps.byUUID, ps.hostIdx, ps.groupID, ps.parents = map[string]int{}, map[string]int{}, map[[2]string]int{}, map[string]bool{}
	}
	clear(ps.byUUID)
	clear(ps.hostIdx)
	clear(ps.groupID)
	clear(ps.parents)
	ps.layoutGPUs = ps.layoutGPUs[:0]
	for _, g := range inv.GPUs {
		ps.layoutGPUs = append(ps.layoutGPUs, gpuKey{g.UUID, g.Host, g.Group, g.Parent, g.Index, g.Healthy})
		if g.Parent != "" {
			ps.parents[g.Parent] = true
		}
	}
	ps.layoutHosts = append(ps.layoutHosts[:0], inv.Hosts...)
	ps.hosts = ps.hosts[:0]
	for _, h := range inv.Hosts {
		ps.addHost(h, true)
	}
	ps.order = ps.order[:0]
	for i, g := range inv.GPUs {
		if len(ps.parents) > 0 && ps.parents[g.UUID] {
			continue // a GPU split into MIG slices is offered as its slices only
		}
		ps.order = append(ps.order, i)
	}
	sort.SliceStable(ps.order, func(a, b int) bool { return inv.GPUs[ps.order[a]].Index < inv.GPUs[ps.order[b]].Index })
	n := len(ps.order)
	ps.slots = grow(ps.slots, n)
	ps.groupOf, ps.hostOf = grow(ps.groupOf, n), grow(ps.hostOf, n)
	for k, i := range ps.order {
		g := &inv.GPUs[i]
		ps.byUUID[g.UUID] = k
		ps.hostOf[k] = ps.addHost(Host{Name: g.Host}, false)
	}
	if len(ps.hosts) == 0 {
		ps.addHost(Host{}, false) // CPU-only stages go on the machine itself
	}
	ps.perGroup, ps.perHost = ps.perGroup[:0], grow(ps.perHost, len(ps.hosts))
	clear(ps.perHost)
	for k, i := range ps.order {
		g := &inv.GPUs[i]
		key := [2]string{g.Host, g.Group}
		id, ok := ps.groupID[key]
		if !ok {
			id = len(ps.groupID)
			ps.groupID[key] = id
			ps.perGroup = append(ps.perGroup, 0)
		}
		ps.groupOf[k] = id
		if g.Healthy {
			ps.perGroup[id]++
			ps.perHost[ps.hostOf[k]]++
		}
	}
	ps.maxGroup, ps.maxHost, ps.groups = 0, 0, 0
	for _, n := range ps.perGroup {
		ps.maxGroup = max(ps.maxGroup, n)
		if n > 0 {
			ps.groups++
		}
	}
	for _, n := range ps.perHost {
		ps.maxHost = max(ps.maxHost, n)
	}
	ps.status = grow(ps.status, n)
	ps.scores = grow(ps.scores, n)
}

// grow returns s resized to n, reusing its array when large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (ps *pass) addHost(h Host, tracked bool) int {
	if i, ok := ps.hostIdx[h.Name]; ok {
		if tracked {
			ps.hosts[i] = HostSlot{Host: h, FreeCPUMilli: h.CPUMilli, FreeMemMiB: h.MemMiB, tracked: true}
		}
		return i
	}
	ps.hostIdx[h.Name] = len(ps.hosts)
	ps.hosts = append(ps.hosts, HostSlot{Host: h, FreeCPUMilli: h.CPUMilli, FreeMemMiB: h.MemMiB, tracked: tracked})
	return len(ps.hosts) - 1
}

// scratch returns copies of the pass's slots and hosts in reused buffers,
// for planning (a head's reservation, preemption, everFits). Only one
// scratch copy is live at a time.
func (ps *pass) scratch() ([]Slot, []HostSlot) {
	ps.sSlots = append(ps.sSlots[:0], ps.slots...)
	ps.sHosts = append(ps.sHosts[:0], ps.hosts...)
	return ps.sSlots, ps.sHosts
}

func (ps *pass) cycle(req *Request) Cycle {
	c := Cycle{Now: ps.st.Now, Req: req, MinNeedMiB: ps.minNeed, Hosts: ps.hosts}
	if ps.hasDemand {
		c.Demand = &ps.demand
	}
	return c
}

// setDemand computes the mix of memory needs of the queue and the running
// placements, for scorers that weigh free memory by it.
func (ps *pass) setDemand(shapes []shapeInfo) {
	ps.hasDemand = false
	for _, s := range ps.p.Scorers {
		if _, ok := s.(Fragmentation); ok {
			ps.hasDemand = true
		}
	}
	if !ps.hasDemand {
		return
	}
	if ps.needCount == nil {
		ps.needCount = map[int64]int{}
	}
	clear(ps.needCount)
	for i := range shapes {
		if r := &shapes[i].rep; r.GPUs > 0 {
			ps.needCount[r.MemPerGPUMiB] += r.GPUs * shapes[i].n
		}
	}
	for i := range ps.st.Running {
		r := &ps.st.Running[i]
		ps.needCount[r.MemPerGPUMiB] += len(r.GPUs)
	}
	ps.demand.set(ps.needCount)
}

// full says no GPU has memory left for even the smallest GPU request, and
// no host has CPUs for the smallest CPU-only one.
func (ps *pass) full() bool {
	for i := range ps.slots {
		if ps.slots[i].Free >= ps.minNeed && ps.slots[i].Healthy {
			return false
		}
	}
	if ps.minCPU >= 0 {
		for _, h := range ps.hosts {
			if !h.tracked || h.FreeCPUMilli >= ps.minCPU {
				return false
			}
		}
	}
	return true
}

// anyShapeFits says whether a request of some shape in the queue could be
// placed now (each with its shortest estimate, the most a filter lets
// through): when none could, a terse pass stops. It asks only for a queue
// of few shapes, where asking costs less than walking the rest of it.
func (ps *pass) anyShapeFits(shapes []shapeInfo) bool {
	if len(shapes) > 64 {
		return true
	}
	for i := range shapes {
		si := &shapes[i]
		if si.deadVer == ps.ver {
			continue
		}
		r := si.rep
		if si.minEst < 1<<63-1 {
			r.EstimateHigh = si.minEst
		}
		c := ps.cycle(&r)
		if _, h := ps.fit(&c, ps.slots, ps.hosts, true); h >= 0 {
			return true
		}
	}
	return false
}

// hostFits says whether a host has the CPUs and memory req asks for.
func hostFits(h *HostSlot, req *Request) bool {
	if !h.tracked {
		return true
	}
	return (h.CPUMilli == 0 || h.FreeCPUMilli >= req.CPUMilli) && (h.MemMiB == 0 || h.FreeMemMiB >= req.MemMiB)
}

// fit chooses GPUs for c.Req among slots (on hosts), returning them and
// their host, or host -1 when it does not fit. withReserve=false ignores
// reservations (used to plan the head's own reservation).
func (ps *pass) fit(c *Cycle, slots []Slot, hosts []HostSlot, withReserve bool) ([]int, int) {
	c.Hosts = hosts
	n := c.Req.GPUs
	if n <= 0 {
		return nil, ps.cpuHost(c.Req, slots, hosts)
	}
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
		return nil, -1
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
		return ps.pick, slots[best].HostIdx
	}
	cand := ps.cand[:0]
	for i := range slots {
		if ps.status[i].IsSuccess() {
			cand = append(cand, i)
		}
	}
	ps.cand = cand
	slices.SortFunc(cand, func(x, y int) int {
		if better(x, y) {
			return -1
		}
		if better(y, x) {
			return 1
		}
		return 0
	})
	unit := ps.hostOf
	if ps.p.Gang && n <= ps.maxGroup {
		unit = ps.groupOf
	}
	// The unit (group, or host) whose best n GPUs score highest in total.
	bestUnit, found := -1, false
	var bestSum int64
	for _, i := range cand {
		u := unit[i]
		var sum int64
		k := 0
		for _, j := range cand {
			if unit[j] == u && k < n {
				sum += ps.scores[j]
				k++
			}
		}
		if k == n && (!found || sum > bestSum) {
			bestUnit, bestSum, found = u, sum, true
		}
		if k == len(cand) {
			break // every candidate is in this one unit
		}
	}
	if !found {
		return nil, -1
	}
	out := ps.pick[:0]
	for _, j := range cand {
		if unit[j] == bestUnit && len(out) < n {
			out = append(out, j)
		}
	}
	ps.pick = out
	return out, slots[out[0]].HostIdx
}

// cpuHost chooses the host of a CPU-only request: the one with the least
// CPU left that fits (best fit) — with SpareGPUHosts, first the one whose
// GPUs have the least free memory, since CPUs taken on a host with free
// GPUs may leave those GPUs with no CPUs for the stages that need them.
func (ps *pass) cpuHost(req *Request, slots []Slot, hosts []HostSlot) int {
	var gpuFree []int64
	if ps.p.SpareGPUHosts && len(hosts) > 1 {
		gpuFree = grow(ps.hostGPUFree, len(hosts))
		clear(gpuFree)
		for i := range slots {
			if slots[i].Healthy {
				gpuFree[slots[i].HostIdx] += slots[i].Free
			}
		}
		ps.hostGPUFree = gpuFree
	}
	best := -1
	for i := range hosts {
		if !hostFits(&hosts[i], req) {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		if gpuFree != nil && gpuFree[i] != gpuFree[best] {
			if gpuFree[i] < gpuFree[best] {
				best = i
			}
			continue
		}
		if hosts[i].FreeCPUMilli < hosts[best].FreeCPUMilli {
			best = i
		}
	}
	return best
}

// place commits a placement into the pass.
func (ps *pass) place(d *Decision, req *Request, pick []int, host int) {
	ps.ver++
	d.Reason, d.Wait = Reason{}, ""
	if len(pick) > 0 {
		d.GPUs = make([]GPU, len(pick))
	}
	for k, i := range pick {
		s := &ps.slots[i]
		s.Free -= req.MemPerGPUMiB
		s.Jobs++
		s.Exclusive = s.Exclusive || !req.Shareable
		if s.Team == "" {
			s.Team = req.Team
		}
		g := s.GPU
		g.FreeMiB = s.Free
		d.GPUs[k] = g
	}
	h := &ps.hosts[host]
	h.FreeCPUMilli -= req.CPUMilli
	h.FreeMemMiB -= req.MemMiB
	d.Host = h.Name
	ps.running = append(ps.running, req.Placement(d.GPUs, h.Name, ps.st.Now))
}

// everFits says whether req could run on this machine once everything else
// has ended; a request that never could must not hold a reservation.
func (ps *pass) everFits(req *Request) bool {
	if req.GPUs > ps.maxHost {
		return false
	}
	slots, hosts := ps.emptied()
	c := ps.cycle(req)
	_, h := ps.fit(&c, slots, hosts, false)
	return h >= 0
}

// emptied is the slots and hosts as they would be with every run gone.
func (ps *pass) emptied() ([]Slot, []HostSlot) {
	slots, hosts := ps.scratch()
	for i := range ps.running {
		ps.release(slots, hosts, &ps.running[i])
	}
	return slots, hosts
}

func (ps *pass) release(slots []Slot, hosts []HostSlot, r *Running) {
	for _, u := range r.GPUs {
		if i, ok := ps.byUUID[u]; ok {
			slots[i].Free += r.MemPerGPUMiB
			slots[i].Jobs--
			if slots[i].Jobs <= 0 {
				// A freed GPU with no runs is not exclusive (exclusivity
				// of one that still has runs is kept: conservative).
				slots[i].Jobs, slots[i].Exclusive, slots[i].Team = 0, false, ""
			}
		}
	}
	if r.CPUMilli != 0 || r.MemMiB != 0 {
		if i, ok := ps.hostIdx[r.Host]; ok {
			hosts[i].FreeCPUMilli += r.CPUMilli
			hosts[i].FreeMemMiB += r.MemMiB
		}
	}
}

// expectedEnd is when a running placement is expected to free its GPUs:
// its start plus its estimate; for one without an estimate, or already
// past it, as long again from now as it has run so far (a run that has
// run long tends to run on: the heavy tail of real traces), at least a
// minute — a guess.
func (ps *pass) expectedEnd(r *Running) (end time.Time, guess bool) {
	now := ps.st.Now
	if r.Estimate > 0 {
		if end := r.Start.Add(r.Estimate); end.After(now) {
			return end, false
		}
	}
	return now.Add(max(now.Sub(r.Start)+r.Attained, time.Minute)), true
}

// head handles the highest ranked request that does not fit: preempt spot
// runs for it, or reserve the GPUs it will get when running runs end. What
// it did goes into the decision's reason.
func (ps *pass) head(d *Decision, c *Cycle) {
	req := c.Req
	if ps.p.Preempt {
		if victims, pick := ps.victims(c); pick != nil {
			d.Preempt = victims
			d.Reason.Preempting = victims
			ps.reserve(pick, ps.st.Now, req.ID)
			return
		}
	}
	if !ps.p.Reserve {
		return
	}

	// Release running runs in order of expected end until the head fits.
	ends := ps.ends[:0]
	for i := range ps.running {
		at, guess := ps.expectedEnd(&ps.running[i])
		ends = append(ends, ending{at, i, guess})
	}
	slices.SortStableFunc(ends, func(a, b ending) int { return a.at.Compare(b.at) })
	ps.ends = ends
	slots, hosts := ps.scratch()
	guessed := false
	for _, e := range ends {
		guessed = guessed || e.guess
		ps.release(slots, hosts, &ps.running[e.i])
		if pick, h := ps.fit(c, slots, hosts, false); h >= 0 {
			from := e.at
			if ps.p.HoldLimit > 0 && from.Sub(ps.st.Now) > ps.p.HoldLimit {
				return // too far out to hold GPUs idle for it
			}
			pick = slices.Clone(pick)
			ps.reserve(pick, from, req.ID)
			d.Reason.Reserved = ps.indices(pick)
			if !guessed {
				d.Reason.ReservedFrom = from // a time only estimates can tell
			}
			return
		}
	}
}

func (ps *pass) reserve(pick []int, until time.Time, id string) {
	ps.ver++
	ps.reservedUntil = until
	for _, i := range pick {
		ps.slots[i].ReservedUntil, ps.slots[i].ReservedFor = until, id
	}
}

func (ps *pass) indices(pick []int) []int {
	out := make([]int, len(pick))
	for k, i := range pick {
		out[k] = ps.slots[i].Index
	}
	return out
}

// victims picks the fewest preemptible runs (lowest priority first, then
// the most recently started: the least work lost) of lower priority — or,
// with PreemptForService, of the same priority and a higher service level
// — whose stopping lets the request fit.
func (ps *pass) victims(c *Cycle) ([]string, []int) {
	now := ps.st.Now
	reqLevel := ps.p.level(c.Req.GPUs, c.Req.Attained)
	var cands []Running
	for _, r := range ps.st.Running { // only runs started before this pass
		if !r.Preemptible || r.Start.Add(ps.p.PreemptAfter).After(now) || r.Kept && r.Team != c.Req.Team {
			continue
		}
		lower := r.Priority < c.Req.Priority
		if ps.p.PreemptLowerServed && lower && ps.p.level(len(r.GPUs), r.Attained+now.Sub(r.Start)) <= reqLevel {
			lower = false
		}
		served := ps.p.PreemptForService && r.Priority == c.Req.Priority &&
			ps.p.level(len(r.GPUs), r.Attained+now.Sub(r.Start)) > reqLevel
		if !lower && !served {
			continue
		}
		cands = append(cands, r)
	}
	slices.SortStableFunc(cands, func(a, b Running) int {
		if x := cmp.Compare(a.Priority, b.Priority); x != 0 {
			return x
		}
		if ps.p.PreemptMostServed {
			sa, sb := a.Attained+now.Sub(a.Start), b.Attained+now.Sub(b.Start)
			if x := cmp.Compare(sb*time.Duration(len(b.GPUs)), sa*time.Duration(len(a.GPUs))); x != 0 {
				return x
			}
		}
		return b.Start.Compare(a.Start)
	})
	slots, hosts := ps.scratch()
	var ids []string
	var left time.Duration // the victims' expected work left, GPU-time
	widest := 0
	for i := range cands {
		r := &cands[i]
		ps.release(slots, hosts, r)
		ids = append(ids, r.ID)
		end, _ := ps.expectedEnd(r)
		left += end.Sub(now) * time.Duration(max(len(r.GPUs), 1))
		widest = max(widest, len(r.GPUs))
		if pick, h := ps.fit(c, slots, hosts, false); h >= 0 {
			if ps.p.PreemptLonger && !c.Req.Preemptible {
				n := time.Duration(max(c.Req.GPUs, 1))
				if c.Req.Estimate > 0 && c.Req.Estimate*n > left || c.Req.Estimate <= 0 && c.Req.GPUs > widest {
					return nil, nil
				}
			}
			return ids, slices.Clone(pick)
		}
	}
	return nil, nil
}

// wait fills a waiting decision's reason: its code, parameters and words,
// e.g. "needs 2×40 GiB on one linked group; largest free is 24 GiB on GPU
// 1; 3 runs ahead". Requests of one shape that wait at the same state of
// the pass wait for the same reasons: the first one's is kept (si) and
// reused, which keeps a pass over a long queue fast.
func (ps *pass) wait(d *Decision, req *Request, ahead int, si *shapeInfo) {
	if ps.st.Terse {
		d.Reason.Code, d.Reason.Text, d.Wait = WaitQueued, "waiting", "waiting"
		return
	}
	r := &d.Reason
	preempting, reserved, from := r.Preempting, r.Reserved, r.ReservedFrom
	beforeRes := ps.endsBeforeReservations(req)
	if si != nil && si.why > 0 && si.whyVer == ps.ver && si.whyBeforeRes == beforeRes {
		*r = ps.whys[si.why-1]
	} else {
		*r = Reason{NeedGPUs: req.GPUs, NeedMiB: req.MemPerGPUMiB, NeedCPUMilli: req.CPUMilli, NeedMemMiB: req.MemMiB, LargestFreeGPU: -1}
		switch {
		case req.GPUs <= 0:
			ps.hostReason(r, req, -1)
		case len(ps.slots) == 0:
			r.Code, r.Detail = WaitNoGPUs, ps.st.Inventory.Reason
		case !ps.neverFits(r, req):
			ps.blockers(r, req)
		}
		gang := ps.p.Gang && req.GPUs > 1 && req.GPUs <= ps.maxGroup && ps.groups > 1
		// The sentence is composed in one buffer and made a string once;
		// the body the shape keeps is a prefix of it.
		buf := r.appendBody(ps.text[:0], gang)
		n := len(buf)
		r.Preempting, r.Reserved, r.ReservedFrom, r.Ahead = preempting, reserved, from, ahead
		buf = appendPosition(r.appendAction(buf), ahead)
		ps.text = buf
		r.Text = string(buf)
		d.Wait = r.Text
		if si != nil {
			if si.why == 0 {
				ps.whys = append(ps.whys, Reason{})
				si.why = int32(len(ps.whys))
			}
			why := &ps.whys[si.why-1]
			*why, si.whyVer, si.whyBeforeRes = *r, ps.ver, beforeRes
			why.Text = r.Text[:n]
			why.Preempting, why.Reserved, why.ReservedFrom, why.Ahead = nil, nil, time.Time{}, 0
		}
		return
	}
	r.Preempting, r.Reserved, r.ReservedFrom, r.Ahead = preempting, reserved, from, ahead
	buf := append(ps.text[:0], r.Text...)
	buf = appendPosition(r.appendAction(buf), ahead)
	ps.text = buf
	r.Text = string(buf)
	d.Wait = r.Text
}

// endsBeforeReservations says whether req's estimate lets it backfill the
// GPUs reserved in this pass (which the Reserved filter decides by).
func (ps *pass) endsBeforeReservations(req *Request) bool {
	if ps.reservedUntil.IsZero() {
		return false
	}
	est := effEst(req)
	return est < 1<<63-1 && !ps.st.Now.Add(est).After(ps.reservedUntil)
}

// neverFits fills r when this machine could not hold req even empty.
func (ps *pass) neverFits(r *Reason, req *Request) bool {
	switch {
	case req.GPUs > ps.maxHost || req.MemPerGPUMiB > ps.most:
		if ps.detailGPUs == "" {
			ps.detailGPUs = fmt.Sprintf("%d usable GPU(s), at most %s each", ps.maxHost, mib(ps.most))
		}
		r.Detail = ps.detailGPUs
	case !ps.anyHostHolds(req):
		r.Detail = ps.hostDetail()
	default:
		return false
	}
	r.Code = WaitNeverFits
	ps.largestFree(r)
	return true
}

// hostDetail is what a request that no host could ever hold is told.
func (ps *pass) hostDetail() string {
	if ps.detailHost == "" {
		h := ps.hosts[0]
		ps.detailHost = fmt.Sprintf("%s CPUs and %s of memory for stages", cpus(h.CPUMilli), mib(h.MemMiB))
	}
	return ps.detailHost
}

// largestFree fills r with the most free memory on one healthy GPU, the
// figure a message about memory speaks of. It changes only when a GPU
// does (ps.ver).
func (ps *pass) largestFree(r *Reason) {
	if ps.lfVer != ps.ver {
		ps.lfVer = ps.ver
		lf := &ps.lf
		lf.LargestFreeMiB, lf.LargestFreeGPU, lf.LargestFreeOn = 0, -1, ""
		for i := range ps.slots {
			s := &ps.slots[i]
			if s.Healthy && (lf.LargestFreeGPU < 0 || s.Free > lf.LargestFreeMiB) {
				lf.LargestFreeMiB, lf.LargestFreeGPU, lf.LargestFreeOn = s.Free, s.Index, s.Label
			}
		}
		if lf.LargestFreeGPU >= 0 && lf.LargestFreeOn == "" {
			lf.LargestFreeOn = "GPU " + strconv.Itoa(lf.LargestFreeGPU)
		}
	}
	if ps.lf.LargestFreeGPU >= 0 {
		r.LargestFreeMiB, r.LargestFreeGPU, r.LargestFreeOn = ps.lf.LargestFreeMiB, ps.lf.LargestFreeGPU, ps.lf.LargestFreeOn
	}
}

// anyHostHolds says whether some host's capacity holds req's CPUs and memory.
func (ps *pass) anyHostHolds(req *Request) bool {
	for _, h := range ps.hosts {
		if !h.tracked || (h.CPUMilli == 0 || h.CPUMilli >= req.CPUMilli) && (h.MemMiB == 0 || h.MemMiB >= req.MemMiB) {
			return true
		}
	}
	return false
}

// hostReason fills r with what of a host holds req back: the given host, or
// (at < 0) the one closest to holding it.
func (ps *pass) hostReason(r *Reason, req *Request, at int) {
	if !ps.anyHostHolds(req) {
		r.Code = WaitNeverFits
		r.Detail = ps.hostDetail()
		return
	}
	if at < 0 {
		for i, h := range ps.hosts {
			if h.tracked && (at < 0 || h.FreeCPUMilli > ps.hosts[at].FreeCPUMilli) {
				at = i
			}
		}
	}
	if at < 0 {
		r.Code = WaitQueued
		return
	}
	h := ps.hosts[at]
	r.CPUMilliFree, r.CPUMilliTotal, r.MemMiBFree, r.MemMiBTotal = h.FreeCPUMilli, h.CPUMilli, h.FreeMemMiB, h.MemMiB
	r.Code = WaitHostMemory
	if h.CPUMilli > 0 && h.FreeCPUMilli < req.CPUMilli {
		r.Code = WaitCPU
	}
}

// causeOrder breaks ties between causes that refused as many GPUs: the
// first is the more useful to hear.
var causeOrderArr = [...]ReasonCode{WaitGPUMemory, WaitReserved, WaitGPUBusy, WaitCPU, WaitHostMemory, WaitGPUHot, WaitGPUUnhealthy}

var causeOrder = causeOrderArr[:]

func causeIndex(c ReasonCode) int {
	switch c { // as causeOrderArr
	case WaitReserved:
		return 1
	case WaitGPUBusy:
		return 2
	case WaitCPU:
		return 3
	case WaitHostMemory:
		return 4
	case WaitGPUHot:
		return 5
	case WaitGPUUnhealthy:
		return 6
	}
	return 0
}

// keepRefusals copies refs into the pass's arena, where the reasons of a
// pass share a few allocations; nil when there are none. Chunks are never
// written again once handed out (a new pass starts new ones).
func (ps *pass) keepRefusals(refs []Refusal) []Refusal {
	n := len(refs)
	if n == 0 {
		return nil
	}
	if len(ps.refArena)+n > cap(ps.refArena) {
		ps.refArena = make([]Refusal, 0, max(256, n))
	}
	k := len(ps.refArena)
	ps.refArena = append(ps.refArena, refs...)
	return ps.refArena[k : k+n : k+n]
}

// blockers fills r with why the GPUs refuse req now: the largest free
// memory, how many GPUs fit, and how many each filter refused.
func (ps *pass) blockers(r *Reason, req *Request) {
	if ps.lastFit != req {
		ps.blockC = ps.cycle(req)
		ps.fit(&ps.blockC, ps.slots, ps.hosts, true)
	}
	var count [len(causeOrderArr)]int
	hostAt := -1
	refs := ps.refs[:0]
	ps.largestFree(r)
	for i := range ps.slots {
		s := &ps.slots[i]
		st := ps.status[i]
		if st.IsSuccess() {
			r.Fit++
			continue
		}
		count[causeIndex(st.Cause)]++
		switch st.Cause {
		case WaitGPUMemory:
			continue // said by "largest free"
		case WaitCPU, WaitHostMemory:
			hostAt = s.HostIdx
			continue // said in the host's words
		}
		words := st.Reason
		if st.Cause == WaitGPUHot {
			if ps.hotWords[i] == "" {
				ps.hotWords[i] = fmt.Sprintf("too hot (%.0f °C)", s.TempC)
			}
			words = ps.hotWords[i]
		}
		k := slices.IndexFunc(refs, func(f Refusal) bool { return f.Words == words })
		if k < 0 {
			refs = append(refs, Refusal{Cause: st.Cause, Words: words})
			k = len(refs) - 1
		}
		refs[k].GPUs++
	}
	ps.refs = refs
	r.Refusals = ps.keepRefusals(refs)
	if r.Fit >= req.GPUs {
		r.Code = WaitGroup
		return
	}
	best := -1
	for k, c := range causeOrder {
		if count[k] > best {
			r.Code, best = c, count[k]
		}
	}
	if r.Code == WaitCPU || r.Code == WaitHostMemory {
		ps.hostReason(r, req, hostAt)
	}
}
