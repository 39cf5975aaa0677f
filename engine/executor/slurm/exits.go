package slurm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"niuma/engine/executor"
)

// evidence is what the job left on the shared filesystem: the batch
// script's marks and what slurmstepd wrote to the job's stderr. It decides
// how a job ended once Slurm no longer says (accounting is off and the
// controller forgot the job after MinJobAge), and completes what Slurm
// says (the workload's own exit code, an OOM kill only the log tells).
type evidence struct {
	started *startMark
	exit    *exitMark
	log     logSigns
}

// startMark is the batch script's first act on the node: proof that the
// job ran, and where.
type startMark struct {
	Job  string
	Node string
	At   time.Time
}

// exitMark is the status the shim recorded when the stage's command ended.
type exitMark struct {
	Code int
	At   time.Time
}

// logSigns are slurmstepd's own lines in the job's stderr. Only lines
// starting with "slurmstepd" count: a workload that prints "oom_kill"
// does not make its job out of memory.
type logSigns struct {
	OOM       bool // cgroup oom-kill events, or the step's memory polling killed it
	TimeLimit bool // "*** JOB N ON node CANCELLED AT … DUE TO TIME LIMIT ***"
	Preempted bool
	NodeFail  bool
	Cancelled bool   // "*** JOB N … CANCELLED AT …" (also printed for a mere signal)
	First     string // the first error slurmstepd reported, for reasons
}

var (
	stepdRe  = regexp.MustCompile(`^slurmstepd(-[^:]*)?: (error: )?(.*)$`)
	oomRe    = regexp.MustCompile(`(?i)oom[-_ ]kill|exceeded (job )?memory limit|out of memory`)
	cancelRe = regexp.MustCompile(`\*\*\* (JOB|STEP) \S+ ON \S+ CANCELLED AT \S+( DUE TO (TIME LIMIT|PREEMPTION|NODE FAILURE))?`)
)

// scanLog reads slurmstepd's lines from a job's log.
func scanLog(r io.Reader) logSigns {
	var s logSigns
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := stepdRe.FindStringSubmatch(strings.TrimRight(sc.Text(), "\r"))
		if m == nil {
			continue
		}
		msg := m[3]
		if s.First == "" && m[2] != "" {
			s.First = msg
			if len(s.First) > 200 {
				s.First = s.First[:200] + "…"
			}
		}
		if oomRe.MatchString(msg) {
			s.OOM = true
		}
		if c := cancelRe.FindStringSubmatch(msg); c != nil {
			switch c[3] {
			case "TIME LIMIT":
				s.TimeLimit = true
			case "PREEMPTION":
				s.Preempted = true
			case "NODE FAILURE":
				s.NodeFail = true
			default:
				s.Cancelled = true
			}
		}
	}
	return s
}

// logTail is how much of the end of a job's stderr is read for
// slurmstepd's lines: they come last, after the workload's output.
const logTail = 256 << 10

// readLogSigns scans the tail of a log file ("" or a missing file: none).
func readLogSigns(path string) logSigns {
	f, err := os.Open(path)
	if err != nil {
		return logSigns{}
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTail {
		_, _ = f.Seek(-logTail, io.SeekEnd)
	}
	return scanLog(f)
}

// readStartMark reads "JOBID EPOCH NODE".
func readStartMark(path string) *startMark {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return &startMark{}
	}
	m := &startMark{Job: f[0]}
	if t, err := strconv.ParseInt(f[1], 10, 64); err == nil {
		m.At = time.Unix(t, 0)
	}
	if len(f) >= 3 {
		m.Node = f[2]
	}
	return m
}

// readExitMark reads "CODE [EPOCH]". A half-written file (the shim writes
// a temporary file and renames it, but a filesystem may show anything)
// counts as none.
func readExitMark(path string) *exitMark {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil
	}
	code, err := strconv.Atoi(f[0])
	if err != nil || code < 0 || code > 255 {
		return nil
	}
	m := &exitMark{Code: code}
	if len(f) >= 2 {
		if t, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			m.At = time.Unix(t, 0)
		}
	}
	return m
}

// limits are what the attempt was given, for the words of an exit.
type limits struct {
	MemoryMiB int64
	TimeLimit time.Duration
}

// exitOf is how a job ended, from Slurm's record (nil when Slurm no longer
// knows the job) and the evidence it left. Slurm's state is the authority
// on why a job ended (time limit, memory, node, preemption); the shim's
// exit file is the authority on the workload's own exit code.
func exitOf(r *record, ev evidence, lim limits) executor.Exit {
	if r == nil {
		return exitFromEvidence(ev, lim)
	}
	state := r.State
	if state == "FAILED" && r.StepState == "OUT_OF_MEMORY" {
		state = "OUT_OF_MEMORY"
	}
	where := ""
	if r.Nodes != "" && r.Nodes != "None assigned" {
		where = " on " + r.Nodes
	}
	switch state {
	case "COMPLETED":
		if ev.exit != nil && ev.exit.Code != 0 {
			return codeExit(ev.exit.Code)
		}
		return executor.Exit{Code: 0}
	case "FAILED":
		switch {
		case ev.log.OOM:
			return oomExit(lim, where)
		case ev.exit != nil:
			return codeExit(ev.exit.Code)
		case ev.started == nil:
			return notStarted(ev, where, fmt.Sprintf("Slurm: FAILED, exit code %d:%d", r.Code, r.Signal))
		case r.Signal != 0:
			return signalExit(r.Signal)
		case r.Code >= 0:
			return codeExit(r.Code)
		}
		return executor.Exit{Code: -1, Reason: "failed" + where + " (Slurm: FAILED)"}
	case "OUT_OF_MEMORY":
		return oomExit(lim, where)
	case "TIMEOUT":
		return timeoutExit(lim)
	case "CANCELLED":
		by := ""
		if r.By != "" {
			by = " by uid " + r.By
		}
		if ev.started == nil {
			return executor.Exit{Code: -1, Reason: "cancelled in Slurm" + by + " before it started"}
		}
		return executor.Exit{Code: -1, Reason: "cancelled in Slurm" + by + where}
	case "NODE_FAIL":
		return executor.Exit{Code: -1, Lost: true, Reason: "lost: its node" + strings.TrimPrefix(where, " on") + " failed under it (Slurm: NODE_FAIL)"}
	case "PREEMPTED":
		return executor.Exit{Code: -1, Interrupted: true, Reason: "interrupted: Slurm preempted it" + where + " for another job (PREEMPTED)"}
	case "BOOT_FAIL":
		return executor.Exit{Code: -1, Interrupted: true, Reason: "interrupted: its node" + strings.TrimPrefix(where, " on") + " failed to boot (Slurm: BOOT_FAIL)"}
	case "DEADLINE":
		return executor.Exit{Code: -1, Reason: "cancelled by Slurm: it could not end before its deadline (DEADLINE)"}
	default:
		return executor.Exit{Code: -1, Reason: "ended in Slurm state " + state + where}
	}
}

// exitFromEvidence decides from the files alone: Slurm has forgotten the
// job and keeps no accounting.
func exitFromEvidence(ev evidence, lim limits) executor.Exit {
	where := ""
	if ev.started != nil && ev.started.Node != "" {
		where = " on " + ev.started.Node
	}
	if ev.exit != nil {
		code := ev.exit.Code
		switch {
		case code == 0:
			return executor.Exit{Code: 0}
		case ev.log.OOM:
			return oomExit(lim, where)
		case ev.log.TimeLimit || ranOut(ev, lim):
			return timeoutExit(lim)
		}
		return codeExit(code)
	}
	switch {
	case ev.log.OOM:
		return oomExit(lim, where)
	case ev.log.TimeLimit:
		return timeoutExit(lim)
	case ev.log.Preempted:
		return executor.Exit{Code: -1, Interrupted: true, Reason: "interrupted: Slurm preempted it" + where + " for another job"}
	case ev.log.NodeFail:
		return executor.Exit{Code: -1, Lost: true, Reason: "lost: its node" + strings.TrimPrefix(where, " on") + " failed under it"}
	case ev.log.Cancelled:
		return executor.Exit{Code: -1, Signal: "killed", Reason: "cancelled in Slurm" + where}
	case ev.started == nil:
		return notStarted(ev, where, "Slurm has forgotten it and keeps no accounting")
	}
	return executor.Exit{Code: -1, Lost: true, Reason: "the job ended" + where + " without an exit status, and Slurm has forgotten it (no accounting): killed by a signal or its node failed?"}
}

// ranOut says whether the job ran to its time limit (within Slurm's
// enforcement slack): its exit came from the limit's SIGTERM.
func ranOut(ev evidence, lim limits) bool {
	if lim.TimeLimit <= 0 || ev.started == nil || ev.exit == nil || ev.started.At.IsZero() || ev.exit.At.IsZero() {
		return false
	}
	return ev.exit.At.Sub(ev.started.At) >= lim.TimeLimit-time.Second
}

func notStarted(ev evidence, where, slurm string) executor.Exit {
	why := "the job ended" + where + " before the stage started"
	if ev.log.First != "" {
		why += ": " + ev.log.First
	} else {
		why += " (is the run directory visible on the node? " + slurm + ")"
	}
	return executor.Exit{Code: -1, Reason: why}
}

func oomExit(lim limits, where string) executor.Exit {
	limit := "the memory Slurm gave it (the partition's default)"
	if lim.MemoryMiB > 0 {
		limit = fmt.Sprintf("its %d MiB (--mem); raise runtime: memory", lim.MemoryMiB)
	}
	return executor.Exit{Code: -1, OOMKilled: true, Reason: "killed: out of memory" + where + ": it used more than " + limit}
}

func timeoutExit(lim limits) executor.Exit {
	if lim.TimeLimit > 0 {
		return executor.Exit{Code: -1, Reason: fmt.Sprintf("timeout: Slurm stopped it at its time limit of %s (the stage's timeout)", lim.TimeLimit)}
	}
	return executor.Exit{Code: -1, Reason: "timeout: Slurm stopped it at its partition's time limit"}
}

// codeExit is the shim's status: 128+n means the command died of signal n.
func codeExit(code int) executor.Exit {
	ex := executor.Exit{Code: code}
	if code > 128 && code < 128+65 {
		ex.Reason = "exited with code " + strconv.Itoa(code) + " (" + syscall.Signal(code-128).String() + ")"
	}
	return ex
}

func signalExit(sig int) executor.Exit {
	if sig == int(syscall.SIGKILL) {
		return executor.Exit{Code: -1, Signal: "killed"}
	}
	return executor.Exit{Code: -1, Signal: syscall.Signal(sig).String()}
}
