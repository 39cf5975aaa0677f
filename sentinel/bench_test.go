package sentinel_test

import (
	"testing"
	"time"

	"niuma/sentinel"
)

// BenchmarkObserve measures the metric detectors' throughput on one core:
// a healthy run's stream (loss, grad_norm, lr and, every 25 steps,
// val_loss), one point per call as the engine feeds them. The target is
// 100,000 points per second.
func BenchmarkObserve(b *testing.B) {
	c := metricCase("bench", 42, 2000, nil, 0, 0)
	var pts []sentinel.Point
	for _, tk := range c.ticks {
		pts = append(pts, tk.points...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	s := sentinel.New(sentinel.DefaultConfig())
	attempt := 0
	for i := 0; i < b.N; i++ {
		if i%len(pts) == 0 {
			// Each pass is a new attempt with fresh detector state, so the
			// detectors never go quiet after firing once.
			s.EndAttempt("r", "train", attempt)
			attempt++
		}
		p := pts[i%len(pts)]
		p.Attempt = attempt
		s.Observe(p)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkObserveGPU measures the telemetry detectors: one GPU, one run.
func BenchmarkObserveGPU(b *testing.B) {
	c := telemetryCase("bench", 42, 1000, nil)
	s := sentinel.New(sentinel.DefaultConfig())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g := *c.ticks[i%len(c.ticks)].sample
		g.Time = g.Time.Add(time.Duration(i/len(c.ticks)) * time.Hour)
		s.ObserveGPU(g)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}
