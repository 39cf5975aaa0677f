package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"niuma/gpumon"
)

// gpus is `niuma gpus`: one line per GPU, like a friendlier nvidia-smi. A
// machine without a GPU is a normal answer, not an error: it prints why
// and exits 0.
func (c *cli) gpus(ctx context.Context, args []string) error {
	fs := c.flags("gpus")
	watch := fs.Bool("watch", false, "print again every --interval until interrupted")
	asJSON := fs.Bool("json", false, "print the snapshot as JSON")
	simulate := fs.String("simulate-gpus", "", "pretend GPUs, e.g. 4xH100-80GB, when there is no real one (or set "+gpumon.EnvSimulate+")")
	interval := fs.Duration("interval", time.Second, "time between samples with --watch")
	seed := fs.Int64("seed", 1, "seed of the simulated GPUs' telemetry")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return exitError{code: 2, msg: fmt.Sprintf("gpus takes no arguments, got %q", pos)}
	}
	if *interval <= 0 {
		return exitError{code: 2, msg: "--interval must be positive, e.g. 2s"}
	}
	// Owners names the GPU processes of Niuma's stages by their run, from
	// the stage contract's variables in their environment.
	opened, err := gpumon.Open(ctx, gpumon.Config{Simulate: *simulate, Seed: *seed,
		NVML: gpumon.NVMLOptions{Owners: gpumon.NewOwners(nil)}})
	if err != nil {
		return exitError{code: 2, msg: err.Error()}
	}
	defer opened.Close()
	if opened.Note != "" && opened.NVML != nil {
		fmt.Fprintln(c.err, "niuma:", opened.Note) // simulated GPUs asked for, real ones win
	}
	t := time.NewTicker(*interval)
	defer t.Stop()
	for first := true; ; first = false {
		snap, err := opened.Source.Snapshot(ctx)
		if err != nil {
			return fmt.Errorf("read the GPUs: %w", err)
		}
		if *asJSON {
			err = writeJSON(c.out, snap)
		} else {
			if !first {
				fmt.Fprintln(c.out)
			}
			err = writeGPUs(c.out, snap, *watch)
		}
		if err != nil || !*watch {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// writeGPUs prints one line per GPU, with the runs on it.
func writeGPUs(w io.Writer, snap gpumon.Snapshot, stamp bool) error {
	if stamp {
		fmt.Fprintln(w, snap.At.Format("15:04:05"))
	}
	if len(snap.GPUs) == 0 {
		_, err := fmt.Fprintln(w, "no GPU:", snap.Reason)
		return err
	}
	label := ""
	if snap.Simulated {
		fmt.Fprintf(w, "SIMULATED GPUs (%s), not real hardware\n", strings.TrimPrefix(snap.Driver, "simulated "))
		label = "  [simulated]"
	}
	tw := newTable(w, "GPU", "NAME", "UTIL", "MEMORY", "TEMP", "POWER", "RUNS")
	for _, g := range snap.GPUs {
		runs := runsOn(g)
		if !g.Healthy {
			runs = "UNHEALTHY: " + g.HealthReason
		}
		tw.row(fmt.Sprint(g.Index), g.Name, optFmt(g.UtilPercent, "%.0f%%"),
			fmt.Sprintf("%.1f/%.1f GiB", float64(g.MemUsedMiB)/1024, float64(g.MemTotalMiB)/1024),
			optFmt(g.TempC, "%.0f°C"), powerFmt(g), runs+label)
	}
	return tw.flush()
}

// runsOn lists the runs holding the GPU, then how many processes no run owns.
func runsOn(g gpumon.GPU) string {
	var runs []string
	seen := map[string]bool{}
	others := 0
	for _, p := range g.Processes {
		if p.Owner == nil {
			others++
			continue
		}
		if s := p.Owner.String(); !seen[s] {
			seen[s] = true
			runs = append(runs, s)
		}
	}
	if others > 0 {
		runs = append(runs, fmt.Sprintf("%d other process(es)", others))
	}
	if len(runs) == 0 {
		return "-"
	}
	return strings.Join(runs, ", ")
}

func optFmt(v *float64, format string) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

func powerFmt(g gpumon.GPU) string {
	switch {
	case g.PowerW == nil:
		return "n/a"
	case g.PowerLimitW == nil:
		return fmt.Sprintf("%.0f W", *g.PowerW)
	default:
		return fmt.Sprintf("%.0f/%.0f W", *g.PowerW, *g.PowerLimitW)
	}
}
