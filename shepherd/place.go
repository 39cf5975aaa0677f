package shepherd

import (
	"fmt"
	"sort"
)

// GPU is one device as the shepherd sees it: what it holds and what is left.
type GPU struct {
	Index   int
	UUID    string
	FreeMiB int64 // memory not held by anyone, including other Niuma stages
	Healthy bool
}

// Inventory is the GPUs a decision is made over.
type Inventory struct {
	GPUs []GPU
	// Reason says why there are no GPUs, when there are none.
	Reason string
}

// Request asks for GPUs for one stage.
type Request struct {
	GPUs         int
	MemPerGPUMiB int64
	Priority     int
}

// Decision is where a request goes, or why it waits.
type Decision struct {
	GPUs []GPU  // chosen devices; empty with Wait == "" for a CPU-only stage
	Wait string // non-empty: the request waits, and this says why
}

// Placed reports whether the request may start now.
func (d Decision) Placed() bool { return d.Wait == "" }

// FirstFit places a request on the healthy GPUs with enough free memory,
// lowest index first. It is the simplest honest policy; the trace-tested
// policies build on the same inputs.
func FirstFit(inv Inventory, req Request) Decision {
	if req.GPUs <= 0 {
		return Decision{}
	}
	if len(inv.GPUs) == 0 {
		why := "this machine has no GPUs"
		if inv.Reason != "" {
			why += " (" + inv.Reason + ")"
		}
		return Decision{Wait: fmt.Sprintf("needs %s; %s", need(req), why)}
	}
	gpus := append([]GPU(nil), inv.GPUs...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	var chosen []GPU
	var largest int64
	for _, g := range gpus {
		if !g.Healthy {
			continue
		}
		largest = max(largest, g.FreeMiB)
		if g.FreeMiB >= req.MemPerGPUMiB && len(chosen) < req.GPUs {
			chosen = append(chosen, g)
		}
	}
	if len(chosen) < req.GPUs {
		return Decision{Wait: fmt.Sprintf("needs %s; %d fit now, largest free is %s", need(req), len(chosen), mib(largest))}
	}
	return Decision{GPUs: chosen}
}

func need(req Request) string {
	if req.MemPerGPUMiB <= 0 {
		return fmt.Sprintf("%d GPU(s)", req.GPUs)
	}
	return fmt.Sprintf("%d×%s", req.GPUs, mib(req.MemPerGPUMiB))
}

func mib(m int64) string {
	if m >= 1024 {
		return fmt.Sprintf("%.0f GiB", float64(m)/1024)
	}
	return fmt.Sprintf("%d MiB", m)
}
