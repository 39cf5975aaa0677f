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
// InsertMetricPoints into a run on a real file. It reports rows/s of wall
// time and, where it can measure it, rows per CPU-second of the whole
// process (SQLite's work included), which is steadier on a busy machine.
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
			// Filling the batch (a few ns a point) stays inside the timed
			// loop: stopping the timer for it would cost more than it hides.
			c0 := processCPU()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for i := range pts {
					if i%len(keys) == 0 {
						step++
					}
					pts[i] = MetricPoint{RunID: "bench", Stage: "train", Attempt: 1, Key: keys[i%len(keys)],
						Step: step, Value: float64(step) * 0.001, Wall: wall}
				}
				if err := db.InsertMetricPoints(ctx, pts); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu := processCPU() - c0
			rows := float64(batch) * float64(b.N)
			b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
			if cpu > 0 {
				b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
			}
		})
	}
}
