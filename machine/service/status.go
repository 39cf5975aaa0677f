package service

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"niuma/machine"
	"niuma/shepherd"
)

// Status is the whole machine as any user may see it: who holds and waits
// for what (user, run ID and name, stage, GPUs), the teams' shares and
// what they lend, and every GPU process with its user. Nothing of a run's
// parameters, logs or metrics ever reaches the service.
func (a *Arbiter) Status(ctx context.Context, p Peer) (machine.Status, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Now()
	a.charge(now)
	leases := make([]*lease, 0, len(a.leases))
	for _, l := range a.leases {
		leases = append(leases, l)
	}
	slices.SortFunc(leases, func(x, y *lease) int {
		return cmp.Or(x.Since.Compare(y.Since), strings.Compare(x.Token, y.Token))
	})
	st := machine.Status{
		User: p.User, Team: a.opts.Config.teamOf(p.User, p.Groups), Admin: a.opts.Config.isAdmin(p.UID, p.User),
		Since: a.since, HalfLife: a.usage.HalfLife, Policy: a.opts.Config.Policy,
		Admins: append([]string(nil), a.opts.Config.Admins...),
	}
	inv, byUUID := a.inventory(ctx, leases)
	for _, g := range inv.GPUs {
		st.GPUs = append(st.GPUs, machine.GPU{Index: g.Index, UUID: g.UUID, Name: g.Model, TotalMiB: g.TotalMiB,
			UsedMiB: g.TotalMiB - g.FreeMiB})
	}
	// Which leases borrow beyond their team's share.
	running := make([]shepherd.Running, len(leases))
	for i, l := range leases {
		running[i] = placementOf(l)
		running[i].ID = l.Token
	}
	teams := a.teams()
	borrowed := map[string]bool{}
	for _, b := range shepherd.Borrowers(shepherd.State{Inventory: inv, Running: running, Teams: teams}) {
		borrowed[b.ID] = b.Borrowed
	}
	for _, l := range leases {
		ml := machine.Lease{ID: leaseID(l.Token), User: l.User, Team: l.Team, Run: l.Run, RunName: l.RunName, Stage: l.Stage,
			GPUs: l.Placement.GPUs, CPUMilli: l.Placement.CPUMilli, MemMiB: l.Placement.MemMiB, Since: l.Since,
			Borrowed: borrowed[l.Token], Reclaim: l.Reclaim, Live: now.Sub(l.Seen) <= a.opts.Quiet}
		for _, u := range l.Placement.GPUs {
			idx := -1
			if g, ok := byUUID[u]; ok {
				idx = g.Index
			}
			ml.Indices = append(ml.Indices, idx)
		}
		st.Leases = append(st.Leases, ml)
	}
	for _, h := range sortedHolders(a.queue) {
		for _, e := range a.queue[h] {
			if a.leases[e.Token] != nil {
				continue
			}
			st.Queue = append(st.Queue, machine.Waiting{User: e.User, Team: e.Team, Run: e.Run, RunName: e.RunName,
				Stage: e.Stage, GPUs: e.Request.GPUs, Since: e.Since, Code: e.decision.Reason.Code, Reason: e.decision.Wait})
		}
	}
	slices.SortStableFunc(st.Queue, func(x, y machine.Waiting) int { return x.Since.Compare(y.Since) })
	if teams != nil {
		st.Teams = a.teamStatus(teams, leases, borrowed)
	}
	st.Processes, st.Simulated = a.processes(ctx, leases)
	return st, nil
}

// leaseID is a lease's name in a status: a digest of its token, which
// stays with its holder (a process carrying it keeps the lease).
func leaseID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}

// teamStatus is each team's part of the machine: its share and limits,
// the GPUs its leases are on, what of those it borrows and from whom,
// its decayed usage and fair-share factor, and which of its leases a
// reclaim would stop first.
func (a *Arbiter) teamStatus(teams *shepherd.Teams, leases []*lease, borrowed map[string]bool) []machine.Team {
	byName := map[string]*machine.Team{}
	var order []string
	add := func(t shepherd.Team) *machine.Team {
		if mt := byName[t.Name]; mt != nil {
			return mt
		}
		mt := &machine.Team{Name: t.Name, Nominal: t.Nominal, BorrowLimit: t.BorrowLimit, LendLimit: t.LendLimit,
			LentTo: map[string]float64{}, BorrowedFrom: map[string]float64{}}
		byName[t.Name] = mt
		order = append(order, t.Name)
		return mt
	}
	for _, t := range teams.Teams {
		mt := add(t)
		for _, tc := range a.opts.Config.Teams {
			if tc.Name == t.Name {
				mt.Members = append(mt.Members, tc.Users...)
				if tc.Group != "" {
					mt.Members = append(mt.Members, "group "+tc.Group)
				}
			}
		}
	}
	on := map[string]map[string]bool{} // team -> GPUs its leases are on
	for _, l := range leases {
		add(shepherd.Team{Name: l.Team, BorrowLimit: shepherd.NoLimit, LendLimit: shepherd.NoLimit})
		if on[l.Team] == nil {
			on[l.Team] = map[string]bool{}
		}
		for _, u := range l.Placement.GPUs {
			on[l.Team][u] = true
		}
	}
	// The last started first: the order a reclaim stops them in.
	for i := len(leases) - 1; i >= 0; i-- {
		if l := leases[i]; borrowed[l.Token] {
			byName[l.Team].Reclaimable = append(byName[l.Team].Reclaimable, leaseID(l.Token))
		}
	}
	usage := a.usage.At(a.charged)
	var list []shepherd.Team
	for _, n := range order {
		mt := byName[n]
		mt.Held = float64(len(on[n]))
		mt.Borrowed = max(0, mt.Held-mt.Nominal)
		mt.Usage = usage[n] / 3600
		list = append(list, shepherd.Team{Name: n, Nominal: mt.Nominal})
	}
	fair := shepherd.FairShare(list, usage)
	for _, n := range order {
		byName[n].FairShare = fair[n]
	}
	// Who lends to whom: a borrower's GPUs beyond its share come from the
	// idle shares of the others, in proportion to what each leaves idle.
	idle, total := map[string]float64{}, 0.0
	for _, n := range order {
		mt := byName[n]
		if v := max(0, mt.Nominal-mt.Held); v > 0 {
			idle[n] = v
			total += v
		}
	}
	for _, n := range order {
		mt := byName[n]
		if mt.Borrowed <= 0 || total <= 0 {
			continue
		}
		for _, lender := range order {
			if v := idle[lender]; v > 0 {
				part := mt.Borrowed * v / total
				mt.BorrowedFrom[lender] += part
				byName[lender].LentTo[n] += part
			}
		}
	}
	out := make([]machine.Team, len(order))
	for i, n := range order {
		out[i] = *byName[n]
	}
	return out
}

// processes is every process on the machine's GPUs with its user and, for
// a lease's, its run. A simulated machine has no processes: each lease on
// a GPU stands for one (PID 0).
func (a *Arbiter) processes(ctx context.Context, leases []*lease) ([]machine.Process, bool) {
	if a.opts.GPUs == nil {
		return nil, false
	}
	snap, err := a.opts.GPUs.Snapshot(ctx)
	if err != nil {
		return nil, false
	}
	byStage := map[string]*lease{}
	for _, l := range leases {
		byStage[l.Run+"/"+l.Stage] = l
	}
	var out []machine.Process
	for _, g := range snap.GPUs {
		for _, pr := range g.Processes {
			mp := machine.Process{GPU: g.UUID, PID: pr.PID, MemMiB: pr.MemMiB}
			if pr.Owner != nil {
				if l := byStage[pr.Owner.RunID+"/"+pr.Owner.Stage]; l != nil {
					mp.User, mp.Run = l.User, l.Run
				}
			}
			if mp.User == "" && pr.PID > 0 {
				if uid, ok := a.opts.Procs.UID(pr.PID); ok {
					mp.User = a.opts.Users.Name(uid)
				}
			}
			out = append(out, mp)
		}
	}
	if snap.Simulated {
		out = out[:0]
		for _, l := range leases {
			for _, u := range l.Placement.GPUs {
				out = append(out, machine.Process{GPU: u, User: l.User, Run: l.Run, MemMiB: l.Placement.MemPerGPUMiB})
			}
		}
	}
	return out, snap.Simulated
}
