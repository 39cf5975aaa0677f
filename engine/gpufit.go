package engine

import (
	"context"
	"fmt"
	"time"

	"niuma/engine/executor"
	"niuma/shepherd"
	"niuma/storage"
)

// checkGPUs refuses, before anything is written, a run with a stage that
// asks for more GPUs, or more memory per GPU, than this machine could give
// it even with nothing else running: it would wait forever. The answer is
// the shepherd's: its policy decides the stage against this machine's
// placeable devices (MIG slices, not their GPUs) as if every GPU were
// healthy and empty, and only its never_fits refuses. An executor that
// places its own stages (a cluster's) is not judged by this machine's
// GPUs, and neither is a machine whose GPUs cannot be read or that shows
// none: a driver that is missing or failing now may answer later.
func (e *Engine) checkGPUs(ctx context.Context, exName string, r storage.Run, stages []storage.Stage) error {
	if p, ok := e.execs[exName].(executor.Placer); ok && p.PlacesItself() {
		return nil
	}
	gpuStage := false
	for _, s := range stages {
		gpuStage = gpuStage || s.GPUs > 0
	}
	if !gpuStage {
		return nil
	}
	snap, err := e.opts.GPUs.Snapshot(ctx)
	if err != nil {
		return nil
	}
	empty := shepherd.Inventory{Hosts: []shepherd.Host{e.opts.Host}}
	for _, d := range snap.Devices() {
		empty.GPUs = append(empty.GPUs, shepherd.GPU{Index: d.Index, UUID: d.UUID, Model: d.Name, TotalMiB: d.MemTotalMiB,
			FreeMiB: d.MemTotalMiB, Healthy: true, Group: d.Group, Parent: d.Parent, Label: d.Label})
	}
	if len(empty.GPUs) == 0 {
		return nil
	}
	now := time.Now()
	for _, s := range stages {
		if s.GPUs <= 0 {
			continue
		}
		req := shepherd.Build(shepherd.Need{ID: s.Name, GPUs: s.GPUs, GPUMemMiB: s.GPUMemoryMiB, CPUMilli: s.CPUMilli,
			MemMiB: s.MemMiB, Priority: r.Priority, Spot: r.Spot, Share: r.Share, ReadySince: now, Estimate: s.Estimate})
		ds := shepherd.Schedule(e.opts.Policy, shepherd.State{Inventory: empty, Queue: []shepherd.Request{req}, Now: now})
		if len(ds) == 1 && ds[0].Reason.Code == shepherd.WaitNeverFits {
			r := ds[0].Reason
			return fmt.Errorf("stage %s can never start on this machine: it needs %s and this machine has %s. "+
				"Ask for fewer GPUs or less memory per GPU (--gpus, --gpu-memory, or gpus: and gpu_memory: in the template)",
				s.Name, gpuNeedWords(r.NeedGPUs, r.NeedMiB), r.Detail)
		}
	}
	return nil
}

// gpuNeedWords writes a GPU need: "3 GPUs with 40 GiB each", "1 GPU".
func gpuNeedWords(gpus int, mib int64) string {
	out := fmt.Sprintf("%d GPUs", gpus)
	if gpus == 1 {
		out = "1 GPU"
	}
	switch {
	case mib <= 0:
		return out
	case gpus == 1:
		return out + " with " + mibWords(mib)
	}
	return out + " with " + mibWords(mib) + " each"
}

// mibWords writes MiB as GiB when whole: "40 GiB", "1536 MiB".
func mibWords(mib int64) string {
	if mib%1024 == 0 {
		return fmt.Sprintf("%d GiB", mib/1024)
	}
	return fmt.Sprintf("%d MiB", mib)
}
