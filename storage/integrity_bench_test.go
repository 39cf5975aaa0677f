package storage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkArchiveChecks measures what an owner adds to its start (a
// quick_check and, once a day, a backup) and what `niuma doctor` costs
// (integrity_check), side by side on one archive of 1,000,000 metric
// points (10 keys of 100,000 steps). It reports the archive's size, so a
// reader can scale the figures to theirs.
func BenchmarkArchiveChecks(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	db, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateRun(ctx, Run{ID: "bench"}, []Stage{{Name: "train"}}); err != nil {
		b.Fatal(err)
	}
	keys := []string{"loss", "acc", "lr", "grad_norm", "val_loss", "val_acc", "tokens_per_s", "mem", "epoch", "time"}
	wall := time.Now()
	pts := make([]MetricPoint, 0, 10000)
	for step := int64(0); step < 100_000; step++ {
		for _, k := range keys {
			pts = append(pts, MetricPoint{RunID: "bench", Stage: "train", Attempt: 1, Key: k, Step: step, Value: float64(step), Wall: wall})
		}
		if len(pts) == cap(pts) {
			if err := db.InsertMetricPoints(ctx, pts); err != nil {
				b.Fatal(err)
			}
			pts = pts[:0]
		}
	}
	if _, err := db.SQL().ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	mib := float64(st.Size()) / (1 << 20)
	backups := b.TempDir()
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"quick_check", func() error { _, err := db.QuickCheck(ctx); return err }},
		{"integrity_check", func() error { _, err := db.IntegrityCheck(ctx); return err }},
		{"backup", func() error { _, err := db.Backup(ctx, backups); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(mib, "archive-MiB")
		})
	}
}
