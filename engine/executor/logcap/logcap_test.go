package logcap

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriterKeepsTheFirstCapBytes(t *testing.T) {
	var b bytes.Buffer
	w := &Writer{W: &b, Cap: 10, Stream: "stdout"}
	for _, p := range []string{"abcd", "efgh", "ijkl", "mnop"} { // the cap falls inside the third write
		n, err := w.Write([]byte(p))
		require.NoError(t, err)
		require.Equal(t, len(p), n, "a dropped byte is still taken")
	}
	require.Equal(t, int64(6), w.Dropped())
	require.NoError(t, w.Close())
	require.Equal(t, "abcdefghij\n"+CutNotice("stdout", 10)+Notice("stdout", 10, 6), b.String())
	require.Equal(t, "[niuma] stdout was cut at 10 bytes (the log cap of each stream of an attempt): 6 more bytes were dropped; "+
		"set NIUMA_LOG_CAP to keep more, or print less\n", Notice("stdout", 10, 6))
}

func TestWriterUnderTheCapWritesNoNotice(t *testing.T) {
	var b bytes.Buffer
	w := &Writer{W: &b, Cap: 10, Stream: "stderr"}
	_, _ = w.Write([]byte("0123456789")) // exactly the cap
	require.NoError(t, w.Close())
	require.Equal(t, "0123456789", b.String())
}

// Read on after a restart: the bytes the file holds count, and a file cut
// before gets no second cut line.
func TestWriterReadOnAfterARestart(t *testing.T) {
	var b bytes.Buffer
	w := &Writer{W: &b, Cap: 10, Stream: "stdout", Kept: 6}
	_, _ = w.Write([]byte("abcdef"))
	require.NoError(t, w.Close())
	require.Equal(t, "abcd\n"+CutNotice("stdout", 10)+Notice("stdout", 10, 2), b.String())

	b.Reset()
	w = &Writer{W: &b, Cap: 10, Stream: "stdout", Kept: 10 + 80}
	_, _ = w.Write([]byte("more"))
	require.NoError(t, w.Close())
	require.Equal(t, Notice("stdout", 10, 4), b.String())
}

func TestSizeAndParse(t *testing.T) {
	for n, want := range map[int64]string{2 << 30: "2 GiB", 512 << 20: "512 MiB", 4096: "4 KiB", 1000: "1000 bytes", 3<<30 + 1: "3221225473 bytes"} {
		require.Equal(t, want, Size(n))
	}
	for s, want := range map[string]int64{"2G": 2 << 30, "512M": 512 << 20, "1GiB": 1 << 30, "64K": 64 << 10, "1048576": 1 << 20} {
		got, err := Parse(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "0", "-1G", "1T", "lots", "100", "9999999999999G", strings.Repeat("9", 1000)} {
		_, err := Parse(s)
		require.Error(t, err, s)
		require.Contains(t, err.Error(), "NIUMA_LOG_CAP=")
		require.Less(t, len(err.Error()), 200, "the value is cut in the message")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"2G", "512M", "1KiB", "0", "-5", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err == nil && n < 1<<10 {
			t.Fatalf("Parse(%q) = %d, below the least cap", s, n)
		}
	})
}
