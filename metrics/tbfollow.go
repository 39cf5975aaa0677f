package metrics

import (
	"context"
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

	"niuma/metrics/pathglob"
	"niuma/storage"
)

// DefaultTBPoll is how often a TBFollower looks for new event data.
const DefaultTBPoll = 500 * time.Millisecond

// TBFollower follows the TensorBoard event files under a directory (a
// stage's tb/ folder) while the stage runs and turns their scalars into
// metric points, as an Ingestor does for stdout lines: the tag is the metric
// key, the event's step and wall time are the point's. Event files in a
// subdirectory (SummaryWriter.add_scalars writes one per series) get the
// subdirectory as a key prefix: tb/val/events… tag "loss" → "val/loss".
//
// Every file whose name contains "tfevents" is read, in name order (the
// name begins with the creation time), from where the previous poll
// stopped. A record still being written is waited for; a corrupt file is
// reported once (Logger and OnProblem) and the readable rest is still used.
//
// Run follows until ctx ends (returning ctx's error) or until Stop: it then
// reads what the files hold, reports a truncated last record (a writer that
// died mid-record) once, and returns nil.
type TBFollower struct {
	// Dir is one folder whose event files (at any depth) are read, their
	// subfolders giving key prefixes; Locations are more, each a folder
	// and a Glob (see Glob for the prefixes). Both may be set.
	Dir       string
	Locations []Location
	// RunDir names sources in cursors ("tb:" and the file's path relative
	// to it); default: the absolute path.
	RunDir       string
	RunID, Stage string
	Attempt      int
	Poll         time.Duration // default DefaultTBPoll
	// Since ignores event files last modified before it: those of an
	// earlier attempt of the stage, which share its tb/ directory.
	Since time.Time
	// Writer receives the points (nil: they only go to OnPoints).
	Writer *Writer
	// Skip holds, per key, the highest step already stored; points at or
	// below it are dropped (an attempt stored before cursors existed).
	Skip map[string]int64
	// Cursors are the stored read positions of the attempt's files, by
	// source: a file is read on from there, and its points are stored with
	// its new position, so reading again after a restart stores each
	// scalar once. Files with a cursor are read whatever their age.
	Cursors map[string]storage.MetricCursor
	// OnPoints gets the points of each poll, after Writer; the slice is
	// reused. It runs on Run's goroutine.
	OnPoints func(pts []storage.MetricPoint)
	// Keys is the stage's limit on distinct keys (nil: none).
	Keys *KeyLimit
	// OnProblem gets each file's first problem (corrupt or truncated).
	OnProblem func(path string, err error)
	Logger    *slog.Logger // default slog.Default()

	files   map[string]*tbFile
	scalars []Scalar
	pts     []storage.MetricPoint
	buf     []byte
	gate    keyGate

	lifecycle
}

type tbFile struct {
	prefix   string // key prefix: the subdirectory and "/", or ""
	source   string // cursor source
	r        EventFileReader
	reported bool
}

// Location is a folder and the files below it that are read.
type Location struct {
	Base string
	Glob pathglob.Glob
	// Skip, when set, names folders under Base not to look in: in a
	// run's folder, the stages' own folders, whose files are theirs.
	Skip func(dir string) bool
}

// Stop asks Run to read what the files hold and return; it waits until Run
// has returned. Calling it before Run makes Run drain at once.
func (f *TBFollower) Stop() {
	f.stopAndWait()
}

// Run follows the directory; see TBFollower. It may be called once.
func (f *TBFollower) Run(ctx context.Context) error {
	if !f.begin() {
		return fmt.Errorf("follow %s: already running", f.Dir)
	}
	return f.follow(ctx, f.Poll, f.scan, f.finish)
}

func (f *TBFollower) logger() *slog.Logger {
	if f.Logger != nil {
		return f.Logger
	}
	return slog.Default()
}

// scan reads the new bytes of every event file once.
func (f *TBFollower) scan() error {
	locs := f.Locations
	if f.Dir != "" {
		locs = append([]Location{{Base: f.Dir, Glob: pathglob.Must("**")}}, locs...)
	}
	type found struct{ path, prefix string }
	var files []found
	seen := map[string]bool{}
	for _, loc := range locs {
		root := filepath.Join(loc.Base, filepath.FromSlash(loc.Glob.Root()))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // not created yet, or removed while walking
				}
				return err
			}
			if d.IsDir() && p != root && loc.Skip != nil && loc.Skip(p) {
				return fs.SkipDir
			}
			if d.IsDir() || !d.Type().IsRegular() || !strings.Contains(d.Name(), "tfevents") || seen[p] {
				return nil
			}
			rel, err := filepath.Rel(loc.Base, p)
			if err != nil {
				return nil
			}
			prefix, ok := loc.Glob.Match(filepath.ToSlash(rel))
			if !ok {
				return nil
			}
			if _, known := f.files[p]; !known && !f.Since.IsZero() {
				if _, has := f.Cursors[f.sourceOf(p)]; !has {
					if fi, err := d.Info(); err != nil || fi.ModTime().Before(f.Since) {
						return nil
					}
				}
			}
			seen[p] = true
			files = append(files, found{p, prefix})
			return nil
		})
		if err != nil {
			return fmt.Errorf("follow TensorBoard logs in %s: %w", root, err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	if f.files == nil {
		f.files = map[string]*tbFile{}
	}
	for _, fd := range files {
		tf := f.files[fd.path]
		if tf == nil {
			tf = &tbFile{prefix: fd.prefix, source: f.sourceOf(fd.path)}
			if err := f.resume(fd.path, tf); err != nil {
				return err
			}
			f.files[fd.path] = tf
		}
		if err := f.read(fd.path, tf); err != nil {
			return err
		}
	}
	return nil
}

// sourceOf names a file in cursors.
func (f *TBFollower) sourceOf(path string) string {
	if f.RunDir != "" {
		if rel, err := filepath.Rel(f.RunDir, path); err == nil && !strings.HasPrefix(rel, "..") {
			return "tb:" + filepath.ToSlash(rel)
		}
	}
	return "tb:" + filepath.ToSlash(path)
}

// resume reads a file up to its stored cursor without emitting anything:
// what came before is stored, but the reader must learn the tags' plugins.
func (f *TBFollower) resume(path string, tf *tbFile) error {
	c, ok := f.Cursors[tf.source]
	if !ok || c.Offset <= 0 {
		return nil
	}
	file, err := os.Open(path)
	if err != nil {
		return nil // gone: nothing to resume
	}
	defer file.Close()
	b := make([]byte, c.Offset)
	n, _ := io.ReadFull(file, b)
	_, _ = tf.r.Feed(nil, b[:n])
	return nil
}

// read feeds a file's new bytes to its reader and hands over the points.
func (f *TBFollower) read(path string, tf *tbFile) error {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("follow TensorBoard log %s: %w", path, err)
	}
	defer file.Close()
	if _, err := file.Seek(tf.r.Offset(), io.SeekStart); err != nil {
		return fmt.Errorf("follow TensorBoard log %s: %w", path, err)
	}
	if f.buf == nil {
		f.buf = make([]byte, 64<<10)
	}
	for {
		n, rerr := file.Read(f.buf)
		if n > 0 {
			var perr error
			f.scalars, perr = tf.r.Feed(f.scalars[:0], f.buf[:n])
			if perr != nil {
				f.problem(path, tf, perr)
			}
			f.emit(tf, f.scalars)
		}
		if rerr == io.EOF || (n == 0 && rerr == nil) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("follow TensorBoard log %s: %w", path, rerr)
		}
	}
}

func (f *TBFollower) problem(path string, tf *tbFile, err error) {
	if tf.reported {
		return
	}
	tf.reported = true
	f.logger().Warn("TensorBoard event file is damaged; reading what is readable",
		"path", path, "run", f.RunID, "stage", f.Stage, "err", err)
	if f.OnProblem != nil {
		f.OnProblem(path, err)
	}
}

// finish reports files whose last record was never completed.
func (f *TBFollower) finish() {
	paths := make([]string, 0, len(f.files))
	for p := range f.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if tf := f.files[p]; tf.r.Pending() > 0 {
			f.problem(p, tf, fmt.Errorf("the last record is truncated (%d bytes): the writer stopped mid-record", tf.r.Pending()))
		}
	}
}

func (f *TBFollower) emit(tf *tbFile, ss []Scalar) {
	f.pts = f.pts[:0]
	f.gate.limit = f.Keys
	defer f.gate.endRecord()
	for _, s := range ss {
		key := s.Tag
		if tf.prefix != "" {
			key = tf.prefix + s.Tag
		}
		if last, ok := f.Skip[key]; ok && s.Step <= last {
			continue
		}
		if !f.gate.admit(key) {
			continue
		}
		f.pts = append(f.pts, storage.MetricPoint{
			RunID: f.RunID, Stage: f.Stage, Attempt: f.Attempt,
			Key: key, Step: s.Step, Value: s.Value, Wall: s.Wall, StepSource: "tensorboard",
		})
	}
	if len(f.pts) == 0 {
		return
	}
	if f.Writer != nil {
		f.Writer.AddWith(&storage.MetricCursor{RunID: f.RunID, Stage: f.Stage, Attempt: f.Attempt,
			Source: tf.source, Offset: tf.r.Consumed()}, f.pts...)
	}
	if f.OnPoints != nil {
		f.OnPoints(f.pts)
	}
}
