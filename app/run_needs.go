package app

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/printable"
)

// needFlags are `niuma run`'s overrides of what a template's stages ask
// for, and what the run allows the shepherd.
type needFlags struct {
	gpus, gpuMemory, estimate *string
	spot, share, flagOnly     *bool
}

func addNeedFlags(fs *flag.FlagSet) *needFlags {
	return &needFlags{
		gpus:      fs.String("gpus", "", "GPUs per stage that uses GPUs (overrides the template)"),
		gpuMemory: fs.String("gpu-memory", "", "memory per GPU, e.g. 20GiB (overrides the template)"),
		estimate:  fs.String("estimate", "", "how long the GPU stages run, e.g. 2h (overrides the template and the predictor)"),
		spot:      fs.Bool("spot", false, "the run may be preempted for higher-priority work (SIGTERM, requeued, resumed with NIUMA_RESUME)"),
		share:     fs.Bool("share", false, "the run may share a GPU with other runs when memory fits"),
		flagOnly:  fs.Bool("flag-only", false, "the sentinel only flags the run's anomalies, never retries or stops it"),
	}
}

// apply reads the flags into spec, each checked as --set checks a value:
// a message that names the flag and what to write.
func (f *needFlags) apply(spec *engine.RunSpec) error {
	bad := func(flag, value, want string) error {
		return exitError{code: 2, msg: fmt.Sprintf("--%s %s: %s", flag, printable.Shorten(value, 64), want)}
	}
	if s := strings.TrimSpace(*f.gpus); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 4096 {
			return bad("gpus", s, "write a whole number of GPUs from 0 to 4096")
		}
		spec.Needs.GPUs = &n
	}
	if s := strings.TrimSpace(*f.gpuMemory); s != "" {
		m, err := template.ParseGPUMemory(s)
		if err != nil || m <= 0 {
			return bad("gpu-memory", s, "write a size such as 20GiB or 512MiB")
		}
		spec.Needs.GPUMemoryMiB = m
	}
	if s := strings.TrimSpace(*f.estimate); s != "" {
		d, err := template.ParseEstimate(s)
		if err != nil {
			return bad("estimate", s, "write a duration such as 40m, 2h or 1h30m")
		}
		spec.Needs.Estimate = d
	}
	spec.Spot, spec.Share, spec.FlagOnly = *f.spot, *f.share, *f.flagOnly
	return nil
}

// runFlags names what a run allows the shepherd, for `niuma show`.
func runFlags(r engine.RunInfo) string {
	out := ""
	if r.Spot {
		out += "   spot (may be preempted)"
	}
	if r.Share {
		out += "   share (may share a GPU)"
	}
	if r.FlagOnly {
		out += "   sentinel only flags (no retry or stop)"
	}
	return out
}
