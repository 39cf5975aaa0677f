package slurm

import (
	"context"
	"fmt"
	"os/user"
	"sort"
	"strconv"
	"strings"
)

// Node is one node of the cluster, as sinfo shows it: the picture a board
// of the cluster draws, and what counting free GPUs reads.
type Node struct {
	Name       string   `json:"name"`
	State      string   `json:"state"`      // idle, mixed, allocated, down, drained, draining, …
	Partitions []string `json:"partitions"` // the default partition without sinfo's "*"
	Default    bool     `json:"default"`    // it is in the default partition
	CPUs       int      `json:"cpus"`
	CPUsAlloc  int      `json:"cpus_alloc"`
	MemoryMiB  int64    `json:"memory_mib"`
	MemAlloc   int64    `json:"mem_alloc_mib"`
	GPUs       int      `json:"gpus"` // GRES gpu, of every type
	GPUsAlloc  int      `json:"gpus_alloc"`
	Reason     string   `json:"reason,omitempty"` // why it is down or drained, as the admin wrote it
}

// Usable reports whether Slurm may start jobs on the node.
func (n Node) Usable() bool {
	for _, bad := range []string{"down", "drain", "fail", "maint", "reboot", "power", "unknown", "not_responding", "inval", "future"} {
		if strings.Contains(n.State, bad) {
			return false
		}
	}
	return true
}

// sinfoFields is what Nodes asks sinfo for; Reason last (it is free text).
const sinfoFields = "NodeList:|,StateLong:|,CPUsState:|,Memory:|,AllocMem:|,Gres:|,GresUsed:|,Partition:|,Reason:"

// Nodes lists the cluster's nodes with their CPUs, memory and GPUs,
// allocated and total (one entry per node, with all its partitions).
func (x *Executor) Nodes(ctx context.Context) ([]Node, error) {
	out, err := x.cmd.Run(ctx, "sinfo", "--noheader", "--Node", "--Format="+sinfoFields)
	if err != nil {
		return nil, fmt.Errorf("list the cluster's nodes: %w", err)
	}
	return parseSinfo(out), nil
}

// parseSinfo reads `sinfo --noheader --Node --Format=sinfoFields`.
func parseSinfo(out []byte) []Node {
	byName := map[string]*Node{}
	var order []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(strings.TrimRight(line, "\r"), "|", 9)
		if len(f) < 8 || strings.TrimSpace(f[0]) == "" {
			continue
		}
		name := strings.TrimSpace(f[0])
		n := byName[name]
		if n == nil {
			n = &Node{Name: name, State: strings.ToLower(strings.TrimSpace(f[1]))}
			cpus := strings.Split(strings.TrimSpace(f[2]), "/") // allocated/idle/other/total
			if len(cpus) == 4 {
				n.CPUsAlloc, _ = strconv.Atoi(cpus[0])
				n.CPUs, _ = strconv.Atoi(cpus[3])
			}
			n.MemoryMiB, _ = strconv.ParseInt(strings.TrimSpace(f[3]), 10, 64)
			n.MemAlloc, _ = strconv.ParseInt(strings.TrimSpace(f[4]), 10, 64)
			n.GPUs = gresCount(f[5], "gpu")
			n.GPUsAlloc = gresCount(f[6], "gpu")
			if len(f) == 9 {
				if r := strings.TrimSpace(f[8]); r != "none" && r != "(null)" {
					n.Reason = r
				}
			}
			byName[name] = n
			order = append(order, name)
		}
		p := strings.TrimSpace(f[7])
		if d, ok := strings.CutSuffix(p, "*"); ok {
			p, n.Default = d, true
		}
		if p != "" {
			n.Partitions = append(n.Partitions, p)
		}
	}
	nodes := make([]Node, 0, len(order))
	for _, name := range order {
		nodes = append(nodes, *byName[name])
	}
	return nodes
}

// gresCount adds up the count of one GRES in sinfo's Gres or GresUsed:
// "gpu:4", "gpu:a100:2(S:0-1),gpu:v100:2", "gpu:3(IDX:0-1,3)", "(null)".
func gresCount(s, name string) int {
	total := 0
	depth, start := 0, 0
	entries := []string{}
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				entries = append(entries, s[start:i])
				start = i + 1
			}
		}
	}
	entries = append(entries, s[start:])
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if i := strings.IndexByte(e, '('); i >= 0 {
			e = e[:i]
		}
		e = strings.TrimPrefix(strings.TrimPrefix(e, "gres/"), "gres:")
		parts := strings.Split(e, ":")
		if len(parts) < 2 || parts[0] != name {
			continue
		}
		if n, err := strconv.Atoi(parts[len(parts)-1]); err == nil && n >= 0 {
			total += n
		}
	}
	return total
}

// FreeGPUs counts the GPUs no job holds on the usable nodes of a partition
// ("" = the default partition): what a sweep could start on now.
func FreeGPUs(nodes []Node, partition string) int {
	free := 0
	for _, n := range nodes {
		in := partition == "" && n.Default
		for _, p := range n.Partitions {
			in = in || p == partition
		}
		if in && n.Usable() {
			free += max(0, n.GPUs-n.GPUsAlloc)
		}
	}
	return free
}

// QueuedJob is one job in the controller's queue.
type QueuedJob struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	User      string `json:"user"`
	State     string `json:"state"` // PENDING, RUNNING, …
	Partition string `json:"partition"`
	Nodes     string `json:"nodes"`
	GPUs      int    `json:"gpus"`
	Reason    string `json:"reason"` // Slurm's code, e.g. Resources, QOSMaxGRESPerUser
	// Waiting is a pending job's reason in words ("" for one that runs).
	Waiting string `json:"waiting,omitempty"`
	// Niuma's own jobs say whose attempt they are.
	RunID   string `json:"run_id,omitempty"`
	Stage   string `json:"stage,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

const jobsFormat = "%i|%j|%u|%T|%P|%N|%b|%r|%k"

// Jobs lists a user's jobs in the controller's queue ("" = the user
// running Niuma), Niuma's and others, with why the pending ones wait.
func (x *Executor) Jobs(ctx context.Context, username string) ([]QueuedJob, error) {
	if username == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("who is the current user: %w", err)
		}
		username = u.Username
	}
	out, err := x.cmd.Run(ctx, "squeue", "--noheader", "--user="+username, "--format="+jobsFormat)
	if err != nil {
		return nil, fmt.Errorf("list %s's jobs: %w", username, err)
	}
	return parseJobs(out), nil
}

func parseJobs(out []byte) []QueuedJob {
	var jobs []QueuedJob
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(strings.TrimRight(line, "\r"), "|", 9)
		if len(f) < 9 || !jobID(f[0]) {
			continue
		}
		j := QueuedJob{ID: f[0], Name: f[1], User: f[2], State: stateWord(f[3]), Partition: f[4], Nodes: f[5],
			GPUs: gresCount(f[6], "gpu"), Reason: f[7]}
		if pending(j.State) {
			j.Waiting = pendingReason(j.Reason)
		}
		for _, kv := range strings.Fields(f[8]) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "run":
				j.RunID = v
			case "stage":
				j.Stage = v
			case "attempt":
				j.Attempt, _ = strconv.Atoi(v)
			}
		}
		if !strings.HasPrefix(f[8], "niuma ") {
			j.RunID, j.Stage, j.Attempt = "", "", 0
		}
		jobs = append(jobs, j)
	}
	sort.SliceStable(jobs, func(a, b int) bool { return newer(jobs[b].ID, jobs[a].ID) })
	return jobs
}
