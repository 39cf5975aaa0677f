package metrics

import (
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"niuma/metrics/textrule"
)

// KV is one numeric member of a metric line: the member name and its
// value (the same type the text rules produce).
type KV = textrule.KV

// Record is one parsed metric line: its step and its numeric members other
// than the one that gave the step, in the order in which the names first
// appear, each holding the value of its last occurrence.
type Record struct {
	Step int64
	// StepKey is the member that gave the step: "step", or with
	// Parser.Lenient one of StepAliases.
	StepKey string
	Values  []KV
}

// StepAliases are the members a lenient Parser takes as the step when a
// line has no "step", in this order of preference: the first one present
// is the step (and is not a point); the others are ordinary points.
var StepAliases = []string{"global_step", "iteration", "iter", "epoch"}

// stepKeys is "step" followed by StepAliases.
var stepKeys = append([]string{"step"}, StepAliases...)

// Parser limits.
const (
	maxDepth      = 10000   // the same limit as encoding/json
	maxInternKeys = 1 << 12 // distinct names remembered by one Parser
	dedupMapAt    = 16      // members beyond which duplicates are found by map
)

// Parser parses metric lines. It reuses its buffers, so parsing a line of an
// already-seen set of names allocates nothing. A Parser is not safe for
// concurrent use; the Record it returns is valid until the next call to
// Parse (the Key strings themselves stay valid forever).
//
// A metric line (docs/ARCHITECTURE.md, "The stage contract") is:
//
//   - The line is one JSON object; whitespace around it is allowed. Anything
//     else after the closing brace makes it a log line.
//   - It has a member "step" whose value is a number with an integral value
//     in [0, 2^63): 12, 12.0 and 1.2e1 are all step 12; 1.5, -1, "12", NaN
//     and a missing step make the line a log line. A step written as a plain
//     integer is read exactly; one written with a fraction or exponent is
//     read as a float64 first.
//   - Every other member whose value is a number becomes a point. Python's
//     json.dumps spellings NaN, Infinity and -Infinity are accepted (as
//     values, and anywhere inside skipped members); a number too large for a
//     float64 becomes ±Inf, as Python's json.loads reads it.
//   - Members holding strings, booleans, null, objects or arrays are skipped
//     (they are still checked to be well-formed JSON); the line still counts.
//   - When a name occurs twice the last value wins, for "step" too.
//   - Names are unescaped as encoding/json does (\u00e9, surrogate pairs,
//     invalid UTF-8 and lone surrogates become U+FFFD).
//   - Nesting deeper than 10000 (the object itself counting as one) is
//     rejected, as encoding/json does.
type Parser struct {
	// Lenient also accepts, as documented in the README's stage contract:
	//   - numbers written as JSON strings ("0.5", " 12 ", "nan", "-inf",
	//     "Infinity", case-insensitive), as values and as the step;
	//   - when "step" is absent, the first of StepAliases present as the
	//     step (Record.StepKey says which).
	// A present "step" (or, without it, the chosen alias) that is not a
	// valid step still makes the line a log line.
	Lenient bool

	vals    []KV
	cand    [5]stepCand       // per stepKeys entry, its last occurrence
	keys    map[string]string // interned member names
	idx     map[string]int    // name -> index in vals, used for wide lines
	idxUsed bool
	ndead   int    // entries of vals marked dead
	scratch []byte // unescaped name
}

// ParseLine parses one line with a throwaway Parser and returns freshly
// allocated values. Hot paths should keep a Parser and call Parse.
func ParseLine(line []byte) (step int64, values []KV, ok bool) {
	var p Parser
	rec, ok := p.Parse(line)
	if !ok {
		return 0, nil, false
	}
	return rec.Step, append([]KV(nil), rec.Values...), true
}

// Parse reads line as a metric line. ok is false when the line is log text
// (not a JSON object, or no valid step); that is never an error.
func (p *Parser) Parse(line []byte) (rec Record, ok bool) {
	p.vals = p.vals[:0]
	p.ndead = 0
	if p.idxUsed {
		clear(p.idx)
		p.idxUsed = false
	}
	b := line
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return Record{}, false
	}
	i = skipWS(b, i+1)
	if i >= len(b) {
		return Record{}, false
	}
	p.cand = [5]stepCand{}
	if b[i] == '}' {
		i++
	} else {
		for {
			// Member name.
			if i >= len(b) || b[i] != '"' {
				return Record{}, false
			}
			kEnd, escaped, ascii := scanString(b, i)
			if kEnd < 0 {
				return Record{}, false
			}
			rawKey := b[i+1 : kEnd-1]
			i = skipWS(b, kEnd)
			if i >= len(b) || b[i] != ':' {
				return Record{}, false
			}
			i = skipWS(b, i+1)
			if i >= len(b) {
				return Record{}, false
			}
			key := rawKey
			if escaped || !ascii {
				key = p.unquote(rawKey)
			}
			ci := p.stepIndex(key) // -1: not a step candidate

			// Member value.
			switch c := b[i]; {
			case c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I':
				n, end := scanNumber(b, i)
				if end < 0 {
					return Record{}, false
				}
				p.number(key, ci, n, b[i:end])
				i = end
			case c == '"' && p.Lenient:
				end, esc, _ := scanString(b, i)
				if end < 0 {
					return Record{}, false
				}
				if n, tok, ok := numericString(b[i+1:end-1], esc); ok {
					p.number(key, ci, n, tok)
				} else {
					p.notNumber(key, ci)
				}
				i = end
			default:
				end := skipValue(b, i, 1)
				if end < 0 {
					return Record{}, false
				}
				p.notNumber(key, ci)
				i = end
			}

			i = skipWS(b, i)
			if i >= len(b) {
				return Record{}, false
			}
			if b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if b[i] == '}' {
				i++
				break
			}
			return Record{}, false
		}
	}
	if skipWS(b, i) != len(b) {
		return Record{}, false
	}
	// The step: "step", or (lenient) the first alias present.
	chosen := -1
	for j := range p.cand {
		if p.cand[j].present {
			chosen = j
			break
		}
	}
	if chosen < 0 || !p.cand[chosen].valid {
		return Record{}, false
	}
	if chosen > 0 {
		p.unset([]byte(stepKeys[chosen])) // an alias that is the step is not a point
	}
	p.compact()
	return Record{Step: p.cand[chosen].step, StepKey: stepKeys[chosen], Values: p.vals}, true
}

// stepCand is the last occurrence of one of stepKeys in a line.
type stepCand struct {
	present, valid bool
	step           int64
}

// stepIndex is key's index in stepKeys, or -1; only "step" unless Lenient.
func (p *Parser) stepIndex(key []byte) int {
	if len(key) < 4 || len(key) > 11 {
		return -1
	}
	n := 1
	if p.Lenient {
		n = len(stepKeys)
	}
	for j, k := range stepKeys[:n] {
		if string(key) == k {
			return j
		}
	}
	return -1
}

// number takes a numeric member; a step candidate other than "step" is
// also a point until it is chosen as the step.
func (p *Parser) number(key []byte, ci int, n number, tok []byte) {
	if ci >= 0 {
		st, ok := n.step(tok)
		p.cand[ci] = stepCand{present: true, valid: ok, step: st}
		if ci == 0 {
			return
		}
	}
	p.set(key, n.float(tok))
}

// notNumber takes a member whose value is no number: the last occurrence
// wins, so an earlier number of the same name is no point (or step).
func (p *Parser) notNumber(key []byte, ci int) {
	if ci >= 0 {
		p.cand[ci] = stepCand{present: true}
		if ci == 0 {
			return
		}
	}
	p.unset(key)
}

// numericString reads the body of a JSON string as a number, for a lenient
// Parser: the number grammar of a metric line (NaN, Infinity, -Infinity
// included) after trimming spaces, or nan, inf, infinity with an optional
// sign in any case. An escaped string is never a number.
func numericString(body []byte, escaped bool) (number, []byte, bool) {
	if escaped {
		return number{}, nil, false
	}
	for len(body) > 0 && body[0] == ' ' {
		body = body[1:]
	}
	for len(body) > 0 && body[len(body)-1] == ' ' {
		body = body[:len(body)-1]
	}
	if len(body) == 0 || len(body) > 64 {
		return number{}, nil, false
	}
	neg := false
	word := body
	if word[0] == '-' || word[0] == '+' {
		neg, word = word[0] == '-', word[1:]
	}
	switch {
	case equalFold(word, "nan"):
		return number{special: 'N'}, body, true
	case equalFold(word, "inf"), equalFold(word, "infinity"):
		if neg {
			return number{special: '-'}, body, true
		}
		return number{special: '+'}, body, true
	}
	switch c := body[0]; {
	case c == '-' || (c >= '0' && c <= '9'):
		n, end := scanNumber(body, 0)
		if end == len(body) {
			return n, body, true
		}
	}
	return number{}, nil, false
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

// dead marks a member whose last occurrence is not a number; such entries
// are removed in one pass at the end of Parse. Parsed values are never this
// NaN (a NaN token reads as math.NaN(), which has another payload).
var dead = math.Float64frombits(0x7ff8_dead_0000_beef)

func isDead(v float64) bool { return math.Float64bits(v) == 0x7ff8_dead_0000_beef }

// set records key=v; a later occurrence of a name replaces the earlier value
// and keeps the position of the first.
func (p *Parser) set(key []byte, v float64) {
	if j := p.find(key); j >= 0 {
		if isDead(p.vals[j].Value) {
			p.ndead--
		}
		p.vals[j].Value = v
		return
	}
	k := p.intern(key)
	p.vals = append(p.vals, KV{Key: k, Value: v})
	if p.idxUsed {
		p.idx[k] = len(p.vals) - 1
	} else if len(p.vals) == dedupMapAt {
		if p.idx == nil {
			p.idx = make(map[string]int, 2*dedupMapAt)
		}
		for j, kv := range p.vals {
			p.idx[kv.Key] = j
		}
		p.idxUsed = true
	}
}

// unset marks key dead when a later, non-numeric occurrence replaces a
// number (last wins: {"a":1,"a":"x"} has no point a).
func (p *Parser) unset(key []byte) {
	if j := p.find(key); j >= 0 && !isDead(p.vals[j].Value) {
		p.vals[j].Value = dead
		p.ndead++
	}
}

// compact drops the dead entries.
func (p *Parser) compact() {
	if p.ndead == 0 {
		return
	}
	out := p.vals[:0]
	for _, kv := range p.vals {
		if !isDead(kv.Value) {
			out = append(out, kv)
		}
	}
	p.vals = out
	p.ndead = 0
}

func (p *Parser) find(key []byte) int {
	if p.idxUsed {
		if j, ok := p.idx[string(key)]; ok {
			return j
		}
		return -1
	}
	for j := range p.vals {
		if p.vals[j].Key == string(key) {
			return j
		}
	}
	return -1
}

// intern returns a string for key, shared by every line that uses the same
// name, so steady-state parsing does not allocate names.
func (p *Parser) intern(key []byte) string {
	if s, ok := p.keys[string(key)]; ok {
		return s
	}
	s := string(key)
	if p.keys == nil {
		p.keys = make(map[string]string)
	}
	if len(p.keys) < maxInternKeys {
		p.keys[s] = s
	}
	return s
}

// unquote decodes the body of a JSON string (without its quotes) that
// scanString accepted, the way encoding/json does: escapes are resolved,
// invalid UTF-8 bytes and unpaired surrogates become U+FFFD.
func (p *Parser) unquote(s []byte) []byte {
	out := p.scratch[:0]
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case '"', '\\', '/':
				out = append(out, s[r])
				r++
			case 'b':
				out = append(out, '\b')
				r++
			case 'f':
				out = append(out, '\f')
				r++
			case 'n':
				out = append(out, '\n')
				r++
			case 'r':
				out = append(out, '\r')
				r++
			case 't':
				out = append(out, '\t')
				r++
			case 'u':
				rr := getu4(s[r-1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						out = utf8.AppendRune(out, dec)
						break
					}
					rr = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, rr)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			if rr == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, unicode.ReplacementChar)
			} else {
				out = append(out, s[r:r+size]...)
			}
			r += size
		}
	}
	p.scratch = out
	return out
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// scanString checks the JSON string starting at b[i] == '"' and returns the
// index just past its closing quote (-1 if malformed), whether it holds
// escapes, and whether it is all ASCII.
func scanString(b []byte, i int) (end int, escaped, ascii bool) {
	ascii = true
	for i++; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, ascii
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				return -1, false, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1, false, false
				}
				i += 4
			default:
				return -1, false, false
			}
		case c < 0x20:
			return -1, false, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return -1, false, false
}

// skipValue checks the JSON value (string, literal, object or array; numbers
// and NaN/Infinity included) starting at b[i] and returns the index just past
// it, or -1. depth is the nesting depth of the container holding the value.
func skipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		end, _, _ := scanString(b, i)
		return end
	case c == '{' || c == '[':
		return skipContainer(b, i, depth+1)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I':
		_, end := scanNumber(b, i)
		return end
	}
	return -1
}

func skipContainer(b []byte, i, depth int) int {
	if depth > maxDepth {
		return -1
	}
	obj := b[i] == '{'
	closing := byte(']')
	if obj {
		closing = '}'
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1
	}
	for {
		if obj {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			end, _, _ := scanString(b, i)
			if end < 0 {
				return -1
			}
			i = skipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return -1
			}
			i = skipWS(b, i+1)
		}
		i = skipValue(b, i, depth)
		if i < 0 {
			return -1
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case closing:
			return i + 1
		default:
			return -1
		}
	}
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

// number is what scanNumber learned about a numeric token on the way.
type number struct {
	special  byte   // 0, or 'N' (NaN), '+' (Infinity), '-' (-Infinity)
	neg      bool   //
	isInt    bool   // no fraction, no exponent
	fast     bool   // mant and exp10 give the exact value (see float)
	mant     uint64 // significant digits, when fast
	exp10    int    // value = ±mant * 10^exp10, when fast
	intExact bool   // isInt and mant holds the whole integer
}

var pow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// scanNumber checks the number token (JSON grammar, plus NaN, Infinity and
// -Infinity) at b[i] and returns what it found and the index past it, or -1.
func scanNumber(b []byte, i int) (n number, end int) {
	switch b[i] {
	case 'N':
		return number{special: 'N'}, literal(b, i, "NaN")
	case 'I':
		return number{special: '+'}, literal(b, i, "Infinity")
	case '-':
		n.neg = true
		i++
		if i < len(b) && b[i] == 'I' {
			return number{special: '-'}, literal(b, i, "Infinity")
		}
	}
	if i >= len(b) {
		return n, -1
	}
	// mant collects up to 19 significant digits; exact stays true while it
	// holds all of them. frac counts the fraction digits taken into mant.
	var (
		mant  uint64
		nd    int
		frac  int
		exact = true
	)
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if nd < 19 {
				mant = mant*10 + uint64(b[i]-'0')
				nd++
			} else {
				exact = false
			}
		}
	default:
		return n, -1
	}
	n.isInt = true
	if i < len(b) && b[i] == '.' {
		n.isInt = false
		i++
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			switch {
			case nd == 0 && b[i] == '0': // a leading zero: only scales
				frac++
			case nd < 19:
				mant = mant*10 + uint64(b[i]-'0')
				nd++
				frac++
			default:
				exact = false
			}
		}
		if i == start {
			return n, -1
		}
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		n.isInt = false
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if exp < 100000 {
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if i == start {
			return n, -1
		}
		if eneg {
			exp = -exp
		}
	}
	n.mant = mant
	n.intExact = n.isInt && exact
	n.exp10 = exp - frac
	n.fast = exact && nd <= 15 && n.exp10 >= -22 && n.exp10 <= 22
	return n, i
}

// float returns the value of the token tok that scanNumber described.
func (n number) float(tok []byte) float64 {
	switch n.special {
	case 'N':
		return math.NaN()
	case '+':
		return math.Inf(1)
	case '-':
		return math.Inf(-1)
	}
	if n.fast {
		// Exact mantissa (< 2^53) and an exact power of ten: one correctly
		// rounded operation (Clinger's fast path).
		f := float64(n.mant)
		if n.exp10 >= 0 {
			f *= pow10[n.exp10]
		} else {
			f /= pow10[-n.exp10]
		}
		if n.neg {
			f = -f
		}
		return f
	}
	// The token is valid, so the only possible error is ErrRange, where
	// ParseFloat returns ±Inf (or a correctly rounded tiny value): keep it.
	f, _ := strconv.ParseFloat(unsafe.String(unsafe.SliceData(tok), len(tok)), 64)
	return f
}

// step returns the token as a step, and whether it is a valid one.
func (n number) step(tok []byte) (int64, bool) {
	if n.special != 0 {
		return 0, false
	}
	if n.isInt {
		if n.intExact && n.mant <= math.MaxInt64 {
			if n.neg && n.mant != 0 {
				return 0, false
			}
			return int64(n.mant), true
		}
		return 0, false // more than 19 digits or above MaxInt64
	}
	f := n.float(tok)
	if !(f >= 0 && f < (1<<63)) || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}
