package shepherd

import (
	"fmt"
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
	LargestFreeMiB int64 // the most free memory on a usable GPU
	LargestFreeGPU int   // that GPU's index; -1 when none
	Fit            int   // GPUs that could take it now
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

// sentence composes r.Text from the parameters; oneGroup says whether the
// machine's GPUs form one group (then groups go unsaid).
func (r *Reason) sentence(gang bool) string {
	var b strings.Builder
	if r.NeedGPUs <= 0 {
		b.WriteString(r.hostWords())
	} else {
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
		case WaitNeverFits:
			b.WriteString("this machine can never hold it (" + r.Detail + ")")
		default:
			var parts []string
			if r.LargestFreeGPU >= 0 {
				parts = append(parts, fmt.Sprintf("largest free is %s on GPU %d", mib(r.LargestFreeMiB), r.LargestFreeGPU))
			}
			switch {
			case r.Code == WaitGroup:
				parts = append(parts, fmt.Sprintf("%d GPUs fit, but not %d on one group", r.Fit, r.NeedGPUs))
			case r.Fit > 0:
				parts = append(parts, fmt.Sprintf("%d of %d fit now", r.Fit, r.NeedGPUs))
			}
			for _, f := range r.Refusals {
				if f.GPUs == 1 {
					parts = append(parts, "1 GPU "+f.Words)
				} else {
					parts = append(parts, fmt.Sprintf("%d GPUs %s", f.GPUs, f.Words))
				}
			}
			if r.Code == WaitCPU || r.Code == WaitHostMemory {
				parts = append(parts, r.hostWords())
			}
			b.WriteString(strings.Join(parts, "; "))
		}
	}
	switch {
	case len(r.Preempting) > 0:
		fmt.Fprintf(&b, "; stopping spot run(s) %s to make room", strings.Join(r.Preempting, ", "))
	case len(r.Reserved) > 0:
		idx := make([]string, len(r.Reserved))
		for k, i := range r.Reserved {
			idx[k] = fmt.Sprint(i)
		}
		fmt.Fprintf(&b, "; GPU %s reserved for it", strings.Join(idx, ","))
		if !r.ReservedFrom.IsZero() {
			fmt.Fprintf(&b, " from about %s", r.ReservedFrom.UTC().Format("Jan 2 15:04"))
		}
	}
	switch r.Ahead {
	case 0:
		b.WriteString("; first in line")
	case 1:
		b.WriteString("; 1 run ahead")
	default:
		fmt.Fprintf(&b, "; %d runs ahead", r.Ahead)
	}
	return b.String()
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
