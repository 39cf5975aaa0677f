package service

import (
	"bufio"
	"bytes"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"niuma/engine/executor"
)

// Procs is what the service learns of the machine's processes.
type Procs interface {
	// Alive is the subset of tokens that some live process still carries
	// (an attempt's processes, even those its owner lost), each with the
	// users its processes run as: a token counts as a lease's only in a
	// process of the lease's user.
	Alive(tokens []string) map[string]Carriers
	// UID is the user a process runs as; false when it cannot be told.
	UID(pid int) (int, bool)
}

// ProcFS reads /proc (root: every process; a user: their own) and the
// attempts' cgroups.
type ProcFS struct {
	Root string // "/proc" when empty
	// Cgroups are the cgroup mount points whose niuma/<token> groups hold
	// attempts ("/sys/fs/cgroup" and its v1 hierarchies when empty).
	Cgroups []string
}

func (p ProcFS) root() string {
	if p.Root == "" {
		return "/proc"
	}
	return p.Root
}

// Carriers are the users whose processes carry a token.
type Carriers map[int]bool

// Alive implements Procs: a token is alive while a process's environment
// carries it (executor.TokenEnv) or its attempt's cgroup holds a process
// (a process that cleared its environment stays in its group). However
// many tokens are asked about, each hierarchy's niuma folder is listed
// once and /proc is read once: the service answers under its lock.
func (p ProcFS) Alive(tokens []string) map[string]Carriers {
	out := map[string]Carriers{}
	if len(tokens) == 0 {
		return out
	}
	want := make(map[string]bool, len(tokens))
	for _, t := range tokens {
		want[t] = true
	}
	add := func(token string, pid int) {
		uid, ok := p.UID(pid)
		if !ok {
			return
		}
		if out[token] == nil {
			out[token] = Carriers{}
		}
		out[token][uid] = true
	}
	for _, m := range p.mounts() {
		groups, err := os.ReadDir(filepath.Join(m, "niuma"))
		if err != nil {
			continue
		}
		for _, g := range groups {
			if !g.IsDir() || !want[g.Name()] {
				continue
			}
			b, err := os.ReadFile(filepath.Join(m, "niuma", g.Name(), "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					add(g.Name(), pid)
				}
			}
		}
	}
	ents, err := os.ReadDir(p.root())
	if err != nil {
		return out
	}
	prefix := []byte(executor.TokenEnv + "=")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.root(), e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(b, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, prefix); ok && want[string(v)] {
				add(string(v), pid)
			}
		}
	}
	return out
}

// mounts are the cgroup hierarchies whose niuma/<token> groups hold
// attempts (where the local executor puts them as root).
func (p ProcFS) mounts() []string {
	if p.Cgroups != nil {
		return p.Cgroups
	}
	mounts := []string{"/sys/fs/cgroup"}
	if ents, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				mounts = append(mounts, filepath.Join("/sys/fs/cgroup", e.Name()))
			}
		}
	}
	return mounts
}

// UID implements Procs from /proc/PID/status's real user ID.
func (p ProcFS) UID(pid int) (int, bool) {
	f, err := os.Open(filepath.Join(p.root(), strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0, false
			}
			uid, err := strconv.Atoi(fields[0])
			return uid, err == nil
		}
	}
	return 0, false
}

// Users names users and their groups, from the system's user database,
// remembering what it looked up.
type Users struct {
	mu     sync.Mutex
	names  map[int]string
	groups map[int][]string
}

// Name is the user name of uid, or "uid N" when the system does not know
// it.
func (u *Users) Name(uid int) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if n, ok := u.names[uid]; ok {
		return n
	}
	name := "uid " + strconv.Itoa(uid)
	if usr, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = usr.Username
	}
	if u.names == nil {
		u.names = map[int]string{}
	}
	u.names[uid] = name
	return name
}

// Groups are the names of uid's Unix groups.
func (u *Users) Groups(uid int) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if g, ok := u.groups[uid]; ok {
		return g
	}
	var names []string
	if usr, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if ids, err := usr.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := user.LookupGroupId(id); err == nil {
					names = append(names, g.Name)
				}
			}
		}
	}
	if u.groups == nil {
		u.groups = map[int][]string{}
	}
	u.groups[uid] = names
	return names
}
