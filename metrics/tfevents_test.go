package metrics

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// Fixture builders: they write the protobuf fields TensorBoard writers
// write, so that the reader is tested against the wire format rather than
// against itself.

func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func tbEvent(wall float64, step int64, values ...[]byte) []byte {
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wall))
	ev = protowire.AppendTag(ev, 2, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	var sum []byte
	for _, v := range values {
		sum = bytesField(sum, 1, v)
	}
	return bytesField(ev, 5, sum)
}

// fileVersionEvent is the first record of every event file.
func fileVersionEvent() []byte {
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(1.7e9))
	return bytesField(ev, 3, []byte("brain.Event:2"))
}

func simpleValue(tag string, v float32) []byte {
	b := bytesField(nil, 1, []byte(tag))
	b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(v))
}

func pluginMeta(name string) []byte {
	return bytesField(nil, 1, bytesField(nil, 1, []byte(name)))
}

// tensorValue is a Summary.Value with a tensor; plugin "" writes no metadata.
func tensorValue(tag, plugin string, tensor []byte) []byte {
	b := bytesField(nil, 1, []byte(tag))
	if plugin != "" {
		b = bytesField(b, 9, pluginMeta(plugin))
	}
	return bytesField(b, 8, tensor)
}

func tensor(dtype uint64, fields ...func([]byte) []byte) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, dtype)
	b = bytesField(b, 2, nil) // scalar shape: no dims
	for _, f := range fields {
		b = f(b)
	}
	return b
}

func content(c []byte) func([]byte) []byte {
	return func(b []byte) []byte { return bytesField(b, 4, c) }
}

func packedFloats(vs ...float32) func([]byte) []byte {
	return func(b []byte) []byte {
		var p []byte
		for _, v := range vs {
			p = protowire.AppendFixed32(p, math.Float32bits(v))
		}
		return bytesField(b, 5, p)
	}
}

func packedDoubles(vs ...float64) func([]byte) []byte {
	return func(b []byte) []byte {
		var p []byte
		for _, v := range vs {
			p = protowire.AppendFixed64(p, math.Float64bits(v))
		}
		return bytesField(b, 6, p)
	}
}

func le32(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
func le64(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }

func eventFile(events ...[]byte) []byte {
	var b []byte
	for _, e := range events {
		b = AppendTFRecord(b, e)
	}
	return b
}

func TestMaskedCRCMatchesTensorFlow(t *testing.T) {
	// The header of TensorFlow's first record of an events file: length 24
	// (the file_version event "brain.Event:2" with its wall time), as
	// written by tf.summary and by torch.utils.tensorboard.
	h := binary.LittleEndian.AppendUint64(nil, 24)
	c := crc32Raw(h)
	assert.Equal(t, ((c>>15)|(c<<17))+0xa282ead8, maskedCRC(h))
	// CRC-32C check value of "123456789" (RFC 3720 B.4): Castagnoli, not IEEE.
	assert.Equal(t, uint32(0xe3069283), crc32Raw([]byte("123456789")))
}

func crc32Raw(b []byte) uint32 {
	// Bitwise CRC-32C, independent of hash/crc32's tables.
	c := ^uint32(0)
	for _, x := range b {
		c ^= uint32(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0x82f63b78
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}

func TestReadEventFileScalars(t *testing.T) {
	wall := 1.7e9 + 0.25
	tests := []struct {
		name  string
		value []byte
		want  []float64 // nil: no scalar
	}{
		{"simple_value", simpleValue("loss", 0.5), []float64{0.5}},
		{"tensor float content", tensorValue("acc", "scalars", tensor(dtFloat, content(le32(0.75)))), []float64{0.75}},
		{"tensor double content", tensorValue("acc", "scalars", tensor(dtDouble, content(le64(0.125)))), []float64{0.125}},
		{"tensor float_val", tensorValue("acc", "scalars", tensor(dtFloat, packedFloats(2.5))), []float64{2.5}},
		{"tensor double_val", tensorValue("acc", "", tensor(dtDouble, packedDoubles(-3))), []float64{-3}},
		{"tensor int64 content", tensorValue("n", "scalars", tensor(dtInt64, content(binary.LittleEndian.AppendUint64(nil, 42)))), []float64{42}},
		{"tensor half content", tensorValue("h", "scalars", tensor(dtHalf, content([]byte{0x00, 0x3c}))), []float64{1}},
		{"text plugin is not a scalar", tensorValue("notes", "text", tensor(dtFloat, content(le32(1)))), nil},
		{"histogram has many values", tensorValue("w", "", tensor(dtDouble, packedDoubles(1, 2, 3))), nil},
		{"string tensor", tensorValue("s", "", tensor(7, content([]byte("abcd")))), nil},
		{"value without tag", protowire.AppendFixed32(protowire.AppendTag(nil, 2, protowire.Fixed32Type), 0), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadEventFile(eventFile(fileVersionEvent(), tbEvent(wall, 7, tt.value)))
			require.NoError(t, err)
			var vals []float64
			for _, s := range got {
				vals = append(vals, s.Value)
				assert.Equal(t, int64(7), s.Step)
				assert.Equal(t, time.Unix(1_700_000_000, 250_000_000), s.Wall)
			}
			assert.Equal(t, tt.want, vals)
		})
	}
}

func TestPluginMetadataOnlyOnFirstValue(t *testing.T) {
	// TensorBoard writes a tag's plugin only with its first value: the
	// second "notes" value, bare, must still be known as text.
	f := eventFile(
		tbEvent(1, 1, tensorValue("notes", "text", tensor(dtFloat, content(le32(1)))),
			tensorValue("acc", "scalars", tensor(dtFloat, content(le32(0.5))))),
		tbEvent(2, 2, tensorValue("notes", "", tensor(dtFloat, content(le32(2)))),
			tensorValue("acc", "", tensor(dtFloat, content(le32(0.625))))),
	)
	got, err := ReadEventFile(f)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, Scalar{Tag: "acc", Step: 1, Wall: time.Unix(1, 0), Value: 0.5}, got[0])
	assert.Equal(t, Scalar{Tag: "acc", Step: 2, Wall: time.Unix(2, 0), Value: 0.625}, got[1])
}

func TestEventFileReaderTruncatedTail(t *testing.T) {
	f := eventFile(tbEvent(1, 1, simpleValue("loss", 1)), tbEvent(2, 2, simpleValue("loss", 2)))
	cut := f[:len(f)-3] // the writer is in the middle of the second record

	var r EventFileReader
	got, err := r.Feed(nil, cut)
	require.NoError(t, err, "a record being written is not an error")
	require.Len(t, got, 1)
	assert.Equal(t, len(cut)-len(eventFile(tbEvent(1, 1, simpleValue("loss", 1)))), r.Pending())

	// The writer finishes the record.
	got, err = r.Feed(got[:0], f[len(cut):])
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, 2.0, got[0].Value)
	assert.Zero(t, r.Pending())
	assert.Equal(t, int64(len(f)), r.Offset())

	// A file whose writer died mid-record: the complete records are read.
	got, err = ReadEventFile(cut)
	require.NoError(t, err)
	assert.Len(t, got, 1)
}

func TestEventFileReaderByteByByte(t *testing.T) {
	f := eventFile(fileVersionEvent(), tbEvent(1, 1, simpleValue("a", 1)),
		tbEvent(2, 2, simpleValue("a", 2), tensorValue("b", "scalars", tensor(dtFloat, content(le32(3))))))
	want, err := ReadEventFile(f)
	require.NoError(t, err)
	var r EventFileReader
	var got []Scalar
	for i := range f {
		got, err = r.Feed(got, f[i:i+1])
		require.NoError(t, err)
	}
	assert.Equal(t, want, got)
	assert.Len(t, got, 3)
}

func TestEventFileReaderCorruption(t *testing.T) {
	rec := func(step int64) []byte {
		return AppendTFRecord(nil, tbEvent(1, step, simpleValue("loss", float32(step))))
	}
	r1, r2, r3 := rec(1), rec(2), rec(3)
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		return c
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	tests := []struct {
		name    string
		file    []byte
		steps   []int64
		wantErr error
	}{
		{"data bit flipped: that record skipped", cat(r1, flip(r2, len(r2)-6), r3), []int64{1, 3}, ErrCorruptData},
		{"data CRC flipped: that record skipped", cat(r1, flip(r2, len(r2)-1), r3), []int64{1, 3}, ErrCorruptData},
		{"two corrupt records: reported once", cat(flip(r1, 13), flip(r2, 13), r3), []int64{3}, ErrCorruptData},
		{"length CRC flipped: rest unreadable", cat(r1, flip(r2, 9), r3), []int64{1}, ErrCorruptLength},
		{"length flipped: rest unreadable", cat(r1, r2, flip(r3, 2)), []int64{1, 2}, ErrCorruptLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r EventFileReader
			got, err := r.Feed(nil, tt.file)
			require.ErrorIs(t, err, tt.wantErr)
			var steps []int64
			for _, s := range got {
				steps = append(steps, s.Step)
			}
			assert.Equal(t, tt.steps, steps)
			// Later problems in the same file are not reported again.
			_, err = r.Feed(nil, flip(r1, 13))
			assert.NoError(t, err)
		})
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	var d EventDecoder
	_, err := d.Decode(nil, []byte{0x0a, 0xff}) // bytes field longer than the message
	require.Error(t, err)
	// A truncated record inside a file is reported, not skipped silently.
	_, err = ReadEventFile(AppendTFRecord(nil, []byte{0x0a, 0xff}))
	assert.ErrorContains(t, err, "decode event")
}

func FuzzEventFileReader(f *testing.F) {
	f.Add(eventFile(fileVersionEvent(), tbEvent(1, 1, simpleValue("a", 1))), 5)
	f.Add(eventFile(tbEvent(2, 3, tensorValue("b", "scalars", tensor(dtFloat, content(le32(3)))),
		tensorValue("c", "text", tensor(dtDouble, packedDoubles(1))))), 17)
	f.Add([]byte{1, 2, 3}, 1)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		whole, werr := ReadEventFile(b)
		if split < 0 {
			split = -split
		}
		if len(b) > 0 {
			split %= len(b) + 1
		} else {
			split = 0
		}
		// Feeding the file in two pieces, at any point, reads the same.
		var r EventFileReader
		got, err1 := r.Feed(nil, b[:split])
		got, err2 := r.Feed(got, b[split:])
		if len(whole) != len(got) {
			t.Fatalf("whole read %d scalars, split at %d read %d", len(whole), split, len(got))
		}
		for i := range whole {
			w, g := whole[i], got[i]
			if w.Tag != g.Tag || w.Step != g.Step || !w.Wall.Equal(g.Wall) ||
				math.Float64bits(w.Value) != math.Float64bits(g.Value) {
				t.Fatalf("scalar %d: whole %+v, split %+v", i, w, g)
			}
		}
		if (werr != nil) != (err1 != nil || err2 != nil) {
			t.Fatalf("whole err %v, split errs %v %v", werr, err1, err2)
		}
		if r.Offset() != int64(len(b)) {
			t.Fatalf("offset %d after %d bytes", r.Offset(), len(b))
		}
	})
}
