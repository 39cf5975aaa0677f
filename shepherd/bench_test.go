package shepherd_test

import (
	"testing"

	"niuma/shepherd"
	"niuma/shepherd/sim"
)

// BenchmarkPass is one scheduling pass over 1,000 queued runs on 64 GPUs
// (sim.QueueState), with a wait reason in words for every run that waits
// (what the engine asks for). Target: under 5 ms.
func BenchmarkPass(b *testing.B) {
	for _, name := range shepherd.Policies {
		b.Run(name, func(b *testing.B) {
			p, _ := shepherd.ByName(name)
			st := sim.QueueState(1000, 64)
			for b.Loop() {
				shepherd.Schedule(p, st)
			}
		})
	}
}

// BenchmarkPassTerse is the same pass without wait reasons (the
// simulator's hot path), on a reused Scheduler.
func BenchmarkPassTerse(b *testing.B) {
	for _, name := range shepherd.Policies {
		b.Run(name, func(b *testing.B) {
			p, _ := shepherd.ByName(name)
			st := sim.QueueState(1000, 64)
			st.Terse = true
			sc := shepherd.NewScheduler(p)
			for b.Loop() {
				sc.Schedule(st)
			}
		})
	}
}
