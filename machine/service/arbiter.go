package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"niuma/gpumon"
	"niuma/machine"
	"niuma/shepherd"
)

// Peer is a connected user, as the socket's credentials say.
type Peer struct {
	UID    int
	User   string
	Groups []string
}

// holder is one user's Niuma: a user and a data directory. Each has its
// own queue at the service and holds its own leases.
type holder struct {
	uid  int
	home string
}

// lease is a stage's hold on GPUs, CPUs and memory, under the token its
// attempt carries.
type lease struct {
	Token, User, Home, Team, Run, RunName, Stage string
	UID                                          int
	Placement                                    shepherd.Running
	Since                                        time.Time
	// Seen is when its holder last said it holds it (not stored: a
	// restarted service counts from its start).
	Seen time.Time
	// Reclaim is why the machine wants it back ("" while it does not).
	Reclaim string
}

func (l *lease) holder() holder { return holder{l.UID, l.Home} }

// passID names the lease's stage in a pass over every user's queue.
func (l *lease) passID() string { return passID(l.User, l.Placement.ID) }

// entry is a queued stage of some user's Niuma.
type entry struct {
	Token, User, Home, Team, Run, RunName, Stage string
	UID                                          int
	Request                                      shepherd.Request
	Since, Seen                                  time.Time
	// decision is the last pass's about it (not stored).
	decision shepherd.Decision
}

func passID(user, id string) string { return user + ":" + id }

// cancelOrder is an admin's cancel of a user's run, kept until the run's
// owner has been told and the run holds and asks for nothing.
type cancelOrder struct {
	UID int
	By  string
	At  time.Time
	// told: the owner's Niuma has been given the order (not stored: after
	// a restart it is given again).
	told bool
}

// cancelKeep is how long an admin's cancel waits for its owner's Niuma to
// come back and hear it.
const cancelKeep = 7 * 24 * time.Hour

// Options configure an Arbiter.
type Options struct {
	Config Config
	Store  *Store
	// GPUs is the machine's GPU source (NVML, or simulated GPUs); nil: no
	// GPUs.
	GPUs gpumon.Source
	// Host is the CPUs and memory the machine's stages may have.
	Host  shepherd.Host
	Procs Procs
	Users interface{ Name(uid int) string }
	// Quiet is how long a holder may go without asking before its queue
	// is dropped and its leases are reclaimed once no process carries
	// their tokens. Default 20s.
	Quiet  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Arbiter is the machine's placement state: every user's queue and
// leases, the teams' usage, the admins' cancel orders. Its methods are the
// service's calls, each under one lock: a lease is stored before the
// answer that gives it.
type Arbiter struct {
	opts   Options
	policy shepherd.Policy
	since  time.Time

	mu      sync.Mutex
	leases  map[string]*lease
	queue   map[holder][]*entry
	usage   shepherd.Usage
	charged time.Time // usage is charged up to here
	saved   time.Time // usage was last stored
	cancels map[string]cancelOrder
	// lapsed are leases given up because their holder went quiet, kept a
	// while (lapseKeep) so that the attempt, should its holder come back
	// and launch it, may claim its lease again (in memory only: after a
	// restart such an attempt queues again).
	lapsed map[string]lapse
}

// lapse is a lease given up while its holder was quiet.
type lapse struct {
	l  *lease
	at time.Time
}

// lapseKeep is how long a lapsed lease may be claimed again.
const lapseKeep = 10 * time.Minute

// NewArbiter loads the stored state. Every lease counts as seen now: its
// holder has Quiet to say it still holds it.
func NewArbiter(ctx context.Context, o Options) (*Arbiter, error) {
	if o.Store == nil {
		return nil, errNoStore
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Quiet <= 0 {
		o.Quiet = 20 * time.Second
	}
	if o.Procs == nil {
		o.Procs = ProcFS{}
	}
	if o.Users == nil {
		o.Users = &Users{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	policy, err := shepherd.ByName(o.Config.Policy)
	if err != nil {
		return nil, err
	}
	st, err := o.Store.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the machine service's state: %w", err)
	}
	now := o.Now()
	a := &Arbiter{opts: o, policy: policy, since: now, leases: map[string]*lease{}, queue: map[holder][]*entry{},
		cancels: st.cancels, lapsed: map[string]lapse{}, charged: now, saved: now}
	a.usage = shepherd.Usage{HalfLife: time.Duration(o.Config.HalfLife)}
	if len(st.usage) > 0 {
		at := st.usageAt
		for team, v := range st.usage {
			a.usage.Add(at, team, v)
		}
	}
	for _, l := range st.leases {
		l.Seen = now
		// The team is the settings' now: they may have changed.
		l.Team = a.teamOf(l.UID, l.User)
		a.leases[l.Token] = l
		a.assign(l)
	}
	for _, e := range st.queue {
		e.Seen = now
		e.Team = a.teamOf(e.UID, e.User)
		e.Request.Team = e.Team
		h := holder{e.UID, e.Home}
		a.queue[h] = append(a.queue[h], e)
	}
	return a, nil
}

func (a *Arbiter) teamOf(uid int, user string) string {
	var groups []string
	if g, ok := a.opts.Users.(interface{ Groups(int) []string }); ok && len(a.opts.Config.Teams) > 0 {
		groups = g.Groups(uid)
	}
	return a.opts.Config.teamOf(user, groups)
}

// assign tells a simulated GPU source who holds what, so that its
// telemetry (and the free memory the next pass sees) follows the leases.
func (a *Arbiter) assign(l *lease) {
	if s, ok := a.opts.GPUs.(gpumon.Assigner); ok {
		for _, u := range l.Placement.GPUs {
			s.Assign(u, l.Run+"/"+l.Stage, l.Placement.MemPerGPUMiB)
		}
	}
}

func (a *Arbiter) unassign(l *lease) {
	if s, ok := a.opts.GPUs.(gpumon.Assigner); ok {
		for _, u := range l.Placement.GPUs {
			s.Release(u, l.Run+"/"+l.Stage)
		}
	}
}

// Limits on what one ask may carry.
const (
	maxQueue   = 100000
	maxRunning = 4096 // more stages than a workstation runs at once
	maxGPUs    = 1024
	maxHomes   = 64 // data directories one user places from at once
)

func checkAsk(ask *machine.Ask) error {
	if ask.Home == "" {
		return errors.New("an ask names no data directory (Home)")
	}
	if len(ask.Queue) > maxQueue {
		return fmt.Errorf("an ask of %d queued stages is more than %d", len(ask.Queue), maxQueue)
	}
	seen := map[string]bool{}
	for _, e := range ask.Queue {
		switch {
		case e.Token == "":
			return fmt.Errorf("queued stage %s has no token", e.Request.ID)
		case seen[e.Token]:
			return fmt.Errorf("token %s is queued twice", e.Token)
		case e.Request.GPUs < 0 || e.Request.GPUs > maxGPUs:
			return fmt.Errorf("queued stage %s asks for %d GPUs", e.Request.ID, e.Request.GPUs)
		}
		seen[e.Token] = true
	}
	if len(ask.Running) > maxRunning {
		return fmt.Errorf("an ask naming %d running stages is more than %d", len(ask.Running), maxRunning)
	}
	for _, h := range ask.Running {
		if h.Token == "" {
			return fmt.Errorf("running stage %s/%s has no token", h.Run, h.Stage)
		}
	}
	return nil
}

// Place is one scheduling pass of a user's Niuma: its queue replaces the
// one it had, the leases it names are its own still (an attempt the
// service does not know, one a new owner adopted, is recorded as it
// stands), those it no longer names are given up once no process carries
// their token, and everyone's queue is scheduled together. The asker's
// placed stages get leases, stored before the answer.
func (a *Arbiter) Place(ctx context.Context, p Peer, ask machine.Ask) (machine.Answer, error) {
	if err := checkAsk(&ask); err != nil {
		return machine.Answer{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Now()
	h := holder{p.UID, ask.Home}
	if _, known := a.queue[h]; !known && a.homes(p.UID) >= maxHomes {
		return machine.Answer{}, &machine.Refused{Reason: fmt.Sprintf(
			"%s places from %d data directories at once already: stop the Niuma of some (each waits %s after its last ask)", p.User, maxHomes, a.opts.Quiet)}
	}
	team := a.opts.Config.teamOf(p.User, p.Groups)
	ch := &change{}

	// The leases it holds, and those it took on from an earlier owner: an
	// attempt the service has no lease for is recorded as it stands when
	// its processes run (a claim takes a lease for one about to launch).
	running := map[string]bool{}
	adopted := map[string]*lease{}
	var unknown []string
	for _, held := range ask.Running {
		if a.leases[held.Token] == nil {
			unknown = append(unknown, held.Token)
		}
	}
	live := a.opts.Procs.Alive(unknown)
	for _, held := range ask.Running {
		running[held.Token] = true
		l := a.leases[held.Token]
		switch {
		case l == nil && !live[held.Token][p.UID]:
			// Not launched yet, or gone, or only another user's process
			// carries the token: nothing of this user's holds the GPUs.
		case l == nil:
			nl := &lease{Token: held.Token, UID: p.UID, User: p.User, Home: ask.Home, Team: team, Run: held.Run,
				RunName: held.RunName, Stage: held.Stage, Placement: held.Placement, Since: now, Seen: now}
			nl.Placement.Team = team
			adopted[held.Token] = nl
			ch.putLeases = append(ch.putLeases, nl)
		case l.UID != p.UID:
			a.opts.Logger.Warn("a user names another user's lease as theirs; ignored", "user", p.User, "token", held.Token, "owner", l.User)
		}
	}
	// The new queue, keeping when each entry first asked.
	old := map[string]*entry{}
	for _, e := range a.queue[h] {
		old[e.Token] = e
	}
	queued := map[string]bool{}
	entries := make([]*entry, 0, len(ask.Queue))
	changed := len(ask.Queue) != len(a.queue[h])
	for _, q := range ask.Queue {
		queued[q.Token] = true
		e := &entry{Token: q.Token, UID: p.UID, User: p.User, Home: ask.Home, Team: team, Run: q.Run, RunName: q.RunName,
			Stage: q.Stage, Request: q.Request, Since: now, Seen: now}
		if o := old[q.Token]; o != nil {
			e.Since, e.decision = o.Since, o.decision
		} else {
			changed = true
		}
		// What orders the machine's queue is the service's, not the
		// asker's to say: the team is the settings', the tier the sharing
		// pass's, and a stage is no older than when the service first
		// heard of it. Priority stays the user's, within their team.
		e.Request.Team, e.Request.Tier = team, 0
		if e.Request.Submit.Before(e.Since) {
			e.Request.Submit = e.Since
		}
		entries = append(entries, e)
	}
	if changed {
		ch.queues = map[holder][]*entry{h: entries}
	}
	// Leases it no longer names: their attempts ended (a release that
	// never arrived) unless a process still carries the token.
	var gone []string
	for t, l := range a.leases {
		if l.holder() == h && !running[t] && !queued[t] {
			gone = append(gone, t)
		}
	}
	if len(gone) > 0 {
		alive := a.opts.Procs.Alive(gone)
		for _, t := range gone {
			if !alive[t][p.UID] {
				ch.dropLeases = append(ch.dropLeases, t)
			}
		}
	}
	dropped := map[string]bool{}
	for _, t := range ch.dropLeases {
		dropped[t] = true
	}

	// The pass over every user's queue, with the leases that stand.
	leases := make([]*lease, 0, len(a.leases)+len(adopted))
	for t, l := range a.leases {
		if !dropped[t] {
			leases = append(leases, l)
		}
	}
	for _, l := range adopted {
		leases = append(leases, l)
	}
	queues := make(map[holder][]*entry, len(a.queue)+1)
	for k, es := range a.queue {
		queues[k] = es
	}
	queues[h] = entries
	a.charge(now)
	inv, byUUID := a.inventory(ctx, leases)
	st := shepherd.State{Inventory: inv, Now: now, Teams: a.teams()}
	byPass := map[string]*lease{}
	for _, l := range leases {
		r := placementOf(l)
		r.ID = l.passID()
		st.Running = append(st.Running, r)
		byPass[r.ID] = l
	}
	leased := func(e *entry) *lease {
		if l := a.leases[e.Token]; l != nil && !dropped[e.Token] {
			return l
		}
		return adopted[e.Token]
	}
	var pass []*entry
	for _, k := range sortedHolders(queues) {
		for _, e := range queues[k] {
			if leased(e) != nil {
				continue // placed already: its attempt is about to start
			}
			r := e.Request
			r.ID = passID(e.User, r.ID)
			st.Queue = append(st.Queue, r)
			pass = append(pass, e)
		}
	}
	decisions := shepherd.Schedule(a.policy, st)

	// Leases for the asker's placed stages; reclaims of what others hold.
	fresh := map[string]*lease{}
	reclaims := map[string]string{}
	for i, d := range decisions {
		e := pass[i]
		for _, victim := range d.Preempt {
			if l := byPass[victim]; l != nil && l.Reclaim == "" && reclaims[l.Token] == "" {
				reclaims[l.Token] = reclaimWhy(e, l, st.Teams != nil)
			}
		}
		if e.UID != p.UID || e.Home != ask.Home || !d.Placed() {
			continue
		}
		pl := e.Request.Placement(d.GPUs, d.Host, now)
		pl.ID = e.Request.ID
		l := &lease{Token: e.Token, UID: p.UID, User: p.User, Home: ask.Home, Team: team, Run: e.Run, RunName: e.RunName,
			Stage: e.Stage, Placement: pl, Since: now, Seen: now}
		fresh[e.Token] = l
		ch.putLeases = append(ch.putLeases, l)
	}
	for t, why := range reclaims {
		cp := *leaseByToken(leases, t)
		cp.Reclaim = why
		ch.putLeases = append(ch.putLeases, &cp)
	}
	if err := a.opts.Store.apply(ctx, ch); err != nil {
		return machine.Answer{}, fmt.Errorf("store the machine's leases: %w", err)
	}

	// Stored: now the memory follows.
	for _, t := range ch.dropLeases {
		a.unassign(a.leases[t])
		delete(a.leases, t)
	}
	for t, l := range adopted {
		a.leases[t] = l
		a.assign(l)
	}
	for t, l := range fresh {
		a.leases[t] = l
		a.assign(l)
	}
	for t, why := range reclaims {
		if l := a.leases[t]; l != nil {
			l.Reclaim = why
		}
	}
	for t := range running {
		if l := a.leases[t]; l != nil && l.UID == p.UID {
			l.Seen = now
		}
	}
	a.queue[h] = entries
	for i, d := range decisions {
		pass[i].decision = d
	}
	for _, e := range entries {
		e.Seen = now
	}

	ans := machine.Answer{User: p.User, Team: team, Decisions: make([]shepherd.Decision, len(ask.Queue))}
	for i, q := range ask.Queue {
		e := entries[i]
		if l := a.leases[q.Token]; l != nil {
			ans.Decisions[i] = placedOn(q.Request.ID, l, byUUID)
			continue
		}
		d := e.decision
		d.ID = q.Request.ID
		d.Preempt = nil // others' leases: the service reclaims them
		ans.Decisions[i] = d
	}
	for _, l := range a.leases {
		if l.holder() == h && l.Reclaim != "" {
			ans.Reclaim = append(ans.Reclaim, machine.Reclaim{Token: l.Token, Why: l.Reclaim, Grace: time.Duration(a.opts.Config.Grace)})
		}
	}
	slices.SortFunc(ans.Reclaim, func(x, y machine.Reclaim) int { return strings.Compare(x.Token, y.Token) })
	for run, o := range a.cancels {
		if o.UID == p.UID && a.holds(h, run) {
			ans.Cancel = append(ans.Cancel, machine.CancelOrder{Run: run, By: o.By})
			o.told = true
			a.cancels[run] = o
		}
	}
	return ans, nil
}

// homes is how many data directories uid places from now.
func (a *Arbiter) homes(uid int) int {
	n := 0
	for h := range a.queue {
		if h.uid == uid {
			n++
		}
	}
	return n
}

func leaseByToken(ls []*lease, t string) *lease {
	for _, l := range ls {
		if l.Token == t {
			return l
		}
	}
	return nil
}

// placedOn is the decision for an entry that holds a lease: the lease's
// GPUs, with the indices the machine gives them now.
func placedOn(id string, l *lease, byUUID map[string]shepherd.GPU) shepherd.Decision {
	d := shepherd.Decision{ID: id, Host: l.Placement.Host}
	for _, u := range l.Placement.GPUs {
		g, ok := byUUID[u]
		if !ok {
			g = shepherd.GPU{UUID: u, Index: -1}
		}
		d.GPUs = append(d.GPUs, g)
	}
	return d
}

// reclaimWhy is what the holder of a lease the machine wants back reads.
func reclaimWhy(e *entry, l *lease, teams bool) string {
	name := e.RunName
	if name == "" {
		name = e.Run
	}
	if teams && e.Team != l.Team {
		return fmt.Sprintf("team %s wants its share back for %s's run %s (%s): this run borrowed it", e.Team, e.User, e.Run, name)
	}
	return fmt.Sprintf("preempted for %s's run %s (%s), priority %d", e.User, e.Run, name, e.Request.Priority)
}

// holds says whether a holder has a lease or queue entry of run.
func (a *Arbiter) holds(h holder, run string) bool {
	for _, l := range a.leases {
		if l.holder() == h && l.Run == run {
			return true
		}
	}
	for _, e := range a.queue[h] {
		if e.Run == run {
			return true
		}
	}
	return false
}

func sortedHolders(m map[holder][]*entry) []holder {
	out := make([]holder, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(x, y holder) int {
		if x.uid != y.uid {
			return x.uid - y.uid
		}
		return strings.Compare(x.home, y.home)
	})
	return out
}

// teams is the shepherd's sharing of the machine; nil without teams.
func (a *Arbiter) teams() *shepherd.Teams {
	ts := a.opts.Config.teams()
	if len(ts) == 0 {
		return nil
	}
	return &shepherd.Teams{Teams: ts, Usage: a.usage.At(a.charged)}
}

// charge adds the GPU time the leases held since the last charge to their
// teams' usage.
func (a *Arbiter) charge(now time.Time) {
	dt := now.Sub(a.charged).Seconds()
	if dt <= 0 {
		return
	}
	for _, l := range a.leases {
		if n := len(l.Placement.GPUs); n > 0 {
			a.usage.Add(now, l.Team, float64(n)*dt)
		}
	}
	a.usage.At(now) // decays to now even with no lease
	a.charged = now
}

// inventory is the machine's devices and host as the shepherd needs them,
// with what the leases reserve taken off each GPU's free memory (less what
// of it their processes already use, which the snapshot counts).
func (a *Arbiter) inventory(ctx context.Context, leases []*lease) (shepherd.Inventory, map[string]shepherd.GPU) {
	inv := shepherd.Inventory{Hosts: []shepherd.Host{a.opts.Host}}
	byUUID := map[string]shepherd.GPU{}
	if a.opts.GPUs == nil {
		inv.Reason = "the machine service sees no GPU"
		return inv, byUUID
	}
	snap, err := a.opts.GPUs.Snapshot(ctx)
	if err != nil {
		inv.Reason = "GPU telemetry failed: " + err.Error()
		return inv, byUUID
	}
	inv.Reason = snap.Reason
	visible := map[string]int64{} // "uuid run/stage" -> MiB in use
	for _, d := range snap.Devices() {
		g := shepherd.GPU{Index: d.Index, UUID: d.UUID, Model: d.Name, TotalMiB: d.MemTotalMiB,
			FreeMiB: d.MemTotalMiB - d.MemUsedMiB, Healthy: d.Healthy, Group: d.Group, Parent: d.Parent}
		if d.Parent != "" {
			g.Label = d.Label
		}
		if d.UtilPercent != nil {
			g.UtilPct = *d.UtilPercent
		}
		if d.TempC != nil {
			g.TempC = *d.TempC
		}
		inv.GPUs = append(inv.GPUs, g)
		for _, pr := range d.Processes {
			if pr.Owner != nil {
				visible[d.UUID+" "+pr.Owner.RunID+"/"+pr.Owner.Stage] += pr.MemMiB
			}
		}
	}
	for _, l := range leases {
		for _, u := range l.Placement.GPUs {
			res := max(0, l.Placement.MemPerGPUMiB-visible[u+" "+l.Run+"/"+l.Stage])
			for i := range inv.GPUs {
				if inv.GPUs[i].UUID == u {
					inv.GPUs[i].FreeMiB -= res
				}
			}
		}
	}
	for _, g := range inv.GPUs {
		byUUID[g.UUID] = g
	}
	return inv, byUUID
}

// Claim confirms that an attempt about to launch holds its lease. A lease
// given up meanwhile because its holder was quiet past Quiet is taken
// again, on the GPUs it had, when no other lease stands on them beyond
// what sharing allows. Any other claim of a token the service placed
// nothing under is refused: GPUs are had through the queue, where shares,
// limits and order hold, never by claiming them.
func (a *Arbiter) Claim(ctx context.Context, p Peer, c machine.Claim) error {
	if c.Token == "" || c.Home == "" {
		return errors.New("a claim names no token or no data directory")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Now()
	if l := a.leases[c.Token]; l != nil {
		if l.UID != p.UID {
			return &machine.Refused{Reason: fmt.Sprintf("the lease %s is %s's", c.Token, l.User)}
		}
		if l.Reclaim != "" && !a.opts.Procs.Alive([]string{c.Token})[c.Token][p.UID] {
			// Wanted back before it launched: it launches nothing, and its
			// stage queues again.
			if err := a.drop(ctx, l); err != nil {
				return fmt.Errorf("store the reclaim: %w", err)
			}
			return &machine.Refused{Reason: l.Reclaim}
		}
		l.Seen = now
		return nil
	}
	lp, ok := a.lapsed[c.Token]
	if !ok || lp.l.UID != p.UID || lp.l.Home != c.Home || !slices.Equal(lp.l.Placement.GPUs, c.Placement.GPUs) {
		return &machine.Refused{Reason: fmt.Sprintf(
			"the machine service placed nothing under %s (%s/%s): the stage queues for its GPUs again", c.Token, c.Run, c.Stage)}
	}
	// The team is the settings' now: they may have changed since.
	l := *lp.l
	l.Team = a.opts.Config.teamOf(p.User, p.Groups)
	l.Placement.Team = l.Team
	if why := a.conflict(l.Placement, l.Team); why != "" {
		return &machine.Refused{Reason: why}
	}
	l.Since, l.Seen, l.Reclaim = now, now, ""
	if err := a.opts.Store.apply(ctx, &change{putLeases: []*lease{&l}}); err != nil {
		return fmt.Errorf("store the lease: %w", err)
	}
	delete(a.lapsed, c.Token)
	a.leases[c.Token] = &l
	a.assign(&l)
	// Whatever queue entry the token had is placed now.
	h := holder{p.UID, c.Home}
	for _, e := range a.queue[h] {
		if e.Token == c.Token {
			e.decision = shepherd.Decision{ID: e.Request.ID}
		}
	}
	return nil
}

// conflict says why a placement cannot be taken now: a lease on one of
// its GPUs that may not share it with this one ("" when none).
func (a *Arbiter) conflict(pl shepherd.Running, team string) string {
	for _, l := range a.leases {
		for _, u := range l.Placement.GPUs {
			if !slices.Contains(pl.GPUs, u) {
				continue
			}
			if pl.Shareable && l.Placement.Shareable && (len(a.opts.Config.Teams) == 0 || l.Team == team) {
				continue
			}
			name := l.RunName
			if name == "" {
				name = l.Run
			}
			return fmt.Sprintf("the GPU %s is held by %s's run %s (%s) now", u, l.User, l.Run, name)
		}
	}
	return ""
}

// Release gives up an ended attempt's lease (another user's is refused;
// an unknown one is already given up).
func (a *Arbiter) Release(ctx context.Context, p Peer, token string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.leases[token]
	if l == nil {
		return nil
	}
	if l.UID != p.UID {
		return &machine.Refused{Reason: fmt.Sprintf("the lease %s is %s's", token, l.User)}
	}
	if err := a.drop(ctx, l); err != nil {
		return fmt.Errorf("store the release: %w", err)
	}
	return nil
}

// drop gives up one lease: its team is charged the GPU time it held up to
// now, then it is stored as gone, then forgotten.
func (a *Arbiter) drop(ctx context.Context, l *lease) error {
	a.charge(a.opts.Now())
	if err := a.opts.Store.apply(ctx, &change{dropLeases: []string{l.Token}}); err != nil {
		return err
	}
	a.unassign(l)
	delete(a.leases, l.Token)
	return nil
}

// Cancel records an admin's cancel of a run some user's Niuma placed or
// queued here (ref is its ID, a unique prefix or a unique end of one). A
// user may cancel their own; anyone else is refused, naming the owner.
func (a *Arbiter) Cancel(ctx context.Context, p Peer, ref string) (machine.CancelResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	type owned struct {
		uid       int
		user, run string
	}
	found := map[string]owned{}
	match := func(uid int, user, run string) {
		if run == ref || (len(ref) >= 4 && (strings.HasPrefix(run, ref) || strings.HasSuffix(run, ref))) {
			found[run] = owned{uid, user, run}
		}
	}
	for _, l := range a.leases {
		match(l.UID, l.User, l.Run)
	}
	for _, es := range a.queue {
		for _, e := range es {
			match(e.UID, e.User, e.Run)
		}
	}
	switch len(found) {
	case 0:
		return machine.CancelResult{}, &machine.Refused{Reason: fmt.Sprintf(
			"no run %s holds or waits for GPUs on this machine (the machine service knows other users' runs only while they are placed or queued)", ref)}
	case 1:
	default:
		var runs []string
		for r := range found {
			runs = append(runs, r)
		}
		slices.Sort(runs)
		return machine.CancelResult{}, &machine.Refused{Reason: fmt.Sprintf("%s names several runs (%s): give more of the ID", ref, strings.Join(runs, ", "))}
	}
	var o owned
	for _, v := range found {
		o = v
	}
	if o.uid != p.UID && !a.opts.Config.isAdmin(p.UID, p.User) {
		admins := append([]string{"root"}, a.opts.Config.Admins...)
		admins = slices.Compact(admins)
		return machine.CancelResult{}, &machine.Refused{Reason: fmt.Sprintf(
			"run %s belongs to %s: only %s or an admin (%s) may cancel it", o.run, o.user, o.user, strings.Join(admins, ", "))}
	}
	order := cancelOrder{UID: o.uid, By: p.User, At: a.opts.Now()}
	if err := a.opts.Store.apply(ctx, &change{putCancel: map[string]cancelOrder{o.run: order}}); err != nil {
		return machine.CancelResult{}, fmt.Errorf("store the cancel: %w", err)
	}
	a.cancels[o.run] = order
	return machine.CancelResult{Owner: o.user, Run: o.run}, nil
}

// Sweep gives up what holders gone quiet left: a lease once no process
// carries its token, a queue entry at once; an admin's cancel order once
// its run holds and asks for nothing; and stores the teams' usage.
func (a *Arbiter) Sweep(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Now()
	ch := &change{}
	var quiet []string
	for t, l := range a.leases {
		if now.Sub(l.Seen) > a.opts.Quiet {
			quiet = append(quiet, t)
		}
	}
	if len(quiet) > 0 {
		alive := a.opts.Procs.Alive(quiet)
		for _, t := range quiet {
			if !alive[t][a.leases[t].UID] {
				ch.dropLeases = append(ch.dropLeases, t)
			}
		}
	}
	for _, es := range a.queue {
		for _, e := range es {
			if now.Sub(e.Seen) > a.opts.Quiet {
				ch.dropQueue = append(ch.dropQueue, e.Token)
			}
		}
	}
	// An order goes once its owner's Niuma heard it and the run holds and
	// asks for nothing; one never heard (its owner's Niuma is away) waits
	// for it to come back, up to cancelKeep.
	for run, o := range a.cancels {
		if (o.told && !a.anyHolds(run)) || now.Sub(o.At) > cancelKeep {
			ch.dropCanc = append(ch.dropCanc, run)
		}
	}
	a.charge(now)
	if now.Sub(a.saved) >= 10*time.Second || len(ch.dropLeases) > 0 {
		ch.usage, ch.usageAt = a.usage.At(now), now
		if ch.usage == nil {
			ch.usage = map[string]float64{}
		}
	}
	if err := a.opts.Store.apply(ctx, ch); err != nil {
		return err
	}
	if ch.usage != nil {
		a.saved = now
	}
	for _, t := range ch.dropLeases {
		l := a.leases[t]
		a.opts.Logger.Info("reclaimed a lease whose holder and processes are gone", "user", l.User, "run", l.Run, "stage", l.Stage, "gpus", l.Placement.GPUs)
		a.unassign(l)
		delete(a.leases, t)
		a.lapsed[t] = lapse{l: l, at: now}
	}
	for t, lp := range a.lapsed {
		if now.Sub(lp.at) > lapseKeep {
			delete(a.lapsed, t)
		}
	}
	drop := map[string]bool{}
	for _, t := range ch.dropQueue {
		drop[t] = true
	}
	for h, es := range a.queue {
		kept := es[:0]
		for _, e := range es {
			if !drop[e.Token] {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(a.queue, h)
		} else {
			a.queue[h] = kept
		}
	}
	for _, run := range ch.dropCanc {
		delete(a.cancels, run)
	}
	return nil
}

func (a *Arbiter) anyHolds(run string) bool {
	for _, l := range a.leases {
		if l.Run == run {
			return true
		}
	}
	for _, es := range a.queue {
		for _, e := range es {
			if e.Run == run {
				return true
			}
		}
	}
	return false
}
