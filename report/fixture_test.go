package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func intp(i int) *int { return &i }

// curve returns n points of a noisy curve from a to b, deterministic per seed.
func curve(n int, a, b float64, seed uint64) ([]int64, []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	steps := make([]int64, n)
	vals := make([]float64, n)
	tau := float64(n)/5 + 1
	for i := range n {
		steps[i] = int64(i)
		vals[i] = b + (a-b)*math.Exp(-float64(i)/tau) + 0.01*rng.NormFloat64()*math.Abs(a-b)
	}
	return steps, vals
}

func metric(stage, key string, n int, a, b float64, seed uint64) Metric {
	s, v := curve(n, a, b, seed)
	return Metric{Stage: stage, Attempt: 1, Key: key, Steps: s, Values: v}
}

// demoRun is a succeeded digits-mlp run with curves in two stages.
func demoRun(id string, lr float64, seed uint64) Run {
	acc := 0.9 + 0.08*(1-math.Abs(math.Log10(lr)+2.5)/2)
	return Run{
		ID: id, Template: "digits-mlp", TemplateVersion: "1.0", TemplateSource: "bundled",
		State:  "succeeded",
		Params: []Param{{"epochs", 30.0}, {"hidden", 128.0}, {"lr", lr}, {"optimizer", "adam"}},
		Seed:   int64(seed), Executor: "local", Fingerprint: "sha256:9f2c1e0b7a55",
		Objective:  Objective{Metric: "val_acc", Goal: "max"},
		Provenance: []Item{{"Code", "sha256:1b2c3d (bundled digits-mlp)"}, {"Host", "lab-ws-03"}},
		Created:    t0, Started: t0.Add(time.Second), Finished: t0.Add(47 * time.Second),
		Stages: []Stage{
			{Name: "preprocess", State: "succeeded", Attempts: 1, MaxAttempts: 1, ExitCodes: []int{0}, Duration: 2 * time.Second},
			{Name: "train", State: "succeeded", Attempts: 1, MaxAttempts: 3, ExitCodes: []int{0}, Duration: 38 * time.Second},
			{Name: "validate", State: "succeeded", Attempts: 1, MaxAttempts: 1, ExitCodes: []int{0}, Duration: 4 * time.Second},
		},
		Metrics: []Metric{
			metric("train", "loss", 300, 2.3, 0.08, seed),
			metric("train", "lr", 300, lr, lr, seed+1),
			metric("validate", "val_acc", 30, 0.1, acc, seed+2),
			metric("validate", "val_loss", 30, 2.3, 0.12, seed+3),
		},
		GPUs: []GPUUsage{gpuUsage(0, "NVIDIA RTX A6000", false, t0.Add(time.Second), 4, seed)},
	}
}

// failedRun failed in train after retries, with a log tail.
func failedRun() Run {
	r := demoRun("20261129-101500-fa11ed", 0.5, 9)
	r.State, r.Error = "failed", "stage train failed: exit code 1 after 3 attempts"
	r.Stages[1] = Stage{Name: "train", State: "failed", Attempts: 3, MaxAttempts: 3, ExitCodes: []int{1, 1, 1}, Duration: 12 * time.Second, Reason: "exit code 1"}
	r.Stages[2] = Stage{Name: "validate", State: "cancelled", MaxAttempts: 1, Reason: "skipped: stage train failed"}
	r.Metrics = []Metric{metric("train", "loss", 40, 2.3, 9, 3)}
	r.Metrics[0].Values[39] = math.NaN()
	r.Anomalies = []Anomaly{{At: t0.Add(10 * time.Second), Stage: "train", Kind: "nan_loss", Message: "loss became NaN at step 39", Action: "stopped the attempt"}}
	r.Logs = []LogTail{{Stage: "train", Attempt: 3, Lines: []string{
		"epoch 4 step 39 loss=nan",
		"Traceback (most recent call last):",
		`  File "train.py", line 88, in <module>`,
		"    raise FloatingPointError(\"loss is NaN\")",
		"FloatingPointError: loss is NaN",
	}}}
	return r
}

// comparison returns n demo runs with different learning rates.
func comparison(n int) *Report {
	rep := &Report{Generated: t0.Add(time.Hour)}
	for i := range n {
		lr := math.Pow(10, -4+3*float64(i)/float64(max(n-1, 1)))
		rep.Runs = append(rep.Runs, demoRun(fmt.Sprintf("20261129-10%02d%02d-%06x", i/60, i%60, i), lr, uint64(i+1)))
	}
	return rep
}

// gpuUsage is one GPU's record over minutes of a run: utilisation around
// 70 %, the run's memory growing to 5120 MiB of 49140, warming up.
func gpuUsage(index int, model string, simulated bool, from time.Time, minutes int, seed uint64) GPUUsage {
	rng := rand.New(rand.NewPCG(seed, 11))
	g := GPUUsage{Index: index, Model: model, Simulated: simulated, UUID: fmt.Sprintf("GPU-%08x-0000-4000-8000-000000000001", seed),
		Stages: []string{"train"}, From: from, To: from.Add(time.Duration(minutes) * time.Minute),
		TotalMemMiB: 49140, PowerLimitW: 300, Samples: 60 * minutes, MeanUtil: math.NaN(), PeakUtil: math.NaN()}
	var util, mem, temp, power acc
	for i := range minutes {
		p := GPUPoint{At: from.Truncate(time.Minute).Add(time.Duration(i) * time.Minute),
			UtilPct: 70 + 5*rng.NormFloat64(), MemMiB: 5120 * float64(i+1) / float64(minutes),
			TempC: 55 + 5*float64(i), Power: 220 + 10*rng.NormFloat64()}
		g.Curve = append(g.Curve, p)
		util.add(p.UtilPct)
		mem.add(p.MemMiB)
		temp.add(p.TempC)
		power.add(p.Power)
	}
	g.MeanUtil, g.PeakUtil = util.mean(), util.peak
	g.MeanMemMiB, g.PeakMemMiB = mem.mean(), mem.peak
	g.MeanTempC, g.PeakTempC = temp.mean(), temp.peak
	g.MeanPowerW, g.PeakPowerW = power.mean(), power.peak
	return g
}

type acc struct {
	sum, peak float64
	n         int
}

func (a *acc) add(v float64) {
	if a.n == 0 || v > a.peak {
		a.peak = v
	}
	a.sum += v
	a.n++
}

func (a acc) mean() float64 { return a.sum / float64(a.n) }
