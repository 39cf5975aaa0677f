package textrule

import "bytes"

// Segments calls fn for every non-blank segment of line: the parts between
// carriage returns (a progress bar redraws itself with '\r', so one line of
// a log file can hold many updates followed by the real output), with
// terminal escape sequences (colours, cursor moves) removed and spaces
// trimmed. scratch is reused for lines that hold escapes; the segment is
// valid only during the call.
func Segments(line []byte, scratch *[]byte, fn func(seg []byte)) {
	if bytes.IndexByte(line, 0x1b) >= 0 {
		*scratch = stripEscapes((*scratch)[:0], line)
		line = *scratch
	}
	for len(line) > 0 {
		var seg []byte
		if i := bytes.IndexByte(line, '\r'); i >= 0 {
			seg, line = line[:i], line[i+1:]
		} else {
			seg, line = line, nil
		}
		seg = bytes.TrimSpace(seg)
		if len(seg) > 0 {
			fn(seg)
		}
	}
}

// stripEscapes appends line to dst without ANSI escape sequences: CSI
// (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \) and two-byte ESC x.
func stripEscapes(dst, line []byte) []byte {
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c != 0x1b {
			dst = append(dst, c)
			continue
		}
		if i+1 >= len(line) {
			break
		}
		switch line[i+1] {
		case '[':
			j := i + 2
			for j < len(line) && !(line[j] >= 0x40 && line[j] <= 0x7e) {
				j++
			}
			i = j
		case ']':
			j := i + 2
			for j < len(line) && line[j] != 0x07 && !(line[j] == 0x1b && j+1 < len(line) && line[j+1] == '\\') {
				j++
			}
			if j < len(line) && line[j] == 0x1b {
				j++
			}
			i = j
		default:
			i++
		}
	}
	return dst
}

// levels are the log level words a prefix may hold.
var levels = []string{"trace", "debug", "info", "notice", "warn", "warning", "error", "err", "critical", "fatal"}

// StripLogPrefix returns seg without a leading log prefix, or seg itself
// when it has none. A prefix is what loggers put before a message: a
// sequence of timestamps (2024-05-01 12:00:00,123; 12:00:00.5;
// 2024-05-01T12:00:00Z), level words (INFO, [WARNING], E:), Python
// logging's default LEVEL:logger: form (INFO:root:, WARNING:__main__:),
// glog/absl headers (I0501 12:00:00.123456 4242 train.py:42]), bracketed
// tags ([rank0], (main)) and separators (" - ", "|", ":") between them. It
// must contain at least one timestamp, level or glog header, so ordinary
// text ("epoch: 3 loss=0.2") is never cut.
func StripLogPrefix(seg []byte) []byte {
	i, evidence := 0, false
	for i < len(seg) {
		j := i
		for j < len(seg) && (seg[j] == ' ' || seg[j] == '\t') {
			j++
		}
		if j >= len(seg) {
			break
		}
		rest := seg[j:]
		if n := glogHeader(rest); n > 0 {
			i, evidence = j+n, true
			continue
		}
		if n := timestamp(rest); n > 0 {
			i, evidence = j+n, true
			continue
		}
		if n := levelWord(rest); n > 0 {
			i, evidence = j+n, true
			// Python's default format: LEVEL:logger:message.
			if n2 := pythonLogger(seg[j+n:]); n2 > 0 {
				i += n2
			}
			continue
		}
		if n, ev := bracketed(rest); n > 0 {
			i, evidence = j+n, evidence || ev
			continue
		}
		if evidence {
			if c := rest[0]; c == '-' || c == '|' || c == ':' || c == ',' {
				if len(rest) == 1 || rest[1] == ' ' || rest[1] == '\t' {
					i = j + 1
					continue
				}
			}
			// "name - " after a timestamp: the logger name of the common
			// '%(asctime)s - %(name)s - %(levelname)s - %(message)s'.
			if n := wordThenDash(rest); n > 0 {
				i = j + n
				continue
			}
		}
		break
	}
	if !evidence {
		return seg
	}
	for i < len(seg) && (seg[i] == ' ' || seg[i] == '\t') {
		i++
	}
	return seg[i:]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c == '-' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// timestamp is the length of a date or time token at the start of b: digits
// with '-', '/', ':', '.', ',', 'T', 'Z' and a '+hh:mm' zone, holding a
// date (two '-' or '/') or a time (two ':'), ending at a space or the end.
func timestamp(b []byte) int {
	if len(b) == 0 || !isDigit(b[0]) {
		return 0
	}
	n, dashes, colons := 0, 0, 0
	for n < len(b) {
		c := b[n]
		switch {
		case isDigit(c):
		case c == '-' || c == '/':
			dashes++
		case c == ':':
			colons++
		case c == '.' || c == ',' || c == 'T' || c == 'Z' || c == '+':
		default:
			goto end
		}
		n++
	}
end:
	if n < len(b) && b[n] != ' ' && b[n] != '\t' && b[n] != ']' && b[n] != '|' {
		return 0
	}
	if dashes < 2 && colons < 2 {
		return 0
	}
	return n
}

// levelWord is the length of a level word at the start of b, with an
// optional trailing ':' and optional brackets ([INFO], INFO:, <info>).
func levelWord(b []byte) int {
	open := 0
	if len(b) > 0 && (b[0] == '[' || b[0] == '<') {
		open = 1
	}
	for _, lv := range levels {
		end := open + len(lv)
		if len(b) < end || !equalFold(b[open:end], lv) {
			continue
		}
		if open == 1 {
			if end < len(b) && (b[end] == ']' || b[end] == '>') {
				end++
			} else {
				continue
			}
		}
		if end < len(b) && b[end] == ':' {
			end++
		}
		if end < len(b) && b[end] != ' ' && b[end] != '\t' && b[end-1] != ':' {
			continue // a longer word ("information")
		}
		return end
	}
	return 0
}

// pythonLogger is the length of "name:" right after "LEVEL:" (no space),
// as in INFO:root: or WARNING:my.module:.
func pythonLogger(b []byte) int {
	n := 0
	for n < len(b) && isWordByte(b[n]) {
		n++
	}
	if n == 0 || n >= len(b) || b[n] != ':' {
		return 0
	}
	return n + 1
}

// glogHeader is the length of a glog/absl header: Lmmdd hh:mm:ss.uuuuuu
// threadid file:line]
func glogHeader(b []byte) int {
	if len(b) < 6 || !(b[0] == 'I' || b[0] == 'W' || b[0] == 'E' || b[0] == 'F') {
		return 0
	}
	for k := 1; k <= 4; k++ {
		if !isDigit(b[k]) {
			return 0
		}
	}
	if b[5] != ' ' {
		return 0
	}
	end := bytes.IndexByte(b, ']')
	if end < 0 || end > 120 || timestamp(b[6:]) == 0 {
		return 0
	}
	return end + 1
}

// bracketed is the length of a short [..] or (..) tag without braces, and
// whether it holds a timestamp or a level ([2024-05-01 12:00:00], [INFO]).
func bracketed(b []byte) (int, bool) {
	if len(b) < 2 || (b[0] != '[' && b[0] != '(') {
		return 0, false
	}
	closing := byte(']')
	if b[0] == '(' {
		closing = ')'
	}
	for n := 1; n < len(b) && n < 64; n++ {
		switch b[n] {
		case closing:
			if n+1 < len(b) && b[n+1] != ' ' && b[n+1] != ':' && b[n+1] != '\t' && b[n+1] != '[' {
				return 0, false
			}
			inner := b[1:n]
			ev := levelWord(inner) == len(inner)
			if !ev {
				// A timestamp, possibly of two tokens (date and time).
				k := timestamp(inner)
				if k > 0 && k < len(inner) && inner[k] == ' ' {
					k += 1 + timestamp(inner[k+1:])
				}
				ev = k == len(inner)
			}
			if n+1 < len(b) && b[n+1] == ':' {
				return n + 2, ev
			}
			return n + 1, ev
		case '{', '}', '[', '(':
			return 0, false
		}
	}
	return 0, false
}

// wordThenDash is the length of "name - " at the start of b.
func wordThenDash(b []byte) int {
	n := 0
	for n < len(b) && isWordByte(b[n]) && b[n] != '-' {
		n++
	}
	if n == 0 || n+3 > len(b) || string(b[n:n+3]) != " - " {
		return 0
	}
	return n + 3
}

// equalFold reports whether b is s (lower case ASCII) in any case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// NextSegment splits the first segment off a line already free of escapes
// (see StripEscapes): the text up to the next '\r', trimmed. rest is what
// follows; seg may be empty (a blank segment).
func NextSegment(line []byte) (seg, rest []byte) {
	if i := bytes.IndexByte(line, '\r'); i >= 0 {
		return bytes.TrimSpace(line[:i]), line[i+1:]
	}
	return bytes.TrimSpace(line), nil
}

// StripEscapes returns line without terminal escape sequences, using
// scratch when there are any (line itself otherwise).
func StripEscapes(line []byte, scratch *[]byte) []byte {
	if bytes.IndexByte(line, 0x1b) < 0 {
		return line
	}
	*scratch = stripEscapes((*scratch)[:0], line)
	return *scratch
}
