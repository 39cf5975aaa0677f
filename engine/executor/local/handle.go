package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"niuma/engine/executor"
	"niuma/engine/executor/cgroup"
	"niuma/engine/executor/logcap"
)

// pollInterval is how often an adopted process (one this process did not
// start, so cannot wait for) is checked for life.
const pollInterval = 250 * time.Millisecond

// groupPollInterval is how often Stop checks whether processes a finished
// command left in its group are gone.
const groupPollInterval = 50 * time.Millisecond

// handle is one running local attempt.
type handle struct {
	ref     ref
	group   *cgroup.Group // nil: the attempt's processes are found by its token
	adopted bool

	mu       sync.Mutex
	paused   string // why the attempt is frozen ("" while it runs); see watchDisk
	stopping bool   // Stop began: never frozen again
	done     chan struct{}
	exit     executor.Exit // set before done is closed
	// final is the cgroup's accounting read as the attempt settled (set
	// before done is closed, when it had a group): what Usage gives after.
	final *executor.Usage
}

// ProcessGroup is the attempt's process group: the shim starts it as the
// leader of a group of its own, so its id is the shim's pid.
func (h *handle) ProcessGroup() int { return h.ref.PID }

func (h *handle) Ref() string {
	b, _ := json.Marshal(h.ref)
	return string(b)
}

func (h *handle) Wait(ctx context.Context) (executor.Exit, error) {
	select {
	case <-h.done:
		return h.exit, nil
	case <-ctx.Done():
		return executor.Exit{}, ctx.Err()
	}
}

// Stop signals the whole process group, the shim and the command and
// whatever it started, as a terminal signals a job: the command gets
// SIGTERM once, straight from the kernel. SIGKILL after grace ends whatever
// is still alive, including processes the command left behind when it
// exited itself.
//
// The grace period is a deadline stored beside the attempt
// (.attempt-N.stop) before SIGTERM is sent: a Stop of an attempt an
// earlier owner already stopped (it died during the grace period) sends
// no second SIGTERM and kills at that deadline, not a later one (a
// shorter grace still shortens it).
func (h *handle) Stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-h.done:
		// Ended before Stop: leave the group alone, its id may have been
		// reused by now.
		return nil
	default:
	}
	pgid := h.ref.PID
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	h.unpause()
	if deadline, ok := readStopFile(h.stopFile()); ok {
		// Stopped before: the earlier of the two deadlines holds.
		grace = min(grace, max(time.Until(deadline), 0))
	} else {
		// Stored first: should this owner die now, the next one kills at
		// the same deadline (a Stop that cannot store it still stops).
		_ = writeStopFile(h.stopFile(), time.Now().Add(grace))
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return err
		}
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	done := h.done
	var tick <-chan time.Time
	for {
		select {
		case <-done:
			// The command ended. What it left in the group had the
			// same SIGTERM and gets the rest of grace to go too. (A
			// group id is not reused while any process is in it.)
			if !groupAlive(pgid) {
				return nil
			}
			done = nil
			tk := time.NewTicker(groupPollInterval)
			defer tk.Stop()
			tick = tk.C
		case <-tick:
			if !groupAlive(pgid) {
				return nil
			}
		case <-t.C:
			err := syscall.Kill(-pgid, syscall.SIGKILL)
			// And what left the process group (setsid, a double
			// fork): in the attempt's cgroup, or carrying its token.
			h.reap()
			if h.group != nil {
				_ = h.group.Remove()
			}
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// groupAlive reports whether any live process is still in the process
// group. Zombies do not count: an orphan's zombie stays until init reaps
// it, and some container inits never do.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true // no telling: let grace run out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := processStat(pid); ok && st.pgid == pgid && st.running() {
			return true
		}
	}
	return false
}

// poll watches an adopted process until it is gone, then reads the exit
// status the shim recorded. Without one, the attempt ends as lost only once
// no process carries its token: a lost attempt is retried, and must never
// run beside what is left of it.
func (h *handle) poll() {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for range t.C {
		if h.ref.alive() {
			continue
		}
		ex, ok := readExitFile(h.ref.ExitFile)
		if !ok {
			if h.members() {
				continue
			}
			ex = executor.Exit{Code: -1, Lost: true, Reason: "the process ended while Niuma was away and left no exit status (killed by a signal?)"}
		}
		h.exit = h.settle(ex)
		close(h.done)
		return
	}
}

// reapLimit bounds how long reapLeftovers goes on killing: a process that keeps
// starting others with the token as fast as they die is left after it.
const reapLimit = 5 * time.Second

// reapLeftovers kills, with SIGKILL, every process still carrying the
// token of an attempt whose command has ended: what it left behind, in its
// process group or out of it (setsid, a double fork), which a signal to
// the group cannot reach. Only an attempt whose exit status is known, or
// that Stop has killed, is reaped, so nothing of a live command is
// touched; the log cappers carry no token and go on copying. A process that cleared its
// environment is not found this way; one left in the stage's process
// group still ends with the group when Stop kills it.
func reapLeftovers(token string) {
	deadline := time.Now().Add(reapLimit)
	for {
		ps := tokenProcesses(token)
		if len(ps) == 0 || time.Now().After(deadline) {
			return
		}
		killed := 0
		for _, p := range ps {
			if logCapper(p.pid) {
				continue
			}
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			killed++
		}
		if killed == 0 {
			return
		}
		time.Sleep(groupPollInterval / 10)
	}
}

// logCapper reports whether pid is a subshell of the log capper's
// wrapper (logcap.WrapperName is its $0): a capper not yet exec'd into
// perl, or the shell capper, which carry the token they were forked with
// (a process's environ is what it was exec'd with, whatever it unset
// since). They end once they have copied what is left.
func logCapper(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	words := bytes.SplitN(b, []byte{0}, 5)
	return len(words) >= 4 && string(words[1]) == "-c" && string(words[3]) == logcap.WrapperName
}

// newToken is a token for an attempt the engine gave none: random, so
// that no other attempt's processes carry it.
func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "local-" + hex.EncodeToString(b)
}

// tokenProc is a live process that carries an attempt's token.
type tokenProc struct {
	pid, pgid int
	startTime uint64
}

// tokenProcesses lists the live processes whose environment carries token
// (none for ""). A process that changed its own environment is not seen.
func tokenProcesses(token string) []tokenProc {
	if token == "" {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(tokenEnv + "=" + token + "\x00")
	var out []tokenProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.HasPrefix(b, want) && !bytes.Contains(b, append([]byte{0}, want...)) {
			continue
		}
		if st, ok := processStat(pid); ok && st.running() {
			out = append(out, tokenProc{pid: pid, pgid: st.pgid, startTime: st.startTime})
		}
	}
	return out
}

// tokenLeader is the shim of an attempt found by its token: the process
// that carries it and leads its process group.
func tokenLeader(token string) (tokenProc, bool) {
	for _, p := range tokenProcesses(token) {
		if p.pid == p.pgid {
			return p, true
		}
	}
	return tokenProc{}, false
}

// alive reports whether the recorded process still runs and is the same
// process (not a newer one that reused the PID).
func (r ref) alive() bool {
	if err := syscall.Kill(r.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, ok := processStat(r.PID)
	// Without a recorded start time there is no telling the process from
	// one that reused its PID; a ref from Start always has one.
	return ok && st.running() && r.StartTime != 0 && st.startTime == r.StartTime
}

func processStartTime(pid int) (uint64, bool) {
	st, ok := processStat(pid)
	return st.startTime, ok
}

// procStat is what Niuma reads from /proc/PID/stat.
type procStat struct {
	state     string // field 3: R, S, D, Z (zombie), X (dead), ...
	pgid      int    // field 5
	startTime uint64 // field 22, in clock ticks since boot
}

func (s procStat) running() bool { return s.state != "Z" && s.state != "X" }

// processStat reads /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func processStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	pgid, _ := strconv.Atoi(f[2])
	st, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{state: f[0], pgid: pgid, startTime: st}, true
}

// readExitFile reads the status the shim wrote; false while the file holds
// only the blank line Start wrote, or is missing.
func readExitFile(path string) (executor.Exit, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return executor.Exit{}, false
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return executor.Exit{}, false
	}
	return exitFromCode(code), true
}

// exitFromCode interprets a shell-style status: above 128 means the command
// died of signal (code-128).
func exitFromCode(code int) executor.Exit {
	ex := executor.Exit{Code: code}
	if code > 128 && code < 128+65 {
		sig := syscall.Signal(code - 128)
		ex.Reason = "exited with code " + strconv.Itoa(code) + " (" + sig.String() + ")"
	}
	return ex
}

// exitFromWait turns the shim's wait status into an Exit. When the shim
// itself was killed (SIGKILL after the grace period) there is no exit file.
func exitFromWait(ps *os.ProcessState, waitErr error, exitFile string) executor.Exit {
	if ex, ok := readExitFile(exitFile); ok {
		return ex
	}
	if ps == nil {
		return executor.Exit{Code: -1, Lost: true, Reason: "could not wait for the process: " + waitErr.Error()}
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) || waitErr == nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return executor.Exit{Code: -1, Signal: ws.Signal().String()}
		}
		return exitFromCode(ps.ExitCode())
	}
	return executor.Exit{Code: -1, Lost: true, Reason: waitErr.Error()}
}

// stopFile is where Stop stores the attempt's kill deadline.
func (h *handle) stopFile() string { return stopFileOf(h.ref.ExitFile) }

// writeStopFile stores a kill deadline (Unix nanoseconds), synced, so
// that it outlives this process.
func writeStopFile(path string, deadline time.Time) error {
	if path == ".stop" {
		return errors.New("the attempt has no exit file to store its stop deadline beside")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d\n", deadline.UnixNano())
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// readStopFile reads the kill deadline an earlier Stop stored; false when
// there is none (or it is not complete).
func readStopFile(path string) (time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
