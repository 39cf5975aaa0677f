package app

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"niuma/engine/executor/slurm"
)

// cluster is `niuma cluster`: the Slurm cluster's nodes with their GPUs
// allocated and total, and your jobs, with why the pending ones wait. It
// reads through the slurm executor's read API (Nodes, Jobs, FreeGPUs), the
// same one a board of the cluster would.
func (c *cli) cluster(ctx context.Context, args []string) error {
	fs := c.flags("cluster")
	asJSON := fs.Bool("json", false, "print nodes and jobs as JSON")
	partition := fs.String("partition", "", "count free GPUs in this partition (default: slurm: partition in settings.yaml, else the default partition)")
	user := fs.String("user", "", "whose jobs to list (default: you)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return exitError{code: 2, msg: fmt.Sprintf("cluster takes no arguments, got %q", pos)}
	}
	home, err := Home()
	if err != nil {
		return err
	}
	settings, err := loadSettings(home)
	if err != nil {
		return err
	}
	x, note := slurmExecutor(home, settings.Slurm)
	if x == nil {
		return exitError{code: 1, msg: note}
	}
	nodes, err := x.Nodes(ctx)
	if err != nil {
		return err
	}
	jobs, err := x.Jobs(ctx, *user)
	if err != nil {
		return err
	}
	part := *partition
	if part == "" {
		part = settings.Slurm.Partition
	}
	free := slurm.FreeGPUs(nodes, part)
	if *asJSON {
		return writeJSON(c.out, struct {
			Nodes    []slurm.Node      `json:"nodes"`
			Jobs     []slurm.QueuedJob `json:"jobs"`
			FreeGPUs int               `json:"free_gpus"`
		}{nodes, jobs, free})
	}
	tw := newTable(c.out, "NODE", "STATE", "PARTITIONS", "GPUS", "CPUS", "MEMORY", "NOTE")
	for _, n := range nodes {
		parts := strings.Join(n.Partitions, ",")
		if n.Default {
			parts += "*"
		}
		tw.row(n.Name, n.State, parts, fmt.Sprintf("%d/%d", n.GPUsAlloc, n.GPUs), fmt.Sprintf("%d/%d", n.CPUsAlloc, n.CPUs),
			fmt.Sprintf("%d/%d MiB", n.MemAlloc, n.MemoryMiB), n.Reason)
	}
	if err := tw.flush(); err != nil {
		return err
	}
	where := "the default partition"
	if part != "" {
		where = "partition " + part
	}
	fmt.Fprintf(c.out, "%d GPU(s) free in %s (GPUS and CPUS are allocated/total)\n\n", free, where)
	if len(jobs) == 0 {
		fmt.Fprintln(c.out, "no jobs of yours in the queue")
		return nil
	}
	tw = newTable(c.out, "JOB", "STATE", "PARTITION", "GPUS", "NIUMA", "WHY")
	for _, j := range jobs {
		owner := ""
		if j.RunID != "" {
			owner = j.RunID + "/" + j.Stage + "#" + strconv.Itoa(j.Attempt)
		}
		why := j.Waiting
		if why == "" {
			why = "on " + j.Nodes
		}
		tw.row(j.ID, strings.ToLower(j.State), j.Partition, strconv.Itoa(j.GPUs), owner, why)
	}
	return tw.flush()
}
