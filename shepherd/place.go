package shepherd

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// GPU is one device as the shepherd sees it: what it holds and what is left.
// A MIG slice appears as its own GPU whose Parent is the physical device;
// a physical GPU that is some slice's Parent is never offered whole.
type GPU struct {
	Index    int
	UUID     string
	Model    string
	TotalMiB int64   // 0 when unknown; then FreeMiB is all the shepherd knows
	FreeMiB  int64   // memory free for new work: not held by anyone, including running Niuma stages
	UtilPct  float64 // utilisation, 0–100
	TempC    float64 // temperature; 0 when unknown
	Healthy  bool
	// Group names the topology group (GPUs linked by NVLink): a gang of
	// several GPUs goes on one group. GPUs with an empty Group form one
	// group together; a machine of one group says nothing about groups in
	// its wait reasons.
	Group  string
	Parent string // UUID of the physical GPU when this is a MIG slice
	// Label is how wait reasons name the device ("GPU 0 MIG 1 (3g.40gb)");
	// "" names it "GPU <Index>".
	Label string
	// Host names the machine the GPU is in ("" on a workstation): every
	// GPU of one placement is on one host, whose CPUs and memory it uses.
	Host string
}

// Host is one machine's CPUs and memory as the shepherd hands them out:
// what Niuma may give its stages in total. The pass subtracts what Running
// placements hold. A zero field is not tracked (any amount fits).
type Host struct {
	Name     string
	CPUMilli int64 // thousandths of a CPU: 8 cores are 8000
	MemMiB   int64
}

// Inventory is the GPUs and hosts a decision is made over.
type Inventory struct {
	GPUs []GPU
	// Hosts are the machines' CPUs and memory; a host not listed (and an
	// inventory with none) does not limit CPUs or memory.
	Hosts []Host
	// Reason says why there are no GPUs, when there are none.
	Reason string
}

// Request asks for GPUs (and CPUs and memory) for one stage. Build makes
// one from a Need; the engine and the simulator both go through it.
type Request struct {
	ID           string
	GPUs         int
	MemPerGPUMiB int64
	CPUMilli     int64 // CPUs, in thousandths; 0 = none asked
	MemMiB       int64 // host memory; 0 = none asked
	Priority     int   // higher runs first
	// Submit is when the stage became ready to run (its needs done, its
	// backoff over, or its preemption): aging counts from here.
	Submit      time.Time
	Preemptible bool // a "spot" run: may be stopped for a higher priority one
	// Estimate is how much longer it will run once started: a user's
	// estimate less what earlier attempts ran, or the predictor's median;
	// 0 = unknown. EstimateHigh is a bound it very likely ends within (the
	// predictor's upper quantile, or the user's estimate); 0 = none. A run
	// backfills GPUs reserved for another only when EstimateHigh (else
	// Estimate) says it ends in time.
	Estimate     time.Duration
	EstimateHigh time.Duration
	// Attained is the run time its earlier attempts already had (a
	// preempted run): least-attained-service ordering counts it.
	Attained  time.Duration
	Shareable bool // may share a GPU with other runs
	// Team is whose share it counts against when State.Teams is set.
	Team string
	// Tier ranks before Priority (higher first). A sharing pass sets it
	// (within the team's share, or by fair share); callers leave it 0.
	Tier int
}

// Decision is where a request goes, or why it waits.
type Decision struct {
	ID   string // the request's ID (Schedule only)
	GPUs []GPU  // chosen devices; empty with Wait == "" for a CPU-only stage
	Host string // the host of the placement
	// Reason is why the request waits, as a code with its parameters and
	// the sentence; zero when it is placed.
	Reason Reason
	// Wait is Reason.Text: non-empty when the request waits.
	Wait string
	// Preempt lists running placements (by ID) to stop so that this request
	// can start at a later pass; the request waits meanwhile.
	Preempt []string
}

// Placed reports whether the request may start now.
func (d Decision) Placed() bool { return d.Wait == "" }

// Placement is the running record of a request placed at start on gpus:
// what the next passes must be told about it. The engine and the simulator
// build their Running entries with it.
func (r Request) Placement(gpus []GPU, host string, start time.Time) Running {
	uuids := make([]string, len(gpus))
	for i, g := range gpus {
		uuids[i] = g.UUID
	}
	return Running{ID: r.ID, GPUs: uuids, Host: host, MemPerGPUMiB: r.MemPerGPUMiB, CPUMilli: r.CPUMilli, MemMiB: r.MemMiB,
		Priority: r.Priority, Preemptible: r.Preemptible, Shareable: r.Shareable, Start: start,
		Estimate: r.Estimate, Attained: r.Attained, Team: r.Team}
}

// FirstFit places a request on the healthy GPUs with enough free memory,
// lowest index first. It is the simplest honest policy for one request at a
// time; Schedule with a Policy decides a whole queue at once.
func FirstFit(inv Inventory, req Request) Decision {
	if req.GPUs <= 0 {
		return Decision{ID: req.ID}
	}
	if len(inv.GPUs) == 0 {
		r := Reason{Code: WaitNoGPUs, NeedGPUs: req.GPUs, NeedMiB: req.MemPerGPUMiB, Detail: inv.Reason}
		r.Text = fmt.Sprintf("needs %s; %s", need(req), noGPUs(inv))
		return Decision{ID: req.ID, Reason: r, Wait: r.Text}
	}
	gpus := append([]GPU(nil), inv.GPUs...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	var chosen []GPU
	var largest int64
	for _, g := range gpus {
		if !g.Healthy || isParent(inv.GPUs, g.UUID) {
			continue
		}
		largest = max(largest, g.FreeMiB)
		if g.FreeMiB >= req.MemPerGPUMiB && len(chosen) < req.GPUs {
			chosen = append(chosen, g)
		}
	}
	if len(chosen) < req.GPUs {
		r := Reason{Code: WaitGPUMemory, NeedGPUs: req.GPUs, NeedMiB: req.MemPerGPUMiB, LargestFreeMiB: largest, Fit: len(chosen)}
		r.Text = fmt.Sprintf("needs %s; %d fit now, largest free is %s", need(req), len(chosen), mib(largest))
		return Decision{ID: req.ID, Reason: r, Wait: r.Text}
	}
	return Decision{ID: req.ID, GPUs: chosen}
}

// isParent says whether uuid is the physical GPU of some MIG slice in gpus.
func isParent(gpus []GPU, uuid string) bool {
	for _, g := range gpus {
		if g.Parent != "" && g.Parent == uuid {
			return true
		}
	}
	return false
}

func noGPUs(inv Inventory) string {
	why := "this machine has no GPUs"
	if inv.Reason != "" {
		why += " (" + inv.Reason + ")"
	}
	return why
}

func need(req Request) string { return string(appendNeed(nil, req.GPUs, req.MemPerGPUMiB)) }

// appendNeed appends "2×40 GiB" (or "2 GPU(s)" when no memory is asked).
func appendNeed(b []byte, gpus int, memMiB int64) []byte {
	b = strconv.AppendInt(b, int64(gpus), 10)
	if memMiB <= 0 {
		return append(b, " GPU(s)"...)
	}
	b = append(b, "×"...)
	return appendMiB(b, memMiB)
}

func mib(m int64) string { return string(appendMiB(nil, m)) }

// appendMiB appends m as "40 GiB" (rounded to whole GiB, as %.0f does) or
// "512 MiB".
func appendMiB(b []byte, m int64) []byte {
	if m >= 1024 {
		b = strconv.AppendFloat(b, float64(m)/1024, 'f', 0, 64)
		return append(b, " GiB"...)
	}
	b = strconv.AppendInt(b, m, 10)
	return append(b, " MiB"...)
}

// cpus writes thousandths of a CPU as a person counts them: "2", "0.5".
func cpus(milli int64) string { return string(appendCPUs(nil, milli)) }

func appendCPUs(b []byte, milli int64) []byte {
	if milli%1000 == 0 {
		return strconv.AppendInt(b, milli/1000, 10)
	}
	return strconv.AppendFloat(b, float64(milli)/1000, 'f', 1, 64)
}
