package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"niuma/storage"
)

// BenchmarkShow2MPoints is `niuma show` on a finished run with 2,000,000
// metric points (4 series of 500,000, as a long training run logs them),
// the whole command: opening the archive, the run, its stages, the metric
// table and the anomalies.
//
//   - summaries: what show does, reading the summaries kept on write;
//   - scan: what it did before, counting each series by reading its
//     points (storage's MetricSeries), for comparison;
//   - curve: what a run view reads to draw one of the 500,000-point
//     series: about 1,000 points with its extremes (MetricSeriesEnvelope).
func BenchmarkShow2MPoints(b *testing.B) {
	home := b.TempDir()
	b.Setenv("NIUMA_HOME", home)
	b.Setenv("NIUMA_BACKGROUND_ENGINE", "off")
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const id = "20261201-120000-bench1"
	now := time.Now()
	run := storage.Run{ID: id, Template: "bench", State: storage.RunSucceeded, CreatedAt: now, StartedAt: now, FinishedAt: now,
		Dir: filepath.Join(home, "runs", id), TemplateYAML: "name: bench\nobjective: {metric: val_loss, goal: min}\nstages:\n  - {name: train, command: [x]}\n"}
	if err := db.CreateRun(ctx, run, []storage.Stage{{RunID: id, Name: "train", State: storage.StageSucceeded, Attempts: 1}}); err != nil {
		b.Fatal(err)
	}
	const perSeries = 500_000
	keys := []string{"loss", "val_loss", "acc", "lr"}
	batch := make([]storage.MetricPoint, 0, 4096)
	for step := int64(0); step < perSeries; step++ {
		for i, k := range keys {
			batch = append(batch, storage.MetricPoint{RunID: id, Stage: "train", Attempt: 1, Key: k, Step: step,
				Value: float64(i) + 1/float64(step+1), Wall: now})
		}
		if len(batch) >= 4096 {
			if err := db.InsertMetricPoints(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := db.InsertMetricPoints(ctx, batch); err != nil {
		b.Fatal(err)
	}
	if n, err := db.CountMetricPoints(ctx, id); err != nil || n != 4*perSeries {
		b.Fatalf("%d points stored (%v)", n, err)
	}
	b.Run("summaries", func(b *testing.B) {
		for b.Loop() {
			if code := Main([]string{"show", id}, io.Discard, io.Discard); code != 0 {
				b.Fatalf("show exited %d", code)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			total := 0
			for _, k := range keys {
				pts, err := db.MetricSeries(ctx, id, "train", k)
				if err != nil {
					b.Fatal(err)
				}
				total += len(pts)
			}
			if total != 4*perSeries {
				b.Fatal(fmt.Sprint(total))
			}
		}
	})
	b.Run("curve", func(b *testing.B) {
		for b.Loop() {
			pts, err := db.MetricSeriesEnvelope(ctx, id, "train", "loss", 1000)
			if err != nil || len(pts) < 1000 {
				b.Fatalf("%d points (%v)", len(pts), err)
			}
		}
	})
	db.Close()
}
