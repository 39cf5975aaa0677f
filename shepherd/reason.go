package shepherd

import (
	"bytes"
	"strconv"
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
	// WaitTeamShare: its team is beyond its share and what other teams
	// leave idle is lent already or kept for them (Team, TeamHeld,
	// TeamNominal, Lent).
	WaitTeamShare ReasonCode = "team_share"
	// WaitTeamBorrow: its team already borrows as much as its borrowing
	// limit allows.
	WaitTeamBorrow ReasonCode = "team_borrow_limit"
	// WaitReclaiming: within its team's share, it waits while GPUs lent to
	// other teams are reclaimed (their runs, Preempting, being stopped).
	WaitReclaiming ReasonCode = "reclaiming"
)

// ReasonCodes lists every wait reason code, for callers that count them
// (a dashboard's labels).
var ReasonCodes = []ReasonCode{WaitNoGPUs, WaitNeverFits, WaitGPUMemory, WaitGPUBusy, WaitGPUUnhealthy,
	WaitGPUHot, WaitGroup, WaitReserved, WaitPreempting, WaitCPU, WaitHostMemory, WaitQueued,
	WaitTeamShare, WaitTeamBorrow, WaitReclaiming}

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
	// Its team's part, on a shared machine: what the team holds of its
	// nominal share, and the GPUs all teams hold beyond theirs (lent).
	Team                  string
	TeamHeld, TeamNominal float64
	Lent                  float64
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
	return string(r.appendBody(make([]byte, 0, 128), gang))
}

// appendBody appends body's words to b: a pass composes many sentences,
// and appending to one buffer spares fmt and the copies of a Builder.
func (r *Reason) appendBody(b []byte, gang bool) []byte {
	if r.NeedGPUs <= 0 {
		return r.appendHostWords(b)
	}
	start := len(b)
	b = append(b, "needs "...)
	b = appendNeed(b, r.NeedGPUs, r.NeedMiB)
	if gang {
		b = append(b, " on one linked group"...)
	}
	b = append(b, "; "...)
	switch r.Code {
	case WaitNoGPUs:
		b = append(b, "this machine has no GPUs"...)
		if r.Detail != "" {
			b = append(b, " ("...)
			b = append(b, r.Detail...)
			b = append(b, ')')
		}
		return b
	case WaitNeverFits:
		b = append(b, "this machine can never hold it ("...)
		b = append(b, r.Detail...)
		return append(b, ')')
	}
	sep := func() {
		if len(b) > start && !bytes.HasSuffix(b[start:], semi) {
			b = append(b, "; "...)
		}
	}
	if r.LargestFreeGPU >= 0 {
		b = append(b, "largest free is "...)
		b = appendMiB(b, r.LargestFreeMiB)
		b = append(b, " on "...)
		b = append(b, r.LargestFreeOn...)
	}
	switch {
	case r.Code == WaitGroup:
		sep()
		b = strconv.AppendInt(b, int64(r.Fit), 10)
		b = append(b, " GPUs fit, but not "...)
		b = strconv.AppendInt(b, int64(r.NeedGPUs), 10)
		b = append(b, " on one group"...)
	case r.Fit > 0:
		sep()
		b = strconv.AppendInt(b, int64(r.Fit), 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(r.NeedGPUs), 10)
		b = append(b, " fit now"...)
	}
	for _, f := range r.Refusals {
		sep()
		if f.GPUs == 1 {
			b = append(b, "1 GPU "...)
		} else {
			b = strconv.AppendInt(b, int64(f.GPUs), 10)
			b = append(b, " GPUs "...)
		}
		b = append(b, f.Words...)
	}
	if r.Code == WaitCPU || r.Code == WaitHostMemory {
		sep()
		b = r.appendHostWords(b)
	}
	if bytes.HasSuffix(b[start:], semi) {
		b = b[:len(b)-len(semi)]
	}
	return b
}

var semi = []byte("; ")

// action is what the shepherd does for the request: "; stopping spot
// run(s) a to make room", "; GPU 0,1 reserved for it from about Mar 1
// 10:00", or nothing.
func (r *Reason) action() string { return string(r.appendAction(nil)) }

func (r *Reason) appendAction(b []byte) []byte {
	switch {
	case len(r.Preempting) > 0:
		b = append(b, "; stopping spot run(s) "...)
		for k, id := range r.Preempting {
			if k > 0 {
				b = append(b, ", "...)
			}
			b = append(b, id...)
		}
		return append(b, " to make room"...)
	case len(r.Reserved) > 0:
		b = append(b, "; GPU "...)
		for k, i := range r.Reserved {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(i), 10)
		}
		b = append(b, " reserved for it"...)
		if !r.ReservedFrom.IsZero() {
			b = append(b, " from about "...)
			b = r.ReservedFrom.UTC().AppendFormat(b, "Jan 2 15:04")
		}
	}
	return b
}

// position is the request's place among those that wait: "; first in
// line", "; 3 runs ahead".
func position(ahead int) string { return string(appendPosition(nil, ahead)) }

func appendPosition(b []byte, ahead int) []byte {
	switch ahead {
	case 0:
		return append(b, "; first in line"...)
	case 1:
		return append(b, "; 1 run ahead"...)
	}
	b = append(b, "; "...)
	b = strconv.AppendInt(b, int64(ahead), 10)
	return append(b, " runs ahead"...)
}

// hostWords says what of the host's CPUs and memory holds the request
// back: "waiting for a CPU: 2 of 2 in use".
func (r *Reason) hostWords() string { return string(r.appendHostWords(nil)) }

func (r *Reason) appendHostWords(b []byte) []byte {
	switch r.Code {
	case WaitCPU:
		b = append(b, "waiting for "...)
		if r.NeedCPUMilli != 1000 {
			b = appendCPUs(b, r.NeedCPUMilli)
			b = append(b, " CPUs"...)
		} else {
			b = append(b, "a CPU"...)
		}
		b = append(b, ": "...)
		b = appendCPUs(b, r.CPUMilliTotal-r.CPUMilliFree)
		b = append(b, " of "...)
		b = appendCPUs(b, r.CPUMilliTotal)
		return append(b, " in use"...)
	case WaitHostMemory:
		b = append(b, "waiting for "...)
		b = appendMiB(b, r.NeedMemMiB)
		b = append(b, " of host memory: "...)
		b = appendMiB(b, r.MemMiBTotal-r.MemMiBFree)
		b = append(b, " of "...)
		b = appendMiB(b, r.MemMiBTotal)
		return append(b, " in use"...)
	case WaitNeverFits:
		b = append(b, "this machine can never hold it ("...)
		b = append(b, r.Detail...)
		return append(b, ')')
	}
	return append(b, "waiting"...)
}
