package shepherd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// four GPUs shared by vision (3) and nlp (1), with no limits.
func labTeams() *Teams {
	return &Teams{Teams: []Team{
		{Name: "vision", Nominal: 3, BorrowLimit: NoLimit, LendLimit: NoLimit},
		{Name: "nlp", Nominal: 1, BorrowLimit: NoLimit, LendLimit: NoLimit},
	}}
}

// whole is a running placement of one team holding GPU g whole.
func whole(id, team string, g string, start time.Time) Running {
	return Running{ID: id, Team: team, GPUs: []string{g}, MemPerGPUMiB: 80 * gib, Start: start}
}

func TestTeamsReclaimLentGPUs(t *testing.T) {
	now := t0.Add(time.Hour)
	// nlp holds all four GPUs: one of its own, three borrowed from vision
	// (the three started last). A vision run arrives: within its share, it
	// has the latest-started borrowed run reclaimed — though nlp's runs
	// are not spot runs and have the same priority.
	inv := machine(8, 0, 0, 0, 0)
	running := []Running{
		whole("n0", "nlp", "G0", t0),
		whole("n1", "nlp", "G1", t0.Add(time.Minute)),
		whole("n2", "nlp", "G2", t0.Add(2*time.Minute)),
		whole("n3", "nlp", "G3", t0.Add(3*time.Minute)),
	}
	q := []Request{{ID: "v", Team: "vision", GPUs: 1, MemPerGPUMiB: 40 * gib, Submit: now}}
	for _, p := range []Policy{Herd(HerdOptions{}), BestFit()} {
		d := NewScheduler(p).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: labTeams()})
		require.False(t, d[0].Placed(), p.Name)
		require.Equal(t, []string{"n3"}, d[0].Preempt, p.Name)
		require.Equal(t, WaitReclaiming, d[0].Reason.Code, p.Name)
		require.Contains(t, d[0].Wait, "reclaiming GPUs lent to nlp", p.Name)
	}
	// Which runs borrow: the three nlp started after its own one.
	var borrowed []string
	for _, b := range Borrowers(State{Inventory: inv, Running: running, Teams: labTeams()}) {
		if b.Borrowed {
			borrowed = append(borrowed, b.ID)
		}
	}
	require.Equal(t, []string{"n1", "n2", "n3"}, borrowed)
}

func TestTeamsWithinShareIsNeverReclaimed(t *testing.T) {
	now := t0.Add(time.Hour)
	// vision holds its three GPUs, nlp its one: a second nlp run (urgent,
	// and the vision runs are spot runs) borrows nothing and stops nothing:
	// each team's share holds as on a partition of its own.
	inv := machine(8, 0, 0, 0, 0)
	running := []Running{
		whole("v0", "vision", "G0", t0), whole("v1", "vision", "G1", t0), whole("v2", "vision", "G2", t0),
		whole("n0", "nlp", "G3", t0),
	}
	for i := range running[:3] {
		running[i].Preemptible = true
	}
	q := []Request{{ID: "n", Team: "nlp", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 2, Submit: t0}}
	d := NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: labTeams()})
	require.False(t, d[0].Placed())
	require.Empty(t, d[0].Preempt)
	require.Equal(t, WaitTeamShare, d[0].Reason.Code)
	require.Equal(t, "nlp", d[0].Reason.Team)
	require.InDelta(t, 1, d[0].Reason.TeamHeld, 1e-9)
	require.Contains(t, d[0].Wait, "team nlp is at its share (1 of 1 GPUs)")
}

func TestTeamsBorrowIdleShares(t *testing.T) {
	now := t0.Add(time.Hour)
	// vision is idle: nlp borrows its GPUs, up to its borrowing limit.
	inv := machine(8, 80, 80, 80, 80)
	q := []Request{
		{ID: "a", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0},
		{ID: "b", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0.Add(time.Second)},
		{ID: "c", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0.Add(2 * time.Second)},
	}
	d := NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Queue: q, Now: now, Teams: labTeams()})
	for i := range d {
		require.True(t, d[i].Placed(), q[i].ID)
	}
	limited := labTeams()
	limited.Teams[1].BorrowLimit = 1
	running := []Running{whole("n0", "nlp", "G0", t0), whole("n1", "nlp", "G1", t0)}
	inv = machine(8, 0, 0, 80, 80)
	d = NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running, Queue: q[:1], Now: now, Teams: limited})
	require.False(t, d[0].Placed())
	require.Equal(t, WaitTeamBorrow, d[0].Reason.Code)
	require.Contains(t, d[0].Wait, "may borrow at most 1 more")
	// A lending limit keeps part of an idle share idle for its team.
	kept := labTeams()
	kept.Teams[0].LendLimit = 1 // vision lends 1 of its 3 idle GPUs
	inv = machine(8, 0, 80, 80, 80)
	d = NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running[:1], Queue: q, Now: now, Teams: kept})
	require.True(t, d[0].Placed())
	require.Equal(t, WaitTeamShare, d[1].Reason.Code, "the second would eat into what vision keeps")
}

func TestTeamsShareAGPUOnlyWithinATeam(t *testing.T) {
	now := t0.Add(time.Hour)
	// GPU 0 has 60 GiB free beside a vision run; an nlp run of 20 GiB
	// goes to the empty GPU 1, never beside vision's; a vision run of 20
	// GiB may go beside its own team's.
	inv := machine(8, 60, 80)
	running := []Running{{ID: "v0", Team: "vision", GPUs: []string{"G0"}, MemPerGPUMiB: 20 * gib, Shareable: true, Start: t0}}
	q := []Request{{ID: "n", Team: "nlp", GPUs: 1, MemPerGPUMiB: 20 * gib, Shareable: true, Submit: t0}}
	d := NewScheduler(BestFit()).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: labTeams()})
	require.Equal(t, []int{1}, placedOn(d[0]))
	// Within its share (3 GPUs, one held), a vision run gets a GPU of its
	// own, as on its partition; past its share, it packs beside its own
	// team's run (best fit).
	q[0].Team = "vision"
	d = NewScheduler(BestFit()).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: labTeams()})
	require.Equal(t, []int{1}, placedOn(d[0]), "within its share: a GPU of its own")
	small := labTeams()
	small.Teams[0].Nominal = 1
	d = NewScheduler(BestFit()).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: small})
	require.Equal(t, []int{0}, placedOn(d[0]), "borrowing: best fit, beside its own team's run")
}

func TestTeamsWithinShareRanksFirst(t *testing.T) {
	now := t0.Add(time.Hour)
	// One GPU free. nlp already holds its one: its urgent run would borrow;
	// vision's normal one is within its share and goes first.
	inv := machine(8, 0, 80, 0, 0)
	running := []Running{whole("n0", "nlp", "G0", t0), whole("v0", "vision", "G2", t0), whole("v1", "vision", "G3", t0)}
	q := []Request{
		{ID: "n", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Priority: 2, Submit: t0},
		{ID: "v", Team: "vision", GPUs: 1, MemPerGPUMiB: 80 * gib, Priority: 1, Submit: now},
	}
	d := NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: labTeams()})
	require.True(t, d[1].Placed())
	require.False(t, d[0].Placed())
}

func TestUsageHalvesEveryHalfLife(t *testing.T) {
	u := Usage{HalfLife: time.Hour}
	u.Add(t0, "nlp", 100)
	u.Add(t0.Add(time.Hour), "vision", 10)
	at := u.At(t0.Add(2 * time.Hour))
	require.InDelta(t, 25, at["nlp"], 1e-9)
	require.InDelta(t, 5, at["vision"], 1e-9)
}

func TestEquiv(t *testing.T) {
	require.Equal(t, 2.0, Equiv(2, 40*gib, 80*gib, false), "a run that does not share holds its GPUs whole")
	require.Equal(t, 1.0, Equiv(2, 40*gib, 80*gib, true))
	require.Equal(t, 1.0, Equiv(1, 40*gib, 0, true), "unknown memory counts whole")
}

func TestTeamsShareAskedForAhead(t *testing.T) {
	now := t0.Add(time.Hour)
	// nlp holds nothing; its first run takes its one-GPU share, the second
	// borrows and, with no GPU free, waits: its reason says the share is
	// asked for by the run ahead, not that nlp holds it.
	inv := machine(8, 80, 0, 0, 0)
	running := []Running{whole("v0", "vision", "G1", t0), whole("v1", "vision", "G2", t0), whole("v2", "vision", "G3", t0)}
	q := []Request{
		{ID: "a", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0},
		{ID: "b", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0.Add(time.Second)},
	}
	d := NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: labTeams()})
	require.True(t, d[0].Placed())
	require.Equal(t, WaitTeamShare, d[1].Reason.Code)
	require.Contains(t, d[1].Wait, "team nlp's share (1 GPUs) is asked for by its runs ahead (0 held)")
}

func TestTeamsBorrowLimitCountsThePass(t *testing.T) {
	now := t0.Add(time.Hour)
	// nlp (share 1, may borrow 1 more) holds its one GPU and asks for
	// three more in one pass: one borrows, two wait at the limit.
	lim := labTeams()
	lim.Teams[1].BorrowLimit = 1
	inv := machine(8, 0, 80, 80, 80)
	running := []Running{whole("n0", "nlp", "G0", t0)}
	var q []Request
	for _, id := range []string{"a", "b", "c"} {
		q = append(q, Request{ID: id, Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0})
	}
	d := NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: lim})
	placed, limited := 0, 0
	for _, x := range d {
		if x.Placed() {
			placed++
		} else if x.Reason.Code == WaitTeamBorrow {
			limited++
		}
	}
	require.Equal(t, 1, placed)
	require.Equal(t, 2, limited)
}

func TestTeamsReclaimStopsOnlyWhatFrees(t *testing.T) {
	now := t0.Add(time.Hour)
	// nlp holds GPU 0, its share, and borrows GPUs 1–3. Two vision runs
	// each have one borrowed run reclaimed, a different one each (the
	// second counts the room the first took), and never nlp's own.
	inv := machine(8, 0, 0, 0, 0)
	running := []Running{
		whole("n0", "nlp", "G0", t0),
		whole("n1", "nlp", "G1", t0.Add(time.Minute)),
		whole("n2", "nlp", "G2", t0.Add(2*time.Minute)),
		whole("n3", "nlp", "G3", t0.Add(3*time.Minute)),
	}
	q := []Request{
		{ID: "v1", Team: "vision", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0},
		{ID: "v2", Team: "vision", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0.Add(time.Second)},
	}
	d := NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: labTeams()})
	require.Len(t, d[0].Preempt, 1)
	require.Len(t, d[1].Preempt, 1)
	require.NotEqual(t, d[0].Preempt, d[1].Preempt, "each reclaim counts the room the one before took")
	require.NotContains(t, append(d[0].Preempt, d[1].Preempt...), "n0", "nlp keeps its own share")
}

func TestTeamsCountAMIGGPUOnce(t *testing.T) {
	// One physical GPU split into two slices and one whole GPU: nlp's two
	// runs on the two slices hold one GPU, its share; vision may have the
	// other within its share.
	inv := Inventory{GPUs: []GPU{
		{Index: 0, UUID: "G0", TotalMiB: 80 * gib, FreeMiB: 0, Healthy: true},
		{Index: 1, UUID: "M0", Parent: "G0", TotalMiB: 40 * gib, FreeMiB: 0, Healthy: true},
		{Index: 2, UUID: "M1", Parent: "G0", TotalMiB: 40 * gib, FreeMiB: 0, Healthy: true},
		{Index: 3, UUID: "G1", TotalMiB: 80 * gib, FreeMiB: 80 * gib, Healthy: true},
	}}
	running := []Running{
		{ID: "n0", Team: "nlp", GPUs: []string{"M0"}, MemPerGPUMiB: 40 * gib, Start: t0},
		{ID: "n1", Team: "nlp", GPUs: []string{"M1"}, MemPerGPUMiB: 40 * gib, Start: t0},
	}
	var borrowed []string
	for _, b := range Borrowers(State{Inventory: inv, Running: running, Teams: labTeams()}) {
		if b.Borrowed {
			borrowed = append(borrowed, b.ID)
		}
	}
	require.Empty(t, borrowed, "two slices of one GPU are one GPU of nlp's share")
}

func TestTeamsLendLimitAfterOwnUse(t *testing.T) {
	now := t0.Add(time.Hour)
	// vision (share 3) lends at most 1 of its idle GPUs. Holding one, it
	// has two idle: one is lent, one kept. nlp (holding its one) borrows
	// one GPU, not two.
	kept := labTeams()
	kept.Teams[0].LendLimit = 1
	inv := machine(8, 0, 0, 80, 80)
	running := []Running{whole("v0", "vision", "G0", t0), whole("n0", "nlp", "G1", t0)}
	q := []Request{
		{ID: "a", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0},
		{ID: "b", Team: "nlp", GPUs: 1, MemPerGPUMiB: 80 * gib, Submit: t0.Add(time.Second)},
	}
	d := NewScheduler(Herd(HerdOptions{})).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: kept})
	require.True(t, d[0].Placed())
	require.Equal(t, WaitTeamShare, d[1].Reason.Code)
	require.Contains(t, d[1].Wait, "1 idle GPU(s) are kept for their teams")
}

func TestTeamsTersePassDecidesAsAFullOne(t *testing.T) {
	now := t0.Add(time.Hour)
	// Terse passes (the simulator's) skip requests whose shape already
	// failed: the shape must carry the team, or a run would be refused a
	// GPU beside its own team's because another team's was.
	inv := machine(8, 60, 0)
	running := []Running{
		{ID: "v0", Team: "vision", GPUs: []string{"G0"}, MemPerGPUMiB: 20 * gib, Shareable: true, Start: t0},
		whole("n0", "nlp", "G1", t0),
	}
	small := labTeams()
	small.Teams[0].Nominal = 1
	q := []Request{
		{ID: "n", Team: "nlp", GPUs: 1, MemPerGPUMiB: 20 * gib, Shareable: true, Submit: t0},
		{ID: "v", Team: "vision", GPUs: 1, MemPerGPUMiB: 20 * gib, Shareable: true, Submit: t0.Add(time.Second)},
	}
	for _, terse := range []bool{false, true} {
		d := NewScheduler(BestFit()).Schedule(State{Inventory: inv, Running: running, Queue: q, Now: now, Teams: small, Terse: terse})
		require.False(t, d[0].Placed(), "terse %v", terse)
		require.Equal(t, []int{0}, placedOn(d[1]), "terse %v: beside its own team's run", terse)
	}
}
