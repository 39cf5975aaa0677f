package local

import (
	"fmt"
	"syscall"
	"time"

	"niuma/engine/executor"
	"niuma/engine/executor/cgroup"
	"niuma/engine/executor/logcap"
)

// Mode says how the executor finds an attempt's processes: by its cgroup
// (Cgroups set), or by the token in their environment; in words, for
// `niuma doctor` and the board.
func (x *Executor) Mode() string {
	if x.Cgroups != nil {
		return x.Cgroups.Describe()
	}
	why := x.NoCgroup
	if why == "" {
		why = "no cgroup was set up"
	}
	return "token scan (an attempt's processes are found by NIUMA_ATTEMPT_TOKEN in their environment; one that clears it is not found): " + why
}

// members reports whether anything of the attempt is alive: a process in
// its cgroup, or, without one, a process carrying its token.
func (h *handle) members() bool {
	if h.group != nil {
		return !h.group.Empty()
	}
	return len(tokenProcesses(h.ref.Token)) > 0
}

// reap ends what the attempt's command left behind once it has ended (its
// status is known, or Stop killed it): every process in its cgroup, which
// nothing can leave, or without one every process carrying its token. The
// log cappers are in neither (they are the wrapper's, outside the group,
// and carry no token) and go on copying.
func (h *handle) reap() {
	if h.group == nil {
		reapLeftovers(h.ref.Token)
		return
	}
	_ = h.group.Kill()
}

// settle reads what the attempt's cgroup says of how it ended (the OOM
// killer, for its memory limit), then reaps what is left and removes the
// group. It runs once the attempt's status is known, or once nothing of
// it is left.
func (h *handle) settle(ex executor.Exit) executor.Exit {
	if h.group == nil {
		reapLeftovers(h.ref.Token)
		return ex
	}
	st := h.group.Stats()
	if st.CPUNanos > 0 || st.PeakBytes > 0 {
		// (All zeros: another handle of the attempt, an earlier owner's
		// in this process, settled and removed the group first.)
		u := usageOf(st)
		h.final = &u
	}
	h.reap()
	_ = h.group.Remove()
	if st.OOMKills > 0 && !ex.Success() {
		ex.OOMKilled = true
		ex.Reason = OOMReason(st.LimitBytes, st.PeakBytes)
	}
	return ex
}

// removeGroup removes the cgroup of an attempt Start could not launch
// (nil: none).
func removeGroup(g *cgroup.Group) {
	if g != nil {
		_ = g.Remove()
	}
}

// OOMReason is the reason of an attempt its memory limit ended: "out of
// memory (limit 4 GiB, peak 4.0 GiB)".
func OOMReason(limit, peak int64) string {
	if limit <= 0 {
		return fmt.Sprintf("out of memory (peak %s)", decimalBytes(peak, unitOf(peak)))
	}
	return fmt.Sprintf("out of memory (limit %s, peak %s)", wholeBytes(limit), decimalBytes(peak, unitOf(limit)))
}

type unit struct {
	size int64
	name string
}

func unitOf(n int64) unit {
	switch {
	case n >= 1<<30:
		return unit{1 << 30, "GiB"}
	case n >= 1<<20:
		return unit{1 << 20, "MiB"}
	case n >= 1<<10:
		return unit{1 << 10, "KiB"}
	}
	return unit{1, "B"}
}

// wholeBytes writes a size as a template would: "4 GiB", "1536 MiB".
func wholeBytes(n int64) string {
	for _, u := range []unit{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return decimalBytes(n, unitOf(n))
}

func decimalBytes(n int64, u unit) string {
	if u.size == 1 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
}

// groupLeader is the shim's process group leader of an attempt found by
// its cgroup before its pid file was written: the group's processes (the
// shim's subshell, the command) lead no group of their own, but are in
// the wrapper's, whose id is the wrapper's pid.
func groupLeader(g *cgroup.Group) (int, bool) {
	for _, pid := range g.Procs() {
		if st, ok := processStat(pid); ok && st.running() && st.pgid > 1 {
			if err := syscall.Kill(st.pgid, 0); err == nil || err == syscall.EPERM {
				return st.pgid, true
			}
		}
	}
	return 0, false
}

// diskPoll is how often a running attempt's disk is looked at.
const diskPoll = time.Second

// watchDisk pauses the attempt while the disk holding dir (its stage
// directory, in the data directory with the archive) is full: it freezes
// the attempt's cgroup once less than logcap.RoomNeeded is free, and thaws
// it once twice that is, so that what the attempt writes, and its points,
// wait instead of being lost. Without a freezer nothing is paused: a
// command then waits on its next write to stdout or stderr, whose capper
// holds what it could not write (see logcap). It returns when the attempt
// ends.
func (h *handle) watchDisk(dir string) {
	if h.group == nil || !h.group.Features().Freeze {
		return
	}
	t := time.NewTicker(diskPoll)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		free, ok := logcap.Free(dir)
		if !ok {
			continue
		}
		h.mu.Lock()
		switch {
		case h.paused == "" && !h.stopping && free < logcap.RoomNeeded:
			if h.group.Freeze() == nil {
				h.paused = pausedWords(free)
			}
		case h.paused != "" && free >= 2*logcap.RoomNeeded:
			if h.group.Thaw() == nil {
				h.paused = ""
			}
		case h.paused != "":
			h.paused = pausedWords(free)
		}
		h.mu.Unlock()
	}
}

// unpause thaws a paused attempt for good (Stop: a frozen command could
// not act on SIGTERM).
func (h *handle) unpause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopping = true
	if h.paused != "" {
		_ = h.group.Thaw()
		h.paused = ""
	}
}

// Paused implements executor.Pauser.
func (h *handle) Paused() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paused
}

func pausedWords(free int64) string {
	if free >= 1<<20 {
		return fmt.Sprintf("paused: disk full, %d MiB free", free>>20)
	}
	return fmt.Sprintf("paused: disk full, %d KiB free", free>>10)
}

// Usage implements executor.Meter: the attempt's cgroup's accounting;
// once the attempt has ended, what the group said as it settled (its CPU
// time in full, its peak), since the group itself is gone.
func (h *handle) Usage() (executor.Usage, bool) {
	if h.group == nil {
		return executor.Usage{}, false
	}
	select {
	case <-h.done:
		if h.final != nil {
			return *h.final, true
		}
		return executor.Usage{}, false // its group is gone
	default:
	}
	return usageOf(h.group.Stats()), true
}

func usageOf(st cgroup.Stats) executor.Usage {
	return executor.Usage{MemoryBytes: st.MemoryBytes, PeakBytes: st.PeakBytes, LimitBytes: st.LimitBytes,
		CPUSeconds: float64(st.CPUNanos) / 1e9, CPULimitMilli: st.CPULimitMilli}
}
