package slurm

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// localNodes is what the executor knows about a partition's nodes: whether
// each of them is this machine (then any directory here is "shared").
type localNodes struct {
	all    bool
	remote []string // nodes that are not this machine
	at     time.Time
}

const nodesTTL = time.Minute

// checkShared makes sure the nodes of the partition can see each
// directory an attempt needs (the run directory, for its logs and outputs;
// the template's code and data): it is under a directory the site listed
// as shared, on a network or cluster filesystem, or every node of the
// partition is this machine. The error says what to change.
func (x *Executor) checkShared(ctx context.Context, partition string, dirs ...string) error {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if x.listedShared(d) {
			continue
		}
		fs, network := filesystemOf(d)
		if network {
			continue
		}
		ln, err := x.partitionNodes(ctx, partition)
		if err != nil {
			return err
		}
		if ln.all {
			continue
		}
		where := "the default partition"
		if partition != "" {
			where = "partition " + partition
		}
		return fmt.Errorf("%s is on this machine's own disk (%s), which the nodes of %s (%s) cannot see: set NIUMA_HOME to a directory on a filesystem every node mounts at the same path (NFS, Lustre, GPFS, BeeGFS, CephFS), or, if %s is shared in a way Niuma cannot tell, list it under slurm: shared_dirs in settings.yaml",
			d, fs, where, listNodes(ln.remote), d)
	}
	return nil
}

func (x *Executor) listedShared(dir string) bool {
	dir = filepath.Clean(dir)
	for _, s := range x.cfg.SharedDirs {
		s = filepath.Clean(s)
		if dir == s || strings.HasPrefix(dir, s+string(filepath.Separator)) || s == "/" {
			return true
		}
	}
	return false
}

func listNodes(n []string) string {
	if len(n) > 5 {
		return strings.Join(n[:5], ", ") + fmt.Sprintf(" and %d more", len(n)-5)
	}
	return strings.Join(n, ", ")
}

// partitionNodes asks sinfo for the partition's nodes ("" = the default
// partition) and whether they are all this machine.
func (x *Executor) partitionNodes(ctx context.Context, partition string) (localNodes, error) {
	x.mu.Lock()
	ln, ok := x.local[partition]
	x.mu.Unlock()
	if ok && time.Since(ln.at) < nodesTTL {
		return ln, nil
	}
	args := []string{"--noheader", "--Node", "--format=%N|%n|%o|%P"}
	if partition != "" {
		args = append(args, "--partition="+partition)
	}
	out, err := x.cmd.Run(ctx, "sinfo", args...)
	if err != nil {
		return localNodes{}, fmt.Errorf("list the cluster's nodes: %w", err)
	}
	here := localNames()
	ln = localNodes{all: true, at: time.Now()}
	seen := map[string]bool{}
	any := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) < 4 || seen[f[0]] {
			continue
		}
		if partition == "" && !strings.HasSuffix(f[3], "*") {
			continue
		}
		seen[f[0]] = true
		any = true
		if !here[f[0]] && !here[f[1]] && !here[f[2]] {
			ln.all = false
			ln.remote = append(ln.remote, f[0])
		}
	}
	if !any {
		where := "the default partition"
		if partition != "" {
			where = "partition " + partition
		}
		return localNodes{}, fmt.Errorf("Slurm lists no nodes in %s: check slurm: partition in settings.yaml or the template's runtime: partition (sinfo lists the partitions)", where)
	}
	x.mu.Lock()
	x.local[partition] = ln
	x.mu.Unlock()
	return ln, nil
}

// localNames are the names and addresses this machine answers to.
func localNames() map[string]bool {
	names := map[string]bool{"localhost": true}
	if h, err := os.Hostname(); err == nil {
		names[h] = true
		short, _, _ := strings.Cut(h, ".")
		names[short] = true
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				names[ipn.IP.String()] = true
			}
		}
	}
	names["127.0.0.1"], names["::1"] = true, true
	return names
}
