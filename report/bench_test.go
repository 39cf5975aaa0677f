package report

import (
	"fmt"
	"testing"
)

// bigComparison is the target case: 100 runs, each with 10
// metrics of 10,000 points (10 million points in all).
func bigComparison() *Report {
	rep := comparison(100)
	keys := []string{"loss", "val_loss", "val_acc", "lr", "grad_norm", "throughput", "gpu_mem", "top5", "wd", "tokens"}
	for i := range rep.Runs {
		ms := make([]Metric, len(keys))
		for k, key := range keys {
			ms[k] = metric("train", key, 10_000, 2.3, 0.1+0.01*float64(i%7), uint64(i*len(keys)+k))
		}
		rep.Runs[i].Metrics = ms
	}
	return rep
}

func BenchmarkComparison100x10x10k(b *testing.B) {
	rep := bigComparison()
	for _, f := range []struct {
		name string
		fn   func(*Report) ([]byte, error)
	}{
		{"html", func(r *Report) ([]byte, error) { return HTML(r, Options{}) }},
		{"pdf", func(r *Report) ([]byte, error) { return PDF(r, Options{}) }},
		{"csv", CSV},
		{"json", JSON},
	} {
		b.Run(f.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				out, err := f.fn(rep)
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
			}
			b.ReportMetric(float64(size)/1e6, "MB")
		})
	}
}

func BenchmarkRunMillionPoints(b *testing.B) {
	r := demoRun("20261129-100000-b19b19", 0.01, 2)
	r.Metrics = []Metric{metric("train", "loss", 1_000_000, 3, 0.1, 5)}
	rep := &Report{Runs: []Run{r}}
	for _, f := range []string{"html", "pdf"} {
		b.Run(f, func(b *testing.B) {
			for b.Loop() {
				var err error
				if f == "html" {
					_, err = HTML(rep, Options{})
				} else {
					_, err = PDF(rep, Options{})
				}
				if err != nil {
					b.Fatal(fmt.Errorf("%s: %w", f, err))
				}
			}
		})
	}
}
