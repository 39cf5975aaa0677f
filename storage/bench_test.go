package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkInsertMetricPoints measures the metrics hot path: batches of
// points (10 keys per step, as a training loop logs them) inserted with
// InsertMetricPoints into a run on a real file. It reports rows/s.
func BenchmarkInsertMetricPoints(b *testing.B) {
	for _, batch := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			if err := db.CreateRun(ctx, Run{ID: "bench"}, []Stage{{Name: "train"}}); err != nil {
				b.Fatal(err)
			}
			keys := []string{"loss", "acc", "lr", "grad_norm", "val_loss", "val_acc", "tokens_per_s", "mem", "epoch", "time"}
			pts := make([]MetricPoint, batch)
			wall := time.Now()
			step := int64(0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				for i := range pts {
					if i%len(keys) == 0 {
						step++
					}
					pts[i] = MetricPoint{RunID: "bench", Stage: "train", Attempt: 1, Key: keys[i%len(keys)],
						Step: step, Value: float64(step) * 0.001, Wall: wall}
				}
				b.StartTimer()
				if err := db.InsertMetricPoints(ctx, pts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
