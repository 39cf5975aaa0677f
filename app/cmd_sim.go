package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"niuma/shepherd"
	"niuma/shepherd/sim"
)

// simCmd is `niuma sim`: replay a GPU-cluster trace through a shepherd
// policy on a simulated workstation and print what happened.
func (c *cli) simCmd(_ context.Context, args []string) error {
	fs := c.flags("sim")
	trace := fs.String("trace", "", "trace file: philly.csv or pai2023_pods.csv (required)")
	nodes := fs.String("nodes", "", "pai: pack onto these nodes (pai2023_gpu_nodes.csv) instead of --gpus")
	cluster := fs.String("cluster", "", "philly: replay only this virtual cluster (e.g. 6214e9)")
	estimates := fs.String("estimates", "predicted", "how run times are known: none, predicted (learned from earlier completions) or noisy:σ (users' guesses, e.g. noisy:0.5)")
	format := fs.String("format", "", "philly or pai (default: guessed from the file name)")
	gpus := fs.String("gpus", "8x80GiB", "the simulated machine: COUNTxMEMORY per GPU")
	group := fs.Int("group", 0, "GPUs per NVLink group (default: all GPUs in one group)")
	policy := fs.String("policy", "herd", "placement policy: "+strings.Join(shepherd.Policies, ", "))
	load := fs.Float64("load", 0.8, "rescale arrival gaps to this offered load (philly; 0 keeps the trace's gaps)")
	seed := fs.Uint64("seed", 1, "seed for the memory needs and priorities the trace lacks")
	startDay := fs.Float64("start-day", 0, "replay only jobs from this day of the trace on (philly)")
	days := fs.Float64("days", 0, "replay only this many days from --start-day (philly; 0 = to the end)")
	teamsCol := fs.String("teams", "", "share the machine among teams: the trace column that names each job's team (philly: cluster, the virtual cluster; pai: qos or gpu_spec)")
	shares := fs.String("shares", "proportional", "with --teams: each team's share of the GPUs, even or proportional (to its GPU-time in the replayed jobs)")
	halfLife := fs.Duration("half-life", 7*24*time.Hour, "with --teams: the half-life of the usage that orders borrowing teams (fair share)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return exitError{code: 2, msg: fmt.Sprintf("sim takes no arguments, got %q: give the trace with --trace FILE", pos)}
	}
	if *trace == "" {
		return exitError{code: 2, msg: "sim needs --trace FILE, e.g. --trace philly.csv"}
	}
	if *format == "" {
		*format = "philly"
		if strings.Contains(strings.ToLower(*trace), "pai") {
			*format = "pai"
		}
	}
	if !slices.Contains([]string{"philly", "pai"}, *format) {
		return exitError{code: 2, msg: fmt.Sprintf("--format %q: use philly or pai", *format)}
	}
	cfg := sim.DefaultConfig()
	if cfg.GPUs, cfg.GPUMiB, err = sim.ParseGPUs(*gpus); err != nil {
		return exitError{code: 2, msg: "--gpus: " + err.Error()}
	}
	cfg.GroupSize = *group
	if cfg.Policy, err = shepherd.ByName(*policy); err != nil {
		return exitError{code: 2, msg: "--policy: " + err.Error()}
	}
	if cfg.Estimates, err = sim.ParseEstimates(*estimates); err != nil {
		return exitError{code: 2, msg: "--estimates: " + err.Error()}
	}
	if !slices.Contains(sim.ShareModes, *shares) {
		return exitError{code: 2, msg: fmt.Sprintf("--shares %q: use even or proportional", *shares)}
	}
	f, err := os.Open(*trace)
	if err != nil {
		return fmt.Errorf("open the trace: %w (download it or point --trace at ../shared/data/traces)", err)
	}
	defer f.Close()
	var teamOf []string
	if *teamsCol != "" {
		if teamOf, err = sim.ReadColumn(f, *teamsCol); err != nil {
			return exitError{code: 2, msg: "--teams: " + err.Error()}
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	maxGPUs := cfg.GPUs
	if *format == "pai" {
		target := sim.Workstation(cfg.GPUs, cfg.GPUMiB, cfg.GroupSize)
		where := *gpus
		if *nodes != "" {
			nf, err := os.Open(*nodes)
			if err != nil {
				return fmt.Errorf("open the node list: %w (point --nodes at pai2023_gpu_nodes.csv)", err)
			}
			target, err = sim.LoadPAINodes(nf, cfg.GPUMiB)
			nf.Close()
			if err != nil {
				return err
			}
			maxGPUs = 0
			for _, h := range target.Hosts {
				maxGPUs = max(maxGPUs, countGPUs(target, h.Name))
			}
			where = fmt.Sprintf("%d nodes with %d GPUs", len(target.Hosts), len(target.GPUs))
		}
		pods, err := sim.LoadPAI(f, maxGPUs)
		if err != nil {
			return err
		}
		if teamOf != nil {
			if *nodes != "" {
				return exitError{code: 2, msg: "--teams replays on --gpus; it does not pack onto --nodes"}
			}
			sim.SetTeams(pods, teamOf)
			pods = slices.DeleteFunc(pods, func(j sim.Job) bool { return j.GPUs < 1 })
			if *load > 0 {
				pods = sim.Rescale(pods, *load, cfg.GPUs)
			}
			return c.simTeams(pods, cfg, *shares, *halfLife, *asJSON,
				"(PAI pod durations are censored: a pod still running at the trace's end counts its time so far)")
		}
		rep := sim.Pack(pods, target, cfg.Policy)
		if *asJSON {
			return writeJSON(c.out, rep)
		}
		fmt.Fprintf(c.out, "policy %s packed %d of %d pods (%d GPUs asked, %.0f GiB held) onto %s before the first refusal\n",
			rep.Policy, rep.Placed, len(pods), rep.GPUs, rep.UsedGiB, where)
		fmt.Fprintf(c.out, "  free then: %.0f GiB, of which stranded (on partly used GPUs, too little for that pod): %.0f GiB (%.1f GPUs' worth)\n",
			rep.FreeGiB, rep.StrandedGiB, rep.StrandedGPUs)
		fmt.Fprintf(c.out, "  refused: %s\n", rep.Refused)
		fmt.Fprintln(c.out, "  (PAI pod durations are censored, so PAI is replayed for packing only)")
		return nil
	}
	jobs, err := sim.LoadPhilly(f, maxGPUs, *seed)
	if err != nil {
		return err
	}
	if *cluster != "" {
		jobs = slices.DeleteFunc(jobs, func(j sim.Job) bool { return j.Cluster != *cluster })
		if len(jobs) == 0 {
			return exitError{code: 1, msg: fmt.Sprintf("no jobs of virtual cluster %q in the trace: check --cluster", *cluster)}
		}
	}
	if *days > 0 || *startDay > 0 {
		d := *days
		if d <= 0 {
			d = 1e6
		}
		jobs = sim.Window(jobs, *startDay, d)
	}
	if len(jobs) == 0 {
		return exitError{code: 1, msg: "no jobs to replay: check --start-day and --days against the trace's span"}
	}
	if *load > 0 {
		jobs = sim.Rescale(jobs, *load, cfg.GPUs)
	}
	if teamOf != nil {
		sim.SetTeams(jobs, teamOf)
		return c.simTeams(jobs, cfg, *shares, *halfLife, *asJSON, "")
	}
	rep := sim.Replay(jobs, cfg)
	if *asJSON {
		return writeJSON(c.out, rep)
	}
	fmt.Fprintf(c.out, "estimates: %s\n", cfg.Estimates)
	fmt.Fprint(c.out, rep.String())
	return nil
}

// simTeams replays jobs with the machine shared among their teams, beside
// each team alone on a static partition of its share, and prints both.
func (c *cli) simTeams(jobs []sim.Job, cfg sim.Config, shares string, halfLife time.Duration, asJSON bool, note string) error {
	teams, err := sim.SharesOf(jobs, cfg.GPUs, shares)
	if err != nil {
		return exitError{code: 2, msg: "--teams: " + err.Error()}
	}
	cfg.HalfLife = halfLife
	rep := sim.ReplayTeams(jobs, cfg, teams, shares, runtime.GOMAXPROCS(0))
	if asJSON {
		return writeJSON(c.out, rep)
	}
	fmt.Fprintf(c.out, "estimates: %s; shares: %s; usage half-life %s\n", cfg.Estimates, shares, halfLife)
	fmt.Fprint(c.out, rep.String())
	if note != "" {
		fmt.Fprintln(c.out, "  "+note)
	}
	return nil
}

// countGPUs counts the GPUs of one host.
func countGPUs(c sim.Cluster, host string) int {
	n := 0
	for _, g := range c.GPUs {
		if g.Host == host {
			n++
		}
	}
	return n
}
