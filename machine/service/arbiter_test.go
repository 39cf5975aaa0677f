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

// procs is a Procs whose live tokens a test sets.
type procs struct {
	mu    sync.Mutex
	alive map[string]bool
}

func (p *procs) Alive(tokens []string) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for _, t := range tokens {
		if p.alive[t] {
			out[t] = true
		}
	}
	return out
}

func (p *procs) UID(int) (int, bool) { return 0, false }

func (p *procs) set(token string, alive bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alive == nil {
		p.alive = map[string]bool{}
	}
	p.alive[token] = alive
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
	w.procs.set("ta1", true)

	// ana's engine is killed; her stage's processes go on.
	w.clock.add(time.Minute)
	require.NoError(t, w.a.Sweep(context.Background()))
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 1)})
	assert.False(t, b.Decisions[0].Placed(), "a lease is kept while a process carries its token")

	// The processes end: the lease is given up at the next sweep.
	w.procs.set("ta1", false)
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

	w.procs.set("ta9", true)
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
	assert.Contains(t, refused.Reason, "held by ana's run a1")

	// A lease given up while its holder was away is taken again when the
	// GPU is still free.
	require.NoError(t, w.a.Release(ctx, ana, "ta1"))
	require.NoError(t, w.a.Claim(ctx, ana, claim))
	b := w.place(bo, "/h/b", []machine.Entry{ask1("tb1", "b1", 2)})
	assert.False(t, b.Decisions[0].Placed())
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
	assert.Equal(t, st.Teams[0].Reclaimable[0], ans.Reclaim[0].Token)
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
