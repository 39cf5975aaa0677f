package metrics

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"niuma/metrics/textrule"
	"niuma/storage"
)

// CSVFollower follows CSV metric logs (Lightning's CSVLogger metrics.csv,
// or any CSV whose first line names its columns) while a stage runs: each
// row's numeric cells become points keyed by their column's name, at the
// step of its step-like column (the first of step, global_step, iteration,
// iter, epoch; without one, the row number from 0). Empty cells (a
// Lightning row carries only the metrics logged at that step) are skipped.
//
// A file rewritten from the start (Lightning rewrites it with a wider
// header when a new metric appears) is read again, skipping the rows
// already stored. Points are stored with the file's cursor (offset, rows
// and header), so reading again after a restart stores each row once.
type CSVFollower struct {
	Locations    []Location
	RunDir       string // names sources ("csv:" and the path relative to it)
	RunID, Stage string
	Attempt      int
	Poll         time.Duration // default DefaultTBPoll
	Since        time.Time     // files last modified before it are an earlier attempt's
	Writer       *Writer
	Cursors      map[string]storage.MetricCursor
	OnPoints     func(pts []storage.MetricPoint)
	Keys         *KeyLimit // the stage's limit on distinct keys (nil: none)
	Logger       *slog.Logger

	files map[string]*csvFile
	pts   []storage.MetricPoint
	gate  keyGate

	lifecycle
}

type csvFile struct {
	source  string
	off     int64  // offset just past the last row read
	rows    int64  // data rows read
	header  string // the first line
	cols    []string
	stepCol int // -1: none
}

type csvState struct {
	Rows   int64  `json:"rows"`
	Header string `json:"header"`
}

// Stop asks Run to read what the files hold and return.
func (f *CSVFollower) Stop() { f.stopAndWait() }

// Run follows the files until ctx ends or Stop.
func (f *CSVFollower) Run(ctx context.Context) error {
	if !f.begin() {
		return errors.New("follow CSV logs: already running")
	}
	return f.follow(ctx, f.Poll, f.scan, nil)
}

func (f *CSVFollower) sourceOf(path string) string {
	if f.RunDir != "" {
		if rel, err := filepath.Rel(f.RunDir, path); err == nil && !strings.HasPrefix(rel, "..") {
			return "csv:" + filepath.ToSlash(rel)
		}
	}
	return "csv:" + filepath.ToSlash(path)
}

func (f *CSVFollower) scan() error {
	paths, err := findFiles(f.Locations, f.Since, func(p string) bool {
		if _, known := f.files[p]; known {
			return true
		}
		_, has := f.Cursors[f.sourceOf(p)]
		return has
	})
	if err != nil {
		return fmt.Errorf("follow CSV logs: %w", err)
	}
	sort.Strings(paths)
	if f.files == nil {
		f.files = map[string]*csvFile{}
	}
	for _, p := range paths {
		cf := f.files[p]
		if cf == nil {
			cf = &csvFile{source: f.sourceOf(p), stepCol: -1}
			if c, ok := f.Cursors[cf.source]; ok {
				var st csvState
				if json.Unmarshal([]byte(c.State), &st) == nil {
					cf.off, cf.rows, cf.header = c.Offset, st.Rows, st.Header
					cf.setHeader(st.Header)
				}
			}
			f.files[p] = cf
		}
		if err := f.read(p, cf); err != nil {
			return err
		}
	}
	return nil
}

func (cf *csvFile) setHeader(line string) {
	cf.header, cf.cols, cf.stepCol = line, nil, -1
	if line == "" {
		return
	}
	cols, err := csv.NewReader(strings.NewReader(line)).Read()
	if err != nil {
		return
	}
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	cf.cols = cols
	best := len(textrule.StepNames)
	for i, c := range cols {
		for rank, s := range textrule.StepNames {
			if strings.EqualFold(c, s) && rank < best {
				best, cf.stepCol = rank, i
			}
		}
	}
}

// read reads a file's new rows.
func (f *CSVFollower) read(path string, cf *csvFile) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("follow CSV log %s: %w", path, err)
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil // the header is not complete yet
	}
	first := string(bytes.TrimRight(b[:nl], "\r"))
	skip := int64(0)
	if first != cf.header || int64(len(b)) < cf.off {
		// New, or rewritten (a wider header): read again from the start,
		// skipping the rows already stored.
		skip = cf.rows
		cf.setHeader(first)
		cf.off, cf.rows = int64(nl+1), 0
	}
	if cf.off > int64(len(b)) {
		return nil
	}
	rest := b[cf.off:]
	f.pts = f.pts[:0]
	now := time.Now()
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break // a row still being written
		}
		line := bytes.TrimRight(rest[:i], "\r")
		rest = rest[i+1:]
		cf.off += int64(i + 1)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		row := cf.rows
		cf.rows++
		if row < skip {
			continue
		}
		f.row(cf, line, row, now)
	}
	if len(f.pts) == 0 {
		return nil
	}
	st, _ := json.Marshal(csvState{Rows: cf.rows, Header: cf.header})
	if f.Writer != nil {
		f.Writer.AddWith(&storage.MetricCursor{RunID: f.RunID, Stage: f.Stage, Attempt: f.Attempt,
			Source: cf.source, Offset: cf.off, State: string(st)}, f.pts...)
	}
	if f.OnPoints != nil {
		f.OnPoints(f.pts)
	}
	return nil
}

func (f *CSVFollower) row(cf *csvFile, line []byte, row int64, wall time.Time) {
	f.gate.limit = f.Keys
	defer f.gate.endRecord()
	cells, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil && !errors.Is(err, io.EOF) {
		return
	}
	step, source := row, "row"
	if cf.stepCol >= 0 {
		if cf.stepCol >= len(cells) {
			return
		}
		s, ok := textrule.ParseNumber([]byte(cells[cf.stepCol]))
		if !ok || s < 0 || s != float64(int64(s)) {
			return
		}
		step, source = int64(s), cf.cols[cf.stepCol]
	}
	for i, c := range cells {
		if i == cf.stepCol || i >= len(cf.cols) || strings.TrimSpace(c) == "" {
			continue
		}
		v, ok := textrule.ParseNumber([]byte(c))
		if !ok || !f.gate.admit(cf.cols[i]) {
			continue
		}
		f.pts = append(f.pts, storage.MetricPoint{RunID: f.RunID, Stage: f.Stage, Attempt: f.Attempt,
			Key: cf.cols[i], Step: step, Value: v, Wall: wall, StepSource: source})
	}
}

// findFiles lists the regular files the locations match, sorted, once
// each. A file last modified before since belongs to an earlier attempt
// and is left out, unless known says it is being read already.
func findFiles(locs []Location, since time.Time, known func(path string) bool) ([]string, error) {
	var paths []string
	seen := map[string]bool{}
	for _, loc := range locs {
		root := filepath.Join(loc.Base, filepath.FromSlash(loc.Glob.Root()))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() && p != root && loc.Skip != nil && loc.Skip(p) {
				return fs.SkipDir
			}
			if d.IsDir() || !d.Type().IsRegular() || seen[p] {
				return nil
			}
			rel, err := filepath.Rel(loc.Base, p)
			if err != nil {
				return nil
			}
			if _, ok := loc.Glob.Match(filepath.ToSlash(rel)); !ok {
				return nil
			}
			if !since.IsZero() && !known(p) {
				if fi, err := d.Info(); err != nil || fi.ModTime().Before(since) {
					return nil
				}
			}
			seen[p] = true
			paths = append(paths, p)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("in %s: %w", root, err)
		}
	}
	sort.Strings(paths)
	return paths, nil
}
