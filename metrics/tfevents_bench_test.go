package metrics

import "testing"

// BenchmarkReadEventFile reads an event file of 10,000 steps with two
// scalars each (one simple_value, one tensor), the shape of a long
// training run's log; b.SetBytes makes the result a read rate.
func BenchmarkReadEventFile(b *testing.B) {
	var events [][]byte
	for i := range 10000 {
		events = append(events, tbEvent(1.7e9+float64(i), int64(i), simpleValue("train/loss", float32(i)),
			tensorValue("train/acc", "scalars", tensor(dtFloat, content(le32(0.5))))))
	}
	f := eventFile(events...)
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	var r EventFileReader
	dst := make([]Scalar, 0, 20000)
	for b.Loop() {
		r = EventFileReader{}
		var err error
		dst, err = r.Feed(dst[:0], f)
		if err != nil || len(dst) != 20000 {
			b.Fatalf("%d scalars, %v", len(dst), err)
		}
	}
}
