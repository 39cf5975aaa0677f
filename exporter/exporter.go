package exporter

import (
	"context"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"niuma/engine"
	"niuma/gpumon"
	"niuma/metrics"
	"niuma/sentinel"
	"niuma/shepherd"
)

// Source is what the exporter reads at every scrape; *engine.Engine has it.
type Source interface {
	GPUs(ctx context.Context) (gpumon.Snapshot, error)
	Queue(ctx context.Context) ([]engine.Waiting, error)
	RunCounts(ctx context.Context) (map[engine.State]int, error)
	StagesFinishedAfter(ctx context.Context, after time.Time, limit int) ([]engine.FinishedStage, error)
	EventKindsAfter(ctx context.Context, after int64) (map[string]int, int64, error)
	Ingested() metrics.WriterStats
	// Usage is what the running stages this process follows use of the
	// host (from their cgroups).
	Usage() []engine.StageUsage
}

// Options tune an Exporter.
type Options struct {
	// PerRun adds series labelled with run IDs: one per waiting stage
	// (niuma_queue_stage_wait_seconds). Off by default: run IDs are
	// unbounded, and every run would leave a series behind in Prometheus.
	PerRun bool
	// Timeout bounds the reads of one scrape (default 5 s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// maxStageSeries bounds the (template, stage) pairs of the stage duration
// histogram; later pairs are counted as template="other", stage="other".
const maxStageSeries = 256

// stageBatch is the most finished stages one scrape reads: a first scrape
// over a large archive catches up over a few scrapes.
const stageBatch = 20000

// WaitCodes are the reasons a stage waits, as niuma_queue_* label them:
// the engine's before the shepherd's. A preempted stage keeps the engine's
// code "preempted" until the shepherd's next pass gives its own (cpu,
// gpu_memory, ...): it is counted as preempted, not as unscheduled.
var WaitCodes = waitCodes()

func waitCodes() []string {
	codes := []string{engine.WaitNeeds, engine.WaitBackoff, engine.WaitExecutor, engine.WaitScheduling, engine.WaitPreempted}
	for _, c := range shepherd.ReasonCodes {
		codes = append(codes, string(c))
	}
	return codes
}

// Actions are what the engine did about anomalies, as
// niuma_sentinel_actions_total labels them (its events "action_<name>").
var Actions = []string{"stop", "retry", "notify", "retry_refused", "flag_only"}

var states = engine.States

// Exporter is a Prometheus collector over a Source.
type Exporter struct {
	src  Source
	opts Options

	gpuLabels []string
	desc      map[string]*prometheus.Desc

	mu          sync.Mutex // one scrape at a time updates the cursors
	stageAfter  time.Time
	eventAfter  int64
	stageDur    *prometheus.HistogramVec
	stagePairs  map[[2]string]bool
	anomalies   *prometheus.CounterVec
	actions     *prometheus.CounterVec
	readErrors  *prometheus.CounterVec
	initialised bool
}

// New returns an exporter over src.
func New(src Source, opts Options) *Exporter {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	x := &Exporter{src: src, opts: opts, gpuLabels: []string{"gpu", "uuid", "model", "simulated"},
		desc: map[string]*prometheus.Desc{}, stagePairs: map[[2]string]bool{}}
	g := func(name, help string, labels ...string) {
		x.desc[name] = prometheus.NewDesc(name, help, labels, nil)
	}
	gl := x.gpuLabels
	g("niuma_gpus", "GPUs this process sees, by source (nvml, simulated or none).", "source")
	g("niuma_gpu_info", "One series per GPU with its identity; the value is always 1.", append(gl, "source")...)
	g("niuma_gpu_utilization_ratio", "GPU (SM) utilisation, 0 to 1.", gl...)
	g("niuma_gpu_memory_used_bytes", "GPU memory in use, by any process.", gl...)
	g("niuma_gpu_memory_total_bytes", "GPU memory in all.", gl...)
	g("niuma_gpu_run_memory_bytes", "GPU memory held by Niuma's runs.", gl...)
	g("niuma_gpu_temperature_celsius", "GPU temperature.", gl...)
	g("niuma_gpu_power_watts", "GPU power draw.", gl...)
	g("niuma_gpu_power_limit_watts", "The GPU's enforced power limit.", gl...)
	g("niuma_gpu_healthy", "1 when the GPU may be offered to new stages; 0 after an uncorrectable ECC error or a critical XID.", gl...)
	g("niuma_gpu_throttled", "1 when a limit (thermal, power, hardware slowdown) holds the clocks down; idleness is no limit.", gl...)
	g("niuma_queue_stages", "Stages waiting in the queue, by why they wait.", "reason")
	g("niuma_queue_longest_wait_seconds", "The longest current wait in the queue, by why it waits (0 when none waits).", "reason")
	g("niuma_queue_stage_wait_seconds", "How long each waiting stage has waited (Options.PerRun only).", "run", "stage", "reason")
	g("niuma_runs", "Runs in the archive, by state.", "state")
	g("niuma_stages_memory_bytes", "Host memory the running stages use in all (from their cgroups).")
	g("niuma_stages_metered", "Running stages whose host memory and CPU use are read (from their cgroups).")
	g("niuma_stage_memory_bytes", "Host memory each running stage uses (Options.PerRun only).", "run", "stage")
	g("niuma_stage_memory_peak_bytes", "The most host memory each running stage has used (Options.PerRun only).", "run", "stage")
	g("niuma_stage_memory_limit_bytes", "Each running stage's memory limit, its memory: (Options.PerRun only; absent without one).", "run", "stage")
	g("niuma_stage_cpu_seconds_total", "CPU time each running stage's attempt has used (Options.PerRun only).", "run", "stage")
	g("niuma_metric_points_ingested_total", "Metric points this process stored from stages' output since it started driving runs.")
	g("niuma_metric_points_lost_total", "Metric points this process could not store (failed writes, points after shutdown).")
	x.stageDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "niuma_stage_duration_seconds",
		Help:    "How long finished stages took, from their first attempt's start to their end, by template, stage and final state.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1 s … 73 h
	}, []string{"template", "stage", "state"})
	x.anomalies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "niuma_anomalies_total", Help: "Anomalies the sentinel raised, by kind (counted from the archive).",
	}, []string{"kind"})
	x.actions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "niuma_sentinel_actions_total", Help: "What the engine did about anomalies, by action (counted from the archive).",
	}, []string{"action"})
	x.readErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "niuma_exporter_read_errors_total", Help: "Scrapes in which a read failed, by what was read.",
	}, []string{"what"})
	for _, k := range sentinel.Kinds {
		x.anomalies.WithLabelValues(string(k))
	}
	x.anomalies.WithLabelValues("not_reproducible")
	for _, a := range Actions {
		x.actions.WithLabelValues(a)
	}
	for _, w := range []string{"gpus", "queue", "runs", "stages", "events"} {
		x.readErrors.WithLabelValues(w)
	}
	return x
}

// Registry returns a registry with the exporter and the Go runtime's and
// the process's own collectors.
func (x *Exporter) Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(x, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return reg
}

// Describe implements prometheus.Collector.
func (x *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range x.desc {
		ch <- d
	}
	x.stageDur.Describe(ch)
	x.anomalies.Describe(ch)
	x.actions.Describe(ch)
	x.readErrors.Describe(ch)
}

// Collect implements prometheus.Collector: it reads the source and sends
// every series.
func (x *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), x.opts.Timeout)
	defer cancel()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.collectGPUs(ctx, ch)
	x.collectQueue(ctx, ch)
	if counts, err := x.src.RunCounts(ctx); err != nil {
		x.failed("runs", err)
	} else {
		for _, s := range states {
			ch <- gauge(x.desc["niuma_runs"], float64(counts[s]), string(s))
		}
	}
	x.collectUsage(ch)
	in := x.src.Ingested()
	ch <- prometheus.MustNewConstMetric(x.desc["niuma_metric_points_ingested_total"], prometheus.CounterValue, float64(in.Points))
	ch <- prometheus.MustNewConstMetric(x.desc["niuma_metric_points_lost_total"], prometheus.CounterValue, float64(in.Failed+in.Dropped))
	x.catchUp(ctx)
	x.stageDur.Collect(ch)
	x.anomalies.Collect(ch)
	x.actions.Collect(ch)
	x.readErrors.Collect(ch)
}

// collectUsage sends what the running stages use of the host: the sum
// always, each stage's with Options.PerRun.
func (x *Exporter) collectUsage(ch chan<- prometheus.Metric) {
	us := x.src.Usage()
	var mem int64
	for _, u := range us {
		mem += u.MemoryBytes
		if !x.opts.PerRun {
			continue
		}
		ch <- gauge(x.desc["niuma_stage_memory_bytes"], float64(u.MemoryBytes), u.RunID, u.Stage)
		ch <- gauge(x.desc["niuma_stage_memory_peak_bytes"], float64(u.PeakBytes), u.RunID, u.Stage)
		if u.LimitBytes > 0 {
			ch <- gauge(x.desc["niuma_stage_memory_limit_bytes"], float64(u.LimitBytes), u.RunID, u.Stage)
		}
		ch <- prometheus.MustNewConstMetric(x.desc["niuma_stage_cpu_seconds_total"], prometheus.CounterValue, u.CPUSeconds, u.RunID, u.Stage)
	}
	ch <- gauge(x.desc["niuma_stages_memory_bytes"], float64(mem))
	ch <- gauge(x.desc["niuma_stages_metered"], float64(len(us)))
}

func (x *Exporter) failed(what string, err error) {
	x.readErrors.WithLabelValues(what).Inc()
	x.opts.Logger.Warn("metrics exporter: read failed", "what", what, "err", err)
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

const mib = 1 << 20

// collectGPUs sends the GPU series. A value the GPU does not report has no
// series (not a 0).
func (x *Exporter) collectGPUs(ctx context.Context, ch chan<- prometheus.Metric) {
	snap, err := x.src.GPUs(ctx)
	if err != nil {
		x.failed("gpus", err)
		return
	}
	source := snap.Source
	if source == "" {
		source = gpumon.SourceNone
	}
	ch <- gauge(x.desc["niuma_gpus"], float64(len(snap.GPUs)), source)
	for _, g := range snap.GPUs {
		l := []string{strconv.Itoa(g.Index), g.UUID, g.Name, strconv.FormatBool(snap.Simulated)}
		send := func(name string, v float64) { ch <- gauge(x.desc[name], v, l...) }
		opt := func(name string, p *float64, scale float64) {
			if p != nil && !math.IsNaN(*p) {
				send(name, *p*scale)
			}
		}
		ch <- gauge(x.desc["niuma_gpu_info"], 1, append(l, source)...)
		opt("niuma_gpu_utilization_ratio", g.UtilPercent, 0.01)
		send("niuma_gpu_memory_used_bytes", float64(g.MemUsedMiB)*mib)
		send("niuma_gpu_memory_total_bytes", float64(g.MemTotalMiB)*mib)
		var runs int64
		for _, p := range g.Processes {
			if p.Owner != nil {
				runs += p.MemMiB
			}
		}
		send("niuma_gpu_run_memory_bytes", float64(runs)*mib)
		opt("niuma_gpu_temperature_celsius", g.TempC, 1)
		opt("niuma_gpu_power_watts", g.PowerW, 1)
		opt("niuma_gpu_power_limit_watts", g.PowerLimitW, 1)
		send("niuma_gpu_healthy", b01(g.Healthy))
		if g.ThrottleReasons != nil {
			held := false
			for _, r := range g.ThrottleReasons {
				held = held || gpumon.IsLimit(r)
			}
			send("niuma_gpu_throttled", b01(held))
		}
	}
}

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectQueue sends the queue series: every known reason, 0 when no
// stage waits for it, so that sums and alerts see a steady set.
func (x *Exporter) collectQueue(ctx context.Context, ch chan<- prometheus.Metric) {
	ws, err := x.src.Queue(ctx)
	if err != nil {
		x.failed("queue", err)
		return
	}
	now := time.Now()
	count := map[string]int{}
	longest := map[string]float64{}
	for _, w := range ws {
		code := w.Code
		if !known(code) {
			code = engine.WaitScheduling
		}
		count[code]++
		wait := max(0, now.Sub(w.Since).Seconds())
		longest[code] = max(longest[code], wait)
		if x.opts.PerRun {
			ch <- gauge(x.desc["niuma_queue_stage_wait_seconds"], wait, w.RunID, w.Stage, code)
		}
	}
	for _, c := range WaitCodes {
		ch <- gauge(x.desc["niuma_queue_stages"], float64(count[c]), c)
		ch <- gauge(x.desc["niuma_queue_longest_wait_seconds"], longest[c], c)
	}
}

func known(code string) bool {
	for _, c := range WaitCodes {
		if c == code {
			return true
		}
	}
	return false
}

// catchUp counts the stages and events recorded since the last scrape
// (since the start of the archive at the first one).
func (x *Exporter) catchUp(ctx context.Context) {
	fs, err := x.src.StagesFinishedAfter(ctx, x.stageAfter, stageBatch)
	if err != nil {
		x.failed("stages", err)
	}
	for _, f := range fs {
		x.stageAfter = f.FinishedAt
		if f.Duration <= 0 {
			continue // never started: skipped or cancelled while queued
		}
		pair := [2]string{f.Template, f.Stage}
		if !x.stagePairs[pair] {
			if len(x.stagePairs) >= maxStageSeries {
				pair = [2]string{"other", "other"}
			} else {
				x.stagePairs[pair] = true
			}
		}
		x.stageDur.WithLabelValues(pair[0], pair[1], string(f.State)).Observe(f.Duration.Seconds())
	}
	kinds, last, err := x.src.EventKindsAfter(ctx, x.eventAfter)
	if err != nil {
		x.failed("events", err)
		return
	}
	x.eventAfter = last
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		n := float64(kinds[k])
		switch {
		case isAnomaly(k):
			x.anomalies.WithLabelValues(k).Add(n)
		case len(k) > 7 && k[:7] == "action_" && isAction(k[7:]):
			x.actions.WithLabelValues(k[7:]).Add(n)
		}
	}
}

func isAnomaly(k string) bool {
	if k == "not_reproducible" {
		return true
	}
	for _, s := range sentinel.Kinds {
		if string(s) == k {
			return true
		}
	}
	return false
}

func isAction(a string) bool {
	for _, s := range Actions {
		if s == a {
			return true
		}
	}
	return false
}
