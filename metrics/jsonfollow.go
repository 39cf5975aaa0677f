package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"niuma/storage"
)

// JSONFollower follows the JSON logs training libraries write while a
// stage runs:
//
//   - JSON lines files (mmengine's vis_data/scalars.json, detectron2's
//     metrics.json): each line read as a metric line of the stage
//     contract, leniently (iteration, iter and epoch are steps too);
//   - Hugging Face Trainer's trainer_state.json, written into each
//     checkpoint-N folder of its output_dir: its log_history, a list of
//     dicts each with the global "step". Every checkpoint holds the whole
//     history so far, so the checkpoints of one output_dir are one source:
//     the newest is read, and the entries past those stored are added.
//
// Points are stored with each source's cursor (a JSON lines file's offset;
// the entries of a log_history stored), so reading again after a restart
// stores each point once.
type JSONFollower struct {
	Lines        []Location // JSON lines files
	States       []Location // trainer_state.json files
	RunDir       string     // names sources ("json:" or "trainer_state:" and the path relative to it)
	RunID, Stage string
	Attempt      int
	Poll         time.Duration // default DefaultTBPoll
	Since        time.Time     // files last modified before it are an earlier attempt's
	Writer       *Writer
	Cursors      map[string]storage.MetricCursor
	OnPoints     func(pts []storage.MetricPoint)
	Keys         *KeyLimit
	Logger       *slog.Logger
	// SkipStates, if not nil, says when trainer_state.json is not to be
	// read: the Trainer's printed dicts are read from its output instead.
	SkipStates func() bool

	lines  map[string]*Ingestor
	offs   map[string]int64
	states map[string]int // entries of a log_history stored, per source

	lifecycle
}

// Stop asks Run to read what the files hold and return.
func (f *JSONFollower) Stop() { f.stopAndWait() }

// Run follows the files until ctx ends or Stop.
func (f *JSONFollower) Run(ctx context.Context) error {
	if !f.begin() {
		return errors.New("follow JSON logs: already running")
	}
	return f.follow(ctx, f.Poll, f.scan, nil)
}

func (f *JSONFollower) source(kind, path string) string {
	if f.RunDir != "" {
		if rel, err := filepath.Rel(f.RunDir, path); err == nil && !strings.HasPrefix(rel, "..") {
			return kind + ":" + filepath.ToSlash(rel)
		}
	}
	return kind + ":" + filepath.ToSlash(path)
}

func (f *JSONFollower) scan() error {
	if f.lines == nil {
		f.lines, f.offs, f.states = map[string]*Ingestor{}, map[string]int64{}, map[string]int{}
	}
	paths, err := findFiles(f.Lines, f.Since, func(p string) bool {
		if _, ok := f.lines[p]; ok {
			return true
		}
		_, ok := f.Cursors[f.source("json", p)]
		return ok
	})
	if err != nil {
		return fmt.Errorf("follow JSON logs: %w", err)
	}
	for _, p := range paths {
		if err := f.readLines(p); err != nil {
			return err
		}
	}
	if f.SkipStates != nil && f.SkipStates() {
		return nil
	}
	states, err := findFiles(f.States, f.Since, func(p string) bool {
		_, ok := f.Cursors[f.source("trainer_state", outputDir(p))]
		return ok
	})
	if err != nil {
		return fmt.Errorf("follow trainer_state.json: %w", err)
	}
	// The newest checkpoint of each output_dir.
	newest := map[string]string{}
	for _, p := range states {
		dir := outputDir(p)
		if cur, ok := newest[dir]; !ok || checkpointNumber(p) > checkpointNumber(cur) {
			newest[dir] = p
		}
	}
	dirs := make([]string, 0, len(newest))
	for d := range newest {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		f.readState(d, newest[d])
	}
	return nil
}

// readLines reads a JSON lines file's new complete lines.
func (f *JSONFollower) readLines(path string) error {
	src := f.source("json", path)
	in := f.lines[path]
	if in == nil {
		in = NewIngestor(f.Writer, f.RunID, f.Stage, f.Attempt, nil)
		in.SetSource(src, 0)
		in.SetKeyLimit(f.Keys)
		f.lines[path] = in
		f.offs[path] = f.Cursors[src].Offset
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("follow JSON log %s: %w", path, err)
	}
	off := f.offs[path]
	if off > int64(len(b)) { // rewritten: read it again
		off = 0
	}
	rest := b[off:]
	now := time.Now()
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break // a line still being written
		}
		off += int64(i + 1)
		pts, _ := in.LineAt(rest[:i], off, now)
		if len(pts) > 0 && f.OnPoints != nil {
			f.OnPoints(pts)
		}
		rest = rest[i+1:]
	}
	f.offs[path] = off
	return nil
}

// readState adds the entries of a trainer_state.json's log_history past
// those stored. A file being written (not yet valid JSON) is read at the
// next scan.
func (f *JSONFollower) readState(dir, path string) {
	src := f.source("trainer_state", dir)
	done, ok := f.states[src]
	if !ok {
		var st struct {
			N int `json:"n"`
		}
		if c, has := f.Cursors[src]; has && json.Unmarshal([]byte(c.State), &st) == nil {
			done = st.N
		}
		f.states[src] = done
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var state struct {
		LogHistory []map[string]json.RawMessage `json:"log_history"`
	}
	if json.Unmarshal(quotePythonNumbers(b), &state) != nil || len(state.LogHistory) <= done {
		return
	}
	gate := keyGate{limit: f.Keys}
	now := time.Now()
	var pts []storage.MetricPoint
	for _, entry := range state.LogHistory[done:] {
		step, ok := jsonStep(entry["step"])
		if !ok {
			continue
		}
		keys := make([]string, 0, len(entry))
		for k := range entry {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "step" {
				continue
			}
			v, ok := jsonNumber(entry[k])
			if !ok || !gate.admit(k) {
				continue
			}
			pts = append(pts, storage.MetricPoint{RunID: f.RunID, Stage: f.Stage, Attempt: f.Attempt,
				Key: k, Step: step, Value: v, Wall: now, StepSource: "global_step"})
		}
		gate.endRecord()
	}
	n := len(state.LogHistory)
	f.states[src] = n
	if f.Writer != nil {
		f.Writer.AddWith(&storage.MetricCursor{RunID: f.RunID, Stage: f.Stage, Attempt: f.Attempt,
			Source: src, State: fmt.Sprintf(`{"n":%d}`, n)}, pts...)
	}
	if len(pts) > 0 && f.OnPoints != nil {
		f.OnPoints(pts)
	}
}

// quotePythonNumbers turns the NaN, Infinity and -Infinity that Python's
// json.dump writes for such floats (a NaN loss, an overflowing grad_norm)
// into strings, so that the file is JSON; jsonNumber reads them back.
func quotePythonNumbers(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inString = false
			}
			continue
		case c == '"':
			inString = true
		case bytes.HasPrefix(b[i:], []byte("NaN")):
			out, i = append(out, `"NaN"`...), i+2
			continue
		case bytes.HasPrefix(b[i:], []byte("-Infinity")):
			out, i = append(out, `"-Infinity"`...), i+8
			continue
		case bytes.HasPrefix(b[i:], []byte("Infinity")):
			out, i = append(out, `"Infinity"`...), i+7
			continue
		}
		out = append(out, c)
	}
	return out
}

// jsonNumber reads a log_history value: a number, or one of Python's
// non-finite spellings quotePythonNumbers quoted.
func jsonNumber(raw json.RawMessage) (float64, bool) {
	var v float64
	if json.Unmarshal(raw, &v) == nil {
		return v, true
	}
	switch string(raw) {
	case `"NaN"`:
		return math.NaN(), true
	case `"Infinity"`:
		return math.Inf(1), true
	case `"-Infinity"`:
		return math.Inf(-1), true
	}
	return 0, false
}

// jsonStep reads a log_history entry's step.
func jsonStep(raw json.RawMessage) (int64, bool) {
	var s float64
	if raw == nil || json.Unmarshal(raw, &s) != nil || s < 0 || s >= 1<<63 || s != math.Trunc(s) {
		return 0, false
	}
	return int64(s), true
}

// outputDir is the output_dir of a trainer_state.json: the folder that
// holds its checkpoint-N folder (or the file's own folder, for the state
// Trainer.save_state writes there).
func outputDir(path string) string {
	dir := filepath.Dir(path)
	if strings.HasPrefix(filepath.Base(dir), "checkpoint-") {
		return filepath.Dir(dir)
	}
	return dir
}

// checkpointNumber is N of checkpoint-N in a trainer_state.json's path;
// the output_dir's own file (written at the end) counts as the newest.
func checkpointNumber(path string) int64 {
	base := filepath.Base(filepath.Dir(path))
	if !strings.HasPrefix(base, "checkpoint-") {
		return math.MaxInt64
	}
	n, ok := parseInt(strings.TrimPrefix(base, "checkpoint-"))
	if !ok {
		return -1
	}
	return n
}

func parseInt(s string) (int64, bool) {
	var n int64
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' || n > (math.MaxInt64-9)/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// The default locations of the JSON logs, relative to the stage's and the
// run's folders.
var (
	// DefaultJSONLines: mmengine's vis_data/scalars.json (work_dirs/NAME/
	// TIMESTAMP/vis_data/) and detectron2's metrics.json (in its
	// OUTPUT_DIR, ./output by default).
	DefaultJSONLines = []string{"work_dirs/**/vis_data/scalars.json", "*/*/vis_data/scalars.json", "output/metrics.json", "output/*/metrics.json"}
	// DefaultTrainerState: Hugging Face Trainer's checkpoints in an
	// output_dir in the folder, or the folder itself.
	DefaultTrainerState = []string{"*/checkpoint-*/trainer_state.json", "checkpoint-*/trainer_state.json", "*/trainer_state.json"}
)
