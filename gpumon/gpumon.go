package gpumon

import (
	"context"
	"time"
)

// Source names, as Snapshot.Source reports them.
const (
	SourceNVML      = "nvml"
	SourceSimulated = "simulated"
	SourceNone      = "none"
)

// GPU is one device as last seen. A pointer field is nil when the device
// did not report that value (NVML answered "not supported", or the GPU is in
// a mode where it has no meaning, such as utilisation with MIG enabled).
type GPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	PCIBusID string `json:"pci_bus_id,omitempty"`

	MemTotalMiB int64 `json:"mem_total_mib"`
	MemUsedMiB  int64 `json:"mem_used_mib"`
	MemFreeMiB  int64 `json:"mem_free_mib"`

	UtilPercent    *float64 `json:"util_percent"`     // GPU (SM) utilisation
	MemUtilPercent *float64 `json:"mem_util_percent"` // memory controller utilisation

	TempC         *float64 `json:"temp_c"`
	TempSlowdownC *float64 `json:"temp_slowdown_c"` // the GPU slows itself down above this
	TempShutdownC *float64 `json:"temp_shutdown_c"` // the GPU shuts down above this

	PowerW      *float64 `json:"power_w"`
	PowerLimitW *float64 `json:"power_limit_w"` // the enforced limit

	SMClockMHz  *int64 `json:"sm_clock_mhz"`
	MemClockMHz *int64 `json:"mem_clock_mhz"`
	// ThrottleReasons names why the clocks are held down ("sw_power_cap",
	// "hw_thermal_slowdown", ...): nil when not reported, empty when none.
	ThrottleReasons []string `json:"throttle_reasons"`
	// ThrottleMask is the same as NVML's bit set (nvmlClocksEventReasons).
	ThrottleMask *uint64  `json:"throttle_mask"`
	FanPercent   *float64 `json:"fan_percent"`

	// ECC error counts since the driver loaded (volatile counters).
	ECCCorrected   *int64 `json:"ecc_corrected"`
	ECCUncorrected *int64 `json:"ecc_uncorrected"`
	MIGEnabled     *bool  `json:"mig_enabled"`
	// XIDs are the XID errors the driver reported for this GPU since the
	// previous snapshot (critical or not), oldest first.
	XIDs []uint64 `json:"xids,omitempty"`

	Processes []Process `json:"processes"`
	// MIG lists the GPU's MIG slices when MIG mode is on: each is a device
	// of its own, and the GPU is never offered whole (Snapshot.Devices).
	MIG []MIGDevice `json:"mig,omitempty"`
	// Group names the GPU's NVLink group: GPUs of one group are linked to
	// each other. "" when NVML reports no NVLink between this machine's
	// GPUs (then none are grouped).
	Group string `json:"group,omitempty"`

	// Healthy is false when the GPU must not be offered to new stages: an
	// uncorrectable ECC error, a critical XID, or the GPU fell off the bus.
	Healthy      bool   `json:"healthy"`
	HealthReason string `json:"health_reason,omitempty"`
	// Errors lists the calls that failed for this GPU in this sample, each
	// naming the call, so a reader knows a missing value is an error and
	// not an unsupported field.
	Errors []string `json:"errors,omitempty"`
}

// Process is one process holding memory on a GPU.
type Process struct {
	PID    int    `json:"pid"` // 0 for a simulated holder
	MemMiB int64  `json:"mem_mib"`
	Owner  *Owner `json:"owner,omitempty"` // nil when no Niuma run owns it
}

// Owner is the Niuma attempt a GPU process belongs to.
type Owner struct {
	RunID   string `json:"run_id"`
	Stage   string `json:"stage,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// String is "RUN/STAGE" (or just RUN), as the CLI prints it.
func (o Owner) String() string {
	if o.Stage == "" {
		return o.RunID
	}
	return o.RunID + "/" + o.Stage
}

// Snapshot is the machine's GPUs at one moment.
type Snapshot struct {
	Source    string    `json:"source"` // SourceNVML, SourceSimulated or SourceNone
	Simulated bool      `json:"simulated"`
	At        time.Time `json:"at"`
	Driver    string    `json:"driver,omitempty"` // NVIDIA driver version, or the simulation spec
	// Reason says why there are no GPUs, when there are none.
	Reason string `json:"reason,omitempty"`
	GPUs   []GPU  `json:"gpus"`
}

// Source yields snapshots.
type Source interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Assigner is implemented by sources whose telemetry follows what the engine
// placed on them (the simulated source, and a Sampler over one). The engine
// calls Assign when it starts an attempt on a GPU and Release when the
// attempt ends. A real GPU needs neither: NVML sees the processes.
type Assigner interface {
	// Assign records that holder (e.g. "RUN/STAGE") holds memMiB on the GPU.
	Assign(uuid, holder string, memMiB int64)
	// Release forgets what holder held on the GPU.
	Release(uuid, holder string)
}

// Absent is the source for a machine where no GPU can be seen. It says why.
type Absent struct{ Reason string }

// Snapshot implements Source.
func (a Absent) Snapshot(context.Context) (Snapshot, error) {
	reason := a.Reason
	if reason == "" {
		reason = "no GPU telemetry source is configured"
	}
	return Snapshot{Source: SourceNone, Reason: reason, At: time.Now(), GPUs: []GPU{}}, nil
}

func ptr[T any](v T) *T { return &v }
