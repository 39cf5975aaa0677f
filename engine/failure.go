package engine

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"niuma/engine/executor"
	"niuma/sentinel"
	"niuma/storage"
)

// FailureInfo says why a stage's attempt failed, as well as Niuma could
// tell: a recognised cause with its fix (sentinel.Diagnose), and the last
// lines of its stderr. The run view, `niuma show` and the report lead with
// it.
type FailureInfo struct {
	Attempt int      `json:"attempt"`
	Cause   string   `json:"cause,omitempty"` // a sentinel.Cause; "" when not recognised
	Summary string   `json:"summary,omitempty"`
	Fix     string   `json:"fix,omitempty"`
	Line    string   `json:"line,omitempty"` // the output line that gave the cause away
	Tail    []string `json:"stderr_tail,omitempty"`
}

// failureKind is the event kind a diagnosed failure is stored under.
const failureKind = "failure"

// failureTailLines is how much of a failed attempt's stderr is kept.
const failureTailLines = 12

// interpretersFile holds, in a run's folder, what each stage's program
// resolved to when the run was submitted (its provenance).
const interpretersFile = "interpreters.json"

func writeInterpreters(dir string, list []string) error {
	if len(list) == 0 {
		return nil
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, interpretersFile), append(b, '\n'), 0o644)
}

// recordedInterpreter is the path argv0 resolved to at submission ("" when
// unknown).
func recordedInterpreter(runDir, argv0 string) string {
	b, err := os.ReadFile(filepath.Join(runDir, interpretersFile))
	if err != nil {
		return ""
	}
	var list []string
	if json.Unmarshal(b, &list) != nil {
		return ""
	}
	for _, s := range list {
		name, rest, ok := strings.Cut(s, "=")
		if ok && name == argv0 {
			path, _, _ := strings.Cut(rest, " ")
			if path != "missing" {
				return path
			}
		}
	}
	return ""
}

// diagnose looks at an attempt that failed (not cancelled, not stopped by
// the sentinel), records what it finds as an event, and, when the cause
// is one the template's sentinel section answers (cuda_oom: retry with a
// smaller batch), returns that retry for the attempt's end to apply. The
// loop calls it at the top of finish.
func (e *Engine) diagnose(ctx context.Context, lr *liveRun, ls *liveStage, exit executor.Exit) *storage.Pending {
	if exit.Success() || exit.Lost || exit.Interrupted || lr.run.CancelRequested || ls.st.Pending.Action != "" {
		return nil
	}
	_, errPath := stageLogPaths(lr.run.Dir, ls.st.Name, ls.st.Attempts)
	tail, _ := tailFile(errPath, 200)
	f := sentinel.Failure{Signal: exit.Signal, OOMKilled: exit.OOMKilled, Output: tail, RunDir: lr.run.Dir,
		Container: lr.run.Executor == "docker", ShmSizeMiB: lr.tmpl.Runtime.ShmSizeMiB, MemoryMiB: lr.tmpl.Runtime.MemoryMiB}
	if exit.Code >= 0 {
		c := exit.Code
		f.ExitCode = &c
	}
	if st, ok := lr.tmpl.Stage(ls.st.Name); ok && !f.Container {
		f.StageMemoryMiB = st.MemMiB
	}
	if st, ok := lr.tmpl.Stage(ls.st.Name); ok && len(st.Command) > 0 {
		f.Command = st.Command
		if !f.Container && !strings.Contains(st.Command[0], "${") {
			f.Interpreter = recordedInterpreter(lr.run.Dir, st.Command[0])
			if p, err := exec.LookPath(st.Command[0]); err == nil {
				if r, err := filepath.EvalSymlinks(p); err == nil {
					p = r
				}
				if abs, err := filepath.Abs(p); err == nil {
					p = abs
				}
				f.Resolved = p
			}
		}
	}
	h, ok := sentinel.Diagnose(f)
	info := FailureInfo{Attempt: ls.st.Attempts, Tail: lastLines(tail, failureTailLines)}
	if ok {
		info.Cause, info.Summary, info.Fix, info.Line = string(h.Cause), h.Summary, h.Fix, h.Line
	}
	if ok || len(info.Tail) > 0 {
		ev, _ := json.Marshal(info)
		msg := "attempt " + strconv.Itoa(info.Attempt) + " failed"
		if info.Summary != "" {
			msg += ": " + info.Summary
		}
		if _, err := e.store.AddEvent(ctx, storage.Event{RunID: lr.run.ID, Stage: ls.st.Name, Kind: failureKind,
			Severity: storage.SeverityWarning, Message: msg, Fix: info.Fix, Evidence: string(ev), At: time.Now()}); err != nil {
			e.logWarn(ctx, "record why an attempt failed", "run", lr.run.ID, "err", err)
		}
	}
	if !ok || h.Cause != sentinel.CauseCUDAOOM {
		return nil
	}
	a := sentinel.Anomaly{Kind: sentinel.CUDAOOM, Severity: sentinel.Critical, Run: lr.run.ID, Stage: ls.st.Name,
		Attempt: ls.st.Attempts, At: time.Now(), Message: h.Summary, Fix: h.Fix}
	d := e.decide(ctx, lr, ls, a)
	if d.Do != sentinel.Retry {
		return nil
	}
	p, err := retryDecision(lr, d.Params)
	if err != nil {
		e.recordNote(ctx, lr, ls, "retry_refused", "the retry after cuda_oom was not made: "+err.Error())
		return nil
	}
	p.Note = "retrying after cuda_oom with " + strings.Join(d.Changes, ", ")
	e.recordNote(ctx, lr, ls, "retry", p.Note)
	return &p
}

// lastLines returns the last n non-blank lines of s.
func lastLines(s string, n int) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// failures fills the Failure of every failed stage of a run: the diagnosis
// the owner stored when the attempt ended, or, for one it could not store,
// a diagnosis from the attempt's stderr now.
func (e *Engine) failures(ctx context.Context, info *RunInfo) {
	var evs []storage.Event
	loaded := false
	for i := range info.Stages {
		st := &info.Stages[i]
		if st.State != Failed || st.Attempts == 0 {
			continue
		}
		if !loaded {
			evs, _ = e.store.Events(ctx, info.ID)
			loaded = true
		}
		for j := len(evs) - 1; j >= 0; j-- {
			ev := evs[j]
			var fi FailureInfo
			if ev.Kind == failureKind && ev.Stage == st.Name && json.Unmarshal([]byte(ev.Evidence), &fi) == nil && fi.Attempt == st.Attempts {
				st.Failure = &fi
				break
			}
		}
		if st.Failure != nil {
			continue
		}
		_, errPath := stageLogPaths(info.Dir, st.Name, st.Attempts)
		tail, _ := tailFile(errPath, 200)
		f := sentinel.Failure{Output: tail, RunDir: info.Dir, Container: info.Executor == "docker"}
		if st.ExitCode != nil {
			f.ExitCode = st.ExitCode
		}
		for _, a := range st.History {
			if a.Number == st.Attempts && strings.Contains(a.Reason, "killed") {
				f.Signal = "killed"
			}
		}
		fi := FailureInfo{Attempt: st.Attempts, Tail: lastLines(tail, failureTailLines)}
		if h, ok := sentinel.Diagnose(f); ok {
			fi.Cause, fi.Summary, fi.Fix, fi.Line = string(h.Cause), h.Summary, h.Fix, h.Line
		}
		if fi.Cause != "" || len(fi.Tail) > 0 {
			st.Failure = &fi
		}
	}
}
