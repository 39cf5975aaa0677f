package shepherd

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ReasonCode names why a request waits. It is what callers switch on (the
// board's badge, the sentinel's fix, the CLI's exit status); the sentence
// is for people. Codes are stable words, fit to be stored.
type ReasonCode string

// The wait reason codes. A Reason's Code is the main thing a request waits
// for; Refusals count the rest.
const (
	// WaitNoGPUs: the machine has no GPUs at all (Detail says why: no
	// driver, telemetry failed).
	WaitNoGPUs ReasonCode = "no_gpus"
	// WaitNeverFits: this machine could not hold the request even empty;
	// Detail names what is too much (GPUs, memory per GPU, CPUs, host
	// memory). Only a smaller request helps.
	WaitNeverFits ReasonCode = "never_fits"
	// WaitGPUMemory: no (or not enough) GPUs have the free memory it needs
	// now (LargestFreeMiB, LargestFreeGPU).
	WaitGPUMemory ReasonCode = "gpu_memory"
	// WaitGPUBusy: GPUs with the memory are held by runs it may not share
	// with, or at the sharing limit.
	WaitGPUBusy ReasonCode = "gpu_busy"
	// WaitGPUUnhealthy: the GPUs that would fit are unhealthy (XID, ECC).
	WaitGPUUnhealthy ReasonCode = "gpu_unhealthy"
	// WaitGPUHot: the GPUs that would fit are too hot.
	WaitGPUHot ReasonCode = "gpu_hot"
	// WaitGroup: enough GPUs fit, but not on one linked group (a gang).
	WaitGroup ReasonCode = "gpu_group"
	// WaitReserved: the GPUs it could use are reserved for a run ahead of
	// it, and it would not end before that run starts.
	WaitReserved ReasonCode = "reserved"
	// WaitPreempting: spot runs (Preempting) are being stopped to make room
	// for it; it starts at a later pass.
	WaitPreempting ReasonCode = "preempting"
	// WaitCPU: its host has too few free CPUs (CPUMilliFree of
	// CPUMilliTotal).
	WaitCPU ReasonCode = "cpu"
	// WaitHostMemory: its host has too little free memory.
	WaitHostMemory ReasonCode = "host_memory"
	// WaitQueued: a terse pass (the simulator's) gives no detail.
	WaitQueued ReasonCode = "queued"
)

// ReasonCodes lists every wait reason code, for callers that count them
// (a dashboard's labels).
var ReasonCodes = []ReasonCode{WaitNoGPUs, WaitNeverFits, WaitGPUMemory, WaitGPUBusy, WaitGPUUnhealthy,
	WaitGPUHot, WaitGroup, WaitReserved, WaitPreempting, WaitCPU, WaitHostMemory, WaitQueued}

// Reason is why a request waits: a code, the parameters behind it, and the
// sentence composed from them. Parameters that do not apply are zero.
type Reason struct {
	Code ReasonCode
	Text string
	// What it asked for.
	NeedGPUs       int
	NeedMiB        int64 // per GPU
	NeedCPUMilli   int64
	NeedMemMiB     int64
	LargestFreeMiB int64  // the most free memory on a usable GPU
	LargestFreeGPU int    // that GPU's index; -1 when none
	LargestFreeOn  string // that GPU's label ("GPU 1", "GPU 0 MIG 1 (3g.40gb)")
	Fit            int    // GPUs that could take it now
	// Refusals counts the GPUs each other cause refused, in order.
	Refusals []Refusal
	// Its host's CPUs and memory when those hold it back.
	CPUMilliFree, CPUMilliTotal int64
	MemMiBFree, MemMiBTotal     int64
	// What the shepherd does about it, when it is first in line.
	Reserved     []int     // GPU indices reserved for it
	ReservedFrom time.Time // when they are expected free; zero when no estimate tells
	Preempting   []string  // spot runs being stopped for it
	Ahead        int       // runs ranked before it that also wait
	// Detail is free text: why there are no GPUs, or what never fits.
	Detail string
}

// Refusal is how many GPUs one cause refused.
type Refusal struct {
	Cause ReasonCode
	Words string // "too hot (91 °C)", "unhealthy"
	GPUs  int
}

// body is the first part of the sentence: what the request needs and what
// holds it back. gang says whether to name the linked group.
func (r *Reason) body(gang bool) string {
	if r.NeedGPUs <= 0 {
		return r.hostWords()
	}
	var b strings.Builder
	b.WriteString("needs ")
	b.WriteString(need(Request{GPUs: r.NeedGPUs, MemPerGPUMiB: r.NeedMiB}))
	if gang {
		b.WriteString(" on one linked group")
	}
	b.WriteString("; ")
	switch r.Code {
	case WaitNoGPUs:
		b.WriteString("this machine has no GPUs")
		if r.Detail != "" {
			b.WriteString(" (" + r.Detail + ")")
		}
		return b.String()
	case WaitNeverFits:
		b.WriteString("this machine can never hold it (" + r.Detail + ")")
		return b.String()
	}
	sep := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "; ") {
			b.WriteString("; ")
		}
	}
	if r.LargestFreeGPU >= 0 {
		b.WriteString("largest free is ")
		b.WriteString(mib(r.LargestFreeMiB))
		b.WriteString(" on ")
		b.WriteString(r.LargestFreeOn)
	}
	switch {
	case r.Code == WaitGroup:
		sep()
		fmt.Fprintf(&b, "%d GPUs fit, but not %d on one group", r.Fit, r.NeedGPUs)
	case r.Fit > 0:
		sep()
		fmt.Fprintf(&b, "%d of %d fit now", r.Fit, r.NeedGPUs)
	}
	for _, f := range r.Refusals {
		sep()
		if f.GPUs == 1 {
			b.WriteString("1 GPU ")
		} else {
			b.WriteString(strconv.Itoa(f.GPUs))
			b.WriteString(" GPUs ")
		}
		b.WriteString(f.Words)
	}
	if r.Code == WaitCPU || r.Code == WaitHostMemory {
		sep()
		b.WriteString(r.hostWords())
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// action is what the shepherd does for the request: "; stopping spot
// run(s) a to make room", "; GPU 0,1 reserved for it from about Mar 1
// 10:00", or nothing.
func (r *Reason) action() string {
	switch {
	case len(r.Preempting) > 0:
		return "; stopping spot run(s) " + strings.Join(r.Preempting, ", ") + " to make room"
	case len(r.Reserved) > 0:
		idx := make([]string, len(r.Reserved))
		for k, i := range r.Reserved {
			idx[k] = strconv.Itoa(i)
		}
		out := "; GPU " + strings.Join(idx, ",") + " reserved for it"
		if !r.ReservedFrom.IsZero() {
			out += " from about " + r.ReservedFrom.UTC().Format("Jan 2 15:04")
		}
		return out
	}
	return ""
}

// position is the request's place among those that wait: "; first in
// line", "; 3 runs ahead".
func position(ahead int) string {
	switch ahead {
	case 0:
		return "; first in line"
	case 1:
		return "; 1 run ahead"
	}
	return "; " + strconv.Itoa(ahead) + " runs ahead"
}

// hostWords says what of the host's CPUs and memory holds the request
// back: "waiting for a CPU: 2 of 2 in use".
func (r *Reason) hostWords() string {
	switch r.Code {
	case WaitCPU:
		what := "a CPU"
		if r.NeedCPUMilli != 1000 {
			what = cpus(r.NeedCPUMilli) + " CPUs"
		}
		return fmt.Sprintf("waiting for %s: %s of %s in use", what, cpus(r.CPUMilliTotal-r.CPUMilliFree), cpus(r.CPUMilliTotal))
	case WaitHostMemory:
		return fmt.Sprintf("waiting for %s of host memory: %s of %s in use", mib(r.NeedMemMiB), mib(r.MemMiBTotal-r.MemMiBFree), mib(r.MemMiBTotal))
	case WaitNeverFits:
		return "this machine can never hold it (" + r.Detail + ")"
	}
	return "waiting"
}
