package sim

import (
	"fmt"
	"math"
	"time"

	"niuma/shepherd"
)

// PackReport is how many pods a policy packs onto an empty machine before
// it first refuses one.
type PackReport struct {
	Policy  string  `json:"policy"`
	Placed  int     `json:"placed"`   // pods placed before the first refusal
	GPUs    int     `json:"gpus"`     // GPUs those pods asked for, counted once per pod GPU
	UsedGiB float64 `json:"used_gib"` // memory they hold
	// StrandedGiB is the free memory left when the first pod is refused:
	// memory on GPUs that have some free but not enough for that pod.
	StrandedGiB float64 `json:"stranded_gib"`
	FreeGiB     float64 `json:"free_gib"` // all free memory at that moment
	Refused     string  `json:"refused"`  // the wait reason of the refused pod
}

// Pack offers pods in order to cfg's empty machine, one pass per pod and
// nothing ever ending (pod durations in PAI are censored, so packing is the
// honest use of it), and stops at the first pod the policy refuses.
func Pack(pods []Job, cfg Config) PackReport {
	if cfg.GroupSize <= 0 {
		cfg.GroupSize = cfg.GPUs
	}
	inv := shepherd.Inventory{GPUs: make([]shepherd.GPU, cfg.GPUs)}
	for i := range inv.GPUs {
		inv.GPUs[i] = shepherd.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), TotalMiB: cfg.GPUMiB, FreeMiB: cfg.GPUMiB,
			Healthy: true, Group: fmt.Sprintf("nvlink%d", i/cfg.GroupSize)}
	}
	rep := PackReport{Policy: cfg.Policy.Name}
	var running []shepherd.Running
	now := base
	for _, p := range pods {
		mem := int64(math.Ceil(float64(p.MemMilli) / 1000 * float64(cfg.GPUMiB)))
		req := shepherd.Request{ID: p.ID, GPUs: p.GPUs, MemPerGPUMiB: mem, Priority: p.Priority, Submit: now,
			Preemptible: p.Preemptible, Shareable: p.Shareable, Estimate: time.Duration(p.Estimate * float64(time.Second))}
		d := shepherd.Schedule(cfg.Policy, shepherd.State{Inventory: inv, Running: running, Queue: []shepherd.Request{req}, Now: now})[0]
		if !d.Placed() || len(d.Preempt) > 0 {
			for _, g := range inv.GPUs {
				rep.FreeGiB += float64(g.FreeMiB) / 1024
				if g.FreeMiB > 0 && g.FreeMiB < mem {
					rep.StrandedGiB += float64(g.FreeMiB) / 1024
				}
			}
			rep.Refused = fmt.Sprintf("%s (%d×%d‰ GPU): %s", p.ID, p.GPUs, p.MemMilli, d.Wait)
			return rep
		}
		var uuids []string
		for _, g := range d.GPUs {
			inv.GPUs[g.Index].FreeMiB -= mem
			uuids = append(uuids, g.UUID)
		}
		running = append(running, shepherd.Running{ID: p.ID, GPUs: uuids, MemPerGPUMiB: mem, Priority: p.Priority,
			Preemptible: p.Preemptible, Shareable: p.Shareable, Start: now})
		rep.Placed++
		rep.GPUs += p.GPUs
		rep.UsedGiB += float64(mem*int64(p.GPUs)) / 1024
		now = now.Add(time.Second)
	}
	rep.Refused = "none: every pod fit"
	return rep
}
