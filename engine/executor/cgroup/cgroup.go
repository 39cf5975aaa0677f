package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is a cgroup layout: V1 (a hierarchy per controller) or V2 (the
// unified tree).
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

// v1Controllers are the v1 hierarchies an attempt's group spans, where
// mounted: freezer (Kill, Freeze), memory and cpu (limits), cpuacct (CPU
// time) and pids (membership only).
var v1Controllers = []string{"freezer", "memory", "cpu", "cpuacct", "pids"}

// v2Controllers are the controllers Niuma enables down its v2 subtree,
// where the tree offers them.
var v2Controllers = []string{"memory", "cpu", "pids"}

// Tree is Niuma's subtree of one cgroup layout: the directory Base under
// each mount, holding one group per attempt.
type Tree struct {
	version Version
	unified string            // V2: the cgroup2 mount
	mounts  map[string]string // V1: controller -> its hierarchy's mount
	base    string            // the subtree, relative to each mount
	// What the layout gives a group.
	memory, cpu, freeze, kill bool
}

// Features says what a tree can do for a group.
type Features struct {
	Memory bool // memory limits and accounting
	CPU    bool // CPU limits (and, on v2, CPU time)
	Freeze bool // Freeze and Thaw
	Kill   bool // an atomic kill (v2 cgroup.kill); otherwise freeze and kill each
}

// NewV2 is the subtree base (a relative path such as "niuma") of the
// cgroup2 tree mounted at mount. It creates base and enables there, and in
// every level above it, the controllers the tree offers (memory, cpu,
// pids); a tree without them (a hybrid layout, whose controllers are v1's)
// still gives membership, kill and freeze.
func NewV2(mount, base string) (*Tree, error) {
	base, err := cleanBase(base)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.procs")); err != nil {
		return nil, fmt.Errorf("%s is not a cgroup2 mount: %w", mount, err)
	}
	t := &Tree{version: V2, unified: mount, base: base}
	dir := mount
	parts := strings.Split(base, "/")
	for i, p := range parts {
		offered := words(readString(filepath.Join(dir, "cgroup.controllers")))
		var enable []string
		for _, c := range v2Controllers {
			if offered[c] {
				enable = append(enable, "+"+c)
			}
		}
		if len(enable) > 0 {
			// One write per controller: a write naming one the parent
			// does not delegate would fail whole.
			for _, e := range enable {
				_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(e), 0)
			}
		}
		dir = filepath.Join(dir, p)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if i == len(parts)-1 {
			// The subtree's own children are the attempts' groups.
			for _, e := range enable {
				_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(e), 0)
			}
		}
	}
	enabled := words(readString(filepath.Join(dir, "cgroup.subtree_control")))
	t.memory, t.cpu = enabled["memory"], enabled["cpu"]
	t.freeze = exists(filepath.Join(dir, "cgroup.freeze"))
	t.kill = exists(filepath.Join(dir, "cgroup.kill"))
	return t, nil
}

// NewV1 is the subtree base of the v1 hierarchies in mounts (controller
// name to the mount of its hierarchy; controllers mounted together share
// one). It creates base in each.
func NewV1(mounts map[string]string, base string) (*Tree, error) {
	base, err := cleanBase(base)
	if err != nil {
		return nil, err
	}
	t := &Tree{version: V1, mounts: map[string]string{}, base: base}
	for _, c := range v1Controllers {
		if m, ok := mounts[c]; ok {
			t.mounts[c] = m
		}
	}
	if len(t.mounts) == 0 {
		return nil, errors.New("none of the v1 hierarchies (memory, cpu, cpuacct, pids, freezer) is mounted")
	}
	for _, d := range t.dirs(base) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
		// Another user (root) may have made it: an attempt's group could
		// not be made in it.
		if err := syscall.Access(d, accessWrite); err != nil {
			return nil, fmt.Errorf("cgroup %s is not this user's to make groups in (%v): run niuma as root for a cgroup per attempt", d, err)
		}
	}
	_, t.memory = t.mounts["memory"]
	_, t.cpu = t.mounts["cpu"]
	_, t.freeze = t.mounts["freezer"]
	return t, nil
}

// accessWrite is access(2)'s W_OK.
const accessWrite = 2

func cleanBase(base string) (string, error) {
	b := filepath.Clean(strings.Trim(base, "/"))
	if b == "." || b == "" || strings.HasPrefix(b, "..") {
		return "", fmt.Errorf("cgroup subtree %q: name a directory such as niuma", base)
	}
	return b, nil
}

// Version is the tree's layout.
func (t *Tree) Version() Version { return t.version }

// Features says what the tree gives a group.
func (t *Tree) Features() Features {
	return Features{Memory: t.memory, CPU: t.cpu, Freeze: t.freeze, Kill: t.kill}
}

// Base is the subtree's path relative to each mount.
func (t *Tree) Base() string { return t.base }

// Describe says in words which layout is in force and what it enforces,
// for `niuma doctor` and the board.
func (t *Tree) Describe() string {
	where := ""
	if t.version == V2 {
		where = filepath.Join(t.unified, t.base)
	} else {
		var cs []string
		for c := range t.mounts {
			cs = append(cs, c)
		}
		sort.Strings(cs)
		where = filepath.Join(filepath.Dir(t.mounts[cs[0]]), "{"+strings.Join(cs, ",")+"}", t.base)
	}
	var can []string
	if t.memory {
		can = append(can, "memory limits")
	}
	if t.cpu {
		can = append(can, "CPU limits")
	}
	if t.freeze {
		can = append(can, "freezing")
	}
	s := fmt.Sprintf("cgroup v%d, a group per attempt under %s", t.version, where)
	if len(can) > 0 {
		s += "; " + strings.Join(can, ", ")
	}
	if !t.memory {
		s += "; memory limits are not enforced (no memory controller here)"
	}
	return s
}

// dirs is the directory of the group at rel (relative to each mount) in
// every hierarchy, once per mount.
func (t *Tree) dirs(rel string) []string {
	if t.version == V2 {
		return []string{filepath.Join(t.unified, rel)}
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range v1Controllers {
		m, ok := t.mounts[c]
		if !ok || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, filepath.Join(m, rel))
	}
	return out
}

// dir is the group's directory in the hierarchy of controller c (V1), or
// its one directory (V2); "" when c is not mounted.
func (t *Tree) dir(rel, c string) string {
	if t.version == V2 {
		return filepath.Join(t.unified, rel)
	}
	m, ok := t.mounts[c]
	if !ok {
		return ""
	}
	return filepath.Join(m, rel)
}

// Limits are what a group may use; zero fields are unlimited.
type Limits struct {
	MemoryBytes int64
	CPUMilli    int64 // thousandths of a CPU
}

// Group is one attempt's cgroup.
type Group struct {
	t   *Tree
	rel string // relative to each mount: base/name
}

// Name makes an attempt's token a group name: the characters a
// directory name may safely hold, others as '_'.
func Name(token string) string {
	b := []byte(token)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok || i == 0 && c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// Group is the group called name in the subtree, whether or not it exists.
func (t *Tree) Group(name string) *Group { return &Group{t: t, rel: filepath.Join(t.base, Name(name))} }

// At is the group at rel (a Group's Path, as stored), if rel lies in a
// subtree called as this tree's is; nil otherwise.
func (t *Tree) At(rel string) *Group {
	rel = filepath.Clean(strings.Trim(rel, "/"))
	if rel == "." || strings.HasPrefix(rel, "..") || strings.Contains(rel, "/../") {
		return nil
	}
	return &Group{t: t, rel: rel}
}

// Create makes the group called name with limits l (an existing one is
// kept, with l applied). A limit the tree cannot enforce is left out:
// Features says which hold.
func (t *Tree) Create(name string, l Limits) (*Group, error) {
	g := t.Group(name)
	for _, d := range t.dirs(g.rel) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
	}
	if err := g.limit(l); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

func (g *Group) limit(l Limits) error {
	t := g.t
	if l.MemoryBytes > 0 && t.memory {
		if t.version == V2 {
			if err := writeFile(g.t.dir(g.rel, "memory"), "memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
				return err
			}
			// The limit is one of RAM: past it the kernel reclaims and
			// then kills, rather than pushing the machine into swap.
			_ = writeFile(g.t.dir(g.rel, "memory"), "memory.swap.max", "0")
		} else {
			d := g.t.dir(g.rel, "memory")
			if err := writeFile(d, "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
				return err
			}
			// Where swap is accounted, memory and swap together.
			_ = writeFile(d, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10))
		}
	}
	if l.CPUMilli > 0 && t.cpu {
		const period = 100000 // µs
		quota := max(l.CPUMilli*period/1000, 1000)
		if t.version == V2 {
			return writeFile(g.t.dir(g.rel, "cpu"), "cpu.max", fmt.Sprintf("%d %d", quota, period))
		}
		d := g.t.dir(g.rel, "cpu")
		if err := writeFile(d, "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
			return err
		}
		return writeFile(d, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
	}
	return nil
}

// Features says what the group's tree can do for it.
func (g *Group) Features() Features { return g.t.Features() }

// Path is the group's path relative to each mount: what an attempt's
// handle stores to find it again.
func (g *Group) Path() string { return g.rel }

// Exists reports whether the group's directory is there.
func (g *Group) Exists() bool {
	for _, d := range g.t.dirs(g.rel) {
		if exists(filepath.Join(d, "cgroup.procs")) {
			return true
		}
	}
	return false
}

// JoinFiles are the files a process writes "0" to, each, to move itself
// into the group (one per hierarchy).
func (g *Group) JoinFiles() []string {
	var out []string
	for _, d := range g.t.dirs(g.rel) {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// Join moves process pid into the group.
func (g *Group) Join(pid int) error {
	for _, f := range g.JoinFiles() {
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("move process %d into cgroup %s: %w", pid, filepath.Dir(f), err)
		}
	}
	return nil
}

// Procs lists the processes in the group, in any of its hierarchies (none
// when it does not exist).
func (g *Group) Procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range g.t.dirs(g.rel) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	sort.Ints(out)
	return out
}

// Empty reports whether no process is left in the group.
func (g *Group) Empty() bool { return len(g.Procs()) == 0 }

// killLimit bounds how long Kill goes on: a group whose processes cannot
// be killed (stuck in the kernel, D state) is left after it, with an error.
const killLimit = 10 * time.Second

// killPoll is how often Kill looks whether the group has emptied.
const killPoll = 10 * time.Millisecond

// Kill ends every process in the group with SIGKILL and returns once the
// group is empty: v2 writes cgroup.kill; otherwise the group is frozen (so
// nothing in it can fork while it is read), each process killed, and thawed
// (a frozen process dies only once thawed), until no process is left.
func (g *Group) Kill() error {
	if !g.Exists() {
		return nil
	}
	deadline := time.Now().Add(killLimit)
	for {
		if g.Empty() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes %v survived SIGKILL for %s", g.rel, g.Procs(), killLimit)
		}
		if g.t.kill {
			if err := writeFile(g.t.dir(g.rel, ""), "cgroup.kill", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		} else {
			frozen := g.t.freeze && g.Freeze() == nil
			for _, pid := range g.Procs() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if frozen {
				_ = g.Thaw()
			}
		}
		time.Sleep(killPoll)
	}
}

// Signal sends sig to every process in the group.
func (g *Group) Signal(sig syscall.Signal) {
	for _, pid := range g.Procs() {
		_ = syscall.Kill(pid, sig)
	}
}

// freezeLimit bounds how long Freeze waits for the kernel to report the
// group frozen.
const freezeLimit = 5 * time.Second

// Freeze stops every process of the group where it is, until Thaw; it
// returns once the kernel reports the group frozen.
func (g *Group) Freeze() error { return g.setFrozen(true) }

// Thaw lets a frozen group run again.
func (g *Group) Thaw() error { return g.setFrozen(false) }

func (g *Group) setFrozen(on bool) error {
	if !g.t.freeze {
		return errors.New("this cgroup layout cannot freeze (no freezer)")
	}
	deadline := time.Now().Add(freezeLimit)
	if g.t.version == V2 {
		d := g.t.dir(g.rel, "")
		v := map[bool]string{true: "1", false: "0"}[on]
		if err := writeFile(d, "cgroup.freeze", v); err != nil {
			return err
		}
		for {
			ev := keyed(readString(filepath.Join(d, "cgroup.events")))
			if f, ok := ev["frozen"]; !ok || f == map[bool]int64{true: 1, false: 0}[on] {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cgroup %s: not %s after %s", g.rel, map[bool]string{true: "frozen", false: "thawed"}[on], freezeLimit)
			}
			time.Sleep(killPoll)
		}
	}
	d := g.t.dir(g.rel, "freezer")
	want := map[bool]string{true: "FROZEN", false: "THAWED"}[on]
	for {
		if err := writeFile(d, "freezer.state", want); err != nil {
			return err
		}
		if strings.TrimSpace(readString(filepath.Join(d, "freezer.state"))) == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: not %s after %s", g.rel, strings.ToLower(want), freezeLimit)
		}
		time.Sleep(killPoll)
	}
}

// Frozen reports whether the group is frozen.
func (g *Group) Frozen() bool {
	if !g.t.freeze {
		return false
	}
	if g.t.version == V2 {
		return keyed(readString(filepath.Join(g.t.dir(g.rel, ""), "cgroup.events")))["frozen"] == 1
	}
	return strings.TrimSpace(readString(filepath.Join(g.t.dir(g.rel, "freezer"), "freezer.state"))) == "FROZEN"
}

// Stats is a group's accounting; a field the layout does not give is 0.
type Stats struct {
	MemoryBytes int64 // in use now (RAM and page cache charged to it)
	PeakBytes   int64 // the most it used
	LimitBytes  int64 // its memory limit; 0 = none
	CPUNanos    int64 // CPU time used, user and system
	OOMKills    int64 // processes the OOM killer ended for its limit
	// CPULimitMilli is its CPU quota in thousandths of a CPU (cpu.max,
	// cpu.cfs_quota_us over the period); 0 = none.
	CPULimitMilli int64
}

// unlimited is what a v1 memory.limit_in_bytes reads without a limit
// (the largest page-aligned value).
const unlimited = int64(1) << 62

// Stats reads the group's accounting.
func (g *Group) Stats() Stats {
	var s Stats
	if g.t.version == V2 {
		d := g.t.dir(g.rel, "")
		s.MemoryBytes = readInt(filepath.Join(d, "memory.current"))
		s.PeakBytes = readInt(filepath.Join(d, "memory.peak"))
		s.LimitBytes = readInt(filepath.Join(d, "memory.max")) // "max" reads as 0
		s.OOMKills = keyed(readString(filepath.Join(d, "memory.events")))["oom_kill"]
		s.CPUNanos = keyed(readString(filepath.Join(d, "cpu.stat")))["usage_usec"] * 1000
		if f := strings.Fields(readString(filepath.Join(d, "cpu.max"))); len(f) == 2 {
			s.CPULimitMilli = quotaMilli(f[0], f[1]) // "max 100000" reads as none
		}
		return s
	}
	if d := g.t.dir(g.rel, "memory"); d != "" {
		s.MemoryBytes = readInt(filepath.Join(d, "memory.usage_in_bytes"))
		s.PeakBytes = readInt(filepath.Join(d, "memory.max_usage_in_bytes"))
		if l := readInt(filepath.Join(d, "memory.limit_in_bytes")); l < unlimited {
			s.LimitBytes = l
		}
		s.OOMKills = keyed(readString(filepath.Join(d, "memory.oom_control")))["oom_kill"]
	}
	if d := g.t.dir(g.rel, "cpuacct"); d != "" {
		s.CPUNanos = readInt(filepath.Join(d, "cpuacct.usage"))
	}
	if d := g.t.dir(g.rel, "cpu"); d != "" {
		s.CPULimitMilli = quotaMilli(strings.TrimSpace(readString(filepath.Join(d, "cpu.cfs_quota_us"))),
			strings.TrimSpace(readString(filepath.Join(d, "cpu.cfs_period_us"))))
	}
	return s
}

// quotaMilli is a CFS quota over its period in thousandths of a CPU; 0
// for none ("max", -1) or what does not read.
func quotaMilli(quota, period string) int64 {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q * 1000 / p
}

// Remove deletes the group once it is empty (an error while processes
// are left in it).
func (g *Group) Remove() error {
	var errs []error
	for _, d := range g.t.dirs(g.rel) {
		if err := removeDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeDir removes a cgroup directory and its child groups, deepest
// first (a cgroup directory is removed with rmdir alone, files and all).
// A group whose processes are just gone may still be busy for a moment.
func removeDir(d string) error {
	ents, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeDir(filepath.Join(d, e.Name())); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(time.Second)
	for {
		err := syscall.Rmdir(d)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", d, err)
		}
		time.Sleep(killPoll)
	}
}

// RemoveAll removes the whole subtree, which must hold no process: for
// tests, which make a subtree of their own.
func (t *Tree) RemoveAll() error {
	var errs []error
	for _, d := range t.dirs(t.base) {
		if err := removeDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeFile(dir, name, v string) error {
	if dir == "" {
		return fmt.Errorf("no cgroup hierarchy for %s", name)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(v), 0); err != nil {
		return fmt.Errorf("write %s to %s: %w", v, p, err)
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func readInt(p string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(readString(p)), 10, 64)
	return n
}

// words is the set of the space-separated words of s.
func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// keyed reads a flat keyed file ("key value" lines: memory.events,
// cpu.stat, memory.oom_control).
func keyed(s string) map[string]int64 {
	m := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				m[f[0]] = n
			}
		}
	}
	return m
}
