package gpumon

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Model is a GPU model the simulated source can pretend to be.
type Model struct {
	Key        string // what a spec names, e.g. "H100-80GB"
	Name       string // what NVML would call it
	MemMiB     int64
	PowerLimit float64 // W
	IdlePower  float64 // W
	SlowdownC  float64
	ShutdownC  float64
	SMClock    int64 // MHz at full load
	MemClock   int64
}

// Models are the GPUs a spec may name (case does not matter).
var Models = []Model{
	{"H200", "NVIDIA H200", 143771, 700, 75, 87, 92, 1980, 3201},
	{"H100-80GB", "NVIDIA H100 80GB HBM3", 81559, 700, 70, 87, 92, 1980, 2619},
	{"A100-80GB", "NVIDIA A100-SXM4-80GB", 81920, 400, 55, 87, 92, 1410, 1593},
	{"A100-40GB", "NVIDIA A100-SXM4-40GB", 40960, 400, 52, 87, 92, 1410, 1215},
	{"L40S", "NVIDIA L40S", 46068, 350, 35, 88, 93, 2520, 9001},
	{"RTX4090", "NVIDIA GeForce RTX 4090", 24564, 450, 25, 87, 92, 2520, 10501},
	{"RTX3090", "NVIDIA GeForce RTX 3090", 24576, 350, 25, 90, 98, 1950, 9751},
	{"V100-32GB", "Tesla V100-SXM2-32GB", 32768, 300, 40, 87, 90, 1530, 877},
	{"T4", "Tesla T4", 15360, 70, 10, 85, 90, 1590, 5000},
}

// ParseSpec reads a simulation spec: comma-separated COUNTxMODEL terms,
// such as "4xH100-80GB" or "2xA100-80GB,1xRTX4090"; a bare MODEL means one.
// A term may split its GPUs into MIG slices (see ParseSimSpec).
func ParseSpec(spec string) ([]Model, error) {
	gpus, err := ParseSimSpec(spec)
	if err != nil {
		return nil, err
	}
	out := make([]Model, len(gpus))
	for i, g := range gpus {
		out[i] = g.Model
	}
	return out, nil
}

// SimGPU is one simulated GPU: its model and, in MIG mode, its slices.
type SimGPU struct {
	Model
	MIG []MIGProfile // empty: MIG off
}

// ParseSimSpec reads a simulation spec like ParseSpec, where a term may end
// in ":mig=LAYOUT" to put its GPUs in MIG mode with those slices, e.g.
// "1xA100-80GB:mig=3g.40gb+2x2g.20gb" (one 3g.40gb and two 2g.20gb).
func ParseSimSpec(spec string) ([]SimGPU, error) {
	var out []SimGPU
	for _, term := range strings.Split(spec, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		term, opt, hasOpt := strings.Cut(term, ":")
		count, key := 1, term
		if i := strings.IndexAny(term, "xX"); i > 0 {
			if n, err := strconv.Atoi(term[:i]); err == nil {
				count, key = n, term[i+1:]
			}
		}
		if count < 1 || count > 64 {
			return nil, fmt.Errorf("simulated GPUs %q: count %d must be 1 to 64", spec, count)
		}
		m, ok := modelByKey(key)
		if !ok {
			return nil, fmt.Errorf("simulated GPUs %q: unknown model %q: use one of %s", spec, key, modelKeys())
		}
		var mig []MIGProfile
		if hasOpt {
			layout, ok := strings.CutPrefix(strings.TrimSpace(opt), "mig=")
			if !ok || strings.TrimSpace(layout) == "" {
				return nil, fmt.Errorf("simulated GPUs %q: %q: write MODEL:mig=LAYOUT, e.g. 1xA100-80GB:mig=3g.40gb+2x2g.20gb", spec, opt)
			}
			var err error
			if mig, err = parseMIG(m, layout); err != nil {
				return nil, fmt.Errorf("simulated GPUs %q: %w", spec, err)
			}
		}
		for range count {
			out = append(out, SimGPU{Model: m, MIG: mig})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("simulated GPUs %q: empty spec: write e.g. 4xH100-80GB", spec)
	}
	return out, nil
}

func modelByKey(key string) (Model, bool) {
	for _, m := range Models {
		if strings.EqualFold(m.Key, key) {
			return m, true
		}
	}
	return Model{}, false
}

func modelKeys() string {
	keys := make([]string, len(Models))
	for i, m := range Models {
		keys[i] = m.Key
	}
	return strings.Join(keys, ", ")
}

// SimOptions tunes a simulated source.
type SimOptions struct {
	Seed int64            // same seed, same clock readings: same telemetry
	Now  func() time.Time // nil is time.Now
}

// Simulated is a source of pretend GPUs whose telemetry follows the holders
// the engine assigns to them: memory used is what the holders hold,
// utilisation rises while a GPU is held and falls when it is released,
// temperature follows utilisation more slowly, and power stays within the
// model's limit. Every snapshot is marked Simulated.
type Simulated struct {
	spec string
	now  func() time.Time

	mu   sync.Mutex
	rng  *rand.Rand
	gpus []simGPU
	last time.Time
}

type simGPU struct {
	model   Model
	mig     []simMIG // MIG slices; empty: MIG off
	uuid    string
	holders map[string]int64 // holder -> MiB
	busy    float64          // 0..1, how hard the holders drive it
	util    float64          // %
	temp    float64          // °C
}

// simMIG is one MIG slice of a simulated GPU.
type simMIG struct {
	profile MIGProfile
	uuid    string
	memMiB  int64
	holders map[string]int64
}

// Time constants of the simulated dynamics: utilisation settles within a
// few seconds, temperature within a minute or two.
const (
	simUtilTau = 3 * time.Second
	simTempTau = 40 * time.Second
	simAmbient = 32.0
)

// NewSimulated returns a simulated source for a spec (see ParseSpec).
func NewSimulated(spec string, o SimOptions) (*Simulated, error) {
	gpus, err := ParseSimSpec(spec)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Simulated{spec: spec, now: o.Now, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6e69756d61))}
	for i, g := range gpus {
		sg := simGPU{model: g.Model, uuid: fmt.Sprintf("GPU-51a1a7ed-0000-4000-8000-%012d", i),
			holders: map[string]int64{}, temp: simAmbient}
		for k, p := range g.MIG {
			sg.mig = append(sg.mig, simMIG{profile: p, uuid: fmt.Sprintf("MIG-51a1a7ed-0000-4000-8000-%04d%08d", i, k),
				memMiB: profileMiB(g.Model, p), holders: map[string]int64{}})
		}
		s.gpus = append(s.gpus, sg)
	}
	return s, nil
}

// Assign implements Assigner.
func (s *Simulated) Assign(uuid, holder string, memMiB int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.gpus {
		g := &s.gpus[i]
		holders := g.holders
		if k := g.slice(uuid); k >= 0 {
			holders = g.mig[k].holders
		} else if g.uuid != uuid {
			continue
		}
		holders[holder] += memMiB
		// Each holder drives the GPU between 70 % and 98 %.
		g.busy = math.Min(1, 0.70+0.28*s.rng.Float64()+0.1*float64(g.holderCount()-1))
	}
}

// Release implements Assigner.
func (s *Simulated) Release(uuid, holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.gpus {
		g := &s.gpus[i]
		if k := g.slice(uuid); k >= 0 {
			delete(g.mig[k].holders, holder)
		} else if g.uuid == uuid {
			delete(g.holders, holder)
		} else {
			continue
		}
		if g.holderCount() == 0 {
			g.busy = 0
		}
	}
}

// Snapshot implements Source. The state advances by the time passed since
// the previous snapshot.
func (s *Simulated) Snapshot(context.Context) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	dt := time.Duration(0)
	if !s.last.IsZero() {
		dt = max(now.Sub(s.last), 0)
	}
	s.last = now
	snap := Snapshot{Source: SourceSimulated, Simulated: true, At: now, Driver: "simulated " + s.spec}
	for i := range s.gpus {
		snap.GPUs = append(snap.GPUs, s.step(i, dt))
		s.gpus[i].migState(&snap.GPUs[i])
	}
	return snap, nil
}

// slice is the index of the MIG slice with uuid, or -1.
func (g *simGPU) slice(uuid string) int {
	for k := range g.mig {
		if g.mig[k].uuid == uuid {
			return k
		}
	}
	return -1
}

// holderCount counts the holders of the GPU and of its slices.
func (g *simGPU) holderCount() int {
	n := len(g.holders)
	for _, m := range g.mig {
		n += len(m.holders)
	}
	return n
}

// migState reports a GPU in MIG mode as NVML does: MIG on, its slices with
// their memory and holders, the GPU's memory used the slices' sum, and no
// whole-GPU utilisation.
func (g *simGPU) migState(out *GPU) {
	if len(g.mig) == 0 {
		return
	}
	out.MIGEnabled = ptr(true)
	out.UtilPercent, out.MemUtilPercent = nil, nil
	var used int64
	for k, m := range g.mig {
		d := MIGDevice{Index: k, UUID: m.uuid, Profile: m.profile.Name, MemTotalMiB: m.memMiB, Processes: []Process{}}
		holders := make([]string, 0, len(m.holders))
		for h := range m.holders {
			holders = append(holders, h)
		}
		sort.Strings(holders)
		for _, h := range holders {
			o := ownerFromHolder(h)
			d.MemUsedMiB += m.holders[h]
			d.Processes = append(d.Processes, Process{MemMiB: m.holders[h], Owner: &o})
		}
		d.MemUsedMiB = min(d.MemUsedMiB, d.MemTotalMiB)
		d.MemFreeMiB = d.MemTotalMiB - d.MemUsedMiB
		used += d.MemUsedMiB
		out.MIG = append(out.MIG, d)
	}
	out.MemUsedMiB, out.MemFreeMiB = used, out.MemTotalMiB-used
}

// step advances GPU i by dt and reports it.
func (s *Simulated) step(i int, dt time.Duration) GPU {
	g := &s.gpus[i]
	m := g.model
	jitter := func(amp float64) float64 { return amp * (2*s.rng.Float64() - 1) }
	approach := func(cur, target float64, tau time.Duration) float64 {
		return cur + (target-cur)*(1-math.Exp(-dt.Seconds()/tau.Seconds()))
	}
	targetUtil := 100 * g.busy
	if g.busy > 0 {
		targetUtil = math.Min(100, targetUtil+jitter(4))
	}
	g.util = approach(g.util, targetUtil, simUtilTau)
	g.temp = approach(g.temp, simAmbient+0.48*g.util, simTempTau)

	var used int64
	holders := make([]string, 0, len(g.holders))
	for h, mib := range g.holders {
		used += mib
		holders = append(holders, h)
	}
	sort.Strings(holders)
	used = min(used, m.MemMiB)
	procs := make([]Process, 0, len(holders))
	for _, h := range holders {
		o := ownerFromHolder(h)
		procs = append(procs, Process{MemMiB: g.holders[h], Owner: &o})
	}
	util := math.Round(g.util)
	memUtil := math.Round(0.6 * g.util)
	power := math.Min(m.PowerLimit, m.IdlePower+(m.PowerLimit-m.IdlePower)*g.util/100+jitter(3))
	power = math.Round(math.Max(m.IdlePower*0.9, power)*10) / 10
	temp := math.Round(g.temp)
	sm := m.SMClock * 3 / 10
	if g.util > 1 {
		sm = m.SMClock
	}
	throttle, mask := []string{}, uint64(0)
	if g.util < 1 {
		throttle, mask = append(throttle, "gpu_idle"), 1 // NVML's GpuIdle bit
	}
	return GPU{
		Index: i, UUID: g.uuid, Name: m.Name, PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10),
		MemTotalMiB: m.MemMiB, MemUsedMiB: used, MemFreeMiB: m.MemMiB - used,
		UtilPercent: ptr(util), MemUtilPercent: ptr(memUtil),
		TempC: ptr(temp), TempSlowdownC: ptr(m.SlowdownC), TempShutdownC: ptr(m.ShutdownC),
		PowerW: ptr(power), PowerLimitW: ptr(m.PowerLimit),
		SMClockMHz: ptr(sm), MemClockMHz: ptr(m.MemClock), ThrottleReasons: throttle, ThrottleMask: ptr(mask),
		ECCCorrected: ptr(int64(0)), ECCUncorrected: ptr(int64(0)), MIGEnabled: ptr(false),
		Processes: procs, Healthy: true,
	}
}

// ownerFromHolder reads "RUN/STAGE" (or "RUN") back into an Owner.
func ownerFromHolder(h string) Owner {
	run, stage, _ := strings.Cut(h, "/")
	return Owner{RunID: run, Stage: stage}
}
