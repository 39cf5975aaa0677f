package shepherd

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// randomState is a random machine (1–16 GPUs in groups of 1–8, some
// unhealthy or hot, some memory held by others), random running runs that
// fit it, and a random queue.
func randomState(rng *rand.Rand) State {
	n := 1 + rng.IntN(16)
	group := 1 + rng.IntN(8)
	now := t0.Add(time.Duration(rng.IntN(48)) * time.Hour)
	var st State
	st.Now = now
	for i := range n {
		g := GPU{Index: i, UUID: fmt.Sprintf("G%d", i), TotalMiB: 80 * gib, FreeMiB: int64(rng.IntN(81)) * gib,
			Healthy: rng.IntN(10) > 0, Group: fmt.Sprintf("nv%d", i/group)}
		if rng.IntN(10) == 0 {
			g.TempC = 80 + float64(rng.IntN(15))
		}
		st.Inventory.GPUs = append(st.Inventory.GPUs, g)
	}
	rng.Shuffle(n, func(i, j int) {
		st.Inventory.GPUs[i], st.Inventory.GPUs[j] = st.Inventory.GPUs[j], st.Inventory.GPUs[i]
	})
	for k := range rng.IntN(6) {
		g := st.Inventory.GPUs[rng.IntN(n)]
		st.Running = append(st.Running, Running{ID: fmt.Sprintf("run%d", k), GPUs: []string{g.UUID},
			MemPerGPUMiB: int64(1+rng.IntN(20)) * gib, Priority: rng.IntN(3), Preemptible: rng.IntN(2) == 0,
			Shareable: rng.IntN(3) > 0, Start: now.Add(-time.Duration(rng.IntN(10)) * time.Hour),
			Estimate: time.Duration(rng.IntN(20)) * time.Hour})
	}
	for k := range rng.IntN(40) {
		st.Queue = append(st.Queue, Request{ID: fmt.Sprintf("q%02d", k), GPUs: rng.IntN(5),
			MemPerGPUMiB: int64(rng.IntN(81)) * gib, Priority: rng.IntN(3),
			Submit: now.Add(-time.Duration(rng.IntN(24*60)) * time.Minute), Preemptible: rng.IntN(3) == 0,
			Estimate: time.Duration(rng.IntN(300)) * time.Minute, Shareable: rng.IntN(2) == 0})
	}
	return st
}

func allPolicies() []Policy { return []Policy{Herd(HerdOptions{}), BestFit(), LAS(), FIFO()} }

// TestPropertiesOverRandomStates checks, for every policy over 600 random
// machines and queues: no GPU over-committed in memory (nor, for herd, in
// runs per GPU or a non-sharing run's GPU), gangs on one group, never an
// unhealthy or hot GPU, the requested number of distinct GPUs, and the
// same decisions with and without wait reasons.
func TestPropertiesOverRandomStates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for c := range 600 {
		st := randomState(rng)
		for _, p := range allPolicies() {
			name := fmt.Sprintf("case %d %s", c, p.Name)
			ds := Schedule(p, st)
			require.Len(t, ds, len(st.Queue))
			used := map[string]int64{}
			jobs := map[string]int{}
			excl := map[string]bool{}
			for _, r := range st.Running {
				for _, u := range r.GPUs {
					jobs[u]++
					excl[u] = excl[u] || !r.Shareable
				}
			}
			gpu := map[string]GPU{}
			groupSize := map[string]int{}
			for _, g := range st.Inventory.GPUs {
				gpu[g.UUID] = g
				if g.Healthy {
					groupSize[g.Group]++
				}
			}
			for i, d := range ds {
				req := st.Queue[i]
				require.Equal(t, req.ID, d.ID)
				if !d.Placed() {
					require.Empty(t, d.GPUs, name)
					continue
				}
				if req.GPUs <= 0 {
					require.Empty(t, d.GPUs, name)
					continue
				}
				require.Len(t, d.GPUs, req.GPUs, name)
				groups := map[string]bool{}
				seen := map[string]bool{}
				for _, g := range d.GPUs {
					require.False(t, seen[g.UUID], "%s: %s twice", name, g.UUID)
					seen[g.UUID] = true
					inv := gpu[g.UUID]
					require.True(t, inv.Healthy, "%s: unhealthy %s", name, g.UUID)
					require.Less(t, inv.TempC, 85.0, "%s: hot %s", name, g.UUID)
					used[g.UUID] += req.MemPerGPUMiB
					require.LessOrEqual(t, used[g.UUID], inv.FreeMiB, "%s: %s over-committed", name, g.UUID)
					if p.Name == "herd" {
						require.False(t, excl[g.UUID], "%s: %s holds a run that does not share", name, g.UUID)
						require.True(t, jobs[g.UUID] == 0 || req.Shareable, "%s: %s busy, %s does not share", name, g.UUID, req.ID)
						jobs[g.UUID]++
						excl[g.UUID] = excl[g.UUID] || !req.Shareable
						require.LessOrEqual(t, jobs[g.UUID], 3, "%s: %s over the sharing limit", name, g.UUID)
					}
					groups[inv.Group] = true
				}
				if p.Gang && req.GPUs > 1 && req.GPUs <= slices.Max(mapValues(groupSize)) {
					require.Len(t, groups, 1, "%s: gang %s spans groups", name, req.ID)
				}
			}
			terse := st
			terse.Terse = true
			td := Schedule(p, terse)
			for i := range ds {
				require.Equal(t, ds[i].GPUs, td[i].GPUs, "%s: terse differs for %s", name, ds[i].ID)
				require.Equal(t, ds[i].Preempt, td[i].Preempt, name)
				require.Equal(t, ds[i].Placed(), td[i].Placed(), name)
			}
		}
	}
}

// TestPriorityOrderRespected: a waiting request was refused before any
// lower-ranked request was placed, so it must not fit on the GPUs as the
// higher-ranked placements left them — except where herd documents
// otherwise: a reservation for the head (backfill only ends before it) and
// aging, which is part of the rank itself.
func TestPriorityOrderRespected(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	for c := range 600 {
		st := randomState(rng)
		for _, p := range allPolicies() {
			ds := Schedule(p, st)
			order := p.Rank(st.Now, st.Queue)
			inv := slices.Clone(st.Inventory.GPUs)
			running := slices.Clone(st.Running)
			reserved := false
			for _, qi := range order {
				req, d := st.Queue[qi], ds[qi]
				if d.Placed() {
					for _, g := range d.GPUs {
						for k := range inv {
							if inv[k].UUID == g.UUID {
								inv[k].FreeMiB -= req.MemPerGPUMiB
							}
						}
					}
					running = append(running, Running{ID: req.ID, GPUs: uuids(d.GPUs), MemPerGPUMiB: req.MemPerGPUMiB, Shareable: req.Shareable})
					continue
				}
				if strings.Contains(d.Wait, "reserved for it") || len(d.Preempt) > 0 {
					reserved = true
					continue
				}
				alone := p
				alone.Reserve, alone.Preempt = false, false
				alone.Filters = slices.DeleteFunc(slices.Clone(p.Filters), func(f Filter) bool { _, ok := f.(Reserved); return ok })
				again := Schedule(alone, State{Inventory: Inventory{GPUs: inv}, Running: running, Queue: []Request{req}, Now: st.Now})
				if again[0].Placed() {
					require.True(t, reserved, "case %d %s: %s waits though it fits after the runs ranked before it\n%s", c, p.Name, req.ID, d.Wait)
				}
			}
		}
	}
}

// TestDeterministic: the same state in another queue order gives the same
// decisions per request.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range 200 {
		st := randomState(rng)
		for _, p := range allPolicies() {
			want := byID(Schedule(p, st))
			shuffled := st
			shuffled.Queue = slices.Clone(st.Queue)
			rng.Shuffle(len(shuffled.Queue), func(i, j int) { shuffled.Queue[i], shuffled.Queue[j] = shuffled.Queue[j], shuffled.Queue[i] })
			require.Equal(t, want, byID(Schedule(p, shuffled)))
		}
	}
}

func byID(ds []Decision) map[string]Decision {
	m := map[string]Decision{}
	for _, d := range ds {
		m[d.ID] = d
	}
	return m
}

func uuids(gs []GPU) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.UUID)
	}
	return out
}

func mapValues(m map[string]int) []int {
	out := []int{0}
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestReusedSchedulerDecidesAsAFreshOne: a Scheduler keeps buffers and the
// machine's layout between passes; over random states — some of the same
// machine with other free memory, health and queues — its decisions are a
// fresh pass's.
func TestReusedSchedulerDecidesAsAFreshOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, p := range allPolicies() {
		sc := NewScheduler(p)
		var prev State
		for c := range 300 {
			st := randomState(rng)
			if c%2 == 1 && len(prev.Inventory.GPUs) > 0 {
				// The same machine again, other free memory and health.
				st.Inventory.GPUs = slices.Clone(prev.Inventory.GPUs)
				for i := range st.Inventory.GPUs {
					st.Inventory.GPUs[i].FreeMiB = int64(rng.IntN(81)) * gib
					if rng.IntN(8) == 0 {
						st.Inventory.GPUs[i].Healthy = !st.Inventory.GPUs[i].Healthy
					}
				}
				st.Running = nil
			}
			prev = st
			st.Terse = c%4 != 3 // runs of terse passes, then one with reasons
			want, got := Schedule(p, st), sc.Schedule(st)
			require.Len(t, got, len(want))
			if len(want) > 0 {
				require.Equal(t, want, got, "case %d %s", c, p.Name)
			}
		}
	}
}
