package printable

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// String returns s with every control character, invalid UTF-8 byte and
// bidirectional control shown as a visible escape. Text that needs none
// is returned unchanged (and unallocated).
func String(s string) string { return escape(s, false) }

// Text is String for multi-line text: line feeds and tabs are kept, every
// other control character is escaped (a carriage return too: it would
// overwrite the line it ends).
func Text(s string) string { return escape(s, true) }

// Cut is String, shortened to at most max runes of s followed by "…" and
// the length of the whole, so that a megabyte pasted where a name belongs
// does not fill the screen when a message repeats it.
func Cut(s string, max int) string { return String(Shorten(s, max)) }

// Shorten is Cut without the escaping, for a caller that quotes (%q)
// what it repeats.
func Shorten(s string, max int) string {
	if max < 1 {
		max = 1
	}
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	end, n := 0, 0
	for i := range s {
		if n == max {
			end = i
			break
		}
		n++
	}
	return s[:end] + "… (" + Count(len(s)) + " bytes)"
}

// TooLong says that what (e.g. "name") is longer than max bytes, without
// repeating it: "name is 1,048,576 bytes long; at most 128". It returns ""
// when s fits.
func TooLong(what, s string, max int) string {
	if len(s) <= max {
		return ""
	}
	return what + " is " + Count(len(s)) + " bytes long; at most " + Count(max)
}

// Count writes n with thousands separators: 1048576 -> "1,048,576".
func Count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// unsafe reports whether r must be escaped: C0 controls and DEL, the C1
// controls (some terminals read U+009B as CSI), the bidirectional
// embeddings, overrides, isolates and marks, and the line and paragraph
// separators.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

func escape(s string, keepLines bool) string {
	clean := true
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafe(r) && !(keepLines && (r == '\n' || r == '\t')) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&0xf])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		case unsafe(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[(r>>shift)&0xf])
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
