package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"niuma/shepherd"
)

// Cluster is a machine (or many) to pack onto: GPUs and the hosts they are
// in.
type Cluster struct {
	GPUs  []shepherd.GPU
	Hosts []shepherd.Host // empty: CPUs and host memory are not limited
	// GPUMiB is the nominal memory of every GPU, which a job's MemMilli is
	// a share of.
	GPUMiB int64
}

// Workstation is one host of n GPUs of mib each in linked groups of group
// (0: one group), with CPUs and memory not limited.
func Workstation(n int, mib int64, group int) Cluster {
	if group <= 0 {
		group = n
	}
	c := Cluster{GPUMiB: mib}
	for i := range n {
		c.GPUs = append(c.GPUs, shepherd.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), TotalMiB: mib, FreeMiB: mib,
			Healthy: true, Group: fmt.Sprintf("link%d", i/group)})
	}
	return c
}

// LoadPAINodes reads pai2023_gpu_nodes.csv (sn, cpu_milli, memory_mib,
// gpu, model): one host per node with its CPUs and memory, and its GPUs,
// each of a nominal mib (PAI's gpu_milli is a share of whichever GPU a pod
// lands on, so every GPU is one whole share).
func LoadPAINodes(r io.Reader, mib int64) (Cluster, error) {
	rows, err := readCSV(r, []string{"sn", "cpu_milli", "memory_mib", "gpu"}, "model")
	if err != nil {
		return Cluster{}, fmt.Errorf("read PAI nodes: %w", err)
	}
	c := Cluster{GPUMiB: mib}
	seen := map[string]bool{}
	for n, row := range rows {
		cpu, e1 := strconv.ParseInt(row[1], 10, 64)
		mem, e2 := strconv.ParseInt(row[2], 10, 64)
		g, e3 := strconv.Atoi(row[3])
		if err := errors.Join(e1, e2, e3); err != nil {
			return Cluster{}, fmt.Errorf("read PAI nodes: row %d: %w", n+2, err)
		}
		if row[0] == "" || seen[row[0]] {
			return Cluster{}, fmt.Errorf("read PAI nodes: row %d: node name %q is empty or repeated: each node needs its own sn", n+2, row[0])
		}
		if cpu < 0 || mem < 0 || g < 0 || g > 64 {
			return Cluster{}, fmt.Errorf("read PAI nodes: row %d: node %s: CPUs, memory and 0–64 GPUs must not be negative", n+2, row[0])
		}
		seen[row[0]] = true
		c.Hosts = append(c.Hosts, shepherd.Host{Name: row[0], CPUMilli: cpu, MemMiB: mem})
		for range g {
			c.GPUs = append(c.GPUs, shepherd.GPU{Index: len(c.GPUs), UUID: fmt.Sprintf("%s-gpu%d", row[0], len(c.GPUs)),
				Model: row[4], TotalMiB: mib, FreeMiB: mib, Healthy: true, Host: row[0]})
		}
	}
	return c, nil
}

// PackReport is how many pods a policy packs onto an empty cluster before
// it first refuses one.
type PackReport struct {
	Policy  string  `json:"policy"`
	Placed  int     `json:"placed"`   // pods placed before the first refusal
	GPUs    int     `json:"gpus"`     // GPUs those pods asked for, counted once per pod GPU
	UsedGiB float64 `json:"used_gib"` // GPU memory they hold
	// StrandedGiB is the free GPU memory left when the first pod is
	// refused on GPUs that are partly used and cannot take that pod;
	// FreeGiB is all free GPU memory at that moment.
	StrandedGiB float64 `json:"stranded_gib"`
	FreeGiB     float64 `json:"free_gib"`
	// StrandedGPUs is StrandedGiB in whole GPUs' worth.
	StrandedGPUs float64 `json:"stranded_gpus"`
	Refused      string  `json:"refused"` // the wait reason of the refused pod
}

// Pack offers pods in order to the empty cluster, one pass per pod and
// nothing ever ending (pod durations in PAI are censored, so packing is the
// honest use of it), and stops at the first pod the policy refuses. Pods
// become requests through the same builder as every stage (their
// estimates are unknown: none is recorded).
func Pack(pods []Job, c Cluster, p shepherd.Policy) PackReport {
	inv := shepherd.Inventory{GPUs: append([]shepherd.GPU(nil), c.GPUs...), Hosts: c.Hosts}
	byUUID := make(map[string]int, len(inv.GPUs))
	for i, g := range inv.GPUs {
		byUUID[g.UUID] = i
	}
	rep := PackReport{Policy: p.Name}
	sched := shepherd.NewScheduler(p)
	var running []shepherd.Running
	now := base
	for _, pod := range pods {
		mem := int64(math.Ceil(float64(pod.MemMilli) / 1000 * float64(c.GPUMiB)))
		req := shepherd.Build(NeedOf(&pod, mem, now, 0, NoEstimates, nil))
		d := sched.Schedule(shepherd.State{Inventory: inv, Running: running, Queue: []shepherd.Request{req}, Now: now, Terse: true})[0]
		if !d.Placed() || len(d.Preempt) > 0 {
			rep.stranded(inv, req)
			words := shepherd.Schedule(p, shepherd.State{Inventory: inv, Running: running, Queue: []shepherd.Request{req}, Now: now})[0].Wait
			rep.Refused = fmt.Sprintf("%s (%d×%d‰ GPU, %s CPUs, %d MiB): %s", pod.ID, pod.GPUs, pod.MemMilli,
				strconv.FormatFloat(float64(pod.CPUMilli)/1000, 'g', -1, 64), pod.MemMiB, words)
			return rep
		}
		for _, g := range d.GPUs {
			inv.GPUs[byUUID[g.UUID]].FreeMiB -= mem
		}
		running = append(running, req.Placement(d.GPUs, d.Host, now))
		rep.Placed++
		rep.GPUs += pod.GPUs
		rep.UsedGiB += float64(mem*int64(pod.GPUs)) / 1024
		now = now.Add(time.Second)
	}
	rep.Refused = "none: every pod fit"
	return rep
}

// stranded sums free memory at the refusal of req: all of it, and what
// sits on partly used GPUs with too little of it for req.
func (rep *PackReport) stranded(inv shepherd.Inventory, req shepherd.Request) {
	for _, g := range inv.GPUs {
		free := float64(g.FreeMiB) / 1024
		rep.FreeGiB += free
		if g.FreeMiB > 0 && g.FreeMiB < g.TotalMiB && g.FreeMiB < req.MemPerGPUMiB {
			rep.StrandedGiB += free
			rep.StrandedGPUs += float64(g.FreeMiB) / float64(g.TotalMiB)
		}
	}
}
