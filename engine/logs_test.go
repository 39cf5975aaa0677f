package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// numbered is lines "prefix 1".."prefix n", each ended by a newline.
func numbered(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%s %d\n", prefix, i)
	}
	return b.String()
}

func TestLogTail(t *testing.T) {
	h := newHarness(t)
	e := h.engine() // not driven: the run stays queued and the test writes its logs
	info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, `
name: logs
stages:
  - name: train
    command: ["true"]
`)})
	require.NoError(t, err)

	// A line long enough that 3000 of them span many read chunks.
	long := strings.Repeat("x", 100)
	tests := []struct {
		name           string
		stdout, stderr *string // nil: the file does not exist
		lines          int
		want           string
	}{
		{"no logs yet", nil, nil, 200, ""},
		{"stdout only", logText("a\nb\n"), nil, 200, "a\nb\n"},
		{"an empty stderr adds no marker", logText("a\n"), logText(""), 200, "a\n"},
		{"the last lines only", logText(numbered("out", 1, 10)), nil, 3, numbered("out", 8, 10)},
		{"no trailing newline", logText("a\nb\nc"), nil, 2, "b\nc\n"},
		{"stderr after a marker", logText("a\n"), logText(numbered("err", 1, 5)), 2,
			"a\n" + StderrMarker + "\n" + numbered("err", 4, 5)},
		{"stderr only", nil, logText("boom\n"), 200, StderrMarker + "\nboom\n"},
		{"a log larger than a read chunk", logText(numbered(long, 1, 3000)), nil, 2, numbered(long, 2999, 3000)},
		{"zero lines means 200", logText(numbered("out", 1, 300)), nil, 0, numbered("out", 101, 300)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attempt := i + 1 // each case its own attempt's files
			outPath, errPath := LogPaths(info, "train", attempt)
			require.NoError(t, os.MkdirAll(filepath.Dir(outPath), 0o755))
			for path, body := range map[string]*string{outPath: tt.stdout, errPath: tt.stderr} {
				if body != nil {
					require.NoError(t, os.WriteFile(path, []byte(*body), 0o644))
				}
			}
			got, err := e.LogTail(context.Background(), info.ID, "train", attempt, tt.lines)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("an unknown stage", func(t *testing.T) {
		_, err := e.LogTail(context.Background(), info.ID, "nope", 1, 10)
		require.ErrorContains(t, err, `no stage "nope"`)
	})
	t.Run("an unknown run", func(t *testing.T) {
		_, err := e.LogTail(context.Background(), "zzzz-no-such-run", "train", 1, 10)
		require.Error(t, err)
	})
}

func logText(s string) *string { return &s }
