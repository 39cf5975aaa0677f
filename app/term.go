package app

import (
	"io"
	"os"
	"strconv"
	"unicode/utf8"
)

// termWidth is the width of the terminal w writes to: $COLUMNS when set,
// else what the terminal says; 0 when w is no terminal (no limit).
func termWidth(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	return ttyWidth(f)
}

// fitWidth cuts s to at most width characters, ending a cut line with
// "…" (width 0: no limit), so a progress line never wraps.
func fitWidth(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	if width == 1 {
		return "…"
	}
	n := 0
	for i := range s {
		if n == width-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
