package ui

import (
	"context"
	"fmt"
	"strings"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/shepherd"
)

// neverFits says why this machine can never hold one of the runs (a stage
// asks for more GPUs, or more memory per GPU, than the machine has even
// with nothing else running), or nil. It asks the shepherd to place each
// stage on the machine's GPUs as they would be with every run gone, so
// that the answer is the shepherd's, not a rule of the window's. GPU
// telemetry that cannot be read refuses nothing.
func (w *Wizard) neverFits(specs []engine.RunSpec) error {
	snap, err := w.backend.GPUs(context.Background())
	if err != nil {
		return nil
	}
	return neverFits(snap, specs, w.resources)
}

func neverFits(snap gpumon.Snapshot, specs []engine.RunSpec, res Resources) error {
	empty := shepherd.Inventory{Reason: snap.Reason}
	var most int64
	healthy := 0
	for _, g := range snap.GPUs {
		if !g.Healthy {
			continue
		}
		healthy++
		most = max(most, g.MemTotalMiB)
		empty.GPUs = append(empty.GPUs, shepherd.GPU{Index: g.Index, UUID: g.UUID, Model: g.Name,
			TotalMiB: g.MemTotalMiB, FreeMiB: g.MemTotalMiB, Healthy: true})
	}
	for i, s := range specs {
		if s.Template == nil {
			continue
		}
		for _, st := range s.Template.Stages {
			n, ok := stageNeed(s, st, res, st.Name)
			if !ok || n.GPUs == 0 {
				continue
			}
			gpus, mem := n.GPUs, n.GPUMemMiB
			d := shepherd.FirstFit(empty, shepherd.Build(n))
			if d.Placed() {
				continue
			}
			run := ""
			if len(specs) > 1 {
				run = fmt.Sprintf("run %d (%s): ", i+1, specLine(s))
			}
			return fmt.Errorf("%sstage %s can never start here: it needs %s and this machine has %s. %s",
				run, st.Name, needText(gpus, mem), haveText(healthy, most, snap), fixText(st, res))
		}
	}
	return nil
}

func needText(gpus int, mem int64) string {
	s := fmt.Sprintf("%d %s", gpus, plural(gpus, "GPU", "GPUs"))
	if mem > 0 {
		s += " with " + mibText(mem) + " each"
	}
	return s
}

func haveText(n int, most int64, snap gpumon.Snapshot) string {
	if n == 0 {
		why := "no usable GPU"
		if snap.Reason != "" {
			why += " (" + strings.TrimSuffix(snap.Reason, ".") + ")"
		}
		return why
	}
	return fmt.Sprintf("%d usable %s of at most %s", n, plural(n, "GPU", "GPUs"), mibText(most))
}

// fixText says what to change: the parameter that sets the need, or the
// template.
func fixText(st template.Stage, res Resources) string {
	switch {
	case res.UseGPUs || res.GPUMemMiB > 0:
		return "Lower GPUs or GPU memory on the Resources step."
	case st.GPUsParam != "":
		return "Lower " + st.GPUsParam + " (or " + orName(st.GPUMemoryParam, "gpu_memory") + ") on the Resources step."
	case st.GPUMemoryParam != "":
		return "Lower " + st.GPUMemoryParam + " on the Resources step."
	default:
		return "Lower gpus or gpu_memory of stage " + st.Name + " in the template."
	}
}

func orName(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func mibText(m int64) string {
	switch {
	case m >= 10*1024:
		return fmt.Sprintf("%.0f GiB", float64(m)/1024)
	case m >= 1024:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(m)/1024), ".0") + " GiB"
	}
	return fmt.Sprintf("%d MiB", m)
}
