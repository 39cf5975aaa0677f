package shepherd

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchState is 64 GPUs (8 NVLink groups of 8, about half of the memory in
// use by 96 running runs) and 1,000 queued runs of mixed shapes.
func benchState() State {
	rng := rand.New(rand.NewPCG(1, 2))
	var st State
	st.Now = t0.Add(24 * time.Hour)
	for i := range 64 {
		st.Inventory.GPUs = append(st.Inventory.GPUs, GPU{Index: i, UUID: fmt.Sprintf("G%d", i), TotalMiB: 80 * gib,
			FreeMiB: 80 * gib, Healthy: true, Group: fmt.Sprintf("nv%d", i/8)})
	}
	for k := range 96 {
		g := &st.Inventory.GPUs[rng.IntN(64)]
		m := int64(5+rng.IntN(30)) * gib
		if g.FreeMiB < m {
			continue
		}
		g.FreeMiB -= m
		st.Running = append(st.Running, Running{ID: fmt.Sprintf("r%d", k), GPUs: []string{g.UUID}, MemPerGPUMiB: m,
			Priority: rng.IntN(3), Preemptible: rng.IntN(3) == 0, Shareable: true, Start: t0, Estimate: time.Duration(1+rng.IntN(30)) * time.Hour})
	}
	for k := range 1000 {
		n := 1
		if rng.IntN(10) == 0 {
			n = 1 << rng.IntN(4)
		}
		st.Queue = append(st.Queue, Request{ID: fmt.Sprintf("q%04d", k), GPUs: n, MemPerGPUMiB: int64(1+rng.IntN(80)) * gib,
			Priority: rng.IntN(3), Submit: t0.Add(time.Duration(rng.IntN(24*60)) * time.Minute), Preemptible: rng.IntN(3) == 0,
			Estimate: time.Duration(rng.IntN(600)) * time.Minute, Shareable: rng.IntN(2) == 0})
	}
	return st
}

// BenchmarkPass is one scheduling pass over 1,000 queued runs on 64 GPUs,
// with a wait reason in words for every run that waits (what the engine
// asks for). Target: under 5 ms.
func BenchmarkPass(b *testing.B) {
	for _, p := range allPolicies() {
		b.Run(p.Name, func(b *testing.B) {
			st := benchState()
			for b.Loop() {
				Schedule(p, st)
			}
		})
	}
}

// BenchmarkPassTerse is the same pass without wait reasons (the
// simulator's hot path), on a reused Scheduler.
func BenchmarkPassTerse(b *testing.B) {
	for _, p := range allPolicies() {
		b.Run(p.Name, func(b *testing.B) {
			st := benchState()
			st.Terse = true
			sc := NewScheduler(p)
			for b.Loop() {
				sc.Schedule(st)
			}
		})
	}
}
