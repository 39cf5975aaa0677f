package sim

import (
	"os"
	"testing"

	"niuma/shepherd"
)

// BenchmarkReplayDay replays the committed day of Philly (3.7k jobs) at load
// 0.8 on 8×80 GiB under each policy.
func BenchmarkReplayDay(b *testing.B) {
	f, err := os.Open("testdata/philly-2017-10-20.csv")
	if err != nil {
		b.Fatal(err)
	}
	jobs, err := LoadPhilly(f, 8, 1)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	jobs = Rescale(jobs, 0.8, 8)
	for _, name := range shepherd.Policies {
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Policy, _ = shepherd.ByName(name)
			for b.Loop() {
				Replay(jobs, cfg)
			}
		})
	}
}

// BenchmarkReplayPhilly is the speed target: the whole 82k-job Philly trace
// at load 0.8 on 8×80 GiB, loading included (needs -traces).
func BenchmarkReplayPhilly(b *testing.B) {
	if *traces == "" {
		b.Skip("set -traces to replay the full trace")
	}
	for _, name := range shepherd.Policies {
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Policy, _ = shepherd.ByName(name)
			for b.Loop() {
				f, err := os.Open(*traces + "/philly.csv")
				if err != nil {
					b.Fatal(err)
				}
				jobs, err := LoadPhilly(f, 8, 1)
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				Replay(Rescale(jobs, 0.8, 8), cfg)
			}
		})
	}
}
