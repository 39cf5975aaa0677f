package sentinel_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"niuma/sentinel"
)

// The labelled evaluation corpus. Every case is a sequence of ticks (a
// metric step, a telemetry sample, or a queue observation); onset says at
// which tick each injected fault begins, tolerate lists kinds that may
// truly fire as a side effect of the fault (a 17× jump on the way to
// divergence is also a loss spike) and count neither way.
type evalCase struct {
	name, source string
	domain       sentinel.Scope
	ticks        []tick
	onset        map[sentinel.Kind]int
	tolerate     map[sentinel.Kind]bool
}

type tick struct {
	points []sentinel.Point
	sample *sentinel.GPUSample
	queue  *sentinel.QueueObservation
	now    time.Time // zero: no Tick call (real recordings have no wall times)
}

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5e4717e1)) }

func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// curve is a healthy training run: a power-law loss decay (it keeps
// improving, never flat) with multiplicative noise and a gradient norm that
// follows it.
type curve struct {
	a, tau, alpha, sigma, g0, gsig, interval float64
}

func randCurve(r *rand.Rand) curve {
	return curve{a: uniform(r, 0.5, 3), tau: uniform(r, 10, 100), alpha: uniform(r, 0.4, 1),
		sigma: uniform(r, 0.01, 0.12), g0: uniform(r, 0.5, 5), gsig: uniform(r, 0.1, 0.3),
		interval: uniform(r, 0.5, 10)}
}

func (c curve) loss(r *rand.Rand, t int) float64 {
	return c.a * math.Pow(1+float64(t)/c.tau, -c.alpha) * math.Exp(c.sigma*r.NormFloat64())
}

func (c curve) grad(r *rand.Rand, t int) float64 {
	return c.g0 * math.Pow(1+float64(t)/c.tau, -c.alpha/2) * math.Exp(c.gsig*r.NormFloat64())
}

// metricCase builds a generated metric case. fault edits the loss and the
// gradient norm at step t (after the healthy values are drawn); stopAt > 0
// ends the metric lines there while the ticks go on (a hang).
func metricCase(name string, seed uint64, n int, fault func(r *rand.Rand, t int, loss, grad *float64), stopAt, extra int) evalCase {
	r := newRand(seed)
	c := randCurve(r)
	pause := 50 + r.IntN(n-100) // one healthy pause (evaluation, checkpoint) of 8 intervals
	ec := evalCase{name: name, source: "generated", domain: sentinel.ScopeRun, onset: map[sentinel.Kind]int{}}
	wall := epoch
	for t := 1; t <= n+extra; t++ {
		gap := c.interval * uniform(r, 0.8, 1.2)
		if t == pause {
			gap *= 8
		}
		wall = wall.Add(time.Duration(gap * float64(time.Second)))
		tk := tick{now: wall}
		if t <= n && (stopAt == 0 || t < stopAt) {
			loss, grad := c.loss(r, t), c.grad(r, t)
			if fault != nil {
				fault(r, t, &loss, &grad)
			}
			p := sentinel.Point{Run: "r", Stage: "train", Attempt: 1, Step: int64(t), Wall: wall}
			for _, kv := range []struct {
				k string
				v float64
			}{{"loss", loss}, {"grad_norm", grad}, {"lr", 0.001}} {
				p.Key, p.Value = kv.k, kv.v
				tk.points = append(tk.points, p)
			}
			if t%25 == 0 { // validation: overfits slowly, never judged as divergence
				p.Key, p.Value = "val_loss", loss*(1+0.002*float64(t))
				tk.points = append(tk.points, p)
			}
		}
		ec.ticks = append(ec.ticks, tk)
	}
	return ec
}

func generatedMetricCases(base uint64, each int) []evalCase {
	var out []evalCase
	for i := range each * 2 {
		s := base + uint64(i)
		r := newRand(s + 7)
		out = append(out, metricCase(fmt.Sprintf("healthy-%d", i), s, 300+r.IntN(500), nil, 0, 0))
	}
	for i := range each {
		s := base + 100 + uint64(i)
		r := newRand(s + 7)
		n := 300 + r.IntN(500)
		on := n/3 + r.IntN(n/3)

		// Spike: 1-3 steps at 4-30× the loss, then back.
		width, factor := 1+r.IntN(3), uniform(r, 4, 30)
		c := metricCase(fmt.Sprintf("spike-%d", i), s, n, func(_ *rand.Rand, t int, loss, _ *float64) {
			if t >= on && t < on+width {
				*loss *= factor
			}
		}, 0, 0)
		c.onset[sentinel.LossSpike] = on - 1 // ticks are 0-based, steps 1-based
		out = append(out, c)

		// Divergence: from onset the loss grows by 2-15% per step.
		rate := uniform(r, 0.02, 0.15)
		c = metricCase(fmt.Sprintf("divergence-%d", i), s+1000, n, func(_ *rand.Rand, t int, loss, _ *float64) {
			if t >= on {
				*loss *= math.Exp(rate * float64(t-on+1))
			}
		}, 0, 0)
		c.onset[sentinel.Divergence] = on - 1
		c.tolerate = map[sentinel.Kind]bool{sentinel.LossSpike: true}
		out = append(out, c)

		// NaN: the loss (or, one case in three, the gradient norm) turns
		// NaN or Inf at onset and stays so.
		bad := []float64{math.NaN(), math.Inf(1)}[r.IntN(2)]
		inGrad := i%3 == 0
		c = metricCase(fmt.Sprintf("nan-%d", i), s+2000, n, func(_ *rand.Rand, t int, loss, grad *float64) {
			if t >= on {
				if inGrad {
					*grad = bad
				} else {
					*loss = bad
				}
			}
		}, 0, 0)
		c.onset[sentinel.NaN] = on - 1
		out = append(out, c)

		// Gradient explosion: the norm jumps 15-1000× and stays high.
		gf := math.Exp(uniform(r, math.Log(15), math.Log(1000)))
		c = metricCase(fmt.Sprintf("grad-%d", i), s+3000, n, func(_ *rand.Rand, t int, _, grad *float64) {
			if t >= on {
				*grad *= gf
			}
		}, 0, 0)
		c.onset[sentinel.GradExplosion] = on - 1
		out = append(out, c)

		// Plateau: from onset the loss stops improving (same noise).
		var level float64
		c = metricCase(fmt.Sprintf("plateau-%d", i), s+4000, on+250, nil, 0, 0)
		cv := randCurve(newRand(s + 4000))
		level = cv.a * math.Pow(1+float64(on)/cv.tau, -cv.alpha)
		rr := newRand(s + 4001)
		for ti := on - 1; ti < len(c.ticks); ti++ {
			for pi := range c.ticks[ti].points {
				if c.ticks[ti].points[pi].Key == "loss" {
					c.ticks[ti].points[pi].Value = level * math.Exp(cv.sigma*rr.NormFloat64())
				}
			}
		}
		c.onset[sentinel.Plateau] = on - 1
		out = append(out, c)

		// Hang: the metric lines stop at onset; the process lives on.
		c = metricCase(fmt.Sprintf("hang-%d", i), s+5000, n, nil, on, 400)
		c.onset[sentinel.Hang] = on - 1
		out = append(out, c)
	}
	return out
}

// gpuRun is a healthy training run's telemetry on one GPU: high utilisation
// with an evaluation dip and a short checkpoint pause, memory that ramps up,
// then stays put apart from one allocator jump, a steady temperature.
type gpuRun struct {
	util, mem, jumpAt, jump, temp, slowdown float64
	dipAt, pauseAt                          int
}

func telemetryCase(name string, seed uint64, n int, fault func(r *rand.Rand, i int, g *sentinel.GPUSample)) evalCase {
	r := newRand(seed)
	g := gpuRun{util: uniform(r, 70, 97), mem: uniform(r, 4000, 70000), jump: uniform(r, 500, 4000),
		temp: uniform(r, 50, 78), slowdown: uniform(r, 87, 95)}
	g.jumpAt = float64(60 + r.IntN(n-120))
	g.dipAt, g.pauseAt = 50+r.IntN(n-100), 50+r.IntN(n-100)
	ec := evalCase{name: name, source: "generated", domain: sentinel.ScopeGPU, onset: map[sentinel.Kind]int{}}
	ecc := int64(r.IntN(3))
	for i := range n {
		u := min(100, max(0, g.util+4*r.NormFloat64()))
		if i >= g.dipAt && i < g.dipAt+15 {
			u = uniform(r, 15, 40) // evaluation on the GPU at lower load
		}
		if i >= g.pauseAt && i < g.pauseAt+4 {
			u = uniform(r, 0, 3) // a checkpoint write
		}
		m := g.mem * min(1, float64(i+1)/30)
		if float64(i) >= g.jumpAt {
			m += g.jump
		}
		m += 20 * r.NormFloat64()
		s := sentinel.GPUSample{UUID: "GPU-1", Time: epoch.Add(time.Duration(i) * time.Second), UtilPercent: u,
			MemUsedMiB: m + 500, MemTotalMiB: 81559, TempC: g.temp + 1.5*r.NormFloat64(), SlowdownTempC: g.slowdown,
			RunMemMiB: map[string]float64{"r": m}, Stage: map[string]string{"r": "train"}, ECCUncorrected: ecc}
		if fault != nil {
			fault(r, i, &s)
		}
		ecc = s.ECCUncorrected
		ec.ticks = append(ec.ticks, tick{sample: &s})
	}
	return ec
}

func generatedTelemetryCases(base uint64, each int) []evalCase {
	var out []evalCase
	for i := range each * 2 {
		s := base + uint64(i)
		out = append(out, telemetryCase(fmt.Sprintf("gpu-healthy-%d", i), s, 600+newRand(s+7).IntN(600), nil))
	}
	for i := range each {
		s := base + 100 + uint64(i)
		r := newRand(s + 7)
		n := 500 + r.IntN(500)
		on := 100 + r.IntN(n-300)

		// Stall: every period samples, a run of near-zero utilisation.
		period := 4 + r.IntN(13)
		low := max(1, int(math.Round(float64(period)*uniform(r, 0.25, 0.6))))
		c := telemetryCase(fmt.Sprintf("stall-%d", i), s, n, func(r *rand.Rand, i int, g *sentinel.GPUSample) {
			if i >= on && (i-on)%period < low {
				g.UtilPercent = uniform(r, 0, 5)
			}
		})
		c.onset[sentinel.DataStall] = on
		out = append(out, c)

		// Leak: from onset the run's memory grows by 1-30 MiB/s, in the
		// caching allocator's 20 MiB segments.
		rate := math.Exp(uniform(r, 0, math.Log(30)))
		c = telemetryCase(fmt.Sprintf("leak-%d", i), s+1000, n, func(_ *rand.Rand, i int, g *sentinel.GPUSample) {
			if i >= on {
				add := 20 * math.Floor(rate*float64(i-on+1)/20)
				g.RunMemMiB["r"] += add
				g.MemUsedMiB += add
			}
		})
		c.onset[sentinel.MemoryLeak] = on
		out = append(out, c)

		// Overheating: from onset (a fan fails, say) the temperature climbs
		// 0.2-1 °C per sample to 1-3 °C above the slowdown threshold; half
		// the cases also set the thermal slowdown bit once above it. The
		// label is the fault's onset, the first sample of the climb, not the
		// moment the detector's margin is reached: the delay includes the
		// time the GPU takes to get hot.
		climb, top := uniform(r, 0.2, 1), uniform(r, 1, 3)
		throttle := i%2 == 0
		c = telemetryCase(fmt.Sprintf("hot-%d", i), s+2000, n, func(r *rand.Rand, i int, g *sentinel.GPUSample) {
			if i >= on {
				g.TempC = min(g.TempC+climb*float64(i-on+1), g.SlowdownTempC+top) + 0.5*r.NormFloat64()
				if throttle && g.TempC > g.SlowdownTempC {
					g.Throttle |= sentinel.ThrottleSWThermalSlowdown
				}
			}
		})
		c.onset[sentinel.Overheating] = on
		out = append(out, c)

		// Idle: from onset the run holds its memory at 0% for 15 minutes.
		c = telemetryCase(fmt.Sprintf("idle-%d", i), s+3000, on+900, func(r *rand.Rand, i int, g *sentinel.GPUSample) {
			if i >= on {
				g.UtilPercent = uniform(r, 0, 1)
			}
		})
		c.onset[sentinel.IdleGPU] = on
		out = append(out, c)

		// Health: an XID (79, 48 or 94) or a new uncorrectable ECC error.
		xid := []int{79, 48, 94}[r.IntN(3)]
		useECC := i%2 == 0
		c = telemetryCase(fmt.Sprintf("health-%d", i), s+4000, n, func(_ *rand.Rand, i int, g *sentinel.GPUSample) {
			if i == on {
				if useECC {
					g.ECCUncorrected++
				} else {
					g.XIDs = []int{xid}
				}
			}
		})
		c.onset[sentinel.GPUHealth] = on
		out = append(out, c)
	}
	return out
}

// generatedQueueCases: a stage observed every 30 s while it waits behind
// other runs on a busy machine, where a run ahead of it leaves every few
// minutes (exponential gaps, a mean of 2-10 minutes per case, so a healthy
// queue can stand still for half an hour now and then). Three kinds of
// case, the label being the injected fault's onset:
//   - healthy: the queue moves until the stage is placed (no label);
//   - the queue stops: from a random moment in the wait, the run that holds
//     the GPU never ends (a hung run, a forgotten notebook) and no one
//     leaves; onset is the first observation after the stop;
//   - it can never fit: the stage asks for more than any GPU has (the
//     shepherd's code too_big); onset is its first observation.
func generatedQueueCases(base uint64, each int) []evalCase {
	var out []evalCase
	for i := range each * 2 {
		r := newRand(base + uint64(i))
		kind := "healthy"
		switch {
		case i < each/2:
			kind = "never-fits"
		case i < each:
			kind = "stops"
		}
		mean := uniform(r, 2, 10) // minutes between departures
		ahead := r.IntN(9)
		since := epoch.Add(-time.Duration(r.IntN(600)) * time.Second)
		stop := time.Duration(-1)
		if kind == "stops" {
			stop = time.Duration(uniform(r, 0, 40) * float64(time.Minute))
		}
		c := evalCase{name: fmt.Sprintf("queue-%s-%d", kind, i), source: "generated", domain: sentinel.ScopeQueue,
			onset: map[sentinel.Kind]int{}}
		next := time.Duration(r.ExpFloat64() * mean * float64(time.Minute)) // the next departure
		end := time.Duration(uniform(r, 60, 120) * float64(time.Minute))    // a stuck case is watched this long
		for k := 0; ; k++ {
			at := time.Duration(k) * 30 * time.Second
			for kind != "never-fits" && (stop < 0 || next < stop) && next <= at {
				if ahead == 0 {
					break
				}
				ahead--
				next += time.Duration(r.ExpFloat64() * mean * float64(time.Minute))
			}
			if kind != "never-fits" && ahead == 0 && (stop < 0 || next < stop) && next <= at {
				break // its GPU freed: placed
			}
			if kind == "healthy" && at > 6*time.Hour {
				break
			}
			if kind != "healthy" && at > end+max(stop, 0) {
				break
			}
			q := sentinel.QueueObservation{Run: "r", Stage: "train", WaitingSince: since, Ahead: ahead, NeedMiB: 40000,
				LargestFreeMiB: 12000, Code: "gpu_memory",
				Reason: fmt.Sprintf("needs 1×39 GiB; largest free is 12 GiB on GPU 0; %d runs ahead", ahead)}
			if kind == "never-fits" {
				q.NeedMiB, q.LargestFreeMiB, q.Code = 100000, 81920, "never_fits"
				q.Reason = "needs 1×98 GiB; this machine can never hold it (1 usable GPU(s), at most 80 GiB each)"
			}
			if _, ok := c.onset[sentinel.QueueStuck]; !ok && (kind == "never-fits" || kind == "stops" && at >= stop) {
				c.onset[sentinel.QueueStuck] = k
			}
			c.ticks = append(c.ticks, tick{queue: &q, now: since.Add(at)})
		}
		out = append(out, c)
	}
	return out
}

// parseLine reads one metrics line as Python's json.dumps writes it (NaN
// and Infinity as bare words); ok is false for log lines.
func parseLine(line string) (step int64, kv map[string]float64, ok bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
		return 0, nil, false
	}
	kv = map[string]float64{}
	for _, part := range strings.Split(line[1:len(line)-1], ",") {
		k, v, found := strings.Cut(part, ":")
		if !found {
			return 0, nil, false
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		kv[strings.Trim(strings.TrimSpace(k), `"`)] = f
	}
	st, has := kv["step"]
	delete(kv, "step")
	return int64(st), kv, has
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open corpus file: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// realCases loads testdata/real: the digits-mlp demo's train stage
// (healthy, lr=1.0 sgd diverging, NIUMA_DEMO_INJECT_NAN) and the fault
// trainer's metrics and telemetry (healthy, loader sleep, leak, hang,
// plateau, spike), recorded by testdata/gen. Labels come from the
// recordings themselves: the first non-finite value, and the fault the
// trainer injected, at the step its "fault:" line (or, for the first
// recordings, its name) says.
func realCases(t testing.TB) []evalCase {
	files, err := filepath.Glob(filepath.Join("testdata", "real", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no real recordings in testdata/real (run testdata/gen/record_*.sh): %v", err)
	}
	sort.Strings(files)
	var out []evalCase
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		if strings.HasSuffix(name, ".telemetry") {
			out = append(out, realTelemetry(t, path, strings.TrimSuffix(name, ".telemetry")))
			continue
		}
		out = append(out, realMetrics(t, path, name))
	}
	return out
}

// fault is what faults.py says it injected (its "fault:" log line).
type fault struct {
	Mode  string `json:"mode"`
	Onset int64  `json:"onset"`
	Width int64  `json:"width"`
}

func realMetrics(t testing.TB, path, name string) evalCase {
	c := evalCase{name: name, source: "real", domain: sentinel.ScopeRun, onset: map[sentinel.Kind]int{},
		tolerate: map[sentinel.Kind]bool{}}
	var f fault
	var end time.Time // the process lived until then (its telemetry's last sample)
	lines := readLines(t, path)
	for _, line := range lines {
		if rest, ok := strings.CutPrefix(line, "fault: "); ok {
			if err := json.Unmarshal([]byte(rest), &f); err != nil {
				t.Fatalf("%s: fault line: %v", path, err)
			}
		}
	}
	if f.Mode != "" {
		tel := strings.TrimSuffix(path, ".jsonl") + ".telemetry.jsonl"
		if tl := readLines(t, tel); len(tl) > 0 {
			if _, kv, ok := parseLine(tl[len(tl)-1]); ok {
				end = epoch.Add(time.Duration(kv["t"] * float64(time.Second)))
			}
		}
	}
	var last time.Time
	for _, line := range lines {
		step, kv, ok := parseLine(line)
		if !ok {
			continue
		}
		var wall time.Time
		if tv, has := kv["t"]; has {
			wall = epoch.Add(time.Duration(tv * float64(time.Second)))
			delete(kv, "t")
			// The engine ticks the sentinel every second while the process
			// lives: the ticks of a silent stretch.
			for at := last.Add(time.Second); !last.IsZero() && at.Before(wall); at = at.Add(time.Second) {
				if f.Mode == "hang" && step == f.Onset {
					if _, seen := c.onset[sentinel.Hang]; !seen {
						c.onset[sentinel.Hang] = len(c.ticks)
					}
				}
				c.ticks = append(c.ticks, tick{now: at})
			}
			last = wall
		}
		keys := make([]string, 0, len(kv))
		for k := range kv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		tk := tick{now: wall}
		for _, k := range keys {
			v := kv[k]
			if _, seen := c.onset[sentinel.NaN]; !seen && (math.IsNaN(v) || math.IsInf(v, 0)) {
				c.onset[sentinel.NaN] = len(c.ticks)
			}
			tk.points = append(tk.points, sentinel.Point{Run: "r", Stage: "train", Attempt: 1, Key: k, Step: step, Value: v, Wall: wall})
		}
		if step == f.Onset {
			switch f.Mode {
			case "plateau":
				c.onset[sentinel.Plateau] = len(c.ticks)
			case "spike":
				// A corrupt batch: the loss jumps, and the gradients with it;
				// the step taken on it may throw training off for a while.
				c.onset[sentinel.LossSpike] = len(c.ticks)
				c.tolerate[sentinel.GradExplosion] = true
				c.tolerate[sentinel.Divergence] = true
			}
		}
		c.ticks = append(c.ticks, tk)
	}
	for at := last.Add(time.Second); !last.IsZero() && at.Before(end); at = at.Add(time.Second) {
		c.ticks = append(c.ticks, tick{now: at})
	}
	if strings.Contains(name, "diverge") {
		// lr=1.0 with SGD: the loss jumps 15-70× in the first epoch and
		// keeps rising by orders of magnitude until it overflows. Onset
		// is epoch 2; the jump is also a spike and an exploding gradient,
		// and a loss that never comes back below where it started makes no
		// progress.
		c.onset[sentinel.Divergence] = 1
		c.tolerate[sentinel.LossSpike] = true
		c.tolerate[sentinel.GradExplosion] = true
		c.tolerate[sentinel.NoProgress] = true
	}
	return c
}

func realTelemetry(t testing.TB, path, name string) evalCase {
	c := evalCase{name: name + ".telemetry", source: "real", domain: sentinel.ScopeGPU, onset: map[sentinel.Kind]int{}}
	for _, line := range readLines(t, path) {
		step, kv, ok := parseLine(line)
		if !ok {
			continue
		}
		s := sentinel.GPUSample{UUID: "CPU-standin", Time: epoch.Add(time.Duration(kv["t"] * float64(time.Second))),
			UtilPercent: kv["util"], MemUsedMiB: kv["mem_mib"], TempC: math.NaN(),
			RunMemMiB: map[string]float64{"r": kv["mem_mib"]}, ECCUncorrected: -1}
		// record_faults.sh starts the loader sleep and the leak at step 100.
		if step >= 100 {
			switch {
			case strings.Contains(name, "loader-sleep"):
				if _, ok := c.onset[sentinel.DataStall]; !ok {
					c.onset[sentinel.DataStall] = len(c.ticks)
				}
			case strings.Contains(name, "leak"):
				if _, ok := c.onset[sentinel.MemoryLeak]; !ok {
					c.onset[sentinel.MemoryLeak] = len(c.ticks)
				}
			}
		}
		c.ticks = append(c.ticks, tick{sample: &s})
	}
	return c
}
