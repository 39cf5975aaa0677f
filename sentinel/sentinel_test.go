package sentinel_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"niuma/sentinel"
)

func pt(key string, step int64, v float64) sentinel.Point {
	return sentinel.Point{Run: "r1", Stage: "train", Attempt: 1, Key: key, Step: step, Value: v,
		Wall: epoch.Add(time.Duration(step) * time.Second)}
}

// feed sends values of one key as steps 1..n and returns the kinds raised,
// with the step each was raised at.
func feed(s *sentinel.Sentinel, key string, vals []float64) map[sentinel.Kind]int64 {
	got := map[sentinel.Kind]int64{}
	for i, v := range vals {
		for _, a := range s.Observe(pt(key, int64(i+1), v)) {
			got[a.Kind] = a.Step
		}
	}
	return got
}

// decay is a smooth, healthy loss curve with a little deterministic wobble.
func decay(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 2 * math.Pow(1+float64(i)/20, -0.5) * (1 + 0.02*math.Sin(float64(i)*1.7))
	}
	return v
}

func TestMetricDetectors(t *testing.T) {
	withAt := func(v []float64, at int, f func(float64, int) float64) []float64 {
		out := append([]float64(nil), v...)
		for i := at; i < len(out); i++ {
			out[i] = f(out[i], i-at)
		}
		return out
	}
	tests := []struct {
		name string
		key  string
		vals []float64
		want map[sentinel.Kind]int64 // kind → step raised
	}{
		{"healthy loss raises nothing", "loss", decay(300), map[sentinel.Kind]int64{}},
		{"NaN at step 50 is raised at once", "loss", withAt(decay(100), 49, func(float64, int) float64 { return math.NaN() }),
			map[sentinel.Kind]int64{sentinel.NaN: 50}},
		{"+Inf in any metric is raised", "lr", withAt(decay(20), 9, func(float64, int) float64 { return math.Inf(1) }),
			map[sentinel.Kind]int64{sentinel.NaN: 10}},
		{"one 20x step is a spike, not divergence", "loss", withAt(decay(200), 99, func(v float64, k int) float64 {
			if k == 0 {
				return v * 20
			}
			return v
		}), map[sentinel.Kind]int64{sentinel.LossSpike: 100}},
		{"a sustained 5%/step rise is divergence", "loss", withAt(decay(200), 99, func(v float64, k int) float64 {
			return v * math.Exp(0.05*float64(k+1))
		}), map[sentinel.Kind]int64{sentinel.Divergence: 0}},
		{"a rising validation loss is overfitting, not divergence", "val_loss", withAt(decay(200), 99, func(v float64, k int) float64 {
			return v * math.Exp(0.1*float64(k+1))
		}), map[sentinel.Kind]int64{}},
		{"grad_norm jumping 50x is an explosion", "grad_norm", withAt(decay(100), 59, func(v float64, _ int) float64 { return v * 50 }),
			map[sentinel.Kind]int64{sentinel.GradExplosion: 60}},
		{"a flat objective for the patience is a plateau", "loss", withAt(decay(400), 99, func(float64, int) float64 { return 0.5 }),
			map[sentinel.Kind]int64{sentinel.Plateau: 0}}, // step checked below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := feed(sentinel.New(sentinel.Config{}), tt.key, tt.vals)
			for k, step := range tt.want {
				at, ok := got[k]
				if !ok {
					t.Errorf("%s not raised; got %v", k, got)
				} else if step != 0 && at != step {
					t.Errorf("%s raised at step %d, want %d", k, at, step)
				}
			}
			for k := range got {
				if _, ok := tt.want[k]; !ok {
					t.Errorf("unexpected %s at step %d", k, got[k])
				}
			}
		})
	}
}

func TestNaNAnomalyCarriesEvidenceAndFix(t *testing.T) {
	s := sentinel.New(sentinel.Config{})
	as := s.Observe(pt("loss", 7, math.NaN()))
	if len(as) != 1 {
		t.Fatalf("got %d anomalies, want 1", len(as))
	}
	a := as[0]
	if a.Severity != sentinel.Critical || a.Run != "r1" || a.Stage != "train" || a.Step != 7 {
		t.Errorf("anomaly = %+v", a)
	}
	if !strings.Contains(a.Fix, "learning rate") || !strings.Contains(a.Fix, "clipping") || !strings.Contains(a.Fix, "schedule") {
		t.Errorf("fix %q lacks the learning-rate advice", a.Fix)
	}
	if ev := a.Evidence.JSON(); !strings.Contains(ev, `"NaN"`) || !strings.Contains(ev, `"key":"loss"`) {
		t.Errorf("evidence JSON %s lacks the NaN value or the key", ev)
	}
	if again := s.Observe(pt("loss", 8, math.NaN())); len(again) != 0 {
		t.Errorf("the same stream raised NaN twice: %+v", again)
	}
}

func TestHangNeedsSilenceLongerThanTheLimit(t *testing.T) {
	s := sentinel.New(sentinel.Config{HangMin: time.Minute, HangFactor: 20})
	for i := int64(1); i <= 10; i++ {
		s.Observe(pt("loss", i, 1)) // one line per second
	}
	last := epoch.Add(10 * time.Second)
	if got := s.Tick(last.Add(59 * time.Second)); len(got) != 0 {
		t.Fatalf("hang after 59 s, limit is max(1 min, 20 × 1 s): %+v", got)
	}
	got := s.Tick(last.Add(61 * time.Second))
	if len(got) != 1 || got[0].Kind != sentinel.Hang || got[0].Step != 10 {
		t.Fatalf("got %+v, want one hang at step 10", got)
	}
	s2 := sentinel.New(sentinel.Config{HangMin: time.Minute})
	s2.Observe(pt("loss", 1, 1))
	s2.EndAttempt("r1", "train", 1)
	if got := s2.Tick(epoch.Add(time.Hour)); len(got) != 0 {
		t.Errorf("an ended attempt was reported hung: %+v", got)
	}
}

func gpuSample(i int, util, mem float64) sentinel.GPUSample {
	return sentinel.GPUSample{UUID: "GPU-a", Time: epoch.Add(time.Duration(i) * time.Second), UtilPercent: util,
		MemUsedMiB: mem, TempC: 60, SlowdownTempC: 90, RunMemMiB: map[string]float64{"r1": mem}, ECCUncorrected: 0}
}

func TestTelemetryDetectors(t *testing.T) {
	tests := []struct {
		name   string
		sample func(i int) sentinel.GPUSample
		n      int
		want   sentinel.Kind // "" = nothing
	}{
		{"steady training is healthy", func(i int) sentinel.GPUSample { return gpuSample(i, 95, 10000) }, 900, ""},
		{"one 2 GiB allocator jump is not a leak", func(i int) sentinel.GPUSample {
			m := 10000.0
			if i > 300 {
				m += 2048
			}
			return gpuSample(i, 95, m)
		}, 600, ""},
		{"5 MiB/s of steady growth is a leak", func(i int) sentinel.GPUSample { return gpuSample(i, 95, 10000+5*float64(i)) }, 200, sentinel.MemoryLeak},
		{"0% every 4th of 8 samples is a data stall", func(i int) sentinel.GPUSample {
			u := 95.0
			if i%8 < 3 {
				u = 1
			}
			return gpuSample(i, u, 10000)
		}, 200, sentinel.DataStall},
		{"dropping to 0% for good is idle, not a stall", func(i int) sentinel.GPUSample {
			u := 95.0
			if i >= 100 {
				u = 0
			}
			return gpuSample(i, u, 10000)
		}, 800, sentinel.IdleGPU},
		{"thermal slowdown is overheating", func(i int) sentinel.GPUSample {
			g := gpuSample(i, 95, 10000)
			if i == 50 {
				g.TempC, g.Throttle = 88, sentinel.ThrottleHWThermalSlowdown
			}
			return g
		}, 100, sentinel.Overheating},
		{"a new uncorrectable ECC error is a health event", func(i int) sentinel.GPUSample {
			g := gpuSample(i, 95, 10000)
			if i >= 50 {
				g.ECCUncorrected = 1
			}
			return g
		}, 100, sentinel.GPUHealth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sentinel.New(sentinel.Config{})
			var got []sentinel.Kind
			for i := range tt.n {
				for _, a := range s.ObserveGPU(tt.sample(i)) {
					got = append(got, a.Kind)
				}
			}
			if tt.want == "" && len(got) != 0 || tt.want != "" && (len(got) != 1 || got[0] != tt.want) {
				t.Errorf("got %v, want [%s]", got, tt.want)
			}
		})
	}
}

func TestXIDNamesTheError(t *testing.T) {
	g := gpuSample(0, 95, 1000)
	g.XIDs = []int{79}
	as := sentinel.New(sentinel.Config{}).ObserveGPU(g)
	if len(as) != 1 || as[0].Kind != sentinel.GPUHealth || !strings.Contains(as[0].Message, "fallen off the bus") {
		t.Fatalf("got %+v", as)
	}
}

func TestQueueStuckSaysWhatIsMissing(t *testing.T) {
	s := sentinel.New(sentinel.Config{QueueAfter: 30 * time.Minute})
	q := sentinel.QueueObservation{Run: "r1", Stage: "train", WaitingSince: epoch, Code: "gpu_memory",
		Reason: "needs 1×39 GiB; largest free is 12 GiB on GPU 0; first in line", NeedMiB: 40000, LargestFreeMiB: 12000, Ahead: 0}
	if got := s.ObserveQueue(q, epoch.Add(29*time.Minute)); len(got) != 0 {
		t.Fatalf("stuck after 29 min: %+v", got)
	}
	got := s.ObserveQueue(q, epoch.Add(31*time.Minute))
	if len(got) != 1 || !strings.Contains(got[0].Fix, "the stage needs 39 GiB per GPU and the largest free is 12 GiB") ||
		!strings.Contains(got[0].Message, q.Reason) {
		t.Fatalf("got %+v", got)
	}
	if again := s.ObserveQueue(q, epoch.Add(40*time.Minute)); len(again) != 0 {
		t.Errorf("reported twice: %+v", again)
	}
}

// A stage that waits with enough free memory (behind other runs, for a
// GPU kept for another) is not told memory is short, and the figures are
// never repeated in other units beside the shepherd's ("80 GiB … 0 MiB").
func TestQueueStuckWordingAgreesWithTheReason(t *testing.T) {
	s := sentinel.New(sentinel.Config{QueueAfter: 30 * time.Minute})
	q := sentinel.QueueObservation{Run: "r1", Stage: "train", WaitingSince: epoch, Code: "gpu_busy",
		Reason:  "needs 2×16 GiB on one NVLink group; largest free is 80 GiB on GPU 0; 1 of 2 fit now; first in line",
		NeedMiB: 16384, LargestFreeMiB: 81920, Ahead: 0}
	got := s.ObserveQueue(q, epoch.Add(31*time.Minute))
	if len(got) != 1 {
		t.Fatalf("got %+v", got)
	}
	a := got[0]
	want := "Stage train has waited in the queue for 31m0s: " + q.Reason + "."
	if a.Message != want {
		t.Errorf("message = %q\nwant      %q", a.Message, want)
	}
	if strings.Contains(a.Fix, "Not enough free GPU memory") || strings.Contains(a.Fix, "0 MiB") {
		t.Errorf("fix = %q: the memory is there", a.Fix)
	}
	if !strings.Contains(a.Fix, "taken by other runs") {
		t.Errorf("fix = %q", a.Fix)
	}
	if a.Evidence.Stats["largest_free_mib"] != 81920 || a.Evidence.Extra["code"] != "gpu_busy" {
		t.Errorf("evidence = %+v", a.Evidence)
	}
}

// A long queue that keeps moving is not stuck: the clock runs from the
// last time the stage moved up.
func TestQueueStuckCountsFromTheLastProgress(t *testing.T) {
	s := sentinel.New(sentinel.Config{QueueAfter: 30 * time.Minute})
	obs := func(ahead int, at time.Duration) []sentinel.Anomaly {
		return s.ObserveQueue(sentinel.QueueObservation{Run: "r1", Stage: "train", WaitingSince: epoch,
			Reason: "waits", NeedMiB: 1000, LargestFreeMiB: 0, Ahead: ahead}, epoch.Add(at))
	}
	for i, ahead := range []int{5, 4, 3, 2, 1} { // one run ahead leaves every 20 minutes
		if got := obs(ahead, time.Duration(i)*20*time.Minute); len(got) != 0 {
			t.Fatalf("reported at %d ahead although the queue moves: %+v", ahead, got)
		}
	}
	if got := obs(1, 100*time.Minute); len(got) != 0 { // 20 min without progress
		t.Fatalf("too early: %+v", got)
	}
	got := obs(1, 111*time.Minute) // 31 min without progress
	if len(got) != 1 || !strings.Contains(got[0].Message, "waited in the queue for 1h51m0s, without moving up for 31m0s") {
		t.Fatalf("got %+v", got)
	}
	// Without a count of runs ahead, the wait itself is the measure.
	s2 := sentinel.New(sentinel.Config{QueueAfter: 30 * time.Minute})
	q := sentinel.QueueObservation{Run: "r", Stage: "s", WaitingSince: epoch, Ahead: -1, LargestFreeMiB: -1}
	if got := s2.ObserveQueue(q, epoch.Add(31*time.Minute)); len(got) != 1 {
		t.Fatalf("unknown ahead: %+v", got)
	}
}

func TestThrottleFromNames(t *testing.T) {
	if got := sentinel.ThrottleFromNames([]string{"sw_power_cap", "hw_thermal_slowdown", "unknown"}); !got.Thermal() ||
		got != sentinel.ThrottleSWPowerCap|sentinel.ThrottleHWThermalSlowdown {
		t.Errorf("got %#x", got)
	}
	if sentinel.ThrottleFromNames([]string{"sw_power_cap"}).Thermal() {
		t.Error("a power cap is not thermal")
	}
}

// A stage that can never start here is stuck as soon as that is clear:
// waiting half an hour would change nothing.
func TestQueueStuckAtOnceWhenItCanNeverFit(t *testing.T) {
	s := sentinel.New(sentinel.Config{})
	q := sentinel.QueueObservation{Run: "r1", Stage: "train", WaitingSince: epoch, Code: "never_fits", Ahead: 0,
		Reason:  "needs 1×98 GiB; this machine can never hold it (1 usable GPU(s), at most 80 GiB each)",
		NeedMiB: 100000, LargestFreeMiB: 81920}
	if got := s.ObserveQueue(q, epoch.Add(time.Minute)); len(got) != 0 {
		t.Fatalf("after 1 min: %+v", got)
	}
	got := s.ObserveQueue(q, epoch.Add(2*time.Minute))
	if len(got) != 1 || !strings.Contains(got[0].Fix, "No GPU of this machine can ever hold it") {
		t.Fatalf("got %+v", got)
	}
}

// A loss thrown far back by a bad batch and climbing out again is making
// progress, not sitting on a plateau, even while it has not yet beaten the
// best it had before (a real recording, fault-spike-s1, showed this).
func TestPlateauNotWhileRecoveringFromASetback(t *testing.T) {
	s := sentinel.New(sentinel.Config{})
	loss := func(i int) float64 {
		switch {
		case i < 110:
			return 2 * math.Pow(1+float64(i)/10, -1)
		default: // thrown back to 2 at step 110, then learning again
			return 2 * math.Pow(1+float64(i-110)/15, -1)
		}
	}
	for i := range 400 {
		p := sentinel.Point{Run: "r", Stage: "train", Attempt: 1, Key: "loss", Step: int64(i), Value: loss(i)}
		for _, a := range s.Observe(p) {
			if a.Kind == sentinel.Plateau {
				t.Fatalf("plateau at step %d while the loss recovers: %s", i, a.Message)
			}
		}
	}
}
