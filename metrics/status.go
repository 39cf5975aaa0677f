package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// statusSize is the size the status file is allocated with; the backlog
// is written over it, padded with spaces, so that no write needs a new
// disk block (the disk may be full: that is when it matters).
const statusSize = 8192

// statusStale: a status not rewritten for this long is ignored (its writer
// rewrites it every retry while its store fails, at most every RetryMax).
const statusStale = 30 * time.Second

type statusFile struct {
	mu sync.Mutex
	f  *os.File
}

type statusJSON struct {
	PID     int       `json:"pid"`
	Updated time.Time `json:"updated"`
	Backlog
}

func openStatusFile(path string) (*statusFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	s := &statusFile{f: f}
	if err := s.write(Backlog{}); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *statusFile) write(b Backlog) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	js, err := json.Marshal(statusJSON{PID: os.Getpid(), Updated: time.Now(), Backlog: b})
	if err != nil {
		return err
	}
	if len(js) > statusSize-1 {
		// Too many runs to list: keep the total.
		b.Runs = nil
		js, _ = json.Marshal(statusJSON{PID: os.Getpid(), Updated: time.Now(), Backlog: b})
	}
	buf := bytes.Repeat([]byte(" "), statusSize)
	copy(buf, js)
	buf[statusSize-1] = '\n'
	_, err = s.f.WriteAt(buf, 0)
	return err
}

// ReadBacklog reads what a writer in another process said in its status
// file: the backlog while its store fails. ok is false when the file is
// missing, unreadable, stale, or says that nothing waits.
func ReadBacklog(path string) (b Backlog, ok bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Backlog{}, false
	}
	var st statusJSON
	if err := json.Unmarshal(bytes.TrimSpace(raw), &st); err != nil {
		return Backlog{}, false
	}
	if st.Reason == "" && len(st.Paused) == 0 || time.Since(st.Updated) > statusStale || !processAlive(st.PID) {
		return Backlog{}, false
	}
	return st.Backlog, true
}

// Describe says in words how many of a run's points wait and why, e.g.
// "1,204 metric points not yet stored: disk full (since 14:02:11)".
func (b Backlog) Describe(runID string) string {
	paused := strings.Join(b.Paused[runID], "; ")
	n, why := b.Waiting(runID)
	if why == "" || n == 0 {
		return paused
	}
	s := fmt.Sprintf("%s metric points not yet stored: %s", groupDigits(n), why)
	if !b.Since.IsZero() {
		s += " (since " + b.Since.Local().Format(time.TimeOnly) + ")"
	}
	s += "; they are kept and written when the database works again"
	if paused != "" {
		s = paused + "; " + s
	}
	return s
}

func groupDigits(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return signalZero(p) == nil
}
