package sentinel

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The troubleshooting knowledge: what each kind usually means and what to
// try, in the words the run view and `niuma show` print.
var fixes = map[Kind]string{
	NaN: "The learning rate is most likely too high: lower it (e.g. lr ×0.1), add gradient clipping " +
		"(e.g. clip_grad_norm_ at 1.0), use a learning-rate schedule with warm-up; check the data for NaN/Inf " +
		"and any log/division of values that can reach zero.",
	LossSpike: "A single bad batch or a too-large step: add gradient clipping, lower the learning rate or add " +
		"warm-up; look for corrupt or mislabelled examples around this step.",
	Divergence: "The learning rate is too high for this model and optimizer: lower it (e.g. lr ×0.1), add " +
		"gradient clipping and a schedule with warm-up; with SGD, lower the momentum or switch to Adam.",
	GradExplosion: "Clip gradients (e.g. clip_grad_norm_ at 1.0), lower the learning rate, add warm-up; " +
		"check normalisation layers and the weight initialisation.",
	NoProgress: "The model is not learning: if the loss blew up first, lower the learning rate (e.g. lr ×0.1) and " +
		"add warm-up and gradient clipping; if it never moved, the learning rate may be far too low (raise it ×10), " +
		"the units dead from the start (check the initialisation, a frozen model, a zero learning rate) or the " +
		"labels not matching the inputs (shuffled separately from them).",
	Plateau: "The objective stopped improving: stop early and keep the best checkpoint, or decay the learning " +
		"rate (ReduceLROnPlateau); if it plateaued high, the model may be too small or the learning rate too low.",
	Hang: "The process is alive but has reported nothing: look at its log for a deadlock (DataLoader workers, " +
		"NCCL collectives waiting on a peer, a blocked file system); stop it and retry if it stays silent.",
	Overheating: "The GPU is near its slowdown temperature and will clock down: check the fans and the airflow " +
		"around the machine, clean dust filters, lower the power limit (nvidia-smi -pl) or spread the work out.",
	MemoryLeak: "Something keeps references to tensors across steps: accumulate losses with loss.item() (or " +
		".detach()), do not keep outputs or graphs in lists, clear caches; check torch.cuda.memory_summary().",
	DataStall: "The data pipeline is the bottleneck (the GPU waits for batches): use more DataLoader workers " +
		"(num_workers), prefetching (prefetch_factor), pinned memory (pin_memory=True), persistent workers, and " +
		"faster storage (copy the data set to a local SSD or into memory).",
	IdleGPU: "The run holds the GPU without using it: if it waits for something (input, a lock, a peer), fix " +
		"that; otherwise stop it so the GPU goes back to the queue.",
	QueueStuck: "Lower its gpu_memory request (smaller batch, mixed precision, gradient checkpointing), wait for " +
		"or stop the runs that hold GPUs, or raise its priority.",
	CUDAOOM: "Lower the batch size (or use gradient accumulation), use mixed precision or gradient checkpointing, or ask " +
		"for a GPU with more memory; sentinel: {cuda_oom: {do: retry, set: {batch_size: \"/2\"}}} retries with half the batch.",
	GPUHealth: "The GPU reported a hardware or driver error: drain it (let running work finish, start nothing " +
		"new), look at `nvidia-smi -q` and the kernel log; uncorrectable ECC errors or a GPU off the bus need a " +
		"reset or a reboot, and a repeat needs the vendor.",
}

// blewUpFix is no progress's fix when the loss blew up before it settled
// no lower than where it started: the step was too large.
const blewUpFix = "The loss blew up and never came back below where it started: the learning rate is too high " +
	"for this model: lower it (e.g. lr ×0.1), add warm-up (a few hundred steps from a small learning rate) and " +
	"gradient clipping (e.g. clip_grad_norm_ at 1.0)."

// FixFor returns the suggested fix for a kind ("" for an unknown kind).
func FixFor(k Kind) string { return fixes[k] }

// SeedFix is the advice for results that do not reproduce (used where two
// runs with the same parameters and seed disagree).
const SeedFix = "Results not reproducible: fix every seed (random, numpy, torch, CUDA), use deterministic " +
	"algorithms (torch.use_deterministic_algorithms(True), cudnn.benchmark=False) and seed DataLoader workers."

// xidMeaning holds the XID codes worth a sentence of their own.
var xidMeaning = map[int]string{
	13:  "graphics engine exception (often an application bug, e.g. an out-of-bounds access)",
	31:  "GPU memory page fault (often an application bug)",
	43:  "GPU stopped processing (a kernel was killed)",
	45:  "preemptive cleanup after a previous error",
	48:  "double-bit ECC error",
	63:  "ECC page retirement or row remapping event",
	64:  "ECC page retirement or row remapping failure",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	119: "GSP RPC timeout",
	120: "GSP error",
}

func containsAny(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func g4(v float64) string { return fmt.Sprintf("%.4g", v) }

func (s *Sentinel) metricAnomaly(k Kind, sev Severity, p Point, ev Evidence, msg string) Anomaly {
	ev.Key, ev.Attempt = p.Key, p.Attempt
	return Anomaly{Kind: k, Severity: sev, Run: p.Run, Stage: p.Stage, Attempt: p.Attempt, At: p.Wall,
		Step: p.Step, Evidence: ev, Message: msg, Fix: fixes[k]}
}

func (s *Sentinel) nanAnomaly(p Point) Anomaly {
	ev := Evidence{FromStep: p.Step, ToStep: p.Step, Steps: []int64{p.Step}, Values: []Num{Num(p.Value)}}
	return s.metricAnomaly(NaN, Critical, p, ev,
		fmt.Sprintf("%s became %s at step %d: training has broken down numerically.", p.Key, Num(p.Value).String(), p.Step))
}

// String prints the number as the evidence shows it.
func (n Num) String() string {
	b, _ := n.MarshalJSON()
	return strings.Trim(string(b), `"`)
}

func (s *Sentinel) spikeAnomaly(st *stream, p Point, z, med float64) Anomaly {
	vals := st.logs.values(nil)
	steps := st.logSteps.values(nil)
	tail := min(5, len(vals))
	ev := Evidence{Stats: map[string]Num{"z": Num(z)}}
	for i := len(vals) - tail; i < len(vals); i++ {
		ev.Steps = append(ev.Steps, int64(steps[i]))
		ev.Values = append(ev.Values, Num(s.unlog(st, vals[i])))
	}
	ev.Steps = append(ev.Steps, p.Step)
	ev.Values = append(ev.Values, Num(p.Value))
	ev.FromStep, ev.ToStep = ev.Steps[0], p.Step
	base := s.unlog(st, med)
	ev.Stats["median"] = Num(base)
	return s.metricAnomaly(LossSpike, Warning, p, ev, fmt.Sprintf(
		"%s spiked to %s at step %d, %.1f× its recent median of %s (robust z = %.1f).",
		p.Key, g4(p.Value), p.Step, p.Value/base, g4(base), z))
}

func (s *Sentinel) unlog(st *stream, v float64) float64 {
	if st.raw {
		return v
	}
	return math.Exp(v)
}

func (s *Sentinel) divergenceAnomaly(st *stream, p Point) Anomaly {
	best := s.unlog(st, st.ref)
	ev := Evidence{FromStep: st.refStep, ToStep: p.Step,
		Steps:  []int64{st.refStep, p.Step},
		Values: []Num{Num(best), Num(p.Value)},
		Stats:  map[string]Num{"cusum": Num(st.cusum), "threshold": Num(s.cfg.DivH), "cusum_from_step": Num(st.cusumAt)}}
	ratio := ""
	if !st.raw {
		ratio = " (" + g4(p.Value/best) + "×)"
	}
	return s.metricAnomaly(Divergence, Critical, p, ev, fmt.Sprintf(
		"%s is diverging: it keeps rising, from its best level of %s at step %d to %s at step %d%s.",
		p.Key, g4(best), st.refStep, g4(p.Value), p.Step, ratio))
}

func (s *Sentinel) gradAnomaly(p Point, med float64, why string) Anomaly {
	ev := Evidence{FromStep: p.Step, ToStep: p.Step, Steps: []int64{p.Step}, Values: []Num{Num(p.Value)},
		Stats: map[string]Num{}}
	var msg string
	if why == "threshold" {
		ev.Stats["threshold"] = Num(s.cfg.GradMax)
		msg = fmt.Sprintf("%s reached %s at step %d, above the limit of %s: gradients are exploding.",
			p.Key, g4(p.Value), p.Step, g4(s.cfg.GradMax))
	} else {
		ev.Stats["median"] = Num(med)
		msg = fmt.Sprintf("%s jumped to %s at step %d, %.0f× its recent median of %s: gradients are exploding.",
			p.Key, g4(p.Value), p.Step, p.Value/med, g4(med))
	}
	return s.metricAnomaly(GradExplosion, Critical, p, ev, msg)
}

func (s *Sentinel) plateauAnomaly(st *stream, p Point, m float64) Anomaly {
	ev := Evidence{FromStep: st.bestStep, ToStep: p.Step, Steps: []int64{st.bestStep, p.Step},
		Values: []Num{Num(st.best), Num(m)},
		Stats:  map[string]Num{"patience": Num(s.cfg.PlateauPatience), "min_delta": Num(s.cfg.PlateauMinDelta)}}
	// The reference is the median where the objective last made real
	// progress, not its best: say what it did since, in its own direction.
	gain := (m - st.best) / math.Abs(st.best)
	if !st.maximize {
		gain = -gain
	}
	var msg string
	if gain > 0 && !math.IsInf(gain, 0) {
		msg = fmt.Sprintf("%s gained only %.2g%% over the %d points since step %d (median %s then, %s now): under the %.0f%% that counts as progress.",
			p.Key, 100*gain, s.cfg.PlateauPatience, st.bestStep, g4(st.best), g4(m), 100*s.cfg.PlateauMinDelta)
	} else {
		msg = fmt.Sprintf("%s has not improved over the %d points since step %d (median %s then, %s now).",
			p.Key, s.cfg.PlateauPatience, st.bestStep, g4(st.best), g4(m))
	}
	return s.metricAnomaly(Plateau, Info, p, ev, msg)
}

func (s *Sentinel) hangAnomaly(k attemptKey, at *attemptState, now time.Time, quiet, limit time.Duration) Anomaly {
	ev := Evidence{Attempt: k.attempt, FromStep: at.lastStep, ToStep: at.lastStep, Times: []time.Time{at.lastWall, now},
		Stats: map[string]Num{"quiet_s": Num(quiet.Seconds()), "limit_s": Num(limit.Seconds())}}
	return Anomaly{Kind: Hang, Severity: Warning, Run: k.run, Stage: k.stage, Attempt: k.attempt, At: now,
		Step: at.lastStep, Evidence: ev, Fix: fixes[Hang], Message: fmt.Sprintf(
			"No new metric for %s (last at step %d) although the stage is running; it usually reports every %s.",
			quiet.Round(time.Second), at.lastStep, (limit / time.Duration(s.cfg.HangFactor)).Round(time.Second))}
}

func gpuAnomaly(k Kind, sev Severity, g GPUSample, run string, ev Evidence, msg string) Anomaly {
	a := Anomaly{Kind: k, Severity: sev, Run: run, GPU: g.UUID, At: g.Time, Evidence: ev, Message: msg, Fix: fixes[k]}
	if g.Stage != nil {
		a.Stage = g.Stage[run]
	}
	return a
}

func (s *Sentinel) xidAnomaly(g GPUSample) Anomaly {
	var parts []string
	for _, x := range g.XIDs {
		if m, ok := xidMeaning[x]; ok {
			parts = append(parts, fmt.Sprintf("XID %d (%s)", x, m))
		} else {
			parts = append(parts, fmt.Sprintf("XID %d", x))
		}
	}
	ev := Evidence{Times: []time.Time{g.Time}, Notes: parts}
	return gpuAnomaly(GPUHealth, Critical, g, "", ev, fmt.Sprintf("GPU %s reported %s.", g.UUID, strings.Join(parts, ", ")))
}

func (s *Sentinel) eccAnomaly(g GPUSample, before int64) Anomaly {
	ev := Evidence{Times: []time.Time{g.Time}, Values: []Num{Num(before), Num(g.ECCUncorrected)}}
	return gpuAnomaly(GPUHealth, Critical, g, "", ev, fmt.Sprintf(
		"GPU %s counted %d new uncorrectable ECC error(s) (now %d).", g.UUID, g.ECCUncorrected-before, g.ECCUncorrected))
}

func (s *Sentinel) hotAnomaly(g GPUSample, st *gpuState) Anomaly {
	ev := Evidence{Times: []time.Time{g.Time}, Values: nums(st.hotTemps.values(nil)),
		Stats: map[string]Num{"slowdown_c": Num(g.SlowdownTempC)}}
	sev := Warning
	msg := fmt.Sprintf("GPU %s is at %.0f °C, within %.0f °C of its slowdown threshold of %.0f °C.",
		g.UUID, g.TempC, s.cfg.HotMargin, g.SlowdownTempC)
	if g.Throttle.Thermal() {
		sev = Critical
		msg = fmt.Sprintf("GPU %s is thermally throttled at %.0f °C: it runs at reduced clocks.", g.UUID, g.TempC)
		ev.Notes = append(ev.Notes, "thermal slowdown active")
	}
	return gpuAnomaly(Overheating, sev, g, "", ev, msg)
}

func (s *Sentinel) leakAnomaly(g GPUSample, run string, x, y []float64, b, se, growth float64) Anomaly {
	ev := Evidence{Values: []Num{Num(y[0]), Num(y[len(y)-1])},
		Stats: map[string]Num{"slope_mib_per_min": Num(b * 60), "slope_low_mib_per_min": Num((b - s.cfg.LeakT*se) * 60),
			"window_s": Num(x[len(x)-1] - x[0]), "samples": Num(len(y))}}
	return gpuAnomaly(MemoryLeak, Warning, g, run, ev, fmt.Sprintf(
		"Run %s's GPU memory keeps growing: %.0f MiB per minute (at least %.0f) over the last %d samples, %.0f → %.0f MiB.",
		run, b*60, (b-s.cfg.LeakT*se)*60, len(y), y[0], y[len(y)-1]))
}

func (s *Sentinel) stallAnomaly(g GPUSample, runs []string, u []float64, share, acf float64, lag int) Anomaly {
	run := ""
	if len(runs) > 0 {
		run = runs[0]
	}
	ev := Evidence{Values: nums(u), Stats: map[string]Num{"low_share": Num(share), "acf": Num(acf), "period_samples": Num(lag)}}
	return gpuAnomaly(DataStall, Warning, g, run, ev, fmt.Sprintf(
		"GPU %s keeps dropping to near 0%% utilisation: %.0f%% of the last %d samples, repeating every %d samples; "+
			"the training waits for data.", g.UUID, 100*share, len(u), lag))
}

func (s *Sentinel) idleAnomaly(g GPUSample, run string, ro *runOnGPU) Anomaly {
	d := g.Time.Sub(ro.idleSince)
	ev := Evidence{Times: []time.Time{ro.idleSince, g.Time}, Values: []Num{Num(g.RunMemMiB[run])},
		Stats: map[string]Num{"idle_s": Num(d.Seconds())}}
	return gpuAnomaly(IdleGPU, Warning, g, run, ev, fmt.Sprintf(
		"Run %s holds GPU %s (%.0f MiB) but has used it at ≤%.0f%% for %s.", run, g.UUID, g.RunMemMiB[run],
		s.cfg.IdleUtil, d.Round(time.Second)))
}

func (s *Sentinel) queueAnomaly(q QueueObservation, now time.Time, waited, still time.Duration) Anomaly {
	ev := Evidence{Times: []time.Time{q.WaitingSince, now},
		Stats: map[string]Num{"waited_s": Num(waited.Seconds()), "no_progress_s": Num(still.Seconds())}}
	msg := fmt.Sprintf("Stage %s has waited in the queue for %s", q.Stage, waited.Round(time.Second))
	if still < waited-time.Second {
		msg += fmt.Sprintf(", without moving up for %s", still.Round(time.Second))
	}
	if q.Reason != "" {
		msg += ": " + q.Reason
		ev.Notes = []string{q.Reason}
	}
	if q.Code != "" {
		ev.Extra = map[string]string{"code": q.Code}
	}
	if q.Ahead >= 0 {
		ev.Stats["ahead"] = Num(q.Ahead)
	}
	known := q.LargestFreeMiB >= 0
	if q.NeedMiB > 0 {
		ev.Stats["need_mib"] = Num(q.NeedMiB)
		if known {
			ev.Stats["largest_free_mib"] = Num(q.LargestFreeMiB)
		}
		if q.Reason == "" { // the shepherd's reason already gives the figures
			msg += fmt.Sprintf(" (needs %s per GPU", mib(q.NeedMiB))
			if known {
				msg += fmt.Sprintf(", the largest free is %s", mib(q.LargestFreeMiB))
			}
			msg += ")"
		}
	}
	return Anomaly{Kind: QueueStuck, Severity: Warning, Run: q.Run, Stage: q.Stage, At: now, Evidence: ev,
		Message: msg + ".", Fix: queueFix(q)}
}

// queueFix is the advice for a stuck stage, by why it waits.
func queueFix(q QueueObservation) string {
	switch {
	case q.Code == "no_gpus":
		return "This machine has no usable GPU: run it where there is one (scripts/gpu-check.sh checks the driver), " +
			"or ask for gpus: 0 if the stage can run on the CPU."
	case q.Code == "never_fits":
		return "No GPU of this machine can ever hold it: lower its gpus or gpu_memory request (smaller batch, mixed " +
			"precision, gradient checkpointing)."
	case q.NeedMiB > 0 && q.LargestFreeMiB >= 0 && q.LargestFreeMiB < q.NeedMiB:
		return fmt.Sprintf("Not enough free GPU memory: the stage needs %s per GPU and the largest free is %s. ",
			mib(q.NeedMiB), mib(q.LargestFreeMiB)) + fixes[QueueStuck]
	}
	return "The GPUs it needs are taken by other runs, or kept for a run ahead of it: wait for them, stop some of " +
		"them, or raise its priority; lowering its gpu_memory request lets it share a GPU."
}

// mib prints memory as the shepherd's reasons do: "16 GiB", "512 MiB".
func mib(m float64) string {
	if m >= 1024 {
		return fmt.Sprintf("%.0f GiB", m/1024)
	}
	return fmt.Sprintf("%.0f MiB", m)
}
