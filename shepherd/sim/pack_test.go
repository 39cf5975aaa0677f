package sim

import (
	"fmt"
	"math"
	"testing"
	"time"

	"niuma/shepherd"
)

// TestPAIHoles prints, for herd and bestfit packing PAI's pods onto PAI's
// nodes, the pods alone on a partly used GPU at the first refusal (by
// their share of the GPU, in thousandths) and how many pods of the trace
// are small enough to fill the hole an 810‰ pod leaves, and herd's free
// memory on partly used GPUs once it has placed as many pods as bestfit
// did: docs/BENCHMARKS.md reads the stranded memory by them.
//
//	go test ./shepherd/sim -run PAIHoles -traces ../shared/data/traces -v
func TestPAIHoles(t *testing.T) {
	if *traces == "" {
		t.Skip("set -traces to run trace evaluations")
	}
	pods, err := LoadPAI(openTrace(t, *traces+"/pai2023_pods.csv"), 8)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := LoadPAINodes(openTrace(t, *traces+"/pai2023_gpu_nodes.csv"), 80<<10)
	if err != nil {
		t.Fatal(err)
	}
	small := 0
	for _, p := range pods {
		if p.GPUs == 1 && p.MemMilli <= 190 {
			small++
		}
	}
	// Bestfit first: herd's stranded memory is also taken when it has
	// placed as many pods as bestfit did before its refusal, so that the
	// two are compared at the same point of the trace.
	bestfitPlaced := -1
	for _, name := range []string{"bestfit", "herd"} {
		p, _ := shepherd.ByName(name)
		inv := shepherd.Inventory{GPUs: append([]shepherd.GPU(nil), nodes.GPUs...), Hosts: nodes.Hosts}
		byUUID := map[string]int{}
		for i, g := range inv.GPUs {
			byUUID[g.UUID] = i
		}
		sched := shepherd.NewScheduler(p)
		var running []shepherd.Running
		now := base
		placed := 0
		for _, pod := range pods {
			mem := int64(math.Ceil(float64(pod.MemMilli) / 1000 * float64(nodes.GPUMiB)))
			req := shepherd.Build(NeedOf(&pod, mem, now, 0, NoEstimates, nil))
			d := sched.Schedule(shepherd.State{Inventory: inv, Running: running, Queue: []shepherd.Request{req}, Now: now, Terse: true})[0]
			if !d.Placed() || len(d.Preempt) > 0 {
				break
			}
			for _, g := range d.GPUs {
				inv.GPUs[byUUID[g.UUID]].FreeMiB -= mem
			}
			running = append(running, req.Placement(d.GPUs, d.Host, now))
			placed++
			now = now.Add(time.Second)
			if placed == bestfitPlaced {
				fmt.Printf("%s after %d pods (bestfit's count): %.0f GiB free on partly used GPUs\n", name, placed, partlyFree(inv))
			}
		}
		if name == "bestfit" {
			bestfitPlaced = placed
		}
		tenants := map[string]int{}
		for _, r := range running {
			for _, u := range r.GPUs {
				tenants[u]++
			}
		}
		alone := map[int64]int{}
		var holes810 float64
		for _, r := range running {
			if len(r.GPUs) == 1 && tenants[r.GPUs[0]] == 1 && r.MemPerGPUMiB < nodes.GPUMiB {
				milli := (r.MemPerGPUMiB*1000 + nodes.GPUMiB/2) / nodes.GPUMiB
				alone[milli]++
				if milli == 810 {
					holes810 += float64(nodes.GPUMiB-r.MemPerGPUMiB) / 1024
				}
			}
		}
		fmt.Printf("%s: %d pods placed; alone on a partly used GPU, by share: %v; the 810‰ pods' holes: %.0f GiB\n", name, placed, alone, holes810)
	}
	fmt.Printf("pods of at most 190‰ of a GPU in the trace: %d\n", small)
}

// partlyFree is the free memory on partly used GPUs, in GiB: what a pod
// that needs a whole GPU cannot use (the stranded memory of Pack's report
// when the refused pod asks for a whole GPU).
func partlyFree(inv shepherd.Inventory) float64 {
	var f float64
	for _, g := range inv.GPUs {
		if g.FreeMiB > 0 && g.FreeMiB < g.TotalMiB {
			f += float64(g.FreeMiB) / 1024
		}
	}
	return f
}
