package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"
)

// Follower defaults.
const (
	DefaultPoll    = 100 * time.Millisecond
	DefaultMaxLine = 1 << 20 // 1 MiB
)

// Follower follows a growing log file (a stage's stdout written straight to
// a file by the executor) and hands over complete lines as they appear.
//
// At end of file it polls every Poll. A file that does not exist yet is
// waited for. A file that shrinks below the read position (truncated or
// replaced) is read again from the start.
//
// Lines are delivered without their "\n" (or "\r\n"). A line longer than
// MaxLine is truncated: its first MaxLine bytes are delivered as one line and
// the rest up to the next newline is skipped, so memory stays bounded and a
// fragment of an over-long line is never mistaken for a metric line.
//
// Run follows until ctx ends (it then returns at once with ctx's error) or
// until Stop is called: then it reads what the file holds up to its end,
// delivers a final line that has no newline, and returns nil. Once Stop is
// called the drain happens even if ctx ends too.
type Follower struct {
	Path    string
	From    int64         // file offset to start at (0 = the beginning)
	Poll    time.Duration // how often to look for more at end of file (default 100 ms)
	MaxLine int           // the longest line delivered whole (default 1 MiB)
	// OnLine receives each line and the file offset just past it (where a
	// later Follower would resume; for a truncated line, just past the
	// bytes delivered). line is valid only during the call. OnLine runs on
	// Run's goroutine and must not call Stop.
	OnLine func(line []byte, end int64)
	// OnEnd, if not nil, is called on Run's goroutine each time the file
	// has been read to its end (or found not to exist yet).
	OnEnd  func()
	Logger *slog.Logger // default slog.Default()

	lifecycle
}

// Follow follows path from offset from until ctx ends, calling onLine for
// every complete line; see Follower (use one directly to drain with Stop).
func Follow(ctx context.Context, path string, from int64, onLine func(line []byte, end int64)) error {
	f := &Follower{Path: path, From: from, OnLine: onLine}
	return f.Run(ctx)
}

// Stop asks Run to read to the end of the file, deliver a trailing partial
// line and return; it waits until Run has returned. Called before Run, it
// makes Run drain at once. Calling Stop more than once is harmless.
func (f *Follower) Stop() {
	f.stopAndWait()
}

// Run follows the file; see Follower. It may be called once.
func (f *Follower) Run(ctx context.Context) (err error) {
	if !f.begin() {
		return fmt.Errorf("follow %s: already running", f.Path)
	}
	defer close(f.done)

	poll := f.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	maxLine := f.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	log := f.Logger
	if log == nil {
		log = slog.Default()
	}
	r := lineReader{maxLine: maxLine, onLine: f.OnLine, base: f.From}
	r.buf = make([]byte, 0, min(64<<10, maxLine))

	var file *os.File
	defer func() {
		if file != nil {
			file.Close()
		}
	}()
	timer := time.NewTimer(poll)
	defer timer.Stop()
	stopping := false
	reached := f.From == 0 // the file has been seen as long as our position
	for {
		if file == nil {
			file, err = os.Open(f.Path)
			switch {
			case err == nil:
				if _, err := file.Seek(r.next(), io.SeekStart); err != nil {
					return fmt.Errorf("follow %s: %w", f.Path, err)
				}
			case errors.Is(err, fs.ErrNotExist):
				file = nil
				if stopping {
					return nil // nothing was ever written
				}
				if f.OnEnd != nil {
					f.OnEnd()
				}
			default:
				return fmt.Errorf("follow %s: %w", f.Path, err)
			}
		}
		if file != nil {
			n, err := file.Read(r.buf[len(r.buf):cap(r.buf)])
			if n > 0 {
				r.consume(n)
				reached = true
				continue
			}
			if err != nil && err != io.EOF {
				return fmt.Errorf("follow %s: %w", f.Path, err)
			}
			// At end of file.
			if stopping {
				r.finish()
				return nil
			}
			if f.OnEnd != nil {
				f.OnEnd()
			}
			// A file smaller than the position once reached was truncated or
			// replaced. (Until the file has reached From, it may still be
			// on its way there: no conclusion.)
			if st, err := file.Stat(); err == nil {
				switch size := st.Size(); {
				case size >= r.next():
					reached = true
				case reached:
					log.Warn("followed file shrank; reading it again from the start",
						"path", f.Path, "size", size, "offset", r.next())
					file.Close()
					file = nil
					r.reset()
					continue
				}
			}
		}
		// A requested drain wins over ctx: callers often Stop and then
		// cancel ctx right away.
		select {
		case <-f.stop:
			stopping = true
			continue
		default:
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.stop:
			stopping = true
		case <-timer.C:
		}
	}
}

// lineReader splits what a Follower reads into lines. buf holds the bytes
// from file offset base that are not delivered yet; it grows up to maxLine.
type lineReader struct {
	buf        []byte
	base       int64 // file offset of buf[0]
	scanned    int   // buf[:scanned] holds no newline
	discarding bool  // skipping the rest of an over-long line
	maxLine    int
	onLine     func([]byte, int64)
}

// next is the file offset of the next byte to read.
func (r *lineReader) next() int64 { return r.base + int64(len(r.buf)) }

func (r *lineReader) reset() {
	r.buf, r.base, r.scanned, r.discarding = r.buf[:0], 0, 0, false
}

// consume takes n more bytes read into buf's spare capacity.
func (r *lineReader) consume(n int) {
	r.buf = r.buf[:len(r.buf)+n]
	start := 0
	for {
		j := bytes.IndexByte(r.buf[r.scanned:], '\n')
		if j < 0 {
			break
		}
		nl := r.scanned + j
		if r.discarding {
			r.discarding = false
		} else {
			r.deliver(r.buf[start:nl], r.base+int64(nl)+1)
		}
		start = nl + 1
		r.scanned = start
	}
	// Keep the partial line at the front of buf.
	if start > 0 {
		m := copy(r.buf, r.buf[start:])
		r.buf = r.buf[:m]
		r.base += int64(start)
	}
	r.scanned = len(r.buf)
	switch {
	case r.discarding:
		r.drop()
	case len(r.buf) == cap(r.buf) && cap(r.buf) < r.maxLine:
		nb := make([]byte, len(r.buf), min(2*cap(r.buf), r.maxLine))
		copy(nb, r.buf)
		r.buf = nb
	case len(r.buf) == r.maxLine:
		r.deliver(r.buf, r.next())
		r.discarding = true
		r.drop()
	}
}

// drop forgets the buffered bytes (the middle of an over-long line).
func (r *lineReader) drop() {
	r.base += int64(len(r.buf))
	r.buf = r.buf[:0]
	r.scanned = 0
}

// finish delivers a final line without newline.
func (r *lineReader) finish() {
	if len(r.buf) > 0 && !r.discarding {
		r.deliver(r.buf, r.next())
	}
	r.drop()
}

func (r *lineReader) deliver(line []byte, end int64) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if r.onLine != nil {
		r.onLine(line, end)
	}
}
