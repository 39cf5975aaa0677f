package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"niuma/engine"
)

// logLines is how many of the latest lines of a stage's stdout and of its
// stderr the log pane shows.
const logLines = 200

// logView is what the log pane shows: the stage picked, the stages to pick
// from, and the tail of its latest attempt (or a note why there is none).
type logView struct {
	stages  []string
	stage   string
	attempt int
	text    string
	note    string
	failed  bool // the stage failed: its tail opens at the end, where the error is
}

// pickLogStage chooses the stage whose log to show: the user's choice when
// the run has it, else the first running stage, else the last that started,
// else the first.
func pickLogStage(r engine.RunInfo, chosen string) (engine.StageInfo, bool) {
	if len(r.Stages) == 0 {
		return engine.StageInfo{}, false
	}
	for _, s := range r.Stages {
		if s.Name == chosen {
			return s, true
		}
	}
	for _, s := range r.Stages {
		if s.State == engine.Running {
			return s, true
		}
	}
	for i := len(r.Stages) - 1; i >= 0; i-- {
		if r.Stages[i].Attempts > 0 {
			return r.Stages[i], true
		}
	}
	return r.Stages[0], true
}

// logCache keeps the last tail read, so the reloads (several a second)
// read a stage's log files again only while it runs: a finished attempt's
// log does not change.
type logCache struct {
	mu   sync.Mutex
	key  string
	view logView
}

// read returns the log pane's content for run r and the stage the user
// chose.
func (c *logCache) read(ctx context.Context, b Backend, r engine.RunInfo, chosen string) logView {
	st, ok := pickLogStage(r, chosen)
	if !ok {
		return logView{note: "This run has no stages."}
	}
	v := logView{stage: st.Name, attempt: st.Attempts, failed: st.State == engine.Failed}
	for _, s := range r.Stages {
		v.stages = append(v.stages, s.Name)
	}
	if st.Attempts == 0 {
		v.note = st.Name + " has not started yet."
		return v
	}
	key := fmt.Sprintf("%s|%s|%d", r.ID, st.Name, st.Attempts)
	c.mu.Lock()
	if c.key == key {
		cached := c.view
		c.mu.Unlock()
		cached.stages = v.stages
		return cached
	}
	c.mu.Unlock()
	text, err := b.LogTail(ctx, r.ID, st.Name, st.Attempts, logLines)
	switch {
	case err != nil:
		v.note = "Could not read the log: " + err.Error()
		return v // not cached: the next reload tries again
	case text == "":
		v.note = fmt.Sprintf("%s attempt %d has written nothing yet.", st.Name, st.Attempts)
	default:
		v.text = text
	}
	// Cache only a final attempt: a running one's log keeps growing.
	if st.State.Done() {
		c.mu.Lock()
		c.key, c.view = key, v
		c.mu.Unlock()
	}
	return v
}

// filterLog keeps the lines of text that contain q, ignoring case, and the
// marker between stdout and stderr so the reader still knows which is
// which. An empty q keeps everything.
func filterLog(text, q string) string {
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" {
		return text
	}
	var keep []string
	matched := false
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == engine.StderrMarker {
			keep = append(keep, line)
			continue
		}
		if strings.Contains(strings.ToLower(line), q) {
			keep = append(keep, line)
			matched = true
		}
	}
	if !matched {
		return ""
	}
	// The marker alone at the end: no stderr line matched.
	if keep[len(keep)-1] == engine.StderrMarker {
		keep = keep[:len(keep)-1]
	}
	return strings.Join(keep, "\n") + "\n"
}

// lastErrorLine is the line that says why a stage failed: the last
// non-empty line of its stderr (a Python traceback ends with the
// exception and its message), else of its stdout.
func lastErrorLine(tail string) string {
	out, errPart, hasErr := strings.Cut(tail, engine.StderrMarker+"\n")
	if !hasErr {
		out, errPart, hasErr = strings.Cut(tail, engine.StderrMarker)
	}
	for _, part := range []string{errPart, out} {
		lines := strings.Split(strings.TrimRight(part, "\n"), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if l := strings.TrimSpace(lines[i]); l != "" && l != engine.StderrMarker {
				return l
			}
		}
		if !hasErr {
			break
		}
	}
	return ""
}

// failCache keeps the error line of a run's failed stage: a finished
// attempt's log does not change, so it is read once.
type failCache struct {
	mu    sync.Mutex
	lines map[string]string // "run/stage/attempt" -> line
}

// line is "stage: last error line" for the run's first failed stage with
// an attempt, or "".
func (c *failCache) line(ctx context.Context, b Backend, r engine.RunInfo) string {
	for _, s := range r.Stages {
		if s.State != engine.Failed || s.Attempts == 0 {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d", r.ID, s.Name, s.Attempts)
		c.mu.Lock()
		l, ok := c.lines[key]
		c.mu.Unlock()
		if !ok {
			tail, err := b.LogTail(ctx, r.ID, s.Name, s.Attempts, 40)
			if err != nil {
				return ""
			}
			l = lastErrorLine(tail)
			if l != "" {
				l = s.Name + ": " + l
			}
			c.mu.Lock()
			if c.lines == nil {
				c.lines = map[string]string{}
			}
			c.lines[key] = l
			c.mu.Unlock()
		}
		return l
	}
	return ""
}
