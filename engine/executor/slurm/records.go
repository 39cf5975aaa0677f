package slurm

import (
	"strconv"
	"strings"
	"time"
)

// record is what Slurm says about one job: from the controller (squeue),
// which forgets a job MinJobAge after it ends, or from accounting (sacct),
// which keeps it.
type record struct {
	ID     string
	State  string // the state word: CANCELLED for "CANCELLED by 1000"
	By     string // who cancelled it (a uid), for CANCELLED
	Code   int    // exit code; -1 when unknown (squeue)
	Signal int    // the signal that ended it; 0 for none
	Reason string // Slurm's reason code: Resources, Priority, QOSMaxGRESPerUser, …
	Nodes  string
	// Elapsed is how long it has run (sacct's Elapsed, squeue's %M).
	Elapsed time.Duration
	// StepState is the worst state of its steps (the batch step, srun
	// steps): OUT_OF_MEMORY shows there even when the job says FAILED.
	StepState string
	Comment   string // squeue only: the job's --comment
	Name      string // squeue only: the job's name
}

// The squeue and sacct formats the executor asks for, and parses.
const (
	squeueFormat = "%i|%T|%r|%N|%M|%j|%k"
	sacctFields  = "JobIDRaw,State,ExitCode,Reason,Elapsed,NodeList"
)

// parseSqueue reads `squeue --noheader --format=squeueFormat`. Lines that
// do not fit are skipped: squeue's output is Slurm's, but a job name or
// comment is the user's (the comment comes last, so a '|' in it is kept).
func parseSqueue(out []byte) map[string]*record {
	recs := map[string]*record{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(strings.TrimRight(line, "\r"), "|", 7)
		if len(f) < 5 || !jobID(f[0]) {
			continue
		}
		r := &record{ID: f[0], State: stateWord(f[1]), Code: -1, Reason: strings.TrimSpace(f[2]), Nodes: f[3]}
		r.Elapsed, _ = parseDuration(f[4])
		if len(f) >= 7 {
			r.Name, r.Comment = f[5], f[6]
		}
		if r.State == "" {
			continue
		}
		recs[r.ID] = r
	}
	return recs
}

// parseSacct reads `sacct --parsable2 --noheader -o sacctFields`: a row for
// each job and one for each of its steps (ID.batch, ID.extern, ID.0). The
// job's row gives its state and exit code; a step's OUT_OF_MEMORY (or
// another terminal state) is kept as StepState. A job requeued by Slurm
// has several rows; the last one is the current.
func parseSacct(out []byte) map[string]*record {
	recs := map[string]*record{}
	steps := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimRight(line, "\r"), "|")
		if len(f) < 6 {
			continue
		}
		id, step, isStep := strings.Cut(f[0], ".")
		if !jobID(id) || (isStep && step == "") {
			continue
		}
		state := stateWord(f[1])
		if state == "" {
			continue
		}
		if isStep {
			if stepRank(state) > stepRank(steps[id]) {
				steps[id] = state
			}
			continue
		}
		r := &record{ID: id, State: state, Code: -1, Reason: strings.TrimSpace(f[3]), Nodes: f[5]}
		if by, ok := strings.CutPrefix(strings.TrimSpace(f[1]), "CANCELLED by "); ok {
			r.By = by
		}
		if c, s, ok := strings.Cut(f[2], ":"); ok {
			if n, err := strconv.Atoi(c); err == nil {
				r.Code = n
			}
			r.Signal, _ = strconv.Atoi(s)
		}
		r.Elapsed, _ = parseDuration(f[4])
		recs[id] = r
	}
	for id, s := range steps {
		if r := recs[id]; r != nil {
			r.StepState = s
		}
	}
	return recs
}

// stepRank orders step states by how much they say about the job's end:
// an out-of-memory step explains a failed job.
func stepRank(s string) int {
	switch s {
	case "":
		return 0
	case "OUT_OF_MEMORY":
		return 3
	case "COMPLETED", "PENDING", "RUNNING":
		return 1
	default:
		return 2
	}
}

// stateWord is a state's first word, upper case: "CANCELLED by 0" and
// "CANCELLED+" (squeue's truncation mark) are CANCELLED.
func stateWord(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " +"); i >= 0 {
		s = s[:i]
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && r != '_' {
			return ""
		}
	}
	return s
}

// jobID accepts a plain numeric job id (arrays and het jobs are not what
// the executor submits).
func jobID(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parseDuration reads Slurm's [DD-[HH:]]MM:SS (also M:SS and plain
// seconds), as in sacct's Elapsed and squeue's %M.
func parseDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "INVALID" || s == "UNLIMITED" {
		return 0, false
	}
	var days int
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 1e6 {
			return 0, false
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return 0, false
	}
	var secs int64
	for _, p := range parts {
		if p == "" || len(p) > 9 {
			return 0, false
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		secs = secs*60 + n
	}
	if len(parts) == 1 && days > 0 {
		secs *= 3600 // "D-HH"
	}
	return time.Duration(int64(days)*86400+secs) * time.Second, true
}

// terminal reports whether a state is an end: the job will not run again
// under this id.
func terminal(state string) bool {
	switch state {
	case "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
		"OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "REVOKED", "SPECIAL_EXIT":
		return true
	}
	return false
}

// pending reports whether a state means the job has not started (yet).
func pending(state string) bool {
	switch state {
	case "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "CONFIGURING":
		return true
	}
	return false
}

// formatTimeLimit writes a Slurm time limit: minutes, rounded up (Slurm's
// resolution), at least one.
func formatTimeLimit(d time.Duration) string {
	m := int64((d + time.Minute - 1) / time.Minute)
	return strconv.FormatInt(max(m, 1), 10)
}
