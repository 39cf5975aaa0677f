package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestScratchAB(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "bench.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	db.CreateRun(ctx, Run{ID: "bench"}, []Stage{{Name: "train"}})
	keys := []string{"loss", "acc", "lr", "grad_norm", "val_loss", "val_acc", "tokens_per_s", "mem", "epoch", "time"}
	pts := make([]MetricPoint, 10000)
	wall := time.Now()
	step := int64(0)
	var cpu [2]time.Duration
	var wl [2]time.Duration
	for round := 0; round < 60; round++ {
		v := round % 2
		for i := range pts {
			if i%len(keys) == 0 {
				step++
			}
			pts[i] = MetricPoint{RunID: "bench", Stage: "train", Attempt: 1, Key: keys[i%len(keys)], Step: step, Value: float64(step) * 0.001, Wall: wall}
		}
		c0, w0 := processCPU(), time.Now()
		if err := db.InsertMetricPoints(ctx, pts); err != nil {
			t.Fatal(err)
		}
		cpu[v] += processCPU() - c0
		wl[v] += time.Since(w0)
	}
	for v, name := range []string{"a", "b"} {
		t.Logf("%s: %.0f rows/cpu-s  %.0f rows/s", name, 300000/cpu[v].Seconds(), 300000/wl[v].Seconds())
	}
}
