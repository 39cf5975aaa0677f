package printable

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestString(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"plain text is kept", "val_acc 0.97 (λ=0.1) 数字牛马", "val_acc 0.97 (λ=0.1) 数字牛马"},
		{"an OSC that retitles the terminal", "\x1b]0;PWNED\x07loss", `\x1b]0;PWNED\x07loss`},
		{"a CSI that clears the screen", "\x1b[2J\x1b[Hacc", `\x1b[2J\x1b[Hacc`},
		{"C1 CSI", "a\u009b31mb", `a\u009b31mb`},
		{"line breaks, tabs and carriage returns", "a\nb\tc\rd", `a\nb\tc\rd`},
		{"NUL and DEL", "a\x00b\x7f", `a\x00b\x7f`},
		{"invalid UTF-8 bytes", "a\xffb\xc3", `a\xffb\xc3`},
		{"a bidirectional override", "abc\u202edcba", `abc\u202edcba`},
		{"isolates and line separators", "\u2066x\u2069\u2028", `\u2066x\u2069\u2028`},
		{"backslashes are left alone", `C:\data`, `C:\data`},
		{"empty", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, String(tt.in))
		})
	}
}

func TestTextKeepsLinesAndTabs(t *testing.T) {
	require.Equal(t, "epoch 1\tloss 0.5\nepoch 2\\r\\x1b[1A", Text("epoch 1\tloss 0.5\nepoch 2\r\x1b[1A"))
}

func TestCut(t *testing.T) {
	require.Equal(t, "short", Cut("short", 10))
	long := strings.Repeat("a", 1<<20)
	got := Cut(long, 16)
	require.Equal(t, strings.Repeat("a", 16)+"… (1,048,576 bytes)", got)
	require.Equal(t, `\x1b]0;… (9 bytes)`, Cut("\x1b]0;PWNED", 4), "what is kept is escaped too")
	require.Equal(t, "数字… (12 bytes)", Cut("数字牛马", 2), "runes are never split")
}

func TestTooLong(t *testing.T) {
	require.Equal(t, "name is 1,048,576 bytes long; at most 128", TooLong("name", strings.Repeat("x", 1<<20), 128))
	require.Empty(t, TooLong("name", "ok", 128))
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1048576: "1,048,576", -12345: "-12,345"} {
		require.Equal(t, want, Count(n))
	}
}

// FuzzString: whatever goes in, what comes out is valid UTF-8 with no
// character a terminal would act on, and clean text passes unchanged.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "loss", "\x1b]0;x\x07", "\xff\xfe", "a\u202eb", "\r\n\t", "数字"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{String(s), Text(s), Cut(s, 8)} {
			require.True(t, utf8.ValidString(out), "%q", out)
			for _, r := range out {
				if r == '\n' || r == '\t' {
					continue
				}
				require.False(t, unsafe(r), "%q left %U in %q", s, r, out)
			}
		}
		require.NotContains(t, String(s), "\n")
		if String(s) == s {
			require.Equal(t, s, Text(s))
		}
	})
}
