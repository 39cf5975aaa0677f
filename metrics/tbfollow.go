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
	Dir          string
	RunID, Stage string
	Attempt      int
	Poll         time.Duration // default DefaultTBPoll
	// Since ignores event files last modified before it: those of an
	// earlier attempt of the stage, which share its tb/ directory.
	Since time.Time
	// Writer receives the points (nil: they only go to OnPoints).
	Writer *Writer
	// Skip holds, per key, the highest step already stored; points at or
	// below it are dropped (a log read again after a restart).
	Skip map[string]int64
	// OnPoints gets the points of each poll, after Writer; the slice is
	// reused. It runs on Run's goroutine.
	OnPoints func(pts []storage.MetricPoint)
	// OnProblem gets each file's first problem (corrupt or truncated).
	OnProblem func(path string, err error)
	Logger    *slog.Logger // default slog.Default()

	files   map[string]*tbFile
	scalars []Scalar
	pts     []storage.MetricPoint
	buf     []byte

	lifecycle
}

type tbFile struct {
	prefix   string // key prefix: the subdirectory and "/", or ""
	r        EventFileReader
	reported bool
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
	defer close(f.done)
	poll := f.Poll
	if poll <= 0 {
		poll = DefaultTBPoll
	}
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		stopping := false
		select {
		case <-f.stop:
			stopping = true
		default:
		}
		if err := f.scan(); err != nil {
			return err
		}
		if stopping {
			f.finish()
			return nil
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.stop:
		case <-timer.C:
		}
	}
}

func (f *TBFollower) logger() *slog.Logger {
	if f.Logger != nil {
		return f.Logger
	}
	return slog.Default()
}

// scan reads the new bytes of every event file once.
func (f *TBFollower) scan() error {
	var paths []string
	err := filepath.WalkDir(f.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // not created yet, or removed while walking
			}
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || !strings.Contains(d.Name(), "tfevents") {
			return nil
		}
		if _, seen := f.files[p]; !seen && !f.Since.IsZero() {
			if fi, err := d.Info(); err != nil || fi.ModTime().Before(f.Since) {
				return nil
			}
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("follow TensorBoard logs in %s: %w", f.Dir, err)
	}
	sort.Strings(paths)
	if f.files == nil {
		f.files = map[string]*tbFile{}
	}
	for _, p := range paths {
		tf := f.files[p]
		if tf == nil {
			tf = &tbFile{}
			if rel, err := filepath.Rel(f.Dir, filepath.Dir(p)); err == nil && rel != "." {
				tf.prefix = filepath.ToSlash(rel) + "/"
			}
			f.files[p] = tf
		}
		if err := f.read(p, tf); err != nil {
			return err
		}
	}
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
			f.emit(tf.prefix, f.scalars)
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

func (f *TBFollower) emit(prefix string, ss []Scalar) {
	f.pts = f.pts[:0]
	for _, s := range ss {
		key := s.Tag
		if prefix != "" {
			key = prefix + s.Tag
		}
		if last, ok := f.Skip[key]; ok && s.Step <= last {
			continue
		}
		f.pts = append(f.pts, storage.MetricPoint{
			RunID: f.RunID, Stage: f.Stage, Attempt: f.Attempt,
			Key: key, Step: s.Step, Value: s.Value, Wall: s.Wall,
		})
	}
	if len(f.pts) == 0 {
		return
	}
	if f.Writer != nil {
		f.Writer.Add(f.pts...)
	}
	if f.OnPoints != nil {
		f.OnPoints(f.pts)
	}
}
