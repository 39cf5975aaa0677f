package shepherd

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// NoLimit is a Team's BorrowLimit or LendLimit that does not limit.
const NoLimit = -1

// Team is one team's part of a shared machine, as Kueue's cohorts give
// it: Nominal GPUs are its own; what it leaves idle is lent to the others,
// who may hold up to BorrowLimit GPUs above their own Nominal; a borrowed
// GPU is reclaimed (its run preempted) when the owner wants it back.
type Team struct {
	Name    string
	Nominal float64 // GPUs owed to it; a team holds each GPU its runs are on
	// BorrowLimit is the most GPUs above Nominal it may hold (NoLimit: as
	// many as are idle); LendLimit the most of its idle Nominal others may
	// borrow (NoLimit: all of it). The rest of its idle share stays idle,
	// kept for it.
	BorrowLimit float64
	LendLimit   float64
}

// Teams shares a machine among teams: a request's and a running
// placement's Team name it. A request of a team not listed has no share
// (Nominal 0): it only ever borrows.
type Teams struct {
	Teams []Team
	// Usage is each team's decayed GPU-seconds (Usage.Of), which orders the
	// teams that borrow: the one that used least against its share first
	// (Slurm's fair-share factor). Nil: no order among them.
	Usage map[string]float64
}

// Tiers a sharing pass ranks requests in, before priority: within the
// team's share, then borrowers by fair share (tierBorrow + 0..fairLevels-1).
const (
	tierShare  = 16
	tierBorrow = 1
	fairLevels = 4
)

// team is one team's state in a sharing pass.
type team struct {
	Team
	held   float64 // GPU equivalents its running placements hold
	kept   float64 // of those, within its share (not borrowed)
	queued float64 // of its requests ranked within its share so far
	asked  float64 // of its requests ranked as borrowers so far
	fair   int     // fair-share level, 0 (used most) .. fairLevels-1
}

// Equiv is the GPUs' worth a placement of gpus GPUs with memMiB each
// uses, for charging its team's usage (Usage): a whole GPU for each it may
// not share, else the part of a GPU's memory (of totalMiB; unknown counts
// whole) it holds. Against a team's share, a GPU counts whole.
func Equiv(gpus int, memMiB, totalMiB int64, shareable bool) float64 {
	if !shareable || totalMiB <= 0 || memMiB <= 0 {
		return float64(gpus)
	}
	return float64(gpus) * min(1, float64(memMiB)/float64(totalMiB))
}

// Borrowing is a running placement's part in a sharing pass.
type Borrowing struct {
	ID       string
	Team     string
	Borrowed bool // held beyond its team's Nominal: the first to be reclaimed
}

// sharing is the state of one sharing pass: the teams and what each
// holds, which runs borrow, and the requests it ranks.
type sharing struct {
	teams    map[string]*team
	capacity float64 // GPUs of the machine
	borrowed map[string]bool
}

func newSharing(st *State) *sharing {
	s := &sharing{teams: map[string]*team{}, borrowed: map[string]bool{}}
	// A team holds physical GPUs: a MIG slice counts as its GPU.
	gpuOf := map[string]string{}
	for _, g := range st.Inventory.GPUs {
		if g.Parent != "" {
			gpuOf[g.UUID] = g.Parent
			continue
		}
		s.capacity++
	}
	for _, t := range st.Teams.Teams {
		s.teams[t.Name] = &team{Team: t}
	}
	for i := range st.Queue {
		s.team(st.Queue[i].Team)
	}
	byTeam := map[string][]*Running{}
	for i := range st.Running {
		r := &st.Running[i]
		s.team(r.Team)
		byTeam[r.Team] = append(byTeam[r.Team], r)
	}
	// A team holds the GPUs its runs are on (OneTeam gives no other team a
	// place on them). Within a team, the runs started last that take a GPU
	// beyond its share are the ones that borrow: its first Nominal GPUs are
	// its own, and a run beside its own team's on one of them borrows
	// nothing.
	for _, name := range sortedNames(byTeam) {
		rs := byTeam[name]
		slices.SortStableFunc(rs, func(a, b *Running) int {
			if c := a.Start.Compare(b.Start); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		t := s.teams[name]
		on := map[string]bool{}
		for _, r := range rs {
			added := 0
			for _, u := range r.GPUs {
				if p, ok := gpuOf[u]; ok {
					u = p
				}
				if !on[u] {
					on[u] = true
					added++
				}
			}
			if added > 0 && float64(len(on)) > t.Nominal+1e-9 {
				s.borrowed[r.ID] = true
			} else {
				t.kept += float64(added)
			}
		}
		t.held = float64(len(on))
	}
	s.fairLevels(st.Teams.Usage)
	return s
}

// sortedNames are a map's keys in order: sums and walks over teams must
// not depend on map order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// keptIdle is the idle share that lending limits keep from borrowers now:
// each team's share less what it holds, what this pass gave it, and what
// it lends.
func (s *sharing) keptIdle() float64 {
	v := 0.0
	for _, n := range sortedNames(s.teams) {
		t := s.teams[n]
		if t.LendLimit >= 0 {
			v += max(0, t.Nominal-t.held-t.queued-t.LendLimit)
		}
	}
	return v
}

// team returns the pass's state of a team by name, with no share when it
// is not listed.
func (s *sharing) team(name string) *team {
	t := s.teams[name]
	if t == nil {
		t = &team{Team: Team{Name: name, BorrowLimit: NoLimit, LendLimit: NoLimit}}
		s.teams[name] = t
	}
	return t
}

// equivRunning and equivRequest are the GPUs a placement holds: whole,
// since no other team may share them.
func (s *sharing) equivRunning(r *Running) float64 { return float64(len(r.GPUs)) }

func (s *sharing) equivRequest(r *Request) float64 { return float64(r.GPUs) }

// fairLevels sets each team's fair-share level from its factor
// (FairShare), cut into fairLevels levels.
func (s *sharing) fairLevels(usage map[string]float64) {
	names := sortedNames(s.teams)
	teams := make([]Team, len(names))
	for i, n := range names {
		teams[i] = s.teams[n].Team
	}
	f := FairShare(teams, usage)
	for _, n := range names {
		s.teams[n].fair = min(fairLevels-1, int(f[n]*fairLevels))
	}
}

// FairShare is each team's fair-share factor from its decayed usage
// against its share: F = 2^(−U/S), U and S normalised over the teams
// (Slurm's classic factor): 1 for a team that used nothing, 0.5 for one
// that used exactly its share, towards 0 the more it used beyond it; a
// team without a share that used anything is at 0.
func FairShare(teams []Team, usage map[string]float64) map[string]float64 {
	var uSum, sSum float64
	for _, t := range teams {
		uSum += usage[t.Name]
		sSum += t.Nominal
	}
	out := make(map[string]float64, len(teams))
	for _, t := range teams {
		f := 1.0
		if uSum > 0 {
			share := 0.0
			if sSum > 0 {
				share = t.Nominal / sSum
			}
			u := usage[t.Name] / uSum
			switch {
			case share > 0:
				f = math.Exp2(-u / share)
			case u > 0:
				f = 0
			}
		}
		out[t.Name] = f
	}
	return out
}

// lent is what all teams hold beyond their Nominal: the GPUs lent.
func (s *sharing) lent() float64 {
	v := 0.0
	for _, n := range sortedNames(s.teams) {
		t := s.teams[n]
		v += max(0, t.held-t.Nominal)
	}
	return v
}

// scheduleTeams is a pass with st.Teams set: requests within their team's
// share rank first; a request beyond it borrows idle GPUs only within its
// team's BorrowLimit and the others' LendLimits, by fair share; and a
// request within its share that does not fit has borrowed GPUs reclaimed
// for it (their runs preempted, whatever their own priority).
func (sc *Scheduler) scheduleTeams(st State) []Decision {
	sh := newSharing(&st)
	// Requests are taken in the policy's own order to tell which lie
	// within their team's share: on a partition of its own, the team's
	// queue would go in that order too.
	order := sc.p.Rank(st.Now, st.Queue)
	out := make([]Decision, len(st.Queue))
	inner := make([]Request, 0, len(st.Queue))
	index := make([]int, 0, len(st.Queue)) // inner position -> queue position
	tiers := make([]int, len(st.Queue))
	held, admitted := sh.heldAll(), 0.0
	for _, i := range order {
		req := st.Queue[i]
		t := sh.team(req.Team)
		e := sh.equivRequest(&req)
		switch {
		case t.kept+t.queued+e <= t.Nominal+1e-9:
			// Within its share, counting only what it holds within it:
			// its own borrowed runs are reclaimed for it as others' are.
			t.queued += e
			admitted += e
			tiers[i] = tierShare
		case t.BorrowLimit >= 0 && t.held+t.queued+t.asked+e > t.Nominal+t.BorrowLimit+1e-9:
			out[i] = sh.waitShare(&req, t, WaitTeamBorrow, st.Terse)
			continue
		case sh.keptIdle() > 0 && held+admitted+e > sh.capacity-sh.keptIdle()+1e-9:
			// Lending limits keep part of an idle share idle: what this
			// pass admits counts against what is left to lend.
			out[i] = sh.waitShare(&req, t, WaitTeamShare, st.Terse)
			continue
		default:
			tiers[i] = tierBorrow + t.fair
			t.asked += e
			admitted += e
		}
		req.Tier = tiers[i]
		inner = append(inner, req)
		index = append(index, i)
	}
	running := make([]Running, len(st.Running))
	copy(running, st.Running)
	for k := range running {
		// A spot run within its team's share may be preempted only for
		// its own team's sake, as on a partition of its own; runs that
		// borrow are reclaimed below, whatever their own flag.
		running[k].Kept = !sh.borrowed[running[k].ID]
		running[k].Preemptible = running[k].Preemptible || sh.borrowed[running[k].ID]
	}
	in := st
	in.Queue, in.Running, in.Teams = inner, running, nil
	if sc.inner == nil {
		p := sc.p
		p.Filters = append(slices.Clone(p.Filters), OneTeam{})
		p.Scorers = append(slices.Clone(p.Scorers), OwnGPUs{})
		sc.inner, sc.probe = NewScheduler(p), NewScheduler(p)
	}
	ds := sc.inner.Schedule(in)
	for k, d := range ds {
		i := index[k]
		out[i] = d
		if tiers[i] != tierShare && !d.Placed() && len(d.Preempt) == 0 && d.Reason.Code != WaitNeverFits {
			// A borrower waits because its team is past its share: say
			// so, with what held it back here.
			t := sh.team(st.Queue[i].Team)
			w := sh.waitShare(&st.Queue[i], t, WaitTeamShare, st.Terse)
			if !st.Terse {
				w.Reason.Text += "; to borrow, it " + d.Reason.Text
				w.Wait = w.Reason.Text
			}
			w.Reason.Ahead = d.Reason.Ahead
			out[i] = w
		}
	}
	sh.reclaim(sc, &st, in, out, tiers)
	return out
}

// heldAll is what every team holds.
func (s *sharing) heldAll() float64 {
	v := 0.0
	for _, n := range sortedNames(s.teams) {
		v += s.teams[n].held
	}
	return v
}

// reclaim preempts borrowed runs for the requests within their share that
// wait for room: the runs of the team most over its share first, the last
// started first, until a probe pass places the request. Each reclaim
// counts the room it takes before the next is tried.
func (s *sharing) reclaim(sc *Scheduler, st *State, in State, out []Decision, tiers []int) {
	var want []int
	for i := range out {
		if tiers[i] == tierShare && !out[i].Placed() && len(out[i].Preempt) == 0 &&
			out[i].Reason.Code != WaitNeverFits && out[i].Reason.Code != WaitNoGPUs && st.Queue[i].GPUs > 0 {
			want = append(want, i)
		}
	}
	if len(want) == 0 || s.lent() == 0 {
		return
	}
	slices.SortStableFunc(want, func(a, b int) int {
		qa, qb := &st.Queue[a], &st.Queue[b]
		if c := cmp.Compare(qb.Priority, qa.Priority); c != 0 {
			return c
		}
		return qa.Submit.Compare(qb.Submit)
	})
	// Runs already asked to stop by this pass, and the placements it made
	// or promised: the room the next probe may not count on.
	taken := map[string]bool{}
	for _, d := range out {
		for _, id := range d.Preempt {
			taken[id] = true
		}
	}
	held := map[string]float64{}
	for name, t := range s.teams {
		held[name] = t.held
	}
	base := slices.Clone(in.Running)
	inv := in.Inventory
	inv.GPUs = slices.Clone(inv.GPUs)
	byUUID := map[string]int{}
	for k, g := range inv.GPUs {
		byUUID[g.UUID] = k
	}
	// What this pass placed holds its GPUs for the probes.
	for k, d := range out {
		if !d.Placed() {
			continue
		}
		for _, g := range d.GPUs {
			inv.GPUs[byUUID[g.UUID]].FreeMiB -= st.Queue[k].MemPerGPUMiB
		}
		base = append(base, st.Queue[k].Placement(d.GPUs, d.Host, st.Now))
	}
	for _, i := range want {
		req := st.Queue[i]
		// Candidates: the runs that borrow, of the team most over its
		// share first and of the request's own team last, the last
		// started first.
		var cands []Running
		for _, r := range base {
			if !taken[r.ID] && r.ID != req.ID && s.borrowed[r.ID] {
				cands = append(cands, r)
			}
		}
		slices.SortStableFunc(cands, func(a, b Running) int {
			if ao, bo := a.Team == req.Team, b.Team == req.Team; ao != bo {
				if ao {
					return 1
				}
				return -1
			}
			oa, ob := held[a.Team]-s.teams[a.Team].Nominal, held[b.Team]-s.teams[b.Team].Nominal
			if c := cmp.Compare(ob, oa); c != 0 {
				return c
			}
			if c := b.Start.Compare(a.Start); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		probeInv := inv
		probeInv.GPUs = slices.Clone(inv.GPUs)
		gone := map[string]bool{}
		var victims []Running
		for _, v := range cands {
			victims = append(victims, v)
			gone[v.ID] = true
			for _, u := range v.GPUs {
				if k, ok := byUUID[u]; ok {
					probeInv.GPUs[k].FreeMiB += v.MemPerGPUMiB
				}
			}
			left := make([]Running, 0, len(base))
			for _, r := range base {
				if !gone[r.ID] {
					left = append(left, r)
				}
			}
			probe := sc.probe.Schedule(State{Inventory: probeInv, Running: left, Queue: []Request{req}, Now: st.Now, Terse: true})
			if !probe[0].Placed() {
				continue
			}
			// Only the victims on the GPUs it goes to are stopped: the
			// others free nothing it needs.
			on := map[string]bool{}
			for _, g := range probe[0].GPUs {
				on[g.UUID] = true
			}
			var ids []string
			stop := map[string]bool{}
			for _, w := range victims {
				for _, u := range w.GPUs {
					if on[u] {
						ids = append(ids, w.ID)
						stop[w.ID] = true
						break
					}
				}
			}
			if len(ids) == 0 {
				for _, w := range victims {
					ids = append(ids, w.ID)
					stop[w.ID] = true
				}
			}
			d := &out[i]
			d.Preempt = ids
			d.Reason.Code = WaitReclaiming
			d.Reason.Preempting = ids
			d.Reason.Text = "waiting"
			if !st.Terse {
				d.Reason.Text = s.reclaimText(st, ids)
			}
			d.Wait = d.Reason.Text
			kept := make([]Running, 0, len(base))
			for _, r := range base {
				if stop[r.ID] {
					taken[r.ID] = true
					held[r.Team] -= s.freed(base, stop, r)
					for _, u := range r.GPUs {
						if k, ok := byUUID[u]; ok {
							inv.GPUs[k].FreeMiB += r.MemPerGPUMiB
						}
					}
					continue
				}
				kept = append(kept, r)
			}
			// The request will take that room: later probes see it held.
			base = append(kept, req.Placement(probe[0].GPUs, probe[0].Host, st.Now))
			for _, g := range probe[0].GPUs {
				inv.GPUs[byUUID[g.UUID]].FreeMiB -= req.MemPerGPUMiB
			}
			break
		}
	}
}

// freed is how many GPUs stopping v frees of its team's: those no other
// run of its team (not gone) is on.
func (s *sharing) freed(base []Running, gone map[string]bool, v Running) float64 {
	n := 0
	for _, u := range v.GPUs {
		shared := false
		for _, r := range base {
			if r.ID != v.ID && !gone[r.ID] && r.Team == v.Team && slices.Contains(r.GPUs, u) {
				shared = true
				break
			}
		}
		if !shared {
			n++
		}
	}
	return float64(n)
}

// waitShare is the decision for a request its team's limits hold back.
func (s *sharing) waitShare(req *Request, t *team, code ReasonCode, terse bool) Decision {
	r := Reason{Code: code, NeedGPUs: req.GPUs, NeedMiB: req.MemPerGPUMiB, LargestFreeGPU: -1,
		Team: t.Name, TeamHeld: t.held, TeamNominal: t.Nominal, Lent: s.lent(), Text: "waiting"}
	if !terse {
		r.Text = s.shareText(&r, req, t)
	}
	return Decision{ID: req.ID, Reason: r, Wait: r.Text}
}

// shareText is "team vision is at its share (4 of 4 GPUs); 2 GPUs are
// lent to nlp until they are wanted".
func (s *sharing) shareText(r *Reason, req *Request, t *team) string {
	var b strings.Builder
	name := t.Name
	if name == "" {
		name = "(none)"
	}
	switch {
	case r.Code == WaitTeamShare && float64(req.GPUs) > t.Nominal+1e-9:
		fmt.Fprintf(&b, "it needs %d GPUs, more than team %s's share (%s GPUs): it runs only on GPUs other teams leave idle",
			req.GPUs, name, gpuCount(t.Nominal))
	case r.Code == WaitTeamBorrow:
		fmt.Fprintf(&b, "team %s holds %s of its %s GPUs and may borrow at most %s more", name, gpuCount(t.held),
			gpuCount(t.Nominal), gpuCount(t.BorrowLimit))
	case t.held+1e-9 < t.Nominal:
		fmt.Fprintf(&b, "team %s's share (%s GPUs) is asked for by its runs ahead (%s held)", name, gpuCount(t.Nominal),
			gpuCount(t.held))
	default:
		fmt.Fprintf(&b, "team %s is at its share (%s of %s GPUs)", name, gpuCount(t.held), gpuCount(t.Nominal))
	}
	if k := s.keptIdle(); r.Code == WaitTeamShare && k > 0 {
		fmt.Fprintf(&b, ", and %s idle GPU(s) are kept for their teams", gpuCount(k))
	}
	if lent := s.lentTo(t.Name); lent != "" {
		b.WriteString("; " + lent)
	}
	return b.String()
}

// lentTo names what is lent, and to whom, leaving out the team itself:
// "2 GPUs lent to nlp until they are wanted".
func (s *sharing) lentTo(except string) string {
	var parts []string
	for _, n := range sortedNames(s.teams) {
		t := s.teams[n]
		if n == except || t.held <= t.Nominal+1e-9 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s GPU(s) lent to %s", gpuCount(t.held-t.Nominal), n))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ", ") + " until they are wanted"
}

// reclaimText is "within its team's share: reclaiming GPUs lent to nlp
// (stopping r1, r2)".
func (s *sharing) reclaimText(st *State, victims []string) string {
	teams := map[string]bool{}
	for _, r := range st.Running {
		if slices.Contains(victims, r.ID) {
			teams[r.Team] = true
		}
	}
	return fmt.Sprintf("within its team's share: reclaiming GPUs lent to %s (stopping %s)", strings.Join(sortedNames(teams), ", "),
		strings.Join(victims, ", "))
}

// gpuCount writes a GPU count as a person does: "4", "2.5".
func gpuCount(v float64) string {
	if math.Abs(v-math.Round(v)) < 0.05 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// Borrowers says which running placements borrow beyond their team's
// share in st (st.Teams set): the board marks them, and they are the
// first a reclaim stops.
func Borrowers(st State) []Borrowing {
	if st.Teams == nil {
		return nil
	}
	sh := newSharing(&st)
	out := make([]Borrowing, len(st.Running))
	for i, r := range st.Running {
		out[i] = Borrowing{ID: r.ID, Team: r.Team, Borrowed: sh.borrowed[r.ID]}
	}
	return out
}

// Usage is decayed GPU-time per team: each GPU-second counts half as much
// after HalfLife (Slurm's PriorityDecayHalfLife). It keeps no clock of its
// own: every call says when it is.
type Usage struct {
	HalfLife time.Duration
	at       time.Time
	v        map[string]float64
}

// Add charges a team gpuSeconds of use at now.
func (u *Usage) Add(now time.Time, team string, gpuSeconds float64) {
	u.decay(now)
	if u.v == nil {
		u.v = map[string]float64{}
	}
	u.v[team] += gpuSeconds
}

// At is every team's decayed usage at now (a copy).
func (u *Usage) At(now time.Time) map[string]float64 {
	u.decay(now)
	out := make(map[string]float64, len(u.v))
	for k, v := range u.v {
		out[k] = v
	}
	return out
}

func (u *Usage) decay(now time.Time) {
	if u.at.IsZero() || !now.After(u.at) {
		if u.at.IsZero() {
			u.at = now
		}
		return
	}
	if u.HalfLife > 0 {
		f := math.Exp2(-float64(now.Sub(u.at)) / float64(u.HalfLife))
		for k := range u.v {
			u.v[k] *= f
		}
	}
	u.at = now
}
