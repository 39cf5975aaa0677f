package logcap

import (
	"fmt"
	"io"
	"strconv"
)

// DefaultCap is how many bytes of each stream of an attempt are kept:
// far more than any training log needs, far less than a disk holds.
const DefaultCap int64 = 2 << 30

// Setting is the environment variable that sets the cap in bytes (a
// number, optionally with K, M or G: "512M").
const Setting = "NIUMA_LOG_CAP"

// noticePrefix begins every line logcap writes into a log.
const noticePrefix = "[niuma] "

// noticeParts are the words before and after the number of dropped bytes
// in the last line of a cut log: the shell capper prints the number
// between them, Notice does the same in Go.
func noticeParts(stream string, limit int64) (before, after string) {
	return noticePrefix + stream + " was cut at " + Size(limit) + " (the log cap of each stream of an attempt): ",
		" more bytes were dropped; set " + Setting + " to keep more, or print less"
}

// Notice is the line (with its newline) that ends a log cut at limit
// after which dropped bytes were dropped.
func Notice(stream string, limit, dropped int64) string {
	before, after := noticeParts(stream, limit)
	return before + strconv.FormatInt(dropped, 10) + after + "\n"
}

// CutNotice is the line written where a log is cut, while the stage still
// writes (Writer only; the count follows in Notice at the end).
func CutNotice(stream string, limit int64) string {
	return noticePrefix + stream + " reached the log cap of " + Size(limit) + ": what follows is dropped and counted\n"
}

// Size writes n bytes in binary units where they are whole: "2 GiB",
// "512 MiB", "1000 bytes".
func Size(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Parse reads a cap as Setting holds it: bytes, or a number with K, M or
// G (binary units; "KiB" etc. too). The cap must be at least 1 KiB.
func Parse(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if len(s) > len(u.suffix) && s[len(s)-len(u.suffix):] == u.suffix {
			num, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult || n*mult < 1<<10 {
		return 0, fmt.Errorf("%s=%.32q: give the bytes of each stream of an attempt to keep, at least 1K, e.g. 2G (the default)", Setting, s)
	}
	return n * mult, nil
}

// Writer keeps the first Cap bytes written to it in W and counts the rest.
// When the cap is reached it writes CutNotice; Close writes Notice. It is
// used by one goroutine.
type Writer struct {
	W      io.Writer
	Cap    int64  // <= 0: DefaultCap
	Stream string // "stdout" or "stderr", for the notices
	// Kept is how many bytes W already holds (a log read on after a
	// restart): they count against the cap.
	Kept    int64
	dropped int64
	cut     bool
}

func (w *Writer) limit() int64 {
	if w.Cap <= 0 {
		return DefaultCap
	}
	return w.Cap
}

// Write keeps what fits under the cap; it never fails for what it drops.
func (w *Writer) Write(p []byte) (int, error) {
	room := w.limit() - w.Kept
	if room >= int64(len(p)) {
		n, err := w.W.Write(p)
		w.Kept += int64(n)
		return n, err
	}
	if room > 0 {
		n, err := w.W.Write(p[:room])
		w.Kept += int64(n)
		if err != nil {
			return n, err
		}
	}
	w.dropped += int64(len(p)) - max(room, 0)
	// A log read on after a restart may hold the notice already (Kept is
	// then past the cap).
	if !w.cut && room >= 0 {
		w.cut = true
		if _, err := io.WriteString(w.W, "\n"+CutNotice(w.Stream, w.limit())); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// Dropped is how many bytes were dropped.
func (w *Writer) Dropped() int64 { return w.dropped }

// Close writes the count of dropped bytes, if any. It does not close W.
func (w *Writer) Close() error {
	if w.dropped == 0 {
		return nil
	}
	_, err := io.WriteString(w.W, Notice(w.Stream, w.limit(), w.dropped))
	w.dropped = 0
	return err
}
