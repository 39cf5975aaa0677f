package service

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/gpumon"
	"niuma/machine"
	"niuma/shepherd"
)

// procs is a Procs whose live tokens a test sets: the user whose process
// carries each.
type procs struct {
	mu    sync.Mutex
	alive map[string]int
}

func (p *procs) Alive(tokens []string) map[string]Carriers {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]Carriers{}
	for _, t := range tokens {
		if uid, ok := p.alive[t]; ok {
			out[t] = Carriers{uid: true}
		}
	}
	return out
}

func (p *procs) UID(int) (int, bool) { return 0, false }

// set says a process of who carries token; gone says none does.
func (p *procs) set(token string, who Peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alive == nil {
		p.alive = map[string]int{}
	}
	p.alive[token] = who.UID
}

func (p *procs) gone(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.alive, token)
}

// names is a user database for tests.
type names map[int]string

func (n names) Name(uid int) string { return n[uid] }

// clock is a test's time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

var (
	ana = Peer{UID: 1001, User: "ana"}
	bo  = Peer{UID: 1002, User: "bo"}
)

// world is an arbiter over two simulated A100s, its database in a test
// folder so that a test can restart it.
type world struct {
	t     *testing.T
	dir   string
	cfg   Config
	gpus  gpumon.Source
	procs *procs
	clock *clock
	store *Store
	a     *Arbiter
}

func newWorld(t *testing.T, cfgYAML string) *world {
	t.Helper()
	cfg, err := ParseConfig([]byte(cfgYAML))
	require.NoError(t, err)
	sim, err := gpumon.NewSimulated("2xA100-80GB", gpumon.SimOptions{Seed: 1})
	require.NoError(t, err)
	w := &world{t: t, dir: t.TempDir(), cfg: cfg, gpus: sim, procs: &procs{},
		clock: &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}}
	w.open()
	return w
}

func (w *world) open() {
	w.t.Helper()
	st, err := OpenStore(filepath.Join(w.dir, "machine.db"))
	require.NoError(w.t, err)
	w.t.Cleanup(func() { st.Close() })
	w.store = st
	w.a, err = NewArbiter(context.Background(), Options{Config: w.cfg, Store: st, GPUs: w.gpus, Procs: w.procs,
		Users: names{1001: "ana", 1002: "bo"}, Host: shepherd.Host{CPUMilli: 64000, MemMiB: 512 << 10},
		Now: w.clock.now, Quiet: 20 * time.Second})
	require.NoError(w.t, err)
}

// restart is a service killed and started again over the same file.
func (w *world) restart() {
	w.store.Close()
	w.open()
}

func ask1(token, run string, gpus int) machine.Entry {
	return machine.Entry{Token: token, Run: run, RunName: "train-" + run, Stage: "train",
		Request: shepherd.Request{ID: run + "/train", GPUs: gpus}}
}

func held(token, run string, d shepherd.Decision) machine.Held {
	r := shepherd.Request{ID: run + "/train", GPUs: len(d.GPUs)}.Placement(d.GPUs, d.Host, time.Time{})
	return machine.Held{Token: token, Run: run, RunName: "train-" + run, Stage: "train", Placement: r}
}

func (w *world) place(p Peer, home string, queue []machine.Entry, running ...machine.Held) machine.Answer {
	w.t.Helper()
	ans, err := w.a.Place(context.Background(), p, machine.Ask{Home: home, Queue: queue, Running: running})
	require.NoError(w.t, err)
	require.Len(w.t, ans.Decisions, len(queue))
	return ans
}

func gpusOf(d shepherd.Decision) []string {
	var out []string
	for _, g := range d.GPUs {
		out = append(out, g.UUID)
	}
	return out
}

func TestTwoUsersNeverGetOneGPU(t *testing.T) {
	w := newWorld(t, "")
	a := w.place(ana, "/home/ana/.niuma", []machine.Entry{ask1("ta1", "a1", 1), ask1("ta2", "a2", 1)})
	require.True(t, a.Decisions[0].Placed())
	require.True(t, a.Decisions[1].Placed())
	assert.NotEqual(t, gpusOf(a.Decisions[0]), gpusOf(a.Decisions[1]), "ana's two runs on two GPUs")

	// Both GPUs are leased to ana: bo waits, whatever he asks.
	b := w.place(bo, "/home/bo/.niuma", []machine.Entry{ask1("tb1", "b1", 1)})
	require.False(t, b.Decisions[0].Placed(), "no GPU is free for bo")
	assert.NotEmpty(t, b.Decisions[0].Wait)

	// Asking again while the attempt is being recorded is idempotent: the
	// same token keeps its GPU.
	again := w.place(ana, "/home/ana/.niuma", []machine.Entry{ask1("ta1", "a1", 1)}, held("ta2", "a2", a.Decisions[1]))
	assert.Equal(t, gpusOf(a.Decisions[0]), gpusOf(again.Decisions[0]))
	w.place(ana, "/home/ana/.niuma", nil, held("ta1", "a1", a.Decisions[0]), held("ta2", "a2", a.Decisions[1]))

	// ana's first run ends: its lease is released, and bo's run gets its GPU.
	require.NoError(t, w.a.Release(context.Background(), ana, "ta1"))
	b = w.place(bo, "/home/bo/.niuma", []machine.Entry{ask1("tb1", "b1", 1)})
	require.True(t, b.Decisions[0].Placed())
	assert.Equal(t, gpusOf(a.Decisions[0]), gpusOf(b.Decisions[0]))
	assert.Equal(t, 0, b.Decisions[0].GPUs[0].Index, "the decision carries the GPU's index")
}

func TestLeasesSurviveTheServiceKilled(t *testing.T) {
	w := newWorld(t, "")
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 2)})
	require.True(t, a.Decisions[0].Placed())

	// Killed right after answering: the lease was stored before.
	w.restart()
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	assert.False(t, b.Decisions[0].Placed(), "the restarted service still knows ana's lease")
	st, err := w.a.Status(context.Background(), bo)
	require.NoError(t, err)
	require.Len(t, st.Leases, 1)
	assert.Equal(t, "ana", st.Leases[0].User)
	assert.Equal(t, []int{0, 1}, st.Leases[0].Indices)
}

func TestAQuietHoldersLeaseGoesOnlyWithItsProcesses(t *testing.T) {
	w := newWorld(t, "")
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 2)})
	require.True(t, a.Decisions[0].Placed())
	w.procs.set("ta1", ana)

	// ana's engine is killed; her stage's processes go on.
	w.clock.add(time.Minute)
	require.NoError(t, w.a.Sweep(context.Background()))
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	assert.False(t, b.Decisions[0].Placed(), "a lease is kept while a process carries its token")

	// The processes end: the lease is given up at the next sweep.
	w.procs.gone("ta1")
	require.NoError(t, w.a.Sweep(context.Background()))
	b = w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	assert.True(t, b.Decisions[0].Placed())
}

func TestALeaseItsHolderStopsNamingIsGivenUp(t *testing.T) {
	w := newWorld(t, "")
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 2)})
	require.True(t, a.Decisions[0].Placed())
	// The attempt ran and ended, and the release never arrived: ana's
	// next ask names neither the token nor a queue entry for it.
	w.place(ana, "/h/a", nil)
	st, err := w.a.Status(context.Background(), ana)
	require.NoError(t, err)
	assert.Empty(t, st.Leases)
}

func TestAnAdoptedAttemptIsRecordedAsItStands(t *testing.T) {
	w := newWorld(t, "")
	// The service lost nothing, but ana's new engine adopted an attempt it
	// never placed (e.g. from before the service was installed).
	d := shepherd.Decision{GPUs: []shepherd.GPU{{Index: 1, UUID: "GPU-51a1a7ed-0000-4000-8000-000000000001"}}}
	// Named while no process carries its token (not launched yet): no
	// lease, nothing holds the GPU.
	w.place(ana, "/h/a", nil, held("ta9", "a9", d))
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb0", "b0", 2)})
	require.True(t, b.Decisions[0].Placed(), "an attempt that is not running holds nothing")
	require.NoError(t, w.a.Release(context.Background(), bo, "tb0"))
	w.place(bo, "/h/b", nil)

	// bo's process carrying ana's token does not make it ana's.
	w.procs.set("ta9", bo)
	w.place(ana, "/h/a", nil, held("ta9", "a9", d))
	st, err := w.a.Status(context.Background(), ana)
	require.NoError(t, err)
	require.Empty(t, st.Leases, "another user's process carrying the token holds nothing for ana")

	w.procs.set("ta9", ana)
	w.place(ana, "/h/a", nil, held("ta9", "a9", d))
	b = w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 2)})
	assert.False(t, b.Decisions[0].Placed(), "bo cannot have both GPUs: ana's adopted attempt holds one")
	b = w.place(bo, "/h/b", []machine.Entry{ask1("tb2", "b2", 1)})
	require.True(t, b.Decisions[0].Placed())
	assert.Equal(t, 0, b.Decisions[0].GPUs[0].Index)
}

func TestClaim(t *testing.T) {
	w := newWorld(t, "")
	ctx := context.Background()
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 1)})
	require.True(t, a.Decisions[0].Placed())
	h := held("ta1", "a1", a.Decisions[0])
	claim := machine.Claim{Home: "/h/a", Token: "ta1", Run: "a1", Stage: "train", Placement: h.Placement}
	require.NoError(t, w.a.Claim(ctx, ana, claim), "a lease claims")

	// bo cannot claim ana's lease, nor the GPU it holds.
	var refused *machine.Refused
	require.ErrorAs(t, w.a.Claim(ctx, bo, machine.Claim{Home: "/h/b", Token: "ta1", Placement: h.Placement}), &refused)
	err := w.a.Claim(ctx, bo, machine.Claim{Home: "/h/b", Token: "tb1", Run: "b1", Stage: "train", Placement: h.Placement})
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Reason, "placed nothing under tb1")

	// A lease given up while its holder was away (quiet, no process) is
	// taken again when the GPU is still free.
	w.clock.add(time.Minute)
	require.NoError(t, w.a.Sweep(ctx))
	st, err := w.a.Status(ctx, ana)
	require.NoError(t, err)
	require.Empty(t, st.Leases, "the quiet holder's lease was given up")
	require.NoError(t, w.a.Claim(ctx, ana, claim))
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 2)})
	assert.False(t, b.Decisions[0].Placed())

	// A lease its holder released is not claimed again, nor is a token the
	// service placed nothing under: GPUs are had through the queue.
	require.NoError(t, w.a.Release(ctx, ana, "ta1"))
	err = w.a.Claim(ctx, ana, claim)
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Reason, "placed nothing under ta1")
	free := held("tx", "x1", shepherd.Decision{GPUs: []shepherd.GPU{{Index: 0, UUID: h.Placement.GPUs[0]}}})
	err = w.a.Claim(ctx, bo, machine.Claim{Home: "/h/b", Token: "tx", Run: "x1", Stage: "train", Placement: free.Placement})
	require.ErrorAs(t, err, &refused, "a claim of free GPUs with no lease is refused")
}

// What orders the machine's queue is the service's to say: a stage that
// claims an old submission time or a high tier does not jump the queue.
func TestAnAskCannotJumpTheQueue(t *testing.T) {
	w := newWorld(t, "")
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 2)})
	require.True(t, a.Decisions[0].Placed())
	w.clock.add(time.Minute)
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 2)})
	require.False(t, b.Decisions[0].Placed())
	w.clock.add(time.Minute)
	cheat := ask1("ta2", "a2", 2)
	cheat.Request.Submit = w.clock.t.Add(-24 * time.Hour)
	cheat.Request.Tier = 9
	w.place(ana, "/h/a", []machine.Entry{cheat}, held("ta1", "a1", a.Decisions[0]))
	// ana's first stage ends: bo, who asked first, gets the GPUs.
	require.NoError(t, w.a.Release(context.Background(), ana, "ta1"))
	ans := w.place(ana, "/h/a", []machine.Entry{cheat})
	assert.False(t, ans.Decisions[0].Placed(), "ana's stage waits behind bo's, whatever it says of itself")
	b = w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 2)})
	assert.True(t, b.Decisions[0].Placed())
}

// A lease the machine wants back before its attempt launched launches
// nothing: the claim is refused with the reason and the stage queues.
func TestALeaseReclaimedBeforeItsLaunchIsNotClaimed(t *testing.T) {
	w := newWorld(t, twoTeams)
	ctx := context.Background()
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 2)})
	require.True(t, a.Decisions[0].Placed(), "ana borrows nlp's idle GPU")
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	require.False(t, b.Decisions[0].Placed())
	h := held("ta1", "a1", a.Decisions[0])
	ans := w.place(ana, "/h/a", nil, h)
	require.Len(t, ans.Reclaim, 1)
	assert.Equal(t, 20*time.Second, ans.Reclaim[0].Grace, "the settings' grace goes with every reclaim")
	var refused *machine.Refused
	err := w.a.Claim(ctx, ana, machine.Claim{Home: "/h/a", Token: "ta1", Run: "a1", Stage: "train", Placement: h.Placement})
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Reason, "team nlp wants its share back")
	b = w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	assert.True(t, b.Decisions[0].Placed())
}

// An admin's cancel waits for its owner's Niuma, however long it is away.
func TestAnAdminsCancelWaitsForTheOwnersNiuma(t *testing.T) {
	w := newWorld(t, "admins: [root]")
	ctx := context.Background()
	root := Peer{UID: 0, User: "root"}
	w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 4)}) // waits: 4 GPUs asked of 2
	res, err := w.a.Cancel(ctx, root, "a1")
	require.NoError(t, err)
	assert.Equal(t, "ana", res.Owner)
	// ana's Niuma is away for an hour: its queue goes, the order stays.
	for i := 0; i < 60; i++ {
		w.clock.add(time.Minute)
		require.NoError(t, w.a.Sweep(ctx))
	}
	ans := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 4)})
	require.Len(t, ans.Cancel, 1)
	assert.Equal(t, "a1", ans.Cancel[0].Run)
	// Heard, and the run asks for nothing more: the order goes.
	w.place(ana, "/h/a", nil)
	require.NoError(t, w.a.Sweep(ctx))
	assert.Empty(t, w.a.cancels)
}

// One user cannot fill the service with data directories.
func TestAUserPlacesFromBoundedDataDirectories(t *testing.T) {
	w := newWorld(t, "")
	for i := 0; i < maxHomes; i++ {
		w.place(ana, fmt.Sprintf("/h/a%d", i), nil)
	}
	_, err := w.a.Place(context.Background(), ana, machine.Ask{Home: "/h/one-more"})
	var refused *machine.Refused
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Reason, "data directories")
	w.place(bo, "/h/b", nil) // another user is not held back
}

const twoTeams = `
teams:
  - {name: vision, users: [ana], gpus: 1}
  - {name: nlp, users: [bo], gpus: 1}
admins: [root]
grace: 20s
`

func TestABorrowedGPUIsReclaimedForItsOwner(t *testing.T) {
	w := newWorld(t, twoTeams)
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 1), ask1("ta2", "a2", 1)})
	require.True(t, a.Decisions[0].Placed())
	require.True(t, a.Decisions[1].Placed(), "nlp's idle GPU is lent to vision")
	running := []machine.Held{held("ta1", "a1", a.Decisions[0]), held("ta2", "a2", a.Decisions[1])}
	w.clock.add(time.Second)
	w.place(ana, "/h/a", nil, running...)

	st, err := w.a.Status(context.Background(), ana)
	require.NoError(t, err)
	require.Len(t, st.Teams, 2)
	assert.Equal(t, "vision", st.Teams[0].Name)
	assert.Equal(t, 2.0, st.Teams[0].Held)
	assert.Equal(t, 1.0, st.Teams[0].Borrowed)
	assert.InDelta(t, 1.0, st.Teams[1].LentTo["vision"], 1e-9, "nlp lends its GPU to vision")
	assert.Len(t, st.Teams[0].Reclaimable, 1)

	// bo (nlp) asks for his share: ana's borrowed run is reclaimed.
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	require.False(t, b.Decisions[0].Placed())
	assert.Equal(t, shepherd.WaitReclaiming, b.Decisions[0].Reason.Code, b.Decisions[0].Wait)
	ans := w.place(ana, "/h/a", nil, running...)
	require.Len(t, ans.Reclaim, 1)
	assert.Equal(t, st.Teams[0].Reclaimable[0], leaseID(ans.Reclaim[0].Token))
	assert.Contains(t, ans.Reclaim[0].Why, "team nlp wants its share back")
	assert.Equal(t, 20*time.Second, ans.Reclaim[0].Grace)

	// The preempted attempt ends; bo's run takes the GPU it had.
	victim := ans.Reclaim[0].Token
	require.NoError(t, w.a.Release(context.Background(), ana, victim))
	b = w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	require.True(t, b.Decisions[0].Placed())
	var kept machine.Held
	for _, h := range running {
		if h.Token != victim {
			kept = h
		} else {
			assert.Equal(t, h.Placement.GPUs, gpusOf(b.Decisions[0]), "bo gets the reclaimed GPU")
		}
	}
	// ana's preempted run asks again: it waits, her team at its share.
	a = w.place(ana, "/h/a", []machine.Entry{ask1("ta3", "a3", 1)}, kept)
	require.False(t, a.Decisions[0].Placed())
	assert.Contains(t, a.Decisions[0].Wait, "team vision is at its share (1 of 1 GPUs)")
}

func TestOnlyTheOwnerOrAnAdminMayCancel(t *testing.T) {
	w := newWorld(t, twoTeams)
	ctx := context.Background()
	w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "20261201-090000-aaaaaa", 1)})

	_, err := w.a.Cancel(ctx, bo, "aaaaaa")
	var refused *machine.Refused
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, "run 20261201-090000-aaaaaa belongs to ana: only ana or an admin (root) may cancel it", refused.Reason)
	ans := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "20261201-090000-aaaaaa", 1)})
	assert.Empty(t, ans.Cancel, "a refused cancel orders nothing")

	root := Peer{UID: 0, User: "root"}
	res, err := w.a.Cancel(ctx, root, "aaaaaa")
	require.NoError(t, err)
	assert.Equal(t, machine.CancelResult{Owner: "ana", Run: "20261201-090000-aaaaaa"}, res)
	ans = w.place(ana, "/h/a", nil, held("ta1", "20261201-090000-aaaaaa", shepherd.Decision{}))
	require.Len(t, ans.Cancel, 1)
	assert.Equal(t, machine.CancelOrder{Run: "20261201-090000-aaaaaa", By: "root"}, ans.Cancel[0])

	_, err = w.a.Cancel(ctx, bo, "nosuchrun")
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Reason, "no run nosuchrun")
}

func TestFairShareOrdersTheBorrowers(t *testing.T) {
	cfg := `
teams:
  - {name: vision, users: [ana], gpus: 1}
  - {name: nlp, users: [bo], gpus: 1}
  - {name: idle, users: [cy], gpus: 0}
half_life: 1h
`
	w := newWorld(t, cfg)
	// ana has used her GPUs for hours; bo has not.
	a := w.place(ana, "/h/a", []machine.Entry{ask1("ta1", "a1", 2)})
	require.True(t, a.Decisions[0].Placed())
	w.clock.add(3 * time.Hour)
	w.place(ana, "/h/a", nil, held("ta1", "a1", a.Decisions[0]))
	st, err := w.a.Status(context.Background(), bo)
	require.NoError(t, err)
	byName := map[string]machine.Team{}
	for _, tm := range st.Teams {
		byName[tm.Name] = tm
	}
	assert.Greater(t, byName["vision"].Usage, 1.0, "decayed GPU-hours")
	assert.Less(t, byName["vision"].FairShare, byName["nlp"].FairShare)
	assert.Equal(t, 1.0, byName["nlp"].FairShare)
}

func TestConfigErrorsSayWhatToFix(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"teams: [{name: a, users: [x], gpus: -1}]", "give its share as 0 or more GPUs"},
		{"teams: [{users: [x], gpus: 1}]", "has no name"},
		{"teams: [{name: a, gpus: 1}]", "has no members"},
		{"teams: [{name: a, users: [x]}, {name: a, users: [y]}]", "listed twice"},
		{"teams: [{name: a, users: [x]}, {name: b, users: [x]}]", "user x is listed in teams a and b"},
		{"half_life: soon", "write a positive duration"},
		{"policy: best", "policy"},
		{"team: []", "field team not found"},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		require.Error(t, err, tc.yaml)
		assert.Contains(t, err.Error(), tc.want, tc.yaml)
	}
	c, err := ParseConfig([]byte("half_life: 7d\ngrace: 45s"))
	require.NoError(t, err)
	assert.Equal(t, 7*24*time.Hour, time.Duration(c.HalfLife))
	assert.Equal(t, 45*time.Second, time.Duration(c.Grace))
	assert.Equal(t, "herd", c.Policy)
}

func TestABadAskIsRefused(t *testing.T) {
	w := newWorld(t, "")
	for _, ask := range []machine.Ask{
		{Queue: []machine.Entry{ask1("t", "r", 1)}},
		{Home: "/h", Queue: []machine.Entry{ask1("", "r", 1)}},
		{Home: "/h", Queue: []machine.Entry{ask1("t", "r", 1), ask1("t", "s", 1)}},
		{Home: "/h", Queue: []machine.Entry{ask1("t", "r", -2)}},
	} {
		_, err := w.a.Place(context.Background(), ana, ask)
		assert.Error(t, err, fmt.Sprintf("%+v", ask))
	}
}
