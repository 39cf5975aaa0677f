package engine

import (
	"fmt"
	"math"
	"time"

	"niuma/engine/executor"
	"niuma/engine/template"
	"niuma/storage"
)

// Needs override, for one launch, what a template's stages ask of the
// machine (niuma run --gpus 2 --gpu-memory 20GiB --estimate 2h). They apply
// to the stages that ask for GPUs — to every stage when none does. Zero
// fields keep the template's.
type Needs struct {
	GPUs         *int          // GPUs per stage; nil keeps the template's
	GPUMemoryMiB int64         // per GPU
	Estimate     time.Duration // the stage's expected run time
}

// defaultCPUMilli is what a stage that does not say asks of the host's
// CPUs: one CPU.
const defaultCPUMilli = 1000

// check says what of n no run could ask for.
func (n Needs) check() error {
	switch {
	case n.GPUs != nil && (*n.GPUs < 0 || *n.GPUs > 4096):
		return fmt.Errorf("gpus %d: write a whole number from 0 to 4096", *n.GPUs)
	case n.GPUMemoryMiB < 0:
		return fmt.Errorf("gpu memory %d MiB: write a size such as 20GiB", n.GPUMemoryMiB)
	case n.Estimate < 0:
		return fmt.Errorf("estimate %s: write a duration such as 2h", n.Estimate)
	}
	return nil
}

// stageNeeds fills what each stage of a new run asks for: the template's
// GPUs and memory for the run's values, its cpus, memory and estimate (for
// a docker template, its container's cpus and memory limits where the
// stage does not say; one CPU where neither does), and the launch's
// overrides on top.
func stageNeeds(t *template.Template, values template.Values, n Needs, stages []storage.Stage) error {
	if err := n.check(); err != nil {
		return err
	}
	anyGPU := false
	for _, s := range stages {
		anyGPU = anyGPU || s.GPUs > 0
	}
	for i := range stages {
		s := &stages[i]
		st, _ := t.Stage(s.Name)
		s.CPUMilli, s.MemMiB, s.Estimate = st.CPUMilli, st.MemMiB, st.Estimate
		if t.Runtime.Kind == "docker" {
			// A container's limits say what it will hold, unless the stage
			// says otherwise.
			if s.CPUMilli == 0 && t.Runtime.CPUs > 0 {
				s.CPUMilli = int64(math.Ceil(t.Runtime.CPUs * 1000))
			}
			if s.MemMiB == 0 {
				s.MemMiB = t.Runtime.MemoryMiB
			}
		}
		if s.CPUMilli == 0 {
			s.CPUMilli = defaultCPUMilli
		}
		if anyGPU && s.GPUs == 0 {
			continue // the overrides are for the stages that use GPUs
		}
		if n.GPUs != nil {
			s.GPUs = *n.GPUs
		}
		if n.GPUMemoryMiB > 0 {
			s.GPUMemoryMiB = n.GPUMemoryMiB
		}
		if n.Estimate > 0 {
			s.Estimate = n.Estimate
		}
	}
	return nil
}

// checkHost refuses, before anything is written, a run with a stage that
// asks for more CPUs or host memory than this machine gives its stages in
// all: it would wait forever. A cluster's executor places its own.
func (e *Engine) checkHost(exName string, stages []storage.Stage) error {
	if p, ok := e.execs[exName].(executor.Placer); ok && p.PlacesItself() {
		return nil
	}
	h := e.opts.Host
	for _, s := range stages {
		switch {
		case h.CPUMilli > 0 && s.CPUMilli > h.CPUMilli:
			return fmt.Errorf("stage %s asks for %s CPUs; this machine gives its stages %s in all: ask for fewer (cpus: in the template), or raise shepherd: cpus in settings.yaml",
				s.Name, cpuWords(s.CPUMilli), cpuWords(h.CPUMilli))
		case h.MemMiB > 0 && s.MemMiB > h.MemMiB:
			return fmt.Errorf("stage %s asks for %d MiB of host memory; this machine gives its stages %d MiB in all: ask for less (memory: in the template), or raise shepherd: memory in settings.yaml",
				s.Name, s.MemMiB, h.MemMiB)
		}
	}
	return nil
}

// cpuWords writes thousandths of a CPU as people count CPUs: "2", "0.5".
func cpuWords(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprint(milli / 1000)
	}
	return fmt.Sprintf("%.1f", float64(milli)/1000)
}
