package metrics

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type gotLine struct {
	line string
	end  int64
}

// followTest runs a Follower on path with a short poll; lines arrive on the
// returned channel, and Run's result on errc.
func followTest(t *testing.T, f *Follower) (lines chan gotLine, errc chan error) {
	t.Helper()
	lines = make(chan gotLine, 100)
	errc = make(chan error, 1)
	if f.Poll == 0 {
		f.Poll = time.Millisecond
	}
	f.Logger = quiet
	f.OnLine = func(line []byte, end int64) { lines <- gotLine{string(line), end} }
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() { errc <- f.Run(ctx) }()
	return lines, errc
}

// next waits for the next delivered line.
func next(t *testing.T, lines chan gotLine) gotLine {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no line delivered")
		return gotLine{}
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestFollowerDeliversLinesAsTheyAppear(t *testing.T) {
	path := filepath.Join(t.TempDir(), "attempt-1.stdout.log")
	appendFile(t, path, "hello\n")
	f := &Follower{Path: path}
	lines, errc := followTest(t, f)
	assert.Equal(t, gotLine{"hello", 6}, next(t, lines))

	appendFile(t, path, `{"step":1,"loss":0.5}`+"\r\npart")
	assert.Equal(t, gotLine{`{"step":1,"loss":0.5}`, 29}, next(t, lines), "CRLF is cut off")
	appendFile(t, path, "ial\n\nlast without newline")
	assert.Equal(t, gotLine{"partial", 37}, next(t, lines), "a line written in two pieces arrives whole")
	assert.Equal(t, gotLine{"", 38}, next(t, lines), "empty lines are lines")

	f.Stop() // drains: the partial last line is delivered
	require.NoError(t, <-errc)
	assert.Equal(t, gotLine{"last without newline", 58}, next(t, lines))
	assert.Empty(t, lines)
}

func TestFollowerStartsAtOffsetAndWaitsForFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.log")
	f := &Follower{Path: path, From: 4}
	lines, errc := followTest(t, f)
	appendFile(t, path, "old\nnew\n") // the file appears after Run started
	assert.Equal(t, gotLine{"new", 8}, next(t, lines))
	f.Stop()
	require.NoError(t, <-errc)
}

func TestFollowerStopWithoutFile(t *testing.T) {
	f := &Follower{Path: filepath.Join(t.TempDir(), "never.log")}
	_, errc := followTest(t, f)
	f.Stop()
	require.NoError(t, <-errc)
}

func TestFollowerStopBeforeRunDrainsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "done.log")
	appendFile(t, path, "a\nb")
	var got []string
	f := &Follower{Path: path, Poll: never, OnLine: func(l []byte, _ int64) { got = append(got, string(l)) }}
	f.Stop()
	require.NoError(t, f.Run(t.Context()))
	assert.Equal(t, []string{"a", "b"}, got)
}

func TestFollowerContextEndsWithoutDrain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	appendFile(t, path, "a\npartial")
	ctx, cancel := context.WithCancel(t.Context())
	var got []string
	f := &Follower{Path: path, Poll: never, OnLine: func(l []byte, _ int64) {
		got = append(got, string(l))
		cancel() // after the first line
	}}
	assert.ErrorIs(t, f.Run(ctx), context.Canceled)
	assert.Equal(t, []string{"a"}, got, "no partial line without Stop")
}

func TestFollowerTruncatesOverlongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.log")
	long := strings.Repeat("x", 40)
	appendFile(t, path, "short\n"+long+"\n"+`{"step":1}`+"\n"+long)
	f := &Follower{Path: path, MaxLine: 16}
	lines, errc := followTest(t, f)
	assert.Equal(t, gotLine{"short", 6}, next(t, lines))
	assert.Equal(t, gotLine{long[:16], 22}, next(t, lines), "first MaxLine bytes of the long line")
	assert.Equal(t, gotLine{`{"step":1}`, 58}, next(t, lines), "the rest of the long line is skipped")
	assert.Equal(t, gotLine{long[:16], 74}, next(t, lines), "a long last line without newline")
	f.Stop()
	require.NoError(t, <-errc)
	assert.Empty(t, lines, "nothing more: the rest of the last line is skipped too")
}

func TestFollowerLongLinesGrowTheBuffer(t *testing.T) {
	// Lines longer than the initial 64 KiB buffer but within MaxLine arrive whole.
	path := filepath.Join(t.TempDir(), "big.log")
	big := strings.Repeat("y", 200<<10)
	appendFile(t, path, big+"\nz\n")
	f := &Follower{Path: path}
	lines, errc := followTest(t, f)
	l := next(t, lines)
	assert.Len(t, l.line, len(big))
	assert.Equal(t, int64(len(big)+1), l.end)
	assert.Equal(t, "z", next(t, lines).line)
	f.Stop()
	require.NoError(t, <-errc)
}

func TestFollowerRereadsTruncatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.log")
	appendFile(t, path, "first run line\n")
	f := &Follower{Path: path}
	lines, errc := followTest(t, f)
	assert.Equal(t, "first run line", next(t, lines).line)
	require.NoError(t, os.WriteFile(path, []byte("again\n"), 0o644))
	assert.Equal(t, gotLine{"again", 6}, next(t, lines))
	f.Stop()
	require.NoError(t, <-errc)
}

func TestFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.log")
	appendFile(t, path, "one\ntwo\n")
	ctx, cancel := context.WithCancel(t.Context())
	var got []string
	err := Follow(ctx, path, 0, func(l []byte, _ int64) {
		got = append(got, string(l))
		if len(got) == 2 {
			cancel()
		}
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{"one", "two"}, got)
}

func TestFollowerStopWinsOverCancelledContext(t *testing.T) {
	// The engine's pattern: Stop, then cancel Run's context at once. The
	// drain must still happen, even if Run only starts afterwards.
	path := filepath.Join(t.TempDir(), "s.log")
	appendFile(t, path, "a\nb\ntail")
	for range 20 {
		var got []string
		f := &Follower{Path: path, Poll: never, OnLine: func(l []byte, _ int64) { got = append(got, string(l)) }}
		ctx, cancel := context.WithCancel(t.Context())
		f.Stop()
		cancel()
		require.NoError(t, f.Run(ctx))
		assert.Equal(t, []string{"a", "b", "tail"}, got)
	}
}

func TestFollowerWaitsForFileToReachFrom(t *testing.T) {
	// Resuming at an offset the file has not reached (yet) is not a truncation.
	path := filepath.Join(t.TempDir(), "grow.log")
	appendFile(t, path, "ab")
	f := &Follower{Path: path, From: 4}
	lines, errc := followTest(t, f)
	appendFile(t, path, "c\nd\n")
	assert.Equal(t, gotLine{"d", 6}, next(t, lines))
	f.Stop()
	require.NoError(t, <-errc)
}
