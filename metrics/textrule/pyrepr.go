package textrule

import (
	"bytes"
	"math"
)

// PyDict reads a line that is one Python dict as print() writes it (the
// repr of a dict), e.g.
//
//	{'loss': 0.6931, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.01}
//	{'acc': tensor(0.25, device='cuda:0'), 'f1': np.float32(0.5), 'x': nan}
//
// and appends its numeric members to vals, in order. Keys are strings in
// single or double quotes; a value is a number (int, float, nan, inf, with
// a sign), a tensor(...), array(...) or numpy scalar (np.float32(...),
// numpy.int64(...)) holding one, or True/False as 1/0. Other members
// (strings, None, lists, nested dicts, objects) are skipped, checked only
// to be balanced. Anything after the closing brace but spaces makes the
// line not a dict. ok is false when the segment is not a dict.
func PyDict(seg []byte, vals []KV) (out []KV, ok bool) {
	p := pyReader{b: bytes.TrimSpace(seg)}
	if len(p.b) < 2 || p.b[0] != '{' {
		return vals, false
	}
	p.i = 1
	p.space()
	if p.peek() == '}' {
		p.i++
		return vals, p.end()
	}
	for {
		p.space()
		key, ok := p.str()
		if !ok {
			return vals, false
		}
		p.space()
		if p.peek() != ':' {
			return vals, false
		}
		p.i++
		p.space()
		start := p.i
		v, isNum := p.value()
		if p.i == start || p.err {
			return vals, false
		}
		if isNum {
			vals = append(vals, KV{key, v})
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
			p.space()
			if p.peek() == '}' { // a trailing comma
				p.i++
				return vals, p.end()
			}
		case '}':
			p.i++
			return vals, p.end()
		default:
			return vals, false
		}
	}
}

// PyNumber reads one Python value written as repr writes it: a number,
// nan/inf, a tensor(...) or numpy scalar holding one, True/False.
func PyNumber(b []byte) (float64, bool) {
	p := pyReader{b: bytes.TrimSpace(b)}
	v, ok := p.value()
	return v, ok && !p.err && p.i == len(p.b)
}

// maxPyDepth bounds the nesting of skipped members.
const maxPyDepth = 64

type pyReader struct {
	b   []byte
	i   int
	err bool
}

func (p *pyReader) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *pyReader) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t') {
		p.i++
	}
}

func (p *pyReader) end() bool {
	p.space()
	return p.i == len(p.b)
}

// str reads a quoted string (a key), with its escapes kept as written but
// for \' and \" and \\, which repr writes for the quote characters.
func (p *pyReader) str() (string, bool) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", false
	}
	p.i++
	var out []byte
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == q:
			p.i++
			return string(out), true
		case c == '\\' && p.i+1 < len(p.b):
			n := p.b[p.i+1]
			if n == '\'' || n == '"' || n == '\\' {
				out = append(out, n)
			} else {
				out = append(out, c, n)
			}
			p.i += 2
		default:
			out = append(out, c)
			p.i++
		}
	}
	return "", false
}

// value reads one member's value; isNum says whether it is a number.
// p.err is set for a value that is not balanced.
func (p *pyReader) value() (float64, bool) {
	switch c := p.peek(); {
	case c == '\'' || c == '"':
		if _, ok := p.str(); !ok {
			p.err = true
		}
		return 0, false
	case c == '{' || c == '[' || c == '(':
		p.skip(0)
		return 0, false
	case c == '-' || c == '+' || c == '.' || isDigit(c):
		return p.number()
	}
	// A name: nan, inf, True, None, or a call such as tensor(0.25).
	start := p.i
	for p.i < len(p.b) && (isWordByte(p.b[p.i]) || p.b[p.i] == '.') {
		p.i++
	}
	name := string(p.b[start:p.i])
	if p.peek() == '(' {
		return p.call(name)
	}
	switch name {
	case "nan":
		return math.NaN(), true
	case "inf":
		return math.Inf(1), true
	case "True":
		return 1, true
	case "False":
		return 0, true
	case "":
		p.err = true
	}
	return 0, false
}

// number reads a number with an optional sign (also -inf, -nan).
func (p *pyReader) number() (float64, bool) {
	start := p.i
	if c := p.peek(); c == '-' || c == '+' {
		p.i++
	}
	for p.i < len(p.b) {
		c := p.b[p.i]
		if isDigit(c) || c == '.' || c == '_' || c == 'e' || c == 'E' || ((c == '-' || c == '+') && (p.b[p.i-1] == 'e' || p.b[p.i-1] == 'E')) {
			p.i++
			continue
		}
		if isWordByte(c) { // -inf, -nan
			for p.i < len(p.b) && isWordByte(p.b[p.i]) {
				p.i++
			}
		}
		break
	}
	text := bytes.ReplaceAll(p.b[start:p.i], []byte("_"), nil)
	v, ok := ParseNumber(text)
	if !ok {
		p.err = true
	}
	return v, ok
}

// call reads name(...): the number inside a tensor, array or numpy scalar
// (its first argument), else a skipped object.
func (p *pyReader) call(name string) (float64, bool) {
	numeric := false
	switch name {
	case "tensor", "torch.tensor", "array", "np.array", "numpy.array", "Decimal", "float", "int":
		numeric = true
	default:
		if i := bytes.LastIndexByte([]byte(name), '.'); i > 0 {
			mod := name[:i]
			numeric = mod == "np" || mod == "numpy"
		}
	}
	if !numeric {
		p.skip(0)
		return 0, false
	}
	p.i++ // '('
	p.space()
	var (
		v  float64
		ok bool
	)
	if c := p.peek(); c == '\'' || c == '"' { // Decimal('0.5')
		s := p.i
		if _, good := p.str(); good {
			v, ok = ParseNumber(p.b[s+1 : p.i-1])
		}
	} else if c == '-' || c == '+' || c == '.' || isDigit(c) || c == 'n' || c == 'i' {
		v, ok = p.value()
	}
	// The rest of the arguments (device=..., dtype=...) to the closing ')'.
	for p.i < len(p.b) && p.b[p.i] != ')' {
		switch p.b[p.i] {
		case '(', '[', '{':
			p.skip(0)
			continue
		case '\'', '"':
			if _, good := p.str(); !good {
				p.err = true
				return 0, false
			}
			continue
		case '<': // grad_fn=<AddBackward0>
			if j := bytes.IndexByte(p.b[p.i:], '>'); j > 0 {
				p.i += j + 1
				continue
			}
		}
		p.i++
	}
	if p.i >= len(p.b) {
		p.err = true
		return 0, false
	}
	p.i++ // ')'
	return v, ok
}

// skip passes over a balanced (...), [...] or {...}, with quoted strings
// and <...> reprs of objects inside.
func (p *pyReader) skip(depth int) {
	if depth > maxPyDepth {
		p.err = true
		return
	}
	open := p.b[p.i]
	closing := map[byte]byte{'(': ')', '[': ']', '{': '}'}[open]
	p.i++
	for p.i < len(p.b) {
		switch c := p.b[p.i]; c {
		case closing:
			p.i++
			return
		case '(', '[', '{':
			p.skip(depth + 1)
			if p.err {
				return
			}
		case '\'', '"':
			if _, ok := p.str(); !ok {
				p.err = true
				return
			}
		case ')', ']', '}':
			p.err = true
			return
		default:
			p.i++
		}
	}
	p.err = true
}
