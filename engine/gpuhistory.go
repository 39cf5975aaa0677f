package engine

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"niuma/gpumon"
	"niuma/storage"
)

// GPUUsage is how one run used one GPU, read back from the per-minute GPU
// records: the minutes the run's attempts held it, its utilisation, the
// memory the run's own processes held, temperature and power, peak and
// mean, and the throttling, XID errors and GPU anomalies of that time.
// A statistic with no reading at all is NaN.
type GPUUsage struct {
	UUID  string `json:"uuid"`
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Simulated marks a simulated GPU (NIUMA_SIMULATE_GPUS): every figure
	// here is pretend telemetry, not a measurement.
	Simulated   bool    `json:"simulated"`
	MemTotalMiB int64   `json:"mem_total_mib,omitempty"`
	PowerLimitW float64 `json:"power_limit_w,omitempty"`
	// Stages ran on the GPU, in the run's order; From and To bound the
	// attempts that held it (To is now for a running attempt).
	Stages []string  `json:"stages"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`

	Util   Stat `json:"util_percent"`
	RunMem Stat `json:"run_mem_mib"` // the run's processes only
	Temp   Stat `json:"temp_c"`
	Power  Stat `json:"power_w"`
	// Samples is the number of readings behind these figures; Throttled how
	// many of them had the clocks held down by a limit (ThrottleReasons:
	// thermal, power, hardware slowdown), ThrottledMinutes in how many
	// minutes that happened.
	Samples          int      `json:"samples"`
	Throttled        int      `json:"throttled_samples"`
	ThrottledMinutes int      `json:"throttled_minutes"`
	ThrottleReasons  []string `json:"throttle_reasons,omitempty"`
	XIDs             []XID    `json:"xids,omitempty"`
	// Anomalies are the sentinel's findings about the GPU itself while the
	// run held it (overheating, GPU health); the run's own anomalies on it
	// (a leak, a stall) are among the run's (Engine.Anomalies).
	Anomalies []AnomalyInfo `json:"anomalies,omitempty"`
	// Minutes is the record minute by minute, oldest first, for curves.
	Minutes []GPUMinute `json:"minutes"`
}

// Stat is the mean and the peak of one GPU figure over a run.
type Stat struct {
	Mean float64 `json:"mean"`
	Peak float64 `json:"peak"`
}

// XID is one XID error the driver reported, in the minute it was recorded.
type XID struct {
	At   time.Time `json:"at"`
	Code uint64    `json:"code"`
}

// GPUMinute is one minute of a GPU while a run held it. NaN is a value
// the GPU did not report.
type GPUMinute struct {
	At                          time.Time
	UtilMean, UtilMax           float64
	RunMemMeanMiB, RunMemMaxMiB int64
	MemUsedMaxMiB               int64 // every process's, the run's included
	TempMean, TempMax           float64
	PowerMean, PowerMax         float64
	Throttled                   int // readings held down by a limit
}

// MarshalJSON writes a NaN (not reported) as null.
func (s Stat) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Mean *float64 `json:"mean"`
		Peak *float64 `json:"peak"`
	}{finite(s.Mean), finite(s.Peak)})
}

// MarshalJSON writes a NaN (not reported) as null.
func (m GPUMinute) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		At            time.Time `json:"at"`
		UtilMean      *float64  `json:"util_mean"`
		UtilMax       *float64  `json:"util_max"`
		RunMemMeanMiB int64     `json:"run_mem_mean_mib"`
		RunMemMaxMiB  int64     `json:"run_mem_max_mib"`
		MemUsedMaxMiB int64     `json:"mem_used_max_mib"`
		TempMean      *float64  `json:"temp_mean"`
		TempMax       *float64  `json:"temp_max"`
		PowerMean     *float64  `json:"power_mean"`
		PowerMax      *float64  `json:"power_max"`
		Throttled     int       `json:"throttled_samples"`
	}{m.At, finite(m.UtilMean), finite(m.UtilMax), m.RunMemMeanMiB, m.RunMemMaxMiB, m.MemUsedMaxMiB,
		finite(m.TempMean), finite(m.TempMax), finite(m.PowerMean), finite(m.PowerMax), m.Throttled})
}

func finite(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// span is a time a run held a GPU.
type span struct{ from, to time.Time }

// GPUUsage reads how a run used each GPU its attempts were placed on, in
// the order the run first used them. A GPU with no stored minute in the
// run's time (a run of a few seconds before the first minute was stored,
// or records past their retention) is still listed, with Samples 0.
func (e *Engine) GPUUsage(ctx context.Context, runID string) ([]GPUUsage, error) {
	id, err := e.ResolveID(ctx, runID)
	if err != nil {
		return nil, err
	}
	stages, err := e.store.Stages(ctx, id)
	if err != nil {
		return nil, err
	}
	attempts, err := e.store.Attempts(ctx, id)
	if err != nil {
		return nil, err
	}
	pos := map[string]int{}
	for _, s := range stages {
		pos[s.Name] = s.Position
	}
	slices.SortStableFunc(attempts, func(a, b storage.Attempt) int { return a.StartedAt.Compare(b.StartedAt) })
	now := time.Now()
	var order []string
	spans := map[string][]span{}
	stagesOn := map[string][]string{}
	for _, a := range attempts {
		if a.StartedAt.IsZero() {
			continue
		}
		to := a.FinishedAt
		if to.IsZero() {
			to = now
		}
		for _, g := range a.GPUs {
			if _, ok := spans[g]; !ok {
				order = append(order, g)
			}
			spans[g] = append(spans[g], span{a.StartedAt, to})
			if !slices.Contains(stagesOn[g], a.Stage) {
				stagesOn[g] = append(stagesOn[g], a.Stage)
			}
		}
	}
	if len(order) == 0 {
		return nil, nil
	}
	infos, err := e.store.GPUs(ctx, order...)
	if err != nil {
		return nil, err
	}
	byUUID := map[string]storage.GPUInfo{}
	for _, g := range infos {
		byUUID[g.UUID] = g
	}
	var out []GPUUsage
	for _, uuid := range order {
		sp := mergeSpans(spans[uuid])
		u := GPUUsage{UUID: uuid, Stages: stagesOn[uuid], From: sp[0].from, To: sp[len(sp)-1].to}
		sort.SliceStable(u.Stages, func(i, j int) bool { return pos[u.Stages[i]] < pos[u.Stages[j]] })
		if info, ok := byUUID[uuid]; ok {
			u.Index, u.Name, u.Simulated, u.MemTotalMiB = info.Index, info.Name, info.Simulated, info.MemTotalMiB
			if !math.IsNaN(info.PowerLimitW) {
				u.PowerLimitW = info.PowerLimitW
			}
		}
		uses, err := e.store.GPUUses(ctx, id, uuid, u.From.Truncate(time.Minute), u.To)
		if err != nil {
			return nil, err
		}
		var kept []storage.GPUUse
		for _, m := range uses {
			if overlaps(sp, m.Minute, m.Minute.Add(time.Minute)) {
				kept = append(kept, m)
			}
		}
		summarizeGPU(&u, kept)
		evs, err := e.store.EventsBetween(ctx, u.From, u.To.Add(time.Minute))
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if ev.GPU != uuid || strings.HasPrefix(ev.Kind, "action_") || ev.RunID != "" ||
				!overlaps(sp, ev.At, ev.At.Add(time.Nanosecond)) {
				continue
			}
			u.Anomalies = append(u.Anomalies, AnomalyInfo{ID: ev.ID, Stage: ev.Stage, GPU: ev.GPU, Kind: ev.Kind,
				Severity: ev.Severity, Message: ev.Message, Fix: ev.Fix, Evidence: ev.Evidence, At: ev.At, DismissedAt: ev.DismissedAt})
		}
		out = append(out, u)
	}
	return out, nil
}

// mergeSpans sorts spans and joins those that overlap or touch.
func mergeSpans(in []span) []span {
	s := slices.Clone(in)
	slices.SortFunc(s, func(a, b span) int { return a.from.Compare(b.from) })
	out := s[:1]
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if !x.from.After(last.to) {
			if x.to.After(last.to) {
				last.to = x.to
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// overlaps reports whether [from, to) meets any of the spans.
func overlaps(sp []span, from, to time.Time) bool {
	for _, s := range sp {
		if from.Before(s.to) && to.After(s.from) {
			return true
		}
	}
	return false
}

// summarizeGPU fills u's statistics from its minutes. Means are weighted by
// the readings of each minute; a minute recorded before readings were
// counted weighs one.
func summarizeGPU(u *GPUUsage, ms []storage.GPUUse) {
	var util, temp, power, mem acc
	reasons := map[string]bool{}
	simulated := u.Simulated
	for _, m := range ms {
		w := float64(max(m.Samples, 1))
		u.Samples += m.Samples
		simulated = simulated || m.Simulated
		util.add(m.UtilMean, m.UtilMax, w)
		temp.add(orElse(m.TempMean, m.TempMax), m.TempMax, w)
		power.add(m.PowerMean, orElse(m.PowerMax, m.PowerMean), w)
		if m.RunMemMaxMiB > 0 {
			mem.add(float64(m.RunMemMeanMiB), float64(m.RunMemMaxMiB), w)
		}
		u.Throttled += m.Throttled
		if m.Throttled > 0 {
			u.ThrottledMinutes++
		}
		for _, r := range m.ThrottleReasons {
			reasons[r] = true
		}
		for _, x := range m.XIDs {
			u.XIDs = append(u.XIDs, XID{At: m.Minute, Code: x})
		}
		u.Minutes = append(u.Minutes, GPUMinute{At: m.Minute, UtilMean: m.UtilMean, UtilMax: m.UtilMax,
			RunMemMeanMiB: m.RunMemMeanMiB, RunMemMaxMiB: m.RunMemMaxMiB, MemUsedMaxMiB: m.MemUsedMax,
			TempMean: orElse(m.TempMean, m.TempMax), TempMax: m.TempMax,
			PowerMean: m.PowerMean, PowerMax: orElse(m.PowerMax, m.PowerMean), Throttled: m.Throttled})
	}
	u.Simulated = simulated
	u.Util, u.Temp, u.Power, u.RunMem = util.stat(), temp.stat(), power.stat(), mem.stat()
	for r := range reasons {
		u.ThrottleReasons = append(u.ThrottleReasons, r)
	}
	sort.Strings(u.ThrottleReasons)
}

func orElse(v, fallback float64) float64 {
	if math.IsNaN(v) {
		return fallback
	}
	return v
}

// acc is a weighted mean and a peak, skipping NaN.
type acc struct {
	sum, w, peak float64
	any          bool
}

func (a *acc) add(mean, peak, w float64) {
	if !math.IsNaN(mean) {
		a.sum += mean * w
		a.w += w
	}
	if !math.IsNaN(peak) && (!a.any || peak > a.peak) {
		a.peak, a.any = peak, true
	}
}

func (a acc) stat() Stat {
	s := Stat{Mean: math.NaN(), Peak: math.NaN()}
	if a.w > 0 {
		s.Mean = a.sum / a.w
	}
	if a.any {
		s.Peak = a.peak
	}
	return s
}

// RecordGPUMinutes stores a sampler's per-minute records (gpumon's
// SamplerOptions.Store) and notes the GPUs they came from, so that a GPU
// UUID in an attempt can be named, and told simulated, long after.
func RecordGPUMinutes(ctx context.Context, db *storage.DB, ms []gpumon.Minute) error {
	samples := make([]storage.GPUSample, len(ms))
	var gpus []storage.GPUInfo
	seen := map[string]int{} // UUID -> index in gpus
	for i, m := range ms {
		g := storage.GPUSample{GPU: m.GPU, Minute: m.Minute, Simulated: m.Simulated, Samples: m.Samples,
			UtilMin: m.UtilMin, UtilMean: m.UtilMean, UtilMax: m.UtilMax,
			MemUsedMin: m.MemUsedMin, MemUsedMean: m.MemUsedMean, MemUsedMax: m.MemUsedMax,
			TempMean: m.TempMean, TempMax: m.TempMax, PowerMean: m.PowerMean, PowerMax: m.PowerMax,
			Throttled: m.Throttled, ThrottleReasons: m.ThrottleReasons, XIDs: m.XIDs}
		for _, o := range m.Owners {
			g.Runs = append(g.Runs, storage.GPURunSample{RunID: o.RunID, Stage: o.Stage, Samples: o.Samples,
				MemMeanMiB: o.MemMeanMiB, MemMaxMiB: o.MemMaxMiB})
		}
		samples[i] = g
		info := storage.GPUInfo{UUID: m.GPU, Index: m.Index, Name: m.Name, Simulated: m.Simulated,
			MemTotalMiB: m.MemTotalMiB, PowerLimitW: m.PowerLimitW, FirstSeen: m.Minute, LastSeen: m.Minute}
		if j, ok := seen[m.GPU]; !ok {
			seen[m.GPU] = len(gpus)
			gpus = append(gpus, info)
		} else if m.Minute.After(gpus[j].LastSeen) {
			info.FirstSeen = gpus[j].FirstSeen
			gpus[j] = info // the latest identity wins
		}
	}
	if err := db.AddGPUSamples(ctx, samples); err != nil {
		return err
	}
	return db.RecordGPUs(ctx, gpus)
}
