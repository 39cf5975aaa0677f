package gpumon

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Container labels the docker executor puts on every container it starts.
const (
	LabelRun     = "niuma.run"
	LabelStage   = "niuma.stage"
	LabelAttempt = "niuma.attempt"
)

// OwnerResolver maps a process on a GPU to the Niuma attempt that owns it.
type OwnerResolver interface {
	Owner(ctx context.Context, pid int) (Owner, bool)
}

// ContainerLabeler reads a container's labels by its full id. The docker
// executor implements it; a container that no longer exists returns an error.
type ContainerLabeler interface {
	ContainerLabels(ctx context.Context, id string) (map[string]string, error)
}

// Owners maps GPU processes to runs: a local stage's processes through their
// process group (when told which group belongs to which attempt), a
// container's processes through /proc/PID/cgroup and the container's
// niuma.* labels, and any stage's process through the NIUMA_* variables of
// the stage contract in its environment. The zero value is not usable: use NewOwners.
type Owners struct {
	proc   string // the proc filesystem; "/proc" outside tests
	labels ContainerLabeler

	mu         sync.Mutex
	groups     map[int]Owner     // process group id -> attempt
	containers map[string]*Owner // container id -> attempt; nil: not Niuma's
}

// NewOwners returns a resolver reading /proc. labels may be nil when no
// container executor is configured.
func NewOwners(labels ContainerLabeler) *Owners {
	return newOwners("/proc", labels)
}

func newOwners(proc string, labels ContainerLabeler) *Owners {
	return &Owners{proc: proc, labels: labels, groups: map[int]Owner{}, containers: map[string]*Owner{}}
}

// TrackGroup records that process group pgid runs the attempt o. The local
// executor starts each attempt in its own group, whose id is the pid in the
// attempt's handle.
func (r *Owners) TrackGroup(pgid int, o Owner) {
	r.mu.Lock()
	r.groups[pgid] = o
	r.mu.Unlock()
}

// UntrackGroup forgets a group whose attempt has ended.
func (r *Owners) UntrackGroup(pgid int) {
	r.mu.Lock()
	delete(r.groups, pgid)
	r.mu.Unlock()
}

// Owner implements OwnerResolver. A process in a tracked group belongs to
// its attempt; otherwise a process in a container with niuma.run labels
// belongs to the labelled attempt. Container labels are cached by id
// (a container's labels never change).
func (r *Owners) Owner(ctx context.Context, pid int) (Owner, bool) {
	if pgid, ok := r.processGroup(pid); ok {
		r.mu.Lock()
		o, tracked := r.groups[pgid]
		r.mu.Unlock()
		if tracked {
			return o, true
		}
	}
	id := r.containerID(pid)
	if id == "" || r.labels == nil {
		return r.fromEnviron(pid)
	}
	r.mu.Lock()
	o, cached := r.containers[id]
	r.mu.Unlock()
	if !cached {
		labels, err := r.labels.ContainerLabels(ctx, id)
		if err != nil {
			return Owner{}, false // gone, or the daemon is busy: try again next sample
		}
		o = ownerFromLabels(labels)
		r.mu.Lock()
		r.containers[id] = o
		r.mu.Unlock()
	}
	if o == nil {
		return r.fromEnviron(pid)
	}
	return *o, true
}

// fromEnviron reads the stage contract's NIUMA_RUN_ID, NIUMA_STAGE and
// NIUMA_ATTEMPT from /proc/PID/environ: every process a stage starts
// inherits them, so any process (this one or another, such as `niuma gpus`)
// can name a stage's GPU processes without being told their group. Only
// the user's own processes (and root's view) can be read this way.
func (r *Owners) fromEnviron(pid int) (Owner, bool) {
	b, err := os.ReadFile(filepath.Join(r.proc, strconv.Itoa(pid), "environ"))
	if err != nil {
		return Owner{}, false
	}
	var o Owner
	for _, kv := range strings.Split(string(b), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "NIUMA_RUN_ID":
			o.RunID = v
		case "NIUMA_STAGE":
			o.Stage = v
		case "NIUMA_ATTEMPT":
			o.Attempt, _ = strconv.Atoi(v)
		}
	}
	return o, o.RunID != ""
}

// ForgetContainer drops a cached container, for when it has been removed.
func (r *Owners) ForgetContainer(id string) {
	r.mu.Lock()
	delete(r.containers, id)
	r.mu.Unlock()
}

func ownerFromLabels(l map[string]string) *Owner {
	run := l[LabelRun]
	if run == "" {
		return nil
	}
	att, _ := strconv.Atoi(l[LabelAttempt])
	return &Owner{RunID: run, Stage: l[LabelStage], Attempt: att}
}

// processGroup reads the pgrp field of /proc/PID/stat. The command name in
// parentheses may itself hold spaces and parentheses, so the fields are
// counted from the last ')'.
func (r *Owners) processGroup(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(r.proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp ...
	if len(f) < 3 {
		return 0, false
	}
	pg, err := strconv.Atoi(f[2])
	return pg, err == nil
}

// containerIDPattern finds a container id in a cgroup path, under the
// layouts docker, containerd and podman use with cgroup v1 and v2:
// "/docker/ID", "/system.slice/docker-ID.scope", "cri-containerd-ID.scope",
// "libpod-ID.scope" (podman may nest a cgroup below it).
var containerIDPattern = regexp.MustCompile(`(?:^|[/-])([0-9a-f]{64})(?:\.scope)?(?:/|$)`)

// containerID reads /proc/PID/cgroup and returns the container's id, or ""
// for a process outside any container.
func (r *Owners) containerID(pid int) string {
	b, err := os.ReadFile(filepath.Join(r.proc, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return ""
	}
	return parseCgroupContainer(string(b))
}

func parseCgroupContainer(s string) string {
	for _, line := range strings.Split(s, "\n") {
		// "hierarchy-ID:controllers:path"
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if m := containerIDPattern.FindStringSubmatch(parts[2]); m != nil {
			return m[1]
		}
	}
	return ""
}
