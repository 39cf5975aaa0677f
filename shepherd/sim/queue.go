package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"niuma/shepherd"
)

// QueueState is the shepherd's speed benchmark: gpus GPUs of 80 GiB in
// linked groups of 8, about half of their memory held by running runs of
// 5–35 GiB (two in three shareable, a third spot), and queued runs of
// mixed shapes — nine in ten on one GPU, the rest on 1, 2, 4 or 8; 1–80
// GiB; priorities 0–2; estimates of 0–10 h where a third have none, as a
// queue with history and without has. The same arguments give the same
// state.
func QueueState(queued, gpus int) shepherd.State {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := base.Add(24 * time.Hour)
	st := shepherd.State{Now: t0.Add(24 * time.Hour)}
	for i := range gpus {
		st.Inventory.GPUs = append(st.Inventory.GPUs, shepherd.GPU{Index: i, UUID: fmt.Sprintf("G%d", i), TotalMiB: 80 << 10,
			FreeMiB: 80 << 10, Healthy: true, Group: fmt.Sprintf("link%d", i/8)})
	}
	for k := range gpus * 3 / 2 {
		g := &st.Inventory.GPUs[rng.IntN(gpus)]
		m := int64(5+rng.IntN(30)) << 10
		if g.FreeMiB < m {
			continue
		}
		g.FreeMiB -= m
		st.Running = append(st.Running, shepherd.Running{ID: fmt.Sprintf("r%d", k), GPUs: []string{g.UUID}, MemPerGPUMiB: m,
			Priority: rng.IntN(3), Preemptible: rng.IntN(3) == 0, Shareable: rng.IntN(3) > 0, Start: t0,
			Estimate: time.Duration(1+rng.IntN(30)) * time.Hour})
	}
	for k := range queued {
		n := 1
		if rng.IntN(10) == 0 {
			n = 1 << rng.IntN(4)
		}
		need := shepherd.Need{ID: fmt.Sprintf("q%04d", k), GPUs: n, GPUMemMiB: int64(1+rng.IntN(80)) << 10, Priority: rng.IntN(3),
			ReadySince: t0.Add(time.Duration(rng.IntN(24*60)) * time.Minute), Spot: rng.IntN(3) == 0, Share: rng.IntN(2) == 0}
		if rng.IntN(3) > 0 {
			need.Estimate = time.Duration(1+rng.IntN(600)) * time.Minute
		}
		st.Queue = append(st.Queue, shepherd.Build(need))
	}
	return st
}
