package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// StderrMarker is the line LogTail puts between a stage's stdout and its
// stderr, so a reader (the window's log pane) can tell the two apart.
const StderrMarker = "──── stderr ────"

// tailChunk is how much of a log LogTail reads at a time, from the end:
// a stage can write gigabytes, and the window wants only the last lines.
const tailChunk = 64 << 10

// LogTail returns the last lines lines of one attempt's stdout, then, when
// the attempt wrote to stderr, StderrMarker and the last lines lines of its
// stderr. A log not written yet (the attempt has not started) reads as
// empty, not as an error. lines <= 0 means 200.
func (e *Engine) LogTail(ctx context.Context, runID, stage string, attempt, lines int) (string, error) {
	if lines <= 0 {
		lines = 200
	}
	run, err := e.Run(ctx, runID)
	if err != nil {
		return "", err
	}
	found := false
	for _, s := range run.Stages {
		if s.Name == stage {
			found = true
		}
	}
	if !found {
		return "", fmt.Errorf("run %s has no stage %q: `niuma show %s` lists its stages", run.ID, stage, run.ID)
	}
	outPath, errPath := LogPaths(run, stage, attempt)
	out, err := tailFile(outPath, lines)
	if err != nil {
		return "", err
	}
	errText, err := tailFile(errPath, lines)
	if err != nil {
		return "", err
	}
	if errText == "" {
		return out, nil
	}
	var b strings.Builder
	b.WriteString(out)
	if out != "" && !strings.HasSuffix(out, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(StderrMarker + "\n")
	b.WriteString(errText)
	return b.String(), nil
}

// tailFile returns the last n lines of the file at path, reading it
// backwards in chunks so a huge log costs only its tail. A missing file
// reads as "".
func tailFile(path string, n int) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("open the log %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read the log %s: %w", path, err)
	}
	end := st.Size()
	var buf []byte
	for pos := end; pos > 0; {
		size := int64(tailChunk)
		if pos < size {
			size = pos
		}
		pos -= size
		chunk := make([]byte, size)
		if _, err := f.ReadAt(chunk, pos); err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the log %s: %w", path, err)
		}
		buf = append(chunk, buf...)
		// n lines need n newlines before them (ignoring a trailing one).
		if bytes.Count(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n")) >= n {
			break
		}
	}
	body := bytes.TrimSuffix(buf, []byte("\n"))
	if len(body) == 0 {
		return "", nil
	}
	ls := bytes.Split(body, []byte("\n"))
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return string(bytes.Join(ls, []byte("\n"))) + "\n", nil
}
