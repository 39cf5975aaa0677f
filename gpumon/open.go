package gpumon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// EnvSimulate names the environment variable that asks for simulated GPUs
// (the same spec as --simulate-gpus).
const EnvSimulate = "NIUMA_SIMULATE_GPUS"

// Config says how to pick the machine's GPU source.
type Config struct {
	// Simulate is a spec such as "4xH100-80GB"; "" falls back to
	// $NIUMA_SIMULATE_GPUS. Simulated GPUs are used only when NVML sees
	// no real GPU.
	Simulate string
	Seed     int64 // for the simulated source
	NVML     NVMLOptions
	Logger   *slog.Logger
}

// Opened is the source Open picked, with what the caller must run and close.
type Opened struct {
	Source Source
	// Note tells the user about the choice, e.g. that simulated GPUs were
	// asked for but real ones are present; "" when there is nothing to say.
	Note string
	// NVML is the real source when one was picked (run its WatchHealth in a
	// goroutine), else nil.
	NVML *NVML
}

// Close releases the source (shuts NVML down).
func (o Opened) Close() error {
	if o.NVML != nil {
		return o.NVML.Close()
	}
	return nil
}

// Open picks the GPU source: NVML when it initialises and sees at least
// one GPU; else simulated GPUs when configured; else Absent with the reason
// (e.g. "NVML library not found: is the NVIDIA driver installed?"). It
// fails only for a simulation spec it cannot read.
func Open(ctx context.Context, cfg Config) (Opened, error) {
	spec := cfg.Simulate
	if spec == "" {
		spec = os.Getenv(EnvSimulate)
	}
	var sim *Simulated
	if spec != "" {
		s, err := NewSimulated(spec, SimOptions{Seed: cfg.Seed})
		if err != nil {
			return Opened{}, err
		}
		sim = s
	}
	reason := ""
	n, err := OpenNVML(cfg.NVML)
	if err != nil {
		reason = err.Error()
	} else {
		snap, serr := n.Snapshot(ctx)
		switch {
		case serr == nil && len(snap.GPUs) > 0:
			o := Opened{Source: n, NVML: n}
			if sim != nil {
				o.Note = fmt.Sprintf("simulated GPUs (%s) ignored: NVML sees %d real GPU(s)", spec, len(snap.GPUs))
			}
			return o, nil
		case serr != nil:
			reason = serr.Error()
		default:
			reason = "the NVIDIA driver is loaded but NVML sees no GPU"
		}
		n.Close()
	}
	if sim != nil {
		return Opened{Source: sim, Note: "simulated GPUs (" + spec + "): " + reason}, nil
	}
	return Opened{Source: Absent{Reason: reason}}, nil
}
