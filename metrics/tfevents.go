package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TensorBoard event files (…tfevents…) are TFRecord files: a sequence of
// records, each framed as
//
//	uint64 length (little endian)
//	uint32 masked CRC-32C of the 8 length bytes
//	length bytes of data (one serialized tensorflow.Event)
//	uint32 masked CRC-32C of the data
//
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 and CRC-32C is the
// Castagnoli polynomial. The protobuf messages are decoded by hand with
// protowire: only the fields that carry scalars are read, so no generated
// TensorFlow code is needed.

// Record framing sizes.
const (
	tfHeaderLen  = 12 // length + its CRC
	tfFooterLen  = 4  // CRC of the data
	tfMaxRecord  = 64 << 20
	tfMaskDelta  = 0xa282ead8
	pluginScalar = "scalars"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + tfMaskDelta
}

// Errors of the TFRecord framing.
var (
	// errShortRecord: the buffer ends inside a record. While the writer is
	// alive this is a record still being written; wait for more bytes.
	errShortRecord = errors.New("record is incomplete")
	// ErrCorruptLength means a record's length does not match its CRC (or is
	// absurd): the framing is lost and the rest of the file cannot be read.
	ErrCorruptLength = errors.New("tfrecord length fails its CRC: the rest of the file is unreadable")
	// ErrCorruptData means a record's data does not match its CRC: that
	// record is skipped, the records after it are still read.
	ErrCorruptData = errors.New("tfrecord data fails its CRC: record skipped")
)

// nextRecord reads the record at the front of b. n is the number of bytes
// it spans (also for ErrCorruptData, so the caller can skip it).
func nextRecord(b []byte) (data []byte, n int, err error) {
	if len(b) < tfHeaderLen {
		return nil, 0, errShortRecord
	}
	if binary.LittleEndian.Uint32(b[8:12]) != maskedCRC(b[:8]) {
		return nil, 0, ErrCorruptLength
	}
	length := binary.LittleEndian.Uint64(b[:8])
	if length > tfMaxRecord {
		return nil, 0, ErrCorruptLength
	}
	n = tfHeaderLen + int(length) + tfFooterLen
	if len(b) < n {
		return nil, 0, errShortRecord
	}
	data = b[tfHeaderLen : tfHeaderLen+int(length)]
	if binary.LittleEndian.Uint32(b[n-tfFooterLen:n]) != maskedCRC(data) {
		return nil, n, ErrCorruptData
	}
	return data, n, nil
}

// AppendTFRecord appends data framed as one TFRecord to dst. It is what a
// TensorBoard writer does; Niuma uses it in tests and fixtures.
func AppendTFRecord(dst, data []byte) []byte {
	var h [tfHeaderLen]byte
	binary.LittleEndian.PutUint64(h[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(h[8:], maskedCRC(h[:8]))
	dst = append(dst, h[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}

// Scalar is one scalar summary value read from an event file.
type Scalar struct {
	Tag   string
	Step  int64
	Wall  time.Time // the event's wall_time
	Value float64
}

// EventDecoder decodes serialized tensorflow.Event messages into scalars.
// It remembers which plugin each tag belongs to, because TensorBoard writes
// a tag's SummaryMetadata only with its first value: a tensor value whose
// tag was declared by another plugin (text, histograms, …) is not a scalar.
// The zero value is ready to use; it is not safe for concurrent use.
type EventDecoder struct {
	plugin    map[string]string // tag → plugin name, for tags that declared one
	tags      map[string]string // interned tags: a steady stream allocates none
	summaries [][]byte          // reused by Decode
}

// intern returns a string equal to b, shared by every value of that tag.
func (d *EventDecoder) intern(b []byte) string {
	if s, ok := d.tags[string(b)]; ok {
		return s
	}
	s := string(b)
	if d.tags == nil {
		d.tags = map[string]string{}
	}
	if len(d.tags) < maxInternKeys {
		d.tags[s] = s
	}
	return s
}

// Decode appends the scalars of one Event to dst. A message that is not a
// valid Event returns an error and appends nothing.
//
// Fields read: Event.wall_time=1 (double), step=2 (int64), summary=5;
// Summary.value=1; Value.tag=1, simple_value=2 (float), tensor=8,
// metadata=9 (SummaryMetadata.plugin_data=1 → PluginData.plugin_name=1);
// TensorProto.dtype=1, tensor_shape=2, tensor_content=4, float_val=5,
// double_val=6, int_val=7, int64_val=10, half_val=13. Everything else is
// skipped.
func (d *EventDecoder) Decode(dst []Scalar, ev []byte) ([]Scalar, error) {
	var wall float64
	var step int64
	summaries := d.summaries[:0]
	defer func() { d.summaries = summaries[:0] }()
	err := eachField(ev, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			wall = math.Float64frombits(x)
		case num == 2 && typ == protowire.VarintType:
			step = int64(x)
		case num == 5 && typ == protowire.BytesType:
			summaries = append(summaries, v)
		}
		return nil
	})
	if err != nil {
		return dst, fmt.Errorf("decode event: %w", err)
	}
	start := len(dst)
	w := wallTime(wall)
	for _, s := range summaries {
		err := eachField(s, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != 1 || typ != protowire.BytesType {
				return nil
			}
			tag, val, ok, err := d.value(v)
			if err != nil {
				return err
			}
			if ok {
				dst = append(dst, Scalar{Tag: tag, Step: step, Wall: w, Value: val})
			}
			return nil
		})
		if err != nil {
			return dst[:start], fmt.Errorf("decode summary: %w", err)
		}
	}
	return dst, nil
}

func wallTime(sec float64) time.Time {
	if sec <= 0 || math.IsNaN(sec) || math.IsInf(sec, 0) || sec > 1e11 {
		return time.Time{}
	}
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(frac*1e9))
}

// value decodes one Summary.Value; ok is false when it holds no scalar.
func (d *EventDecoder) value(b []byte) (tag string, val float64, ok bool, err error) {
	var tensor []byte
	var hasSimple, hasTensor bool
	var plugin string
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			tag = d.intern(v)
		case num == 2 && typ == protowire.Fixed32Type:
			val, hasSimple = float64(math.Float32frombits(uint32(x))), true
		case num == 8 && typ == protowire.BytesType:
			tensor, hasTensor = v, true
		case num == 9 && typ == protowire.BytesType:
			plugin = pluginName(v)
		}
		return nil
	})
	if err != nil || tag == "" {
		return "", 0, false, err
	}
	if plugin != "" {
		if d.plugin == nil {
			d.plugin = map[string]string{}
		}
		if len(d.plugin) < maxInternKeys || d.plugin[tag] != "" {
			d.plugin[tag] = plugin
		}
	}
	if hasSimple {
		return tag, val, true, nil
	}
	if !hasTensor {
		return "", 0, false, nil
	}
	if p := d.plugin[tag]; p != "" && p != pluginScalar {
		return "", 0, false, nil
	}
	val, ok = tensorScalar(tensor)
	return tag, val, ok, nil
}

// pluginName reads SummaryMetadata.plugin_data.plugin_name.
func pluginName(meta []byte) string {
	var name string
	_ = eachField(meta, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 1 && typ == protowire.BytesType {
			_ = eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == 1 && typ == protowire.BytesType {
					name = string(v)
				}
				return nil
			})
		}
		return nil
	})
	return name
}

// TensorFlow DataType values that can hold a scalar metric.
const (
	dtFloat    = 1
	dtDouble   = 2
	dtInt32    = 3
	dtInt64    = 9
	dtBfloat16 = 14
	dtHalf     = 19
)

// tensorScalar reads a TensorProto holding exactly one number.
func tensorScalar(b []byte) (float64, bool) {
	var dtype uint64
	var content []byte
	var vals []float64 // from the typed repeated fields
	dims := 0
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case 1:
			dtype = x
		case 2: // TensorShapeProto: dim=2 repeated; a scalar has none
			_ = eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, _ uint64) error {
				if num == 2 {
					dims++
				}
				return nil
			})
		case 4:
			content = v
		case 5, 6, 7, 10, 13:
			vals = appendRepeated(vals, num, typ, v, x)
		}
		return nil
	})
	if err != nil || dims > 1 {
		return 0, false
	}
	if content != nil {
		switch {
		case dtype == dtFloat && len(content) == 4:
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(content))), true
		case dtype == dtDouble && len(content) == 8:
			return math.Float64frombits(binary.LittleEndian.Uint64(content)), true
		case dtype == dtInt32 && len(content) == 4:
			return float64(int32(binary.LittleEndian.Uint32(content))), true
		case dtype == dtInt64 && len(content) == 8:
			return float64(int64(binary.LittleEndian.Uint64(content))), true
		case dtype == dtHalf && len(content) == 2:
			return halfToFloat(binary.LittleEndian.Uint16(content)), true
		case dtype == dtBfloat16 && len(content) == 2:
			return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(content)) << 16)), true
		}
		return 0, false
	}
	switch dtype {
	case dtFloat, dtDouble, dtInt32, dtInt64, dtHalf, dtBfloat16:
	default:
		return 0, false
	}
	if len(vals) != 1 {
		return 0, false
	}
	return vals[0], true
}

// appendRepeated appends the numbers of a TensorProto repeated field, packed
// or not. half_val (13) holds float16 bits in int32s.
func appendRepeated(dst []float64, num protowire.Number, typ protowire.Type, v []byte, x uint64) []float64 {
	conv := func(x uint64) float64 {
		switch num {
		case 5:
			return float64(math.Float32frombits(uint32(x)))
		case 6:
			return math.Float64frombits(x)
		case 7:
			return float64(int32(x))
		case 10:
			return float64(int64(x))
		default: // 13
			return halfToFloat(uint16(x))
		}
	}
	if typ != protowire.BytesType {
		return append(dst, conv(x))
	}
	for len(v) > 0 {
		var x uint64
		var n int
		switch num {
		case 5:
			var y uint32
			y, n = protowire.ConsumeFixed32(v)
			x = uint64(y)
		case 6:
			x, n = protowire.ConsumeFixed64(v)
		default:
			x, n = protowire.ConsumeVarint(v)
		}
		if n < 0 {
			return dst
		}
		dst = append(dst, conv(x))
		v = v[n:]
	}
	return dst
}

// halfToFloat converts IEEE 754 binary16 bits.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

// eachField calls fn for every field of a protobuf message. For varint,
// fixed32 and fixed64 fields x holds the value; for length-delimited ones v
// holds the bytes. Groups are skipped.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// EventFileReader reads the scalars of one event file incrementally: feed it
// the bytes as they are appended (Feed) and it returns the scalars of every
// complete record. A record cut short at the end is kept for the next Feed
// (the writer is still writing it); End says whether one was left over.
//
// A record whose data fails its CRC is skipped; one whose length fails its
// CRC ends the reading of the file (nothing after it can be framed). Both are
// reported once per file through the error of Feed: the first problem is
// returned, later ones are silent, and the scalars read are returned with it.
type EventFileReader struct {
	dec      EventDecoder
	buf      []byte
	off      int64 // file offset of buf[0]
	reported bool
	dead     bool // the framing is lost
}

// Consumed is the file offset just past the last complete record: where a
// reader started afresh would begin.
func (r *EventFileReader) Consumed() int64 { return r.off }

// Offset is the file offset of the next byte the reader expects.
func (r *EventFileReader) Offset() int64 { return r.off + int64(len(r.buf)) }

// Feed takes the next bytes of the file and appends the scalars of the
// records they complete to dst.
func (r *EventFileReader) Feed(dst []Scalar, p []byte) ([]Scalar, error) {
	if r.dead {
		r.off += int64(len(p))
		return dst, nil
	}
	r.buf = append(r.buf, p...)
	var report error
	i := 0
	for i < len(r.buf) {
		data, n, err := nextRecord(r.buf[i:])
		if errors.Is(err, errShortRecord) {
			break
		}
		if errors.Is(err, ErrCorruptLength) {
			r.dead = true
			report = r.report(fmt.Errorf("at offset %d: %w", r.off+int64(i), err), report)
			i = len(r.buf)
			break
		}
		if err == nil {
			var derr error
			dst, derr = r.dec.Decode(dst, data)
			if derr != nil {
				report = r.report(fmt.Errorf("at offset %d: %w", r.off+int64(i), derr), report)
			}
		} else {
			report = r.report(fmt.Errorf("at offset %d: %w", r.off+int64(i), err), report)
		}
		i += n
	}
	r.off += int64(i)
	r.buf = r.buf[:copy(r.buf, r.buf[i:])]
	return dst, report
}

func (r *EventFileReader) report(err, prev error) error {
	if r.reported {
		return prev
	}
	r.reported = true
	return err
}

// Pending is the number of bytes of an incomplete last record held back.
// Once the writer has exited, a non-zero Pending is a truncated file.
func (r *EventFileReader) Pending() int {
	if r.dead {
		return 0
	}
	return len(r.buf)
}

// ReadEventFile reads the scalars of a complete event file held in b. A
// truncated last record is ignored (a writer killed mid-record leaves one);
// the first corruption found is returned with the scalars that could be read.
func ReadEventFile(b []byte) ([]Scalar, error) {
	var r EventFileReader
	return r.Feed(nil, b)
}
