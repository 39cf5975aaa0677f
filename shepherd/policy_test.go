package shepherd

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// machine is n healthy GPUs with the given free GiB, in NVLink groups of size group.
func machine(group int, freeGiB ...int64) Inventory {
	var inv Inventory
	for i, f := range freeGiB {
		inv.GPUs = append(inv.GPUs, GPU{Index: i, UUID: fmt.Sprintf("G%d", i), TotalMiB: 80 * gib, FreeMiB: f * gib,
			Healthy: true, Group: fmt.Sprintf("nv%d", i/group)})
	}
	return inv
}

func placedOn(d Decision) []int {
	var out []int
	for _, g := range d.GPUs {
		out = append(out, g.Index)
	}
	return out
}

func TestBestFitIsTheBaseline(t *testing.T) {
	// Free 30, 10, 50, 20 GiB. By priority: "hi" (prio 5, 15 GiB) scans by
	// free ascending 10, 20, 30, 50 and takes GPU 3 (20 ≥ 15, 5 left);
	// "mid" (prio 1, 25 GiB) skips 10 and 5 and takes GPU 0 (30); "lo"
	// (prio 0, 60 GiB) fits nowhere (largest is 50) and waits; "lo2"
	// (prio 0, 8 GiB) is not blocked by it: GPU 1 (10 free).
	inv := machine(8, 30, 10, 50, 20)
	q := []Request{
		{ID: "lo", GPUs: 1, MemPerGPUMiB: 60 * gib, Priority: 0, Submit: t0},
		{ID: "mid", GPUs: 1, MemPerGPUMiB: 25 * gib, Priority: 1, Submit: t0},
		{ID: "hi", GPUs: 1, MemPerGPUMiB: 15 * gib, Priority: 5, Submit: t0.Add(time.Minute)},
		{ID: "lo2", GPUs: 1, MemPerGPUMiB: 8 * gib, Priority: 0, Submit: t0.Add(time.Minute)},
	}
	ds := Schedule(BestFit(), State{Inventory: inv, Queue: q, Now: t0.Add(time.Hour)})
	require.Empty(t, placedOn(ds[0]))
	require.Equal(t, "needs 1×60 GiB; largest free is 50 GiB on GPU 2; first in line", ds[0].Wait)
	require.Equal(t, []int{0}, placedOn(ds[1]))
	require.Equal(t, []int{3}, placedOn(ds[2]))
	require.Equal(t, []int{1}, placedOn(ds[3]))
}

func TestFIFOTakesArrivalOrderAndLowestIndex(t *testing.T) {
	// "b" arrived first despite its low priority: it gets GPU 0 (40 ≥ 30);
	// "a" then needs 30 and GPU 0 has 10 left, so GPU 1.
	inv := machine(8, 40, 40)
	q := []Request{
		{ID: "a", GPUs: 1, MemPerGPUMiB: 30 * gib, Priority: 9, Submit: t0.Add(time.Minute)},
		{ID: "b", GPUs: 1, MemPerGPUMiB: 30 * gib, Priority: 0, Submit: t0},
	}
	ds := Schedule(FIFO(), State{Inventory: inv, Queue: q, Now: t0.Add(time.Hour)})
	require.Equal(t, []int{1}, placedOn(ds[0]))
	require.Equal(t, []int{0}, placedOn(ds[1]))
}

func TestHerd(t *testing.T) {
	herd := Herd(HerdOptions{})
	hot := machine(4, 80, 80, 80, 80)
	hot.GPUs[0].TempC = 91
	hot.GPUs[1].Healthy = false
	tests := []struct {
		name    string
		inv     Inventory
		running []Running
		queue   []Request
		now     time.Time
		want    map[string][]int // placed IDs and their GPUs
		wait    map[string]string
		preempt map[string][]string
		reserve bool // herd with HerdOptions.Reserve
	}{
		{
			name: "never a hot or unhealthy gpu",
			inv:  hot,
			queue: []Request{{ID: "a", GPUs: 1, MemPerGPUMiB: 10 * gib, Submit: t0},
				{ID: "b", GPUs: 3, MemPerGPUMiB: 10 * gib, Submit: t0}},
			want: map[string][]int{"a": {2}},
			wait: map[string]string{"b": "needs 3×10 GiB; largest free is 80 GiB on GPU 0; 1 of 3 fit now; 1 GPU too hot (91 °C); 1 GPU unhealthy; 1 GPU held by a run that does not share; first in line"},
		},
		{
			// Group nv0 = GPUs 0,1 (30 and 80 free), nv1 = GPUs 2,3 (80, 80).
			// A 2×40 gang cannot use GPU 0, so it goes on nv1 as a whole.
			name:  "gang on one NVLink group",
			inv:   machine(2, 30, 80, 80, 80),
			queue: []Request{{ID: "g", GPUs: 2, MemPerGPUMiB: 40 * gib, Submit: t0}},
			want:  map[string][]int{"g": {2, 3}},
		},
		{
			// Both groups have one GPU with 40 free: 2 fit, not on one group.
			name:  "gang waits rather than span groups",
			inv:   machine(2, 40, 10, 40, 10),
			queue: []Request{{ID: "g", GPUs: 2, MemPerGPUMiB: 40 * gib, Submit: t0}},
			wait:  map[string]string{"g": "needs 2×40 GiB on one linked group; largest free is 40 GiB on GPU 0; 2 GPUs fit, but not 2 on one group; first in line"},
		},
		{
			// GPU 0 holds one sharing run and 50 GiB free; GPU 1 is empty.
			// Fewest tenants first: the 20 GiB run goes on GPU 1 alone.
			name:    "shares only when it saves a gpu",
			inv:     machine(8, 50, 80),
			running: []Running{{ID: "r", GPUs: []string{"G0"}, MemPerGPUMiB: 30 * gib, Shareable: true, Start: t0}},
			queue: []Request{{ID: "a", GPUs: 1, MemPerGPUMiB: 20 * gib, Shareable: true, Submit: t0},
				{ID: "b", GPUs: 1, MemPerGPUMiB: 20 * gib, Shareable: true, Submit: t0},
				{ID: "c", GPUs: 1, MemPerGPUMiB: 20 * gib, Shareable: true, Submit: t0}},
			// a → GPU 1 (0 tenants); b → GPU 0 or 1, both 1 tenant: least fragment, GPU 0 (50-20=30 left vs 60);
			// c → GPU 1 (GPU 0 is at the sharing limit of 2).
			want: map[string][]int{"a": {1}, "b": {0}, "c": {1}},
		},
		{
			name:    "a run that does not share gets its own gpu",
			reserve: true,
			inv:     machine(8, 60),
			running: []Running{{ID: "r", GPUs: []string{"G0"}, MemPerGPUMiB: 20 * gib, Shareable: true, Start: t0}},
			queue:   []Request{{ID: "x", GPUs: 1, MemPerGPUMiB: 10 * gib, Submit: t0}},
			wait:    map[string]string{"x": "needs 1×10 GiB; largest free is 60 GiB on GPU 0; 1 GPU busy, and this run does not share; GPU 0 reserved for it; first in line"},
		},
		{
			// "big" (prio 2) needs both GPUs; GPU 1's run ends at 10:00, so GPU 0
			// is reserved from then. "short" (1 h) ends at 9:30+1h = 10:30 > 10:00: waits;
			// "tiny" (20 min) ends at 9:50 ≤ 10:00: backfills GPU 0 (shortest
			// first, so it is placed before "short", which then sees 70 GiB free).
			name:    "reservation for the head, backfill around it",
			reserve: true,
			inv:     machine(8, 80, 0),
			running: []Running{{ID: "r", GPUs: []string{"G1"}, MemPerGPUMiB: 80 * gib, Priority: 5,
				Start: t0, Estimate: time.Hour}},
			now: t0.Add(30 * time.Minute),
			queue: []Request{{ID: "big", GPUs: 2, MemPerGPUMiB: 70 * gib, Priority: 2, Submit: t0},
				{ID: "short", GPUs: 1, MemPerGPUMiB: 10 * gib, Priority: 1, Submit: t0, Shareable: true, Estimate: time.Hour},
				{ID: "tiny", GPUs: 1, MemPerGPUMiB: 10 * gib, Priority: 1, Submit: t0, Shareable: true, Estimate: 20 * time.Minute}},
			want: map[string][]int{"tiny": {0}},
			wait: map[string]string{
				"big":   "needs 2×70 GiB; largest free is 80 GiB on GPU 0; 1 of 2 fit now; GPU 0,1 reserved for it from about Mar 1 10:00; first in line",
				"short": "needs 1×10 GiB; largest free is 70 GiB on GPU 0; 1 GPU reserved for a run ahead; 1 run ahead",
			},
		},
		{
			// "urgent" (prio 2) finds no room; the spot run on GPU 0 (prio 0)
			// is preempted for it, the normal run on GPU 1 is not.
			name: "preempt a spot run for a higher priority one",
			inv:  machine(8, 0, 0),
			running: []Running{
				{ID: "spot", GPUs: []string{"G0"}, MemPerGPUMiB: 80 * gib, Priority: 0, Preemptible: true, Start: t0},
				{ID: "normal", GPUs: []string{"G1"}, MemPerGPUMiB: 80 * gib, Priority: 1, Start: t0}},
			now:     t0.Add(time.Hour),
			queue:   []Request{{ID: "urgent", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 2, Submit: t0}},
			preempt: map[string][]string{"urgent": {"spot"}},
			wait:    map[string]string{"urgent": "needs 1×40 GiB; largest free is 0 MiB on GPU 0; stopping spot run(s) spot to make room; first in line"},
		},
		{
			// The spot run started 10 min ago, under the 30 min it is spared.
			name:    "a spot run that just started is spared",
			reserve: true,
			inv:     machine(8, 0),
			now:     t0.Add(10 * time.Minute),
			running: []Running{
				{ID: "spot", GPUs: []string{"G0"}, MemPerGPUMiB: 80 * gib, Priority: 0, Preemptible: true, Start: t0}},
			queue: []Request{{ID: "urgent", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 2, Submit: t0}},
			wait:  map[string]string{"urgent": "needs 1×40 GiB; largest free is 0 MiB on GPU 0; GPU 0 reserved for it; first in line"},
		},
		{
			// Aging: "old" (prio 0, 1 h estimate) waited 5 h; a level per
			// max(30 min, 2×1 h) = 2 h gives 0+2, capped just below the most
			// urgent waiting ("wide", prio 2, which can never fit here): 1,
			// as "new" (prio 1). Same estimate and GPUs: the older goes first.
			name: "aging lifts a long-waiting run",
			inv:  machine(8, 40),
			now:  t0.Add(5 * time.Hour),
			queue: []Request{{ID: "new", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 1, Submit: t0.Add(5 * time.Hour), Estimate: time.Hour},
				{ID: "old", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 0, Submit: t0, Estimate: time.Hour},
				{ID: "wide", GPUs: 2, MemPerGPUMiB: gib, Priority: 2, Submit: t0.Add(5 * time.Hour)}},
			want: map[string][]int{"old": {0}},
		},
		{
			// However long "old" waited, the most urgent run goes first.
			name: "aging never overtakes the most urgent",
			inv:  machine(8, 40),
			now:  t0.Add(50 * time.Hour),
			queue: []Request{{ID: "urgent", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 2, Submit: t0.Add(50 * time.Hour), Estimate: 9 * time.Hour},
				{ID: "old", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 0, Submit: t0, Estimate: time.Minute}},
			want: map[string][]int{"urgent": {0}},
		},
		{
			name:  "a run that can never fit holds no reservation",
			inv:   machine(8, 80),
			queue: []Request{{ID: "huge", GPUs: 1, MemPerGPUMiB: 100 * gib, Priority: 9, Submit: t0}, {ID: "ok", GPUs: 1, MemPerGPUMiB: 10 * gib, Submit: t0}},
			want:  map[string][]int{"ok": {0}},
			wait:  map[string]string{"huge": "needs 1×100 GiB; this machine can never hold it (1 usable GPU(s), at most 80 GiB each); first in line"},
		},
		{
			// "big" (8 GPUs, prio 2) has an 8 h estimate; the spot runs on the
			// machine have about 1 h left each (2 h estimates, 1 h run): its
			// 8×8 h of work is more than the 8×1 h they have left, so they
			// are not stopped for it. A 1-GPU urgent run of 30 min would be.
			name:    "a large run does not stop many small spot runs",
			reserve: true,
			inv:     machine(8, 0, 0, 0, 0, 0, 0, 0, 0),
			running: spotRuns(8, 2*time.Hour),
			now:     t0.Add(time.Hour),
			queue:   []Request{{ID: "big", GPUs: 8, MemPerGPUMiB: 40 * gib, Priority: 2, Submit: t0, Estimate: 8 * time.Hour}},
			wait:    map[string]string{"big": "needs 8×40 GiB; largest free is 0 MiB on GPU 0; GPU 0,1,2,3,4,5,6,7 reserved for it from about Mar 1 11:00; first in line"},
		},
		{
			name:    "a short urgent run does stop a spot run",
			inv:     machine(8, 0, 0, 0, 0, 0, 0, 0, 0),
			running: spotRuns(8, 2*time.Hour),
			now:     t0.Add(time.Hour),
			queue:   []Request{{ID: "quick", GPUs: 1, MemPerGPUMiB: 40 * gib, Priority: 2, Submit: t0, Estimate: 30 * time.Minute}},
			preempt: map[string][]string{"quick": {"spot7"}},
		},
		{
			// Unknown length: it may stop runs only in place of runs at
			// least as wide, so a 4-GPU run waits for 1-GPU spot runs to end.
			name:    "a run of unknown length stops no narrower runs",
			inv:     machine(8, 0, 0, 0, 0, 0, 0, 0, 0),
			running: spotRuns(8, 0),
			now:     t0.Add(time.Hour),
			queue:   []Request{{ID: "gang", GPUs: 4, MemPerGPUMiB: 40 * gib, Priority: 2, Submit: t0}},
		},
		{
			// Within a priority, a run that already had 2 GPU-hours (a
			// preempted one) goes after a fresh one, whatever the estimates.
			name: "least attained service first",
			inv:  machine(8, 40),
			queue: []Request{{ID: "served", GPUs: 1, MemPerGPUMiB: 40 * gib, Submit: t0, Estimate: time.Minute, Attained: 2 * time.Hour},
				{ID: "fresh", GPUs: 1, MemPerGPUMiB: 40 * gib, Submit: t0.Add(time.Minute), Estimate: 5 * time.Hour}},
			want: map[string][]int{"fresh": {0}},
		},
		{
			// A fresh spot run has a spot run of the same priority that has
			// had more than a GPU-hour stopped for it (Tiresias).
			name: "a fresh spot run displaces a well-served one",
			inv:  machine(8, 0),
			running: []Running{{ID: "old", GPUs: []string{"G0"}, MemPerGPUMiB: 80 * gib, Preemptible: true,
				Start: t0, Attained: time.Hour}},
			now:     t0.Add(time.Hour),
			queue:   []Request{{ID: "new", GPUs: 1, MemPerGPUMiB: 40 * gib, Preemptible: true, Submit: t0}},
			preempt: map[string][]string{"new": {"old"}},
		},
		{
			// No estimates at all: the 1-GPU run goes before the 4-GPU one.
			name: "fewest GPUs first without estimates",
			inv:  machine(8, 80, 80, 80, 80),
			queue: []Request{{ID: "gang", GPUs: 4, MemPerGPUMiB: 40 * gib, Submit: t0},
				{ID: "one", GPUs: 1, MemPerGPUMiB: 60 * gib, Submit: t0.Add(time.Hour)}},
			now:  t0.Add(2 * time.Hour),
			want: map[string][]int{"one": {0}},
		},
		{
			// GPU 1's run (no estimate) has run 3 h: it is expected to run
			// about 3 h more, past the 2 h a reservation may hold GPUs. So
			// nothing is held for "pair", and "small", ranked after it (lower
			// priority) and of unknown length, still takes GPU 0.
			name:    "no reservation on a guess far out",
			reserve: true,
			inv:     machine(8, 80, 0),
			running: []Running{{ID: "long", GPUs: []string{"G1"}, MemPerGPUMiB: 80 * gib, Priority: 2,
				Start: t0}},
			now: t0.Add(3 * time.Hour),
			queue: []Request{{ID: "pair", GPUs: 2, MemPerGPUMiB: 80 * gib, Priority: 1, Submit: t0},
				{ID: "small", GPUs: 1, MemPerGPUMiB: 10 * gib, Priority: 0, Submit: t0.Add(time.Hour)}},
			want: map[string][]int{"small": {0}},
			wait: map[string]string{"pair": "needs 2×80 GiB; largest free is 80 GiB on GPU 0; 1 of 2 fit now; first in line"},
		},
		{
			// The same within the hold limit: the run has 30 min left on its
			// estimate, so GPU 0 is held for "pair" from 10:00; "small" may
			// backfill only if its high estimate ends by then (20 min: yes;
			// "slow", 1 h high though 10 min likely: no; it ranks before
			// "small" by name, so it sees GPU 0 still empty).
			name:    "backfill by the high estimate",
			reserve: true,
			inv:     machine(8, 80, 0),
			running: []Running{{ID: "long", GPUs: []string{"G1"}, MemPerGPUMiB: 80 * gib, Priority: 2,
				Start: t0, Estimate: time.Hour}},
			now: t0.Add(30 * time.Minute),
			queue: []Request{{ID: "pair", GPUs: 2, MemPerGPUMiB: 70 * gib, Priority: 1, Submit: t0},
				{ID: "small", GPUs: 1, MemPerGPUMiB: 10 * gib, Priority: 0, Submit: t0, Shareable: true, Estimate: 10 * time.Minute, EstimateHigh: 20 * time.Minute},
				{ID: "slow", GPUs: 1, MemPerGPUMiB: 10 * gib, Priority: 0, Submit: t0, Shareable: true, Estimate: 10 * time.Minute, EstimateHigh: time.Hour}},
			want: map[string][]int{"small": {0}},
			wait: map[string]string{"slow": "needs 1×10 GiB; largest free is 80 GiB on GPU 0; 1 GPU reserved for a run ahead; 1 run ahead"},
		},
		{
			// The default herd holds nothing for a large run of unknown
			// length: smaller runs of any priority keep using free GPUs.
			name: "a large run without an estimate blocks no one",
			inv:  machine(8, 80, 0, 0, 0, 0, 0, 0, 0),
			running: []Running{{ID: "r1", GPUs: []string{"G1", "G2", "G3", "G4", "G5", "G6", "G7"}, MemPerGPUMiB: 80 * gib,
				Priority: 2, Start: t0}},
			now: t0.Add(time.Hour),
			queue: []Request{{ID: "big", GPUs: 8, MemPerGPUMiB: 80 * gib, Priority: 2, Submit: t0},
				{ID: "small", GPUs: 1, MemPerGPUMiB: 10 * gib, Priority: 0, Submit: t0.Add(time.Minute)}},
			want: map[string][]int{"small": {0}},
			wait: map[string]string{"big": "needs 8×80 GiB; largest free is 80 GiB on GPU 0; 1 of 8 fit now; first in line"},
		},
		{
			name:  "no gpus at all",
			inv:   Inventory{Reason: "no NVIDIA driver"},
			queue: []Request{{ID: "a", GPUs: 1, MemPerGPUMiB: gib, Submit: t0}, {ID: "cpu", Submit: t0}},
			want:  map[string][]int{"cpu": nil},
			wait:  map[string]string{"a": "needs 1×1 GiB; this machine has no GPUs (no NVIDIA driver); first in line"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.now
			if now.IsZero() {
				now = t0
			}
			p := herd
			if tt.reserve {
				p = Herd(HerdOptions{Reserve: true})
			}
			ds := Schedule(p, State{Inventory: tt.inv, Running: tt.running, Queue: tt.queue, Now: now})
			for _, d := range ds {
				if want, ok := tt.want[d.ID]; ok {
					require.True(t, d.Placed(), "%s: %s", d.ID, d.Wait)
					require.Equal(t, want, placedOn(d), d.ID)
					continue
				}
				require.False(t, d.Placed(), "%s placed on %v", d.ID, placedOn(d))
				if w, ok := tt.wait[d.ID]; ok {
					require.Equal(t, w, d.Wait, d.ID)
				}
				require.Equal(t, tt.preempt[d.ID], d.Preempt, d.ID)
			}
		})
	}
}

// spotRuns are n spot runs of 80 GiB on GPUs 0..n-1, started at t0 with
// the given estimate.
func spotRuns(n int, est time.Duration) []Running {
	var out []Running
	for i := range n {
		out = append(out, Running{ID: fmt.Sprintf("spot%d", i), GPUs: []string{fmt.Sprintf("G%d", i)}, MemPerGPUMiB: 80 * gib,
			Preemptible: true, Start: t0.Add(time.Duration(i) * time.Second), Estimate: est})
	}
	return out
}

func TestByName(t *testing.T) {
	for _, n := range Policies {
		p, err := ByName(n)
		require.NoError(t, err)
		require.Equal(t, n, p.Name)
	}
	_, err := ByName("sjf")
	require.EqualError(t, err, `unknown policy "sjf": choose one of herd, bestfit, las, fifo`)
}

// TestRankOrdersPrioritiesOfAnySize: the packed key a pass compares
// covers priorities of ±127; beyond, the fields are compared, in the same
// order.
func TestRankOrdersPrioritiesOfAnySize(t *testing.T) {
	var q []Request
	for i, prio := range []int{5, 1000, -1000, 0, 127, -128, 128, 5} {
		q = append(q, Request{ID: fmt.Sprintf("r%d", i), GPUs: 1, Priority: prio, Submit: t0.Add(time.Duration(i) * time.Second)})
	}
	for _, p := range []Policy{BestFit(), LAS()} {
		got := p.Rank(t0, q)
		require.Equal(t, []int{1, 6, 4, 0, 7, 3, 5, 2}, got, p.Name)
	}
}

func TestHerdTriesSpotRunsFirstAmongTies(t *testing.T) {
	// Equal priority, no service yet, no estimates: the spot runs go before
	// the ones that may not be stopped, even the earlier and the narrower
	// ("fixed1" was ready first and asks for 1 GPU, "spot2" for 2). An
	// estimate still comes first: "short" (10 min) precedes every unknown.
	q := []Request{
		{ID: "fixed1", GPUs: 1, Priority: 1, Submit: t0},
		{ID: "spot2", GPUs: 2, Priority: 1, Preemptible: true, Submit: t0.Add(time.Minute)},
		{ID: "spot1", GPUs: 1, Priority: 1, Preemptible: true, Submit: t0.Add(2 * time.Minute)},
		{ID: "short", GPUs: 1, Priority: 1, Estimate: 10 * time.Minute, Submit: t0.Add(3 * time.Minute)},
		{ID: "fixed2", GPUs: 2, Priority: 1, Submit: t0},
	}
	ids := func(p Policy) []string {
		var out []string
		for _, i := range p.Rank(t0.Add(4*time.Minute), q) {
			out = append(out, q[i].ID)
		}
		return out
	}
	// Priority 1000 is beyond the packed key: the fields compare alike.
	for _, prio := range []int{1, 1000} {
		for i := range q {
			q[i].Priority = prio
		}
		require.Equal(t, []string{"short", "spot1", "spot2", "fixed1", "fixed2"}, ids(Herd(HerdOptions{})), prio)
		p := Herd(HerdOptions{})
		p.PreemptibleFirst = false
		require.Equal(t, []string{"short", "fixed1", "spot1", "fixed2", "spot2"}, ids(p), prio)
	}
}
