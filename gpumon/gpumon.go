package gpumon

import "context"

// GPU is one device as last seen.
type GPU struct {
	Index       int
	UUID        string
	Name        string
	MemTotalMiB int64
	MemUsedMiB  int64
	UtilPercent float64
	TempC       float64
	Healthy     bool
}

// Snapshot is the machine's GPUs at one moment.
type Snapshot struct {
	Source    string // "nvml", "simulated", "none"
	Simulated bool
	// Reason says why there are no GPUs, when there are none.
	Reason string
	GPUs   []GPU
}

// Source yields snapshots.
type Source interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Absent is the source for a machine where no GPU can be seen. It says why.
type Absent struct{ Reason string }

// Snapshot implements Source.
func (a Absent) Snapshot(context.Context) (Snapshot, error) {
	reason := a.Reason
	if reason == "" {
		reason = "no GPU telemetry source is configured"
	}
	return Snapshot{Source: "none", Reason: reason}, nil
}
