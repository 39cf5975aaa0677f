package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"niuma/engine/executor"
	"niuma/storage"
)

// HostUsage is what one stage of a run used of the host (memory and CPU
// time, from its attempts' cgroups), read back from the per-minute host
// records: it is there after the run ended, in any process. Memory is in
// bytes; the figures cover every recorded attempt of the stage.
type HostUsage struct {
	Stage string `json:"stage"`
	// Attempts are the stage's attempts with a record, in order.
	Attempts []int `json:"attempts"`
	// MemPeakBytes is the most memory an attempt used (its cgroup's own
	// high-water mark, which catches what fell between readings);
	// MemMeanBytes the mean over the readings while it ran (0 with none:
	// a stage shorter than a reading has only its peak); MemLimitBytes
	// the limit (memory:), 0 for none.
	MemPeakBytes  int64 `json:"mem_peak_bytes"`
	MemMeanBytes  int64 `json:"mem_mean_bytes"`
	MemLimitBytes int64 `json:"mem_limit_bytes"`
	// CPUSeconds is the CPU time (user and system) the attempts used, all
	// together; CPULimitMilli the CPU limit (cpus:) in thousandths of a
	// CPU, 0 for none.
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPULimitMilli int64   `json:"cpu_limit_milli"`
	// Samples is the number of readings of its memory while it ran (about
	// one a second); the CPU time and peak also count what each attempt's
	// cgroup said as it ended.
	Samples int `json:"samples"`
	// Minutes is the record minute by minute, by attempt, oldest first.
	Minutes []HostMinute `json:"minutes"`
}

// HostMinute is one minute of one attempt's record.
type HostMinute struct {
	At           time.Time `json:"at"`
	Attempt      int       `json:"attempt"`
	Samples      int       `json:"samples"`
	MemMeanBytes int64     `json:"mem_mean_bytes"`
	MemMaxBytes  int64     `json:"mem_max_bytes"` // the most of the minute's readings
	CPUSeconds   float64   `json:"cpu_seconds"`   // used in this minute
}

// HostUsage reads what each stage of a run used of the host, in the run's
// stage order; a stage with no record (it never ran locally with a
// cgroup, or its records are past their retention) is left out. A
// running attempt's minute is stored once it ends (or its attempt does);
// what it uses now is in its stage's Usage.
func (e *Engine) HostUsage(ctx context.Context, runID string) ([]HostUsage, error) {
	id, err := e.ResolveID(ctx, runID)
	if err != nil {
		return nil, err
	}
	rows, err := e.store.HostSamples(ctx, id)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	stages, err := e.store.Stages(ctx, id)
	if err != nil {
		return nil, err
	}
	pos := map[string]int{}
	for _, s := range stages {
		pos[s.Name] = s.Position
	}
	byStage := map[string]*HostUsage{}
	var out []*HostUsage
	memSum := map[string]float64{}
	for _, r := range rows { // ordered by stage, attempt, minute
		u := byStage[r.Stage]
		if u == nil {
			u = &HostUsage{Stage: r.Stage}
			byStage[r.Stage] = u
			out = append(out, u)
		}
		if n := len(u.Attempts); n == 0 || u.Attempts[n-1] != r.Attempt {
			u.Attempts = append(u.Attempts, r.Attempt)
		}
		peak := max(r.MemMax, r.MemPeak)
		u.MemPeakBytes = max(u.MemPeakBytes, peak)
		if r.MemLimit > 0 {
			u.MemLimitBytes = r.MemLimit // the latest attempt's
		}
		if r.CPULimitMilli > 0 {
			u.CPULimitMilli = r.CPULimitMilli
		}
		u.CPUSeconds += r.CPUSeconds
		u.Samples += r.Samples
		memSum[r.Stage] += float64(r.MemMean) * float64(r.Samples)
		u.Minutes = append(u.Minutes, HostMinute{At: r.Minute, Attempt: r.Attempt, Samples: r.Samples,
			MemMeanBytes: r.MemMean, MemMaxBytes: r.MemMax, CPUSeconds: r.CPUSeconds})
	}
	slices.SortStableFunc(out, func(a, b *HostUsage) int { return pos[a.Stage] - pos[b.Stage] })
	res := make([]HostUsage, len(out))
	for i, u := range out {
		if u.Samples > 0 {
			u.MemMeanBytes = int64(memSum[u.Stage] / float64(u.Samples))
		}
		res[i] = *u
	}
	return res, nil
}

// hostMeter turns one attempt's readings into per-minute records. It is
// owned by the attempt's watch goroutine.
type hostMeter struct {
	run, stage string
	attempt    int
	cur        *storage.HostSample // the minute in progress; nil before the first reading
	memSum     float64             // of cur's readings
	cpuBase    float64             // the attempt's CPU time at the last reading before cur
	cpuLast    float64             // at the last reading
}

// add takes one reading; it returns the minute the reading closed, if any.
func (m *hostMeter) add(at time.Time, u executor.Usage) *storage.HostSample {
	done := m.roll(at)
	c := m.cur
	c.Samples++
	m.memSum += float64(u.MemoryBytes)
	c.MemMean = int64(m.memSum / float64(c.Samples))
	c.MemMax = max(c.MemMax, u.MemoryBytes)
	m.count(u)
	return done
}

// end takes the reading of an attempt that has ended (its cgroup's
// accounting as it settled): its CPU time in full and its peak count, but
// not as a reading of the memory it used, since its processes are gone.
// It returns the minute it closed, if any.
func (m *hostMeter) end(at time.Time, u executor.Usage) *storage.HostSample {
	done := m.roll(at)
	m.count(u)
	return done
}

// roll makes at's minute the one in progress, and returns the one it
// closed, if any.
func (m *hostMeter) roll(at time.Time) *storage.HostSample {
	minute := at.Truncate(time.Minute)
	var done *storage.HostSample
	if m.cur != nil && !m.cur.Minute.Equal(minute) {
		done = m.finish()
	}
	if m.cur == nil {
		m.cur = &storage.HostSample{RunID: m.run, Stage: m.stage, Attempt: m.attempt, Minute: minute}
		m.memSum = 0
	}
	return done
}

// count notes a reading's high-water mark, limits and CPU time in the
// minute in progress.
func (m *hostMeter) count(u executor.Usage) {
	c := m.cur
	c.MemPeak = max(c.MemPeak, u.PeakBytes)
	c.MemLimit = u.LimitBytes
	c.CPULimitMilli = u.CPULimitMilli
	m.cpuLast = max(m.cpuLast, u.CPUSeconds) // a counter: it never goes back
	c.CPUTotal = m.cpuLast
	c.CPUSeconds = max(m.cpuLast-m.cpuBase, 0)
}

// finish closes the minute in progress and returns it (nil when there is
// none).
func (m *hostMeter) finish() *storage.HostSample {
	done := m.cur
	m.cur = nil
	m.cpuBase = m.cpuLast
	return done
}

// hostBook holds the finished minutes of every attempt this process
// follows until they are stored: once a minute, all together in one
// transaction, and at an attempt's end.
type hostBook struct {
	mu      sync.Mutex
	pending []storage.HostSample
	store   sync.Mutex // one store at a time, so a minute is never written twice at once
}

// maxHostPending bounds the minutes kept while the archive refuses them
// (a day of 100 running stages).
const maxHostPending = 24 * 60 * 100

// keepHostMinute holds a finished minute for the next store.
func (e *Engine) keepHostMinute(s *storage.HostSample) {
	if s == nil || s.Samples == 0 && s.CPUSeconds == 0 && s.MemPeak == 0 {
		return
	}
	e.host.mu.Lock()
	defer e.host.mu.Unlock()
	e.host.pending = append(e.host.pending, *s)
	if n := len(e.host.pending); n > maxHostPending {
		e.host.pending = e.host.pending[n-maxHostPending:]
	}
}

// storeHostMinutes writes the minutes held so far in one transaction; on
// failure they are kept for the next try.
func (e *Engine) storeHostMinutes(ctx context.Context) error {
	e.host.store.Lock()
	defer e.host.store.Unlock()
	e.host.mu.Lock()
	batch := e.host.pending
	e.host.pending = nil
	e.host.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := e.store.AddHostSamples(ctx, batch)
	if err != nil {
		e.host.mu.Lock()
		e.host.pending = append(batch, e.host.pending...)
		if n := len(e.host.pending); n > maxHostPending {
			e.host.pending = e.host.pending[n-maxHostPending:]
		}
		e.host.mu.Unlock()
	}
	return err
}

// storeHostEveryMinute stores the minutes the attempts finished, once a
// minute, a moment after the minute's end (when every attempt has taken
// its first reading of the next one), until ctx ends. Drive runs it; what
// is left when it stops Drive stores after its attempts have stopped.
func (e *Engine) storeHostEveryMinute(ctx context.Context) {
	for {
		now := time.Now()
		next := now.Truncate(time.Minute).Add(time.Minute + 2*e.opts.PollInterval)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := e.storeHostMinutes(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("storing the stages' host use failed; will retry", "err", err)
		}
	}
}

// storeHostAtEnd stores what is held, the ended attempt's last minute
// included, before its end is reported, so that a run read as ended has
// its record; an archive that refuses it now gets it on the next minute's
// try.
func (e *Engine) storeHostAtEnd(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.storeHostMinutes(sctx); err != nil {
		e.logWarn(ctx, "store an ended attempt's host use; will retry", "err", err)
	}
}

// storeHostLeft stores what is held when the owner stops (Drive, after
// its attempts' goroutines have handed in their minutes in progress).
func (e *Engine) storeHostLeft() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.storeHostMinutes(ctx); err != nil {
		e.log.Warn("the stages' host use of the last minute could not be stored", "err", err)
	}
}

// hostMeter starts the per-minute record of one attempt. An attempt this
// process adopted (elapsed > 0) counts its CPU time on from what the
// last owner stored of it, so that no CPU second is counted twice.
func (e *Engine) hostMeter(ctx context.Context, job executor.Job, elapsed time.Duration) *hostMeter {
	m := &hostMeter{run: job.RunID, stage: job.Stage, attempt: job.Attempt}
	if elapsed > 0 {
		total, err := e.store.HostCPUTotal(ctx, job.RunID, job.Stage, job.Attempt)
		if err != nil {
			e.logWarn(ctx, "read the adopted attempt's recorded CPU time", "run", job.RunID, "stage", job.Stage, "err", err)
		}
		m.cpuBase, m.cpuLast = total, total
	}
	return m
}

// Summary says what the stage used in one line, as `niuma show` and the
// run view put it: "peak memory 1.2 GiB of 4 GiB (mean 900 MiB) · CPU
// time 3m12s (limit 2 CPUs)", with the attempts when there were several.
func (u HostUsage) Summary() string {
	mem := "peak memory " + BytesText(u.MemPeakBytes)
	if u.MemLimitBytes > 0 {
		mem += " of " + BytesText(u.MemLimitBytes)
	}
	if u.Samples > 0 {
		mem += " (mean " + BytesText(u.MemMeanBytes) + ")"
	}
	cpu := "CPU time " + CPUTimeText(u.CPUSeconds)
	if u.CPULimitMilli > 0 {
		n := strconv.FormatFloat(float64(u.CPULimitMilli)/1000, 'f', -1, 64)
		unit := " CPUs"
		if u.CPULimitMilli == 1000 {
			unit = " CPU"
		}
		cpu += " (limit " + n + unit + ")"
	}
	out := mem + " · " + cpu
	if len(u.Attempts) > 1 {
		as := make([]string, len(u.Attempts))
		for i, a := range u.Attempts {
			as[i] = strconv.Itoa(a)
		}
		out += " · attempts " + strings.Join(as, ", ") + " together"
	}
	return out
}

// BytesText writes a memory size in binary units: "512 B", "3.4 MiB",
// "512 MiB", "1.2 GiB".
func BytesText(n int64) string {
	units := []struct {
		size int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}}
	for _, u := range units {
		if n >= u.size {
			v := float64(n) / float64(u.size)
			if v >= 100 || n%u.size == 0 {
				return fmt.Sprintf("%.0f %s", v, u.name)
			}
			return fmt.Sprintf("%.1f %s", v, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// CPUTimeText writes CPU time: "1.9 ms", "0.42 s" under a minute,
// "3m12s" above.
func CPUTimeText(sec float64) string {
	switch {
	case sec < 0.01:
		return fmt.Sprintf("%.1f ms", sec*1000)
	case sec < 60:
		return fmt.Sprintf("%.2f s", sec)
	}
	return (time.Duration(sec * float64(time.Second))).Round(time.Second).String()
}
