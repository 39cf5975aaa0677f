package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func kv(k string, v float64) KV { return KV{Key: k, Value: v} }

func TestParseMetricLines(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name string
		line string
		step int64
		want []KV
	}{
		{"contract example", `{"step": 12, "loss": 0.41, "lr": 0.001}`, 12, []KV{kv("loss", 0.41), kv("lr", 0.001)}},
		{"step only", `{"step":0}`, 0, nil},
		{"step last", `{"loss":1.5,"step":3}`, 3, []KV{kv("loss", 1.5)}},
		{"whitespace around and inside", " \t{ \"step\" : 7 ,\n \"a\" :\r-2 } \r\n", 7, []KV{kv("a", -2)}},
		{"step as integral float", `{"step": 12.0, "a": 1}`, 12, []KV{kv("a", 1)}},
		{"step with exponent", `{"step": 1.2e1}`, 12, nil},
		{"step minus zero", `{"step": -0}`, 0, nil},
		{"step max int64", `{"step": 9223372036854775807}`, math.MaxInt64, nil},
		{"step big exact integer", `{"step": 9007199254740993}`, 9007199254740993, nil},
		{"python NaN and infinities", `{"step": 1, "a": NaN, "b": Infinity, "c": -Infinity}`, 1, []KV{kv("a", nan), kv("b", inf), kv("c", -inf)}},
		{"exponents and signs", `{"step":2,"a":1e-05,"b":-2.5E+3,"c":0.000123,"d":-0.0}`, 2, []KV{kv("a", 1e-05), kv("b", -2500), kv("c", 0.000123), kv("d", math.Copysign(0, -1))}},
		{"17 significant digits", `{"step":1,"loss":0.41234567891234567}`, 1, []KV{kv("loss", 0.41234567891234567)}},
		{"huge value becomes infinity", `{"step":1,"a":1e400,"b":-1e400,"c":1e-400}`, 1, []KV{kv("a", inf), kv("b", -inf), kv("c", 0)}},
		{"long integer value", `{"step":1,"a":123456789012345678901234567890}`, 1, []KV{kv("a", 1.2345678901234568e29)}},
		{"non-numeric members skipped", `{"step":1,"s":"x","t":true,"f":false,"n":null,"o":{"a":1},"l":[1,2,"3"],"a":2}`, 1, []KV{kv("a", 2)}},
		{"nested braces and quotes in strings", `{"o":{"s":"}{\"]["},"l":[{"x":"}"},[[]],{}],"step":5,"a":1}`, 5, []KV{kv("a", 1)}},
		{"NaN inside skipped array", `{"step":1,"hist":[NaN,Infinity,-Infinity,1],"a":3}`, 1, []KV{kv("a", 3)}},
		{"duplicate key last wins", `{"step":1,"a":1,"b":2,"a":3}`, 1, []KV{kv("a", 3), kv("b", 2)}},
		{"duplicate step last wins", `{"step":1,"step":2}`, 2, nil},
		{"number then string: no point", `{"step":1,"a":1,"a":"x","b":2}`, 1, []KV{kv("b", 2)}},
		{"number, string, number", `{"step":1,"a":1,"a":"x","a":4}`, 1, []KV{kv("a", 4)}},
		{"escaped keys", `{"step":1,"caf\u00e9":1,"a\"b":2,"t\tab":3,"\ud83d\ude00":4,"s\/l":5}`, 1, []KV{kv("café", 1), kv(`a"b`, 2), kv("t\tab", 3), kv("😀", 4), kv("s/l", 5)}},
		{"escaped step key", `{"st\u0065p":4}`, 4, nil},
		{"utf-8 key", `{"step":1,"损失":0.5}`, 1, []KV{kv("损失", 0.5)}},
		{"lone surrogate becomes U+FFFD", `{"step":1,"\ud800x":1}`, 1, []KV{kv("\uFFFDx", 1)}},
		{"invalid utf-8 becomes U+FFFD", "{\"step\":1,\"a\xffb\":1}", 1, []KV{kv("a\uFFFDb", 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Parser
			rec, ok := p.Parse([]byte(tt.line))
			require.True(t, ok, "should be a metric line")
			assert.Equal(t, tt.step, rec.Step)
			assertKVs(t, tt.want, rec.Values)

			step, vals, ok := ParseLine([]byte(tt.line))
			require.True(t, ok)
			assert.Equal(t, tt.step, step)
			assertKVs(t, tt.want, vals)
		})
	}
}

// assertKVs compares values bit for bit (so NaN equals NaN, -0 differs from 0).
func assertKVs(t *testing.T, want, got []KV) {
	t.Helper()
	require.Len(t, got, len(want), "got %v", got)
	for i := range want {
		assert.Equal(t, want[i].Key, got[i].Key)
		assert.Equal(t, math.Float64bits(want[i].Value), math.Float64bits(got[i].Value),
			"%s: want %v, got %v", want[i].Key, want[i].Value, got[i].Value)
	}
}

func TestParseLogLines(t *testing.T) {
	tests := []struct{ name, line string }{
		{"empty", ``},
		{"blank", " \t\r\n"},
		{"plain text", `epoch 1 done`},
		{"not an object", `[{"step":1}]`},
		{"json number", `12`},
		{"json string", `"{\"step\":1}"`},
		{"no step", `{"loss":1}`},
		{"empty object", `{}`},
		{"step is a string", `{"step":"1"}`},
		{"step is null", `{"step":null}`},
		{"step is bool", `{"step":true}`},
		{"step is an object", `{"step":{"n":1}}`},
		{"negative step", `{"step":-1}`},
		{"negative float step", `{"step":-2.0}`},
		{"non-integral step", `{"step":1.5}`},
		{"step NaN", `{"step":NaN}`},
		{"step Infinity", `{"step":Infinity}`},
		{"step too big for int64", `{"step":9223372036854775808}`},
		{"step float too big", `{"step":1e19}`},
		{"step overflows float", `{"step":1e400}`},
		{"last step is not a number", `{"step":1,"step":"x"}`},
		{"trailing garbage", `{"step":1} x`},
		{"two objects", `{"step":1}{"step":2}`},
		{"trailing comma", `{"step":1,}`},
		{"missing colon", `{"step" 1}`},
		{"missing comma", `{"step":1 "a":2}`},
		{"unterminated", `{"step":1`},
		{"unterminated string", `{"step":1,"a`},
		{"unquoted key", `{step:1}`},
		{"single quotes", `{'step':1}`},
		{"leading zero", `{"step":01}`},
		{"bare minus", `{"step":1,"a":-}`},
		{"dot without digits", `{"step":1,"a":1.}`},
		{"leading dot", `{"step":1,"a":.5}`},
		{"plus sign", `{"step":1,"a":+1}`},
		{"exponent without digits", `{"step":1,"a":1e}`},
		{"hex", `{"step":1,"a":0x10}`},
		{"lowercase nan", `{"step":1,"a":nan}`},
		{"minus NaN", `{"step":1,"a":-NaN}`},
		{"Inf abbreviation", `{"step":1,"a":Inf}`},
		{"bad escape", `{"step":1,"a\x":1}`},
		{"short unicode escape", `{"step":1,"\u12":1}`},
		{"control char in key", "{\"step\":1,\"a\x01\":1}"},
		{"unclosed nested", `{"step":1,"o":{"a":[1,2}}`},
		{"bad literal", `{"step":1,"t":tru}`},
		{"array trailing comma", `{"step":1,"l":[1,]}`},
		{"object missing value", `{"step":1,"o":{"a":}}`},
		{"BOM", "\uFEFF{\"step\":1}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Parser
			_, ok := p.Parse([]byte(tt.line))
			assert.False(t, ok)
		})
	}
}

func TestParseDepthLimit(t *testing.T) {
	nest := func(n int) string { // an object holding n-1 nested arrays
		return `{"step":1,"x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	var p Parser
	_, ok := p.Parse([]byte(nest(maxDepth)))
	assert.True(t, ok, "depth 10000 is accepted, as by encoding/json")
	assert.True(t, json.Valid([]byte(nest(maxDepth))))
	_, ok = p.Parse([]byte(nest(maxDepth + 1)))
	assert.False(t, ok, "depth 10001 is rejected, as by encoding/json")
	assert.False(t, json.Valid([]byte(nest(maxDepth+1))))
}

func TestParseWideLineAndReuse(t *testing.T) {
	// More members than the linear duplicate search handles: the map takes over.
	var b strings.Builder
	b.WriteString(`{"step":9`)
	for i := range 100 {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	b.WriteString(`,"k5":-5,"k50":"gone","k50":50.5,"k60":"gone"}`)
	var p Parser
	for range 3 { // the same Parser, reused
		rec, ok := p.Parse([]byte(b.String()))
		require.True(t, ok)
		require.Len(t, rec.Values, 99)
		assert.Equal(t, kv("k5", -5), rec.Values[5])
		assert.Equal(t, kv("k50", 50.5), rec.Values[50])
		assert.Equal(t, kv("k61", 61), rec.Values[60])

		rec, ok = p.Parse([]byte(`{"step":1,"k1":1,"k1":2}`))
		require.True(t, ok)
		assert.Equal(t, []KV{kv("k1", 2)}, rec.Values)
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	line := []byte(`{"step": 1234, "loss": 0.4123456789012345, "val_loss": 0.5, "acc": 0.91, "lr": 1e-05, "tag": "x"}`)
	var p Parser
	p.Parse(line) // learn the names
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := p.Parse(line); !ok {
			t.Fatal("not parsed")
		}
	})
	assert.Zero(t, allocs)
}

// oracle reads line with encoding/json. It reports whether encoding/json
// accepts the line as an object, and if so whether it has a valid step, the
// step, and every numeric member other than step as Parse must return them.
func oracle(line []byte) (isObject, stepOK bool, step int64, vals map[string]float64) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || m == nil {
		return false, false, 0, nil
	}
	isNumber := func(raw json.RawMessage) bool {
		return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
	}
	vals = make(map[string]float64)
	for k, raw := range m {
		if k == "step" || !isNumber(raw) {
			continue
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil && !isRangeErr(err) {
			panic(err)
		}
		vals[k] = f
	}
	raw, has := m["step"]
	if !has || !isNumber(raw) {
		return true, false, 0, vals
	}
	if !bytes.ContainsAny(raw, ".eE") {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		return true, err == nil && n >= 0, n, vals
	}
	f, _ := strconv.ParseFloat(string(raw), 64)
	if f >= 0 && f < (1<<63) && f == math.Trunc(f) {
		return true, true, int64(f), vals
	}
	return true, false, 0, vals
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// crossCheck holds Parse to encoding/json on line.
func crossCheck(t *testing.T, p *Parser, line []byte) {
	t.Helper()
	rec, ok := p.Parse(line)
	isObject, stepOK, step, want := oracle(line)
	if !isObject {
		// encoding/json rejects the line; Parse may accept it only for the
		// Python spellings encoding/json does not know.
		if ok && !bytes.Contains(line, []byte("NaN")) && !bytes.Contains(line, []byte("Infinity")) {
			t.Fatalf("Parse accepts %q, encoding/json does not", line)
		}
		return
	}
	if ok != stepOK {
		t.Fatalf("Parse ok=%v, encoding/json step ok=%v for %q", ok, stepOK, line)
	}
	if !ok {
		return
	}
	if rec.Step != step {
		t.Fatalf("step %d, encoding/json %d for %q", rec.Step, step, line)
	}
	if len(rec.Values) != len(want) {
		t.Fatalf("%d values %v, encoding/json %d %v for %q", len(rec.Values), rec.Values, len(want), want, line)
	}
	for _, kv := range rec.Values {
		w, has := want[kv.Key]
		if !has || math.Float64bits(w) != math.Float64bits(kv.Value) {
			t.Fatalf("%q=%v, encoding/json %v (present %v) for %q", kv.Key, kv.Value, w, has, line)
		}
	}
}

var seedLines = []string{
	`{"step": 12, "loss": 0.41, "lr": 0.001}`,
	`{"step": 1, "a": NaN, "b": Infinity, "c": -Infinity}`,
	`{"step": 3.0, "loss": 1e-05, "x": -2.5E+3, "y": 0.000123, "z": 123456789012345678901234567890}`,
	`{"o":{"s":"}{\"]["},"l":[{"x":"}"},[[]],{}],"step":5,"a":1,"t":true,"n":null}`,
	`{"step":1,"caf\u00e9":1,"a\"b":2,"\ud83d\ude00":4,"\ud800":5,"a\u0000":6}`,
	`{"step":1,"a":1,"a":"x","b":2,"b":3,"step":2}`,
	`{"step":1.5}`,
	`{"step":-1}`,
	`{"step":9223372036854775808}`,
	`{"step":1} x`,
	`{"step":"1"}`,
	`[1,2,3]`,
	`epoch 3/10 loss=0.2`,
	``,
	"{\"step\":1,\"a\xff\":1e400}",
	`{"step":0.1e1,"a":-0,"b":0e-999,"c":1E22,"d":4.9e-324}`,
}

func TestParseAgreesWithEncodingJSON(t *testing.T) {
	var p Parser
	for _, line := range seedLines {
		crossCheck(t, &p, []byte(line))
	}
	// Numbers in many spellings, each as a value and as a step.
	nums := []string{"0", "-0", "1", "-1", "10", "0.5", "1.0", "1e3", "1E+3", "1e-3", "123456789012345",
		"1234567890123456", "12345678901234567890", "0.1", "0.30000000000000004", "2.2250738585072014e-308",
		"1.7976931348623157e308", "1.8e308", "9007199254740993", "9007199254740993.0", "4.35e15", "1e22", "1e23",
		"0.000000000000000000000001", "100000000000000000000000", "9223372036854775807", "9223372036854775807.0",
		"9.223372036854775e18", "8.5e-17", "123.456e-7"}
	for _, n := range nums {
		crossCheck(t, &p, []byte(`{"step":7,"v":`+n+`}`))
		crossCheck(t, &p, []byte(`{"step":`+n+`}`))
	}
}

func FuzzParseLine(f *testing.F) {
	for _, line := range seedLines {
		f.Add([]byte(line))
	}
	for _, frag := range []string{"1.5e3", "-0.0", "12345678901234567890", `"a\u00e9"`, `[1,{"a":NaN}]`, `caf\u00e9`, `\ud83d\ude00`} {
		f.Add([]byte(frag))
	}
	var p Parser // reused on purpose: stale state must not leak between lines
	f.Fuzz(func(t *testing.T, in []byte) {
		// The input as a line, and spliced into a line as a value, as the
		// step and as a name, so that mutations of one token are checked
		// without the fuzzer having to build the object around it.
		crossCheck(t, &p, in)
		crossCheck(t, &p, slices.Concat([]byte(`{"step":1,"v":`), in, []byte(`,"w":2}`)))
		crossCheck(t, &p, slices.Concat([]byte(`{"step":`), in, []byte(`}`)))
		crossCheck(t, &p, slices.Concat([]byte(`{"step":1,"`), in, []byte(`":3}`)))
	})
}

func BenchmarkParse(b *testing.B) {
	line := []byte(`{"step": 123456, "loss": 0.41234567891234567, "val_loss": 0.5123, "acc": 0.912, "lr": 1e-05}`)
	var p Parser
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := p.Parse(line); !ok {
			b.Fatal("not parsed")
		}
	}
}

func TestParseLenient(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name    string
		line    string
		step    int64
		stepKey string
		want    []KV
	}{
		{"step as a string", `{"step": "15", "loss": 0.5}`, 15, "step", []KV{kv("loss", 0.5)}},
		{"values as strings", `{"step": 1, "loss": "0.25", "lr": " 1e-3 ", "name": "resnet"}`, 1, "step", []KV{kv("loss", 0.25), kv("lr", 0.001)}},
		{"python str of special floats", `{"step": 2, "a": "nan", "b": "inf", "c": "-Infinity", "d": "NaN"}`, 2, "step", []KV{kv("a", nan), kv("b", inf), kv("c", -inf), kv("d", nan)}},
		{"epoch as the step", `{"epoch": 3, "loss": 0.2, "val_loss": 0.3}`, 3, "epoch", []KV{kv("loss", 0.2), kv("val_loss", 0.3)}},
		{"global_step beats epoch", `{"epoch": 3, "global_step": 1200, "loss": 0.2}`, 1200, "global_step", []KV{kv("epoch", 3), kv("loss", 0.2)}},
		{"iteration", `{"iteration": 7, "loss": 1}`, 7, "iteration", []KV{kv("loss", 1)}},
		{"iter", `{"iter": "8", "loss": 1}`, 8, "iter", []KV{kv("loss", 1)}},
		{"step beats aliases", `{"iter": 5, "step": 9, "epoch": 1}`, 9, "step", []KV{kv("iter", 5), kv("epoch", 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Parser{Lenient: true}
			rec, ok := p.Parse([]byte(tt.line))
			require.True(t, ok)
			assert.Equal(t, tt.step, rec.Step)
			assert.Equal(t, tt.stepKey, rec.StepKey)
			assertKVs(t, tt.want, rec.Values)
		})
	}
	for _, line := range []string{
		`{"step": "x"}`, `{"step": "1.5"}`, `{"step": "-1"}`, `{"epoch": "one", "loss": 1}`,
		`{"step": -1, "epoch": 2}`, // a present but invalid step is not replaced by an alias
		`{"loss": "1"}`, `{"step": "\u0031"}`, `{"step": "+1"}`, `{"step": "0x10"}`,
	} {
		p := Parser{Lenient: true}
		_, ok := p.Parse([]byte(line))
		assert.False(t, ok, line)
	}
}

// lenientNumber is the oracle's reading of a raw JSON value as a lenient
// number: a JSON number, or a string holding one (see Parser.Lenient).
func lenientNumber(raw json.RawMessage) (tok string, ok bool) {
	if len(raw) == 0 {
		return "", false
	}
	if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
		return string(raw), true
	}
	if raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	s = strings.Trim(s, " ")
	w := strings.TrimLeft(s, "+-")
	if len(s)-len(w) <= 1 {
		switch strings.ToLower(w) {
		case "nan":
			return "NaN", true
		case "inf", "infinity":
			if strings.HasPrefix(s, "-") {
				return "-Inf", true
			}
			return "+Inf", true
		}
	}
	if s == "" || len(s) > 64 || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) || !json.Valid([]byte(s)) {
		return "", false
	}
	return s, true
}

func oracleStep(tok string) (int64, bool) {
	switch tok {
	case "NaN", "+Inf", "-Inf":
		return 0, false
	}
	if !strings.ContainsAny(tok, ".eE") {
		n, err := strconv.ParseInt(tok, 10, 64)
		return n, err == nil && n >= 0
	}
	f, _ := strconv.ParseFloat(tok, 64)
	if f >= 0 && f < (1<<63) && f == math.Trunc(f) {
		return int64(f), true
	}
	return 0, false
}

// crossCheckLenient holds a lenient Parse to encoding/json plus the
// documented lenient rules.
func crossCheckLenient(t *testing.T, p *Parser, line []byte) {
	t.Helper()
	rec, ok := p.Parse(line)
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || m == nil {
		if ok && !bytes.Contains(line, []byte("NaN")) && !bytes.Contains(line, []byte("Infinity")) {
			t.Fatalf("lenient Parse accepts %q, encoding/json does not", line)
		}
		return
	}
	stepKey := ""
	for _, k := range stepKeys {
		if _, has := m[k]; has {
			stepKey = k
			break
		}
	}
	var (
		step   int64
		stepOK bool
	)
	if stepKey != "" {
		if tok, isNum := lenientNumber(m[stepKey]); isNum {
			step, stepOK = oracleStep(tok)
		}
	}
	if ok != stepOK {
		t.Fatalf("lenient Parse ok=%v, oracle %v (step key %q) for %q", ok, stepOK, stepKey, line)
	}
	if !ok {
		return
	}
	if rec.Step != step || rec.StepKey != stepKey {
		t.Fatalf("step %d from %q, oracle %d from %q for %q", rec.Step, rec.StepKey, step, stepKey, line)
	}
	want := map[string]float64{}
	for k, raw := range m {
		if k == stepKey || k == "step" {
			continue
		}
		tok, isNum := lenientNumber(raw)
		if !isNum {
			continue
		}
		var f float64
		switch tok {
		case "NaN":
			f = math.NaN()
		case "+Inf":
			f = math.Inf(1)
		case "-Inf":
			f = math.Inf(-1)
		default:
			var err error
			f, err = strconv.ParseFloat(tok, 64)
			if err != nil && !isRangeErr(err) {
				panic(err)
			}
		}
		want[k] = f
	}
	if len(rec.Values) != len(want) {
		t.Fatalf("%d values %v, oracle %d %v for %q", len(rec.Values), rec.Values, len(want), want, line)
	}
	for _, kv := range rec.Values {
		w, has := want[kv.Key]
		if !has || math.Float64bits(w) != math.Float64bits(kv.Value) {
			if has && math.IsNaN(w) && math.IsNaN(kv.Value) {
				continue
			}
			t.Fatalf("%q=%v, oracle %v (present %v) for %q", kv.Key, kv.Value, w, has, line)
		}
	}
}

func FuzzParseLenient(f *testing.F) {
	for _, line := range seedLines {
		f.Add([]byte(line))
	}
	for _, frag := range []string{`"15"`, `" 1e3 "`, `"nan"`, `"-Infinity"`, `"0x1"`, `"1\u0030"`, `12`} {
		f.Add([]byte(frag))
	}
	p := Parser{Lenient: true}
	f.Fuzz(func(t *testing.T, in []byte) {
		crossCheckLenient(t, &p, in)
		crossCheckLenient(t, &p, slices.Concat([]byte(`{"epoch":1,"v":`), in, []byte(`,"w":"2"}`)))
		crossCheckLenient(t, &p, slices.Concat([]byte(`{"iter":`), in, []byte(`}`)))
		crossCheckLenient(t, &p, slices.Concat([]byte(`{"step":`), in, []byte(`,"epoch":3}`)))
		crossCheckLenient(t, &p, slices.Concat([]byte(`{"global_step":1,"`), in, []byte(`":"3"}`)))
	})
}
