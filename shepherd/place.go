package shepherd

import (
	"fmt"
	"sort"
	"time"
)

// GPU is one device as the shepherd sees it: what it holds and what is left.
// A MIG slice appears as its own GPU whose Parent is the physical device.
type GPU struct {
	Index    int
	UUID     string
	Model    string
	TotalMiB int64   // 0 when unknown; then FreeMiB is all the shepherd knows
	FreeMiB  int64   // memory free for new work: not held by anyone, including running Niuma stages
	UtilPct  float64 // utilisation, 0–100
	TempC    float64 // temperature; 0 when unknown
	Healthy  bool
	// Group names the topology group (NVLink peers): a gang of several GPUs
	// goes on one group. GPUs with an empty Group form one group together.
	Group  string
	Parent string // UUID of the physical GPU when this is a MIG slice
}

// Inventory is the GPUs a decision is made over.
type Inventory struct {
	GPUs []GPU
	// Reason says why there are no GPUs, when there are none.
	Reason string
}

// Request asks for GPUs for one stage (one queued run in the simulator).
type Request struct {
	ID           string
	GPUs         int
	MemPerGPUMiB int64
	Priority     int           // higher runs first
	Submit       time.Time     // when it joined the queue; aging counts from here
	Preemptible  bool          // a "spot" run: may be stopped for a higher priority one
	Estimate     time.Duration // how long it will run; 0 = unknown
	Shareable    bool          // may share a GPU with other runs
}

// Decision is where a request goes, or why it waits.
type Decision struct {
	ID   string // the request's ID (Schedule only)
	GPUs []GPU  // chosen devices; empty with Wait == "" for a CPU-only stage
	Wait string // non-empty: the request waits, and this says why
	// Code is why it waits, as a code (Wait is the same in words); ""
	// when placed, and in a terse pass.
	Code WaitCode
	// LargestFreeMiB is the most free memory on one healthy GPU when the
	// request was refused; -1 when the machine has no GPU.
	LargestFreeMiB int64
	// Ahead counts the requests ranked before this waiting one.
	Ahead int
	// Preempt lists running placements (by ID) to stop so that this request
	// can start at a later pass; the request waits meanwhile.
	Preempt []string
}

// WaitCode says, as a code, why a request waits; a dashboard counts them.
type WaitCode string

// Wait codes.
const (
	WaitNoGPU      WaitCode = "no_gpu"     // the machine has no usable GPU
	WaitTooBig     WaitCode = "too_big"    // no GPU of this machine can ever hold it
	WaitGPUMemory  WaitCode = "gpu_memory" // no GPU has enough free memory now
	WaitGPUsBusy   WaitCode = "gpus_busy"  // memory would do, but the GPUs refuse it now (too few fit, not on one group, too hot, held exclusively)
	WaitReserved   WaitCode = "reserved"   // next in line: GPUs are kept for it until runs end
	WaitPreempting WaitCode = "preempting" // spot runs are being stopped to make room
)

// Placed reports whether the request may start now.
func (d Decision) Placed() bool { return d.Wait == "" }

// FirstFit places a request on the healthy GPUs with enough free memory,
// lowest index first. It is the simplest honest policy for one request at a
// time; Schedule with a Policy decides a whole queue at once.
func FirstFit(inv Inventory, req Request) Decision {
	if req.GPUs <= 0 {
		return Decision{ID: req.ID}
	}
	if len(inv.GPUs) == 0 {
		return Decision{ID: req.ID, Wait: fmt.Sprintf("needs %s; %s", need(req), noGPUs(inv)), Code: WaitNoGPU, LargestFreeMiB: -1}
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
		code := WaitGPUsBusy
		if largest < req.MemPerGPUMiB {
			code = WaitGPUMemory
		}
		return Decision{ID: req.ID, Wait: fmt.Sprintf("needs %s; %d fit now, largest free is %s", need(req), len(chosen), mib(largest)),
			Code: code, LargestFreeMiB: largest}
	}
	return Decision{ID: req.ID, GPUs: chosen}
}

func noGPUs(inv Inventory) string {
	why := "this machine has no GPUs"
	if inv.Reason != "" {
		why += " (" + inv.Reason + ")"
	}
	return why
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
