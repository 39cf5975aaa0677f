package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const hybridMountinfo = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 33 0:30 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
38 33 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
39 33 0:34 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,memory
40 33 0:35 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,freezer
41 33 0:36 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:19 - cgroup cgroup rw,pids
42 33 0:37 / /mnt/odd\040place rw - cgroup cgroup rw,memory
`

func TestParseMountinfo(t *testing.T) {
	m, err := ParseMountinfo(strings.NewReader(hybridMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Unified) != 1 || m.Unified[0] != "/sys/fs/cgroup/unified" {
		t.Errorf("unified = %v", m.Unified)
	}
	want := map[string]string{
		"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
		"memory":  "/sys/fs/cgroup/memory", // the first mount wins
		"freezer": "/sys/fs/cgroup/freezer", "pids": "/sys/fs/cgroup/pids",
	}
	if len(m.V1) != len(want) {
		t.Errorf("v1 = %v, want %v (name=systemd is no controller)", m.V1, want)
	}
	for c, p := range want {
		if m.V1[c] != p {
			t.Errorf("v1[%s] = %q, want %q", c, m.V1[c], p)
		}
	}
	m, _ = ParseMountinfo(strings.NewReader("42 33 0:37 / /mnt/odd\\040place rw - cgroup2 cgroup2 rw\n"))
	if len(m.Unified) != 1 || m.Unified[0] != "/mnt/odd place" {
		t.Errorf("escaped mount point = %q", m.Unified)
	}
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"a0123abc":       "a0123abc",
		"local-12ab":     "local-12ab",
		"../etc":         "_._etc",
		"with space/and": "with_space_and",
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

// layouts are the trees a test can make on this machine, each under a
// subtree of its own (niuma/test-PID-NAME), removed after it: v1 where its
// hierarchies are mounted, v2 where a cgroup2 tree is mounted or the test
// can mount one.
func layouts(t *testing.T) map[string]*Tree {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cgroup tests need root (CI runs as root)")
	}
	m, err := ReadMounts()
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("niuma/test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
	out := map[string]*Tree{}
	if _, ok := m.V1["memory"]; ok {
		tr, err := NewV1(m.V1, base)
		if err != nil {
			t.Fatalf("v1: %v", err)
		}
		out["v1"] = tr
	} else {
		t.Log("v1: skipped, no v1 memory hierarchy is mounted here")
	}
	unified := ""
	if len(m.Unified) > 0 {
		unified = m.Unified[0]
	} else {
		dir := t.TempDir()
		if err := syscall.Mount("none", dir, "cgroup2", 0, ""); err != nil {
			t.Logf("v2: skipped, no cgroup2 tree is mounted and mounting one failed: %v", err)
		} else {
			t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
			unified = dir
		}
	}
	if unified != "" {
		tr, err := NewV2(unified, base)
		if err != nil {
			t.Fatalf("v2: %v", err)
		}
		out["v2"] = tr
	}
	for name, tr := range out {
		t.Cleanup(func() {
			if err := tr.RemoveAll(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	return out
}

// joined starts sh running script inside g (it joins first, as the
// local executor's shim does).
func joined(t *testing.T, g *Group, script string) *exec.Cmd {
	t.Helper()
	join := ""
	for _, f := range g.JoinFiles() {
		join += "echo 0 > " + strconv.Quote(f) + " || exit 96\n"
	}
	cmd := exec.Command("/bin/sh", "-c", join+script)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// poll waits for cond, up to a generous deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gone reports whether pid has ended (no process, or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// TestKillTakesWhatLeftTheGroup: a child that cleared its environment,
// forked twice and called setsid is still in the group, and Kill ends it.
func TestKillTakesWhatLeftTheGroup(t *testing.T) {
	for name, tr := range layouts(t) {
		t.Run(name, func(t *testing.T) {
			g, err := tr.Create("a-kill", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(t.TempDir(), "escapee")
			cmd := joined(t, g, `(setsid env -i /bin/sh -c 'echo $$ > `+pidFile+`; exec sleep 300' &) ; exec sleep 300`)
			defer cmd.Process.Kill()
			var escapee int
			poll(t, "the escapee's pid", func() bool {
				b, _ := os.ReadFile(pidFile)
				escapee, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return escapee > 0
			})
			poll(t, "both processes in the group", func() bool { return len(g.Procs()) == 2 })
			if err := g.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if !g.Empty() {
				t.Fatalf("processes left: %v", g.Procs())
			}
			poll(t, "the escapee gone", func() bool { return gone(escapee) })
			if err := g.Remove(); err != nil {
				t.Fatal(err)
			}
			if g.Exists() {
				t.Error("the group is still there after Remove")
			}
		})
	}
}

func TestFreezeAndThaw(t *testing.T) {
	for name, tr := range layouts(t) {
		t.Run(name, func(t *testing.T) {
			if !tr.Features().Freeze {
				t.Skipf("%s: this layout cannot freeze", name)
			}
			g, err := tr.Create("a-freeze", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Remove()
			out := filepath.Join(t.TempDir(), "count")
			cmd := joined(t, g, `i=0; while :; do i=$((i+1)); echo $i > `+out+`; done`)
			defer func() { _ = g.Kill(); _ = cmd.Wait() }()
			count := func() int { b, _ := os.ReadFile(out); n, _ := strconv.Atoi(strings.TrimSpace(string(b))); return n }
			poll(t, "the loop counting", func() bool { return count() > 0 })
			if err := g.Freeze(); err != nil {
				t.Fatal(err)
			}
			if !g.Frozen() {
				t.Fatal("not frozen after Freeze")
			}
			// Frozen: the state of every process is stopped.
			for _, pid := range g.Procs() {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
				if !strings.Contains(string(b), "State:\tD") && !strings.Contains(string(b), "State:\tS") && !strings.Contains(string(b), "State:\tT") {
					t.Errorf("process %d of a frozen group: %s", pid, firstMatch(string(b), "State:"))
				}
			}
			if err := g.Thaw(); err != nil {
				t.Fatal(err)
			}
			before := count()
			poll(t, "the loop counting on after Thaw", func() bool { return count() > before })
		})
	}
}

func firstMatch(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestMemoryLimitKills: a process allocating twice its group's memory
// limit is killed by the kernel, and Stats says so.
func TestMemoryLimitKills(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl allocates the memory here; it is not installed")
	}
	for name, tr := range layouts(t) {
		t.Run(name, func(t *testing.T) {
			if !tr.Features().Memory {
				t.Skipf("%s: no memory controller in this layout (%s)", name, tr.Describe())
			}
			const limit = 64 << 20
			g, err := tr.Create("a-oom", Limits{MemoryBytes: limit, CPUMilli: 500})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Remove()
			cmd := joined(t, g, `exec perl -e '$x = "a" x (128*1024*1024); print "survived\n"'`)
			err = cmd.Wait()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("a process allocating 128 MiB under a 64 MiB limit ended %v, want killed", err)
			}
			s := g.Stats()
			if s.OOMKills < 1 {
				t.Errorf("OOM kills = %d, want at least 1", s.OOMKills)
			}
			if s.LimitBytes != limit {
				t.Errorf("limit = %d, want %d", s.LimitBytes, limit)
			}
			if s.PeakBytes < limit*9/10 {
				t.Errorf("peak = %d, want near the limit %d", s.PeakBytes, limit)
			}
			if s.CPUNanos <= 0 && tr.Version() == V1 {
				t.Errorf("CPU time = %d, want some", s.CPUNanos)
			}
		})
	}
}

// TestCPULimitWritten: a cpus: of 0.5 is a quota of half the period.
func TestCPULimitWritten(t *testing.T) {
	for name, tr := range layouts(t) {
		t.Run(name, func(t *testing.T) {
			if !tr.Features().CPU {
				t.Skipf("%s: no cpu controller in this layout", name)
			}
			g, err := tr.Create("a-cpu", Limits{CPUMilli: 500})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Remove()
			var got string
			if tr.Version() == V2 {
				got = readString(filepath.Join(tr.dir(g.rel, "cpu"), "cpu.max"))
			} else {
				d := tr.dir(g.rel, "cpu")
				got = strings.TrimSpace(readString(filepath.Join(d, "cpu.cfs_quota_us"))) + " " + strings.TrimSpace(readString(filepath.Join(d, "cpu.cfs_period_us")))
			}
			if strings.TrimSpace(got) != "50000 100000" {
				t.Errorf("quota and period = %q, want 50000 100000", got)
			}
			if m := g.Stats().CPULimitMilli; m != 500 {
				t.Errorf("Stats' CPU limit = %d thousandths, want 500", m)
			}
			free, err := tr.Create("a-nocpu", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			defer free.Remove()
			if m := free.Stats().CPULimitMilli; m != 0 {
				t.Errorf("a group without cpus: reads a CPU limit of %d thousandths, want 0", m)
			}
		})
	}
}

func TestQuotaMilli(t *testing.T) {
	for _, c := range []struct {
		quota, period string
		want          int64
	}{{"50000", "100000", 500}, {"200000", "100000", 2000}, {"max", "100000", 0}, {"-1", "100000", 0}, {"", "", 0}, {"1000", "0", 0}} {
		if got := quotaMilli(c.quota, c.period); got != c.want {
			t.Errorf("quotaMilli(%q, %q) = %d, want %d", c.quota, c.period, got, c.want)
		}
	}
}

func TestAtRefusesPathsOutOfTheTree(t *testing.T) {
	tr := &Tree{version: V2, unified: "/sys/fs/cgroup", base: "niuma"}
	for _, bad := range []string{"", "/", "..", "../x", "niuma/../../etc"} {
		if g := tr.At(bad); g != nil {
			t.Errorf("At(%q) = %s, want nil", bad, g.rel)
		}
	}
	if g := tr.At("niuma/a1"); g == nil || g.Path() != "niuma/a1" {
		t.Errorf("At(niuma/a1) = %v", g)
	}
}
