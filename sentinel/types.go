package sentinel

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Point is one value of one metric of one attempt, as a stage reported it.
// The engine's metric points map onto it field by field.
type Point struct {
	Run, Stage string
	Attempt    int
	Key        string
	Step       int64
	Value      float64 // NaN and ±Inf are what the NaN detector looks for
	// Wall is when Niuma received the point: the hang detector's clock.
	// Never the workload's own time (a TensorBoard event's wall_time): a
	// file written yesterday and read now arrived now.
	Wall time.Time
}

// Throttle is a bit set of the reasons a GPU runs below its top clocks, with
// NVML's bit values (nvmlClocksEventReasons), so gpumon can pass them as is.
type Throttle uint64

// Throttle reasons the sentinel looks at (NVML's values).
const (
	ThrottleGPUIdle           Throttle = 0x1
	ThrottleSWPowerCap        Throttle = 0x4
	ThrottleHWSlowdown        Throttle = 0x8
	ThrottleSWThermalSlowdown Throttle = 0x20
	ThrottleHWThermalSlowdown Throttle = 0x40
	ThrottleHWPowerBrake      Throttle = 0x80
	throttleThermal                    = ThrottleSWThermalSlowdown | ThrottleHWThermalSlowdown
)

// Thermal reports whether a thermal slowdown (software or hardware) is active.
func (t Throttle) Thermal() bool { return t&throttleThermal != 0 }

// GPUSample is one telemetry reading of one GPU. A float field the GPU did
// not report is NaN; a zero SlowdownTempC means the threshold is unknown.
type GPUSample struct {
	UUID          string
	Time          time.Time
	UtilPercent   float64
	MemUsedMiB    float64
	MemTotalMiB   float64
	TempC         float64
	SlowdownTempC float64 // NVML's slowdown temperature threshold
	Throttle      Throttle
	// RunMemMiB is the GPU memory each run holds on this GPU (by run ID),
	// summed over its processes; the leak and idle detectors follow it.
	// A run with an entry holds the GPU.
	RunMemMiB map[string]float64
	// Stage names the stage of each run in RunMemMiB, where known; the data
	// stall detector only judges training-like stages when it is given.
	Stage map[string]string
	// XIDs are the XID error codes NVML reported since the previous sample.
	XIDs []int
	// ECCUncorrected is the GPU's volatile uncorrected ECC error count; a
	// rise between samples is a health event. Negative = not reported.
	ECCUncorrected int64
}

// QueueObservation is one look at a queued stage: since when it waits, the
// shepherd's reason in plain words (e.g. "needs 1×20 GiB; largest free is
// 8 GiB on GPU 1; 2 runs ahead") and the same as figures and a code.
type QueueObservation struct {
	Run, Stage   string
	WaitingSince time.Time
	Reason       string
	// Code is the shepherd's wait code ("gpu_memory", "never_fits", ...);
	// "" when unknown.
	Code           string
	NeedMiB        float64 // memory the stage asks for per GPU; 0 = unknown
	LargestFreeMiB float64 // the most free memory on one healthy GPU; negative = unknown
	// Ahead counts the runs ranked before it; negative = unknown. A stage
	// that moves up is making progress, however long it has waited.
	Ahead int
}

// Kind names what an anomaly is; the words are stored as storage.Event.Kind.
type Kind string

// Anomaly kinds, one per detector.
const (
	NaN           Kind = "nan"
	LossSpike     Kind = "loss_spike"
	Divergence    Kind = "divergence"
	GradExplosion Kind = "grad_explosion"
	Plateau       Kind = "plateau"
	// NoProgress is a run that is not learning: after its warm-up the loss
	// is no lower than where it started, or its validation accuracy sits
	// at chance.
	NoProgress  Kind = "no_progress"
	Hang        Kind = "hang"
	Overheating Kind = "overheating"
	MemoryLeak  Kind = "memory_leak"
	DataStall   Kind = "data_stall"
	IdleGPU     Kind = "idle_gpu"
	QueueStuck  Kind = "queue_stuck"
	GPUHealth   Kind = "gpu_health"
	// CUDAOOM is a stage that failed because its GPU ran out of memory
	// (Diagnose recognises it); a template may answer it with a retry
	// with a smaller batch.
	CUDAOOM Kind = "cuda_oom"
)

// Kinds lists every kind, in the order reports show them.
var Kinds = []Kind{NaN, LossSpike, Divergence, GradExplosion, NoProgress, Plateau, Hang,
	Overheating, MemoryLeak, DataStall, IdleGPU, QueueStuck, GPUHealth}

// FailureKinds are kinds no detector raises: Diagnose recognises them in a
// failed attempt's output, and a template may answer them like any other.
var FailureKinds = []Kind{CUDAOOM}

// Severity says how urgent an anomaly is; the words match storage's
// severities ("info", "warning", "critical").
type Severity string

// Severities.
const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

// Anomaly is one thing the sentinel saw: what, where, when, the evidence,
// and what to do about it.
type Anomaly struct {
	Kind     Kind
	Severity Severity
	Run      string // "" for a machine-wide anomaly (a GPU's health)
	Stage    string
	Attempt  int
	GPU      string    // GPU UUID, for telemetry anomalies
	At       time.Time // the wall time of the point or sample that tipped it
	Step     int64     // the step that tipped it (metric anomalies)
	Evidence Evidence
	Message  string // what happened, in plain words
	Fix      string // what to try
}

// Evidence is what an anomaly rests on: the step range and the values, or
// the samples, and the statistics the detector computed.
type Evidence struct {
	Attempt  int               `json:"attempt,omitempty"` // storage.Event has no attempt column
	Key      string            `json:"key,omitempty"`
	FromStep int64             `json:"from_step,omitempty"`
	ToStep   int64             `json:"to_step,omitempty"`
	Steps    []int64           `json:"steps,omitempty"`
	Values   []Num             `json:"values,omitempty"`
	Times    []time.Time       `json:"times,omitempty"` // of telemetry samples, with Values
	Stats    map[string]Num    `json:"stats,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"`
}

// JSON encodes the evidence for storage.Event.Evidence.
func (e Evidence) JSON() string {
	b, err := json.Marshal(e)
	if err != nil { // cannot happen: Num encodes every float
		return "{}"
	}
	return string(b)
}

// Num is a float64 that encodes NaN and ±Inf as the JSON strings "NaN",
// "+Inf" and "-Inf" (plain JSON has no such numbers), so evidence can show
// the very value that tripped the NaN detector.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', 6, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Num) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*n = Num(math.NaN())
		return nil
	case `"+Inf"`:
		*n = Num(math.Inf(1))
		return nil
	case `"-Inf"`:
		*n = Num(math.Inf(-1))
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

func nums(v []float64) []Num {
	out := make([]Num, len(v))
	for i, x := range v {
		out[i] = Num(x)
	}
	return out
}

// throttleNames are gpumon's names for the NVML reasons (GPU.ThrottleReasons).
var throttleNames = map[string]Throttle{
	"gpu_idle":                ThrottleGPUIdle,
	"sw_power_cap":            ThrottleSWPowerCap,
	"hw_slowdown":             ThrottleHWSlowdown,
	"sw_thermal_slowdown":     ThrottleSWThermalSlowdown,
	"hw_thermal_slowdown":     ThrottleHWThermalSlowdown,
	"hw_power_brake_slowdown": ThrottleHWPowerBrake,
}

// ThrottleFromNames turns gpumon's reason names ("hw_thermal_slowdown", ...)
// into a Throttle; names it does not know are ignored.
func ThrottleFromNames(names []string) Throttle {
	var t Throttle
	for _, n := range names {
		t |= throttleNames[n]
	}
	return t
}

// Key is the metric the anomaly is about ("" for telemetry and the queue).
func (a Anomaly) Key() string { return a.Evidence.Key }
