package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/machine"
	"niuma/machine/service"
	"niuma/shepherd"
	"niuma/storage"
)

// These tests drive two users' engines, each over its own archive, through
// one machine service's arbiter (in this process, each engine's calls made
// as its user), on simulated GPUs and real local processes.

// asUser is the machine service as one user's connection sees it.
type asUser struct {
	a *service.Arbiter
	p service.Peer
}

func (u asUser) Place(ctx context.Context, ask machine.Ask) (machine.Answer, error) {
	return u.a.Place(ctx, u.p, ask)
}
func (u asUser) Claim(ctx context.Context, c machine.Claim) error { return u.a.Claim(ctx, u.p, c) }
func (u asUser) Release(ctx context.Context, t string) error      { return u.a.Release(ctx, u.p, t) }
func (u asUser) Status(ctx context.Context) (machine.Status, error) {
	return u.a.Status(ctx, u.p)
}
func (u asUser) Cancel(ctx context.Context, run string) (machine.CancelResult, error) {
	return u.a.Cancel(ctx, u.p, run)
}

var (
	ana  = service.Peer{UID: 1001, User: "ana"}
	bo   = service.Peer{UID: 1002, User: "bo"}
	root = service.Peer{UID: 0, User: "root"}
)

func arbiter(t *testing.T, cfg string) *service.Arbiter {
	t.Helper()
	c, err := service.ParseConfig([]byte(cfg))
	require.NoError(t, err)
	st, err := service.OpenStore(filepath.Join(t.TempDir(), "machine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := service.NewArbiter(context.Background(), service.Options{Config: c, Store: st,
		GPUs: simulated(t, "2xA100-80GB"), Host: shepherd.Host{CPUMilli: 16000}})
	require.NoError(t, err)
	return a
}

// sharedEngine is a user's engine that places through the service m.
func sharedEngine(t *testing.T, m machine.Arbiter) (*harness, *Engine) {
	h := newHarness(t)
	e := h.engine(func(o *Options) {
		o.GPUs = simulated(t, "2xA100-80GB")
		o.Host = shepherd.Host{CPUMilli: 16000}
		o.Machine = m
	})
	h.drive(e)
	return h, e
}

// borrowYAML holds its GPU until the gate file appears; on SIGTERM it
// keeps a checkpoint and exits; resumed, it checks the checkpoint is there
// and ends.
const borrowYAML = `
name: borrow
params:
  gate: {type: string, default: ""}
stages:
  - name: train
    gpus: 1
    command: [sh, -c, 'echo "$CUDA_VISIBLE_DEVICES" >> train/devices; if [ -n "$NIUMA_RESUME" ]; then cat "$NIUMA_RESUME/ckpt" > train/resumed; exit 0; fi; trap "echo step-3 > train/ckpt; exit 143" TERM; touch train/started; while [ ! -e "$NIUMA_PARAM_GATE" ]; do sleep 0.05; done']
`

func TestALentGPUIsReclaimedForItsOwnerTeam(t *testing.T) {
	m := arbiter(t, `
teams:
  - {name: vision, users: [ana], gpus: 1}
  - {name: nlp, users: [bo], gpus: 1}
grace: 5s
`)
	_, ea := sharedEngine(t, asUser{m, ana})
	_, eb := sharedEngine(t, asUser{m, bo})
	gate := filepath.Join(t.TempDir(), "go")
	tm := parse(t, borrowYAML)
	var mine []RunInfo
	for range 2 {
		r, err := ea.Submit(context.Background(), RunSpec{Template: tm, Values: mustValues(t, tm, "gate", gate)})
		require.NoError(t, err)
		mine = append(mine, r)
	}
	until(t, 20*time.Second, "both of ana's runs on the two GPUs (one lent by nlp)", func() bool {
		for _, r := range mine {
			if _, err := os.Stat(filepath.Join(r.Dir, "train", "started")); err != nil {
				return false
			}
		}
		return true
	})
	st, err := eb.MachineStatus(context.Background())
	require.NoError(t, err)
	require.Len(t, st.Leases, 2)
	require.Equal(t, 1, countBorrowed(st.Leases), "one of ana's leases borrows nlp's share")

	theirs, err := eb.Submit(context.Background(), RunSpec{Template: parse(t, urgentYAML)})
	require.NoError(t, err)
	b := waitDone(t, eb, theirs.ID)
	require.Equal(t, Succeeded, b.State, "bo's run got his team's GPU back: %+v", b.Stages)

	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	preempted := 0
	for _, r := range mine {
		info := waitDone(t, ea, r.ID)
		require.Equal(t, Succeeded, info.State, "%+v", info.Stages)
		h := info.Stages[0].History
		if h[0].State != storage.AttemptPreempted {
			continue
		}
		preempted++
		require.Contains(t, h[0].Reason, "team nlp wants its share back for bo's run "+theirs.ID)
		require.Len(t, h, 2)
		require.True(t, h[1].StartedAt.After(b.Stages[0].StartedAt), "it resumed after bo's run took its GPU")
		resumed, err := os.ReadFile(filepath.Join(r.Dir, "train", "resumed"))
		require.NoError(t, err, "the resumed attempt found its checkpoint")
		require.Equal(t, "step-3\n", string(resumed))
		devices, err := os.ReadFile(filepath.Join(r.Dir, "train", "devices"))
		require.NoError(t, err)
		bd, err := os.ReadFile(filepath.Join(theirs.Dir, "train", "devices"))
		require.NoError(t, err)
		require.Equal(t, string(bd), strings.SplitAfter(string(devices), "\n")[0], "bo's run took the GPU the preempted one had")
	}
	require.Equal(t, 1, preempted, "exactly the borrowing run was preempted")
	until(t, 10*time.Second, "every lease given up", func() bool {
		st, err := ea.MachineStatus(context.Background())
		return err == nil && len(st.Leases) == 0 && len(st.Queue) == 0
	})
}

func countBorrowed(ls []machine.Lease) int {
	n := 0
	for _, l := range ls {
		if l.Borrowed {
			n++
		}
	}
	return n
}

// flaky is a machine service that does not answer while down is set, and
// refuses the next claims while refuse is above zero.
type flaky struct {
	machine.Arbiter
	down   atomic.Bool
	refuse atomic.Int32
	mu     sync.Mutex
	claims int
}

func (f *flaky) Place(ctx context.Context, ask machine.Ask) (machine.Answer, error) {
	if f.down.Load() {
		return machine.Answer{}, machine.Unreachable("/run/niuma/niuma.sock", errors.New("connection refused"))
	}
	return f.Arbiter.Place(ctx, ask)
}

func (f *flaky) Claim(ctx context.Context, c machine.Claim) error {
	f.mu.Lock()
	f.claims++
	f.mu.Unlock()
	if f.refuse.Add(-1) >= 0 {
		return &machine.Refused{Reason: "the GPU GPU-x is held by bo's run r1 (urgent) now"}
	}
	return f.Arbiter.Claim(ctx, c)
}

func TestAStageWaitsWhileTheServiceIsAwayAndNeverLaunchesUnconfirmed(t *testing.T) {
	f := &flaky{Arbiter: asUser{arbiter(t, ""), ana}}
	f.down.Store(true)
	f.refuse.Store(1)
	_, e := sharedEngine(t, f)
	r, err := e.Submit(context.Background(), RunSpec{Template: parse(t, urgentYAML)})
	require.NoError(t, err)
	until(t, 10*time.Second, "the stage waiting for the service", func() bool {
		s := stageOf(t, e, r.ID)
		return s.ReasonCode == WaitMachine
	})
	s := stageOf(t, e, r.ID)
	require.Equal(t, Queued, s.State)
	require.Contains(t, s.Reason, "waits for the machine service")
	require.Contains(t, s.Reason, "not answering")

	// The service answers; its first claim is refused (the GPUs went to
	// someone else meanwhile): that attempt never runs and costs no retry.
	f.down.Store(false)
	info := waitDone(t, e, r.ID)
	require.Equal(t, Succeeded, info.State)
	h := info.Stages[0].History
	require.Len(t, h, 2)
	require.Equal(t, storage.AttemptNotStarted, h[0].State)
	require.Contains(t, h[0].Reason, "held by bo's run r1")
	require.Equal(t, storage.AttemptSucceeded, h[1].State)
	_, err = os.Stat(filepath.Join(r.Dir, "train", "devices"))
	require.NoError(t, err)
}

func TestAnAdminsCancelStopsAnotherUsersRun(t *testing.T) {
	m := arbiter(t, "")
	_, ea := sharedEngine(t, asUser{m, ana})
	gate := filepath.Join(t.TempDir(), "never")
	tm := parse(t, borrowYAML)
	r, err := ea.Submit(context.Background(), RunSpec{Template: tm, Values: mustValues(t, tm, "gate", gate)})
	require.NoError(t, err)
	until(t, 20*time.Second, "ana's run started", func() bool {
		_, err := os.Stat(filepath.Join(r.Dir, "train", "started"))
		return err == nil
	})
	var refused *machine.Refused
	_, err = asUser{m, bo}.Cancel(context.Background(), r.ID)
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "belongs to ana")

	res, err := asUser{m, root}.Cancel(context.Background(), r.ID)
	require.NoError(t, err)
	require.Equal(t, "ana", res.Owner)
	info := waitDone(t, ea, r.ID)
	require.Equal(t, Cancelled, info.State)
}

// installed is a machine service that is installed or not as a test says
// (machine.Present), counting the placements asked of it.
type installed struct {
	machine.Arbiter
	present atomic.Bool
	places  atomic.Int64
}

func (i *installed) Present() bool { return i.present.Load() }

func (i *installed) Place(ctx context.Context, ask machine.Ask) (machine.Answer, error) {
	i.places.Add(1)
	return i.Arbiter.Place(ctx, ask)
}

// A service installed or removed while an engine runs is followed at its
// next pass: with none, the engine places alone; with one, through it.
func TestTheEngineFollowsTheServiceBeingInstalledAndRemoved(t *testing.T) {
	m := &installed{Arbiter: asUser{arbiter(t, ""), ana}}
	_, e := sharedEngine(t, m)
	require.False(t, e.Shared())
	_, err := e.MachineStatus(context.Background())
	require.ErrorIs(t, err, ErrNoMachine)
	r, err := e.Submit(context.Background(), RunSpec{Template: parse(t, urgentYAML)})
	require.NoError(t, err)
	require.Equal(t, Succeeded, waitDone(t, e, r.ID).State)
	require.Zero(t, m.places.Load(), "no service installed: the engine placed alone")

	m.present.Store(true)
	require.True(t, e.Shared())
	r, err = e.Submit(context.Background(), RunSpec{Template: parse(t, urgentYAML)})
	require.NoError(t, err)
	require.Equal(t, Succeeded, waitDone(t, e, r.ID).State)
	require.NotZero(t, m.places.Load(), "installed: the engine placed through the service")
	st, err := e.MachineStatus(context.Background())
	require.NoError(t, err)
	require.Empty(t, st.Leases, "the ended attempt's lease was given up")
}
