package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/cgroup"
)

// trees are the cgroup layouts a test can use on this machine, each a
// subtree of its own (niuma/test-PID-NAME) removed after the test: v1
// where its hierarchies are mounted, v2 where a cgroup2 tree is.
func trees(t *testing.T) map[string]*cgroup.Tree {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cgroup tests need root (CI runs as root)")
	}
	m, err := cgroup.ReadMounts()
	require.NoError(t, err)
	base := fmt.Sprintf("niuma/test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
	out := map[string]*cgroup.Tree{}
	if _, ok := m.V1["memory"]; ok {
		tr, err := cgroup.NewV1(m.V1, base)
		require.NoError(t, err)
		out["v1"] = tr
	} else {
		t.Log("v1: skipped, no v1 memory hierarchy is mounted here")
	}
	if len(m.Unified) > 0 {
		tr, err := cgroup.NewV2(m.Unified[0], base)
		require.NoError(t, err)
		out["v2"] = tr
	} else {
		t.Log("v2: skipped, no cgroup2 tree is mounted here")
	}
	for _, tr := range out {
		t.Cleanup(func() { require.NoError(t, tr.RemoveAll(), "the test's cgroups are left empty") })
	}
	return out
}

// treeAgain is the tree tr in another process (the owner helper).
func treeAgain(version, base string) (*cgroup.Tree, error) {
	m, err := cgroup.ReadMounts()
	if err != nil {
		return nil, err
	}
	if version == "1" {
		return cgroup.NewV1(m.V1, base)
	}
	return cgroup.NewV2(m.Unified[0], base)
}

// escapeeScript starts a child that leaves every trace the token scan
// follows: it forks twice, calls setsid and clears its environment. It
// writes its pid to escapee.pid (write, then rename) before it sleeps.
const escapeeScript = `(setsid env -i /bin/sh -c 'echo $$ > escapee.tmp; mv escapee.tmp escapee.pid; exec sleep 300' &)
while [ ! -e escapee.pid ]; do :; done
`

// goneWithin is how soon after its stage's end, or a cancel, an escapee
// is gone (the bound).
const goneWithin = time.Second

// requireGoneSince fails unless pid is dead now, and now is within
// goneWithin of since (when the stage was told to end, or cancelled).
func requireGoneSince(t *testing.T, pid int, since time.Time, what string) {
	t.Helper()
	took := time.Since(since)
	require.True(t, dead(pid), "the escapee (pid %d) outlived %s", pid, what)
	require.LessOrEqual(t, took, goneWithin, "the escapee (pid %d) went %s after %s", pid, took, what)
}

// TestCgroupTakesTheEscapeeAtTheEnd: once its stage's command has ended,
// a double-forked, env-clearing, setsid child is gone by the time Wait
// returns (within a second of the end), and the attempt's cgroup with it.
func TestCgroupTakesTheEscapeeAtTheEnd(t *testing.T) {
	for name, tr := range trees(t) {
		t.Run(name, func(t *testing.T) {
			job := newJob(t, "sh", "-c", escapeeScript+"while [ ! -e finish ]; do sleep 0.05; done; exit 0")
			job.Token = "a-end-" + name
			h := start(t, &Executor{Cgroups: tr}, job)
			escapee := readPID(t, filepath.Join(job.RunDir, "escapee.pid"))
			killLater(t, escapee, escapee)
			told := time.Now()
			require.NoError(t, os.WriteFile(filepath.Join(job.RunDir, "finish"), nil, 0o644))
			ex := wait(t, h)
			require.True(t, ex.Success(), ex.Describe())
			requireGoneSince(t, escapee, told, "its stage's end")
			require.False(t, tr.Group(job.Token).Exists(), "the attempt's cgroup is removed")
			var r ref
			require.NoError(t, json.Unmarshal([]byte(h.Ref()), &r))
			require.Equal(t, tr.Group(job.Token).Path(), r.Cgroup, "the ref names the cgroup")
		})
	}
}

// TestCgroupTakesTheEscapeeAtACancel: Stop's SIGTERM ends the command,
// and the escapee goes with the attempt.
func TestCgroupTakesTheEscapeeAtACancel(t *testing.T) {
	for name, tr := range trees(t) {
		t.Run(name, func(t *testing.T) {
			job := newJob(t, "sh", "-c", escapeeScript+"exec sleep 300")
			job.Token = "a-cancel-" + name
			h := start(t, &Executor{Cgroups: tr}, job)
			escapee := readPID(t, filepath.Join(job.RunDir, "escapee.pid"))
			killLater(t, escapee, escapee)
			cancelled := time.Now()
			require.NoError(t, h.Stop(context.Background(), 30*time.Second))
			ex := wait(t, h)
			require.False(t, ex.Success())
			requireGoneSince(t, escapee, cancelled, "the cancel")
			require.False(t, tr.Group(job.Token).Exists())
		})
	}
}

// helperOwner is an owner that starts the attempt described by the JSON
// job in jobFile under the cgroup tree (version, base), prints its ref and
// waits to be killed.
func helperOwner(jobFile, version, base string) {
	tr, err := treeAgain(version, base)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var job executor.Job
	b, _ := os.ReadFile(jobFile)
	if err := json.Unmarshal(b, &job); err != nil {
		os.Exit(3)
	}
	h, err := (&Executor{Cgroups: tr}).Start(context.Background(), job)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println(h.Ref())
	select {}
}

// ownerKilled starts job through an owner process, kills that owner with
// SIGKILL once the attempt runs, and returns the attempt's ref.
func ownerKilled(t *testing.T, tr *cgroup.Tree, job executor.Job) string {
	t.Helper()
	b, err := json.Marshal(job)
	require.NoError(t, err)
	jobFile := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(jobFile, b, 0o644))
	cmd := exec.Command(helperArgv(t)[0], jobFile, fmt.Sprint(int(tr.Version())), tr.Base())
	cmd.Env = append(os.Environ(), helperEnv+"=owner")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line := make([]byte, 4096)
	n, _ := out.Read(line)
	ref := strings.TrimSpace(string(line[:n]))
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.NotEmpty(t, ref, "the owner printed no ref")
	return ref
}

// TestCgroupAdoptionAfterTheOwnerWasKilled: a new owner finds the attempt
// by its cgroup (with its ref, and with its token alone), and the escapee
// goes at the stage's end, and at a cancel.
func TestCgroupAdoptionAfterTheOwnerWasKilled(t *testing.T) {
	for name, tr := range trees(t) {
		for _, how := range []string{"end", "cancel"} {
			for _, byToken := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/token-only=%v", name, how, byToken), func(t *testing.T) {
					job := newJob(t, "sh", "-c", escapeeScript+"while [ ! -e finish ]; do sleep 0.05; done; exit 3")
					job.Token = fmt.Sprintf("a-adopt-%s-%s-%v", name, how, byToken)
					ref := ownerKilled(t, tr, job)
					escapee := readPID(t, filepath.Join(job.RunDir, "escapee.pid"))
					killLater(t, escapee, escapee)
					if byToken {
						ref = ""
					}
					h, err := (&Executor{Cgroups: tr}).Recover(context.Background(), job, ref)
					require.NoError(t, err)
					t.Cleanup(func() { reap(h) })
					told := time.Now()
					if how == "end" {
						require.NoError(t, os.WriteFile(filepath.Join(job.RunDir, "finish"), nil, 0o644))
						require.Equal(t, 3, wait(t, h).Code)
					} else {
						require.NoError(t, h.Stop(context.Background(), 30*time.Second))
						wait(t, h)
					}
					requireGoneSince(t, escapee, told, "the adopted attempt's "+how)
					require.False(t, tr.Group(job.Token).Exists())
				})
			}
		}
	}
}

// TestCgroupMemoryLimit: a stage allocating twice its memory: is killed
// by its cgroup's limit, and its exit says so in the words the run view
// shows.
func TestCgroupMemoryLimit(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl allocates the memory here; it is not installed")
	}
	for name, tr := range trees(t) {
		t.Run(name, func(t *testing.T) {
			if !tr.Features().Memory {
				t.Skipf("no memory controller: %s", tr.Describe())
			}
			job := newJob(t, "perl", "-e", `$x = "a" x (128*1024*1024); print "survived\n"`)
			job.Token = "a-oom-" + name
			job.Limits = executor.Limits{MemoryMiB: 64}
			h := start(t, &Executor{Cgroups: tr}, job)
			ex := wait(t, h)
			require.False(t, ex.Success())
			require.True(t, ex.OOMKilled, "exit %+v", ex)
			require.True(t, strings.HasPrefix(ex.Reason, "out of memory (limit 64 MiB, peak "), ex.Reason)
			require.NotContains(t, readFile(t, job.StdoutPath), "survived")
		})
	}
}

// TestCgroupUsageAfterTheEnd: a stage too short for any reading while it
// ran still tells what it used: once Wait returns, Usage gives what its
// cgroup said as it settled (its CPU time, its peak, its limits).
func TestCgroupUsageAfterTheEnd(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl burns the CPU here; it is not installed")
	}
	for name, tr := range trees(t) {
		t.Run(name, func(t *testing.T) {
			if !tr.Features().Memory {
				t.Skipf("no memory controller: %s", tr.Describe())
			}
			job := newJob(t, "perl", "-e", `$x = "a" x (32*1024*1024); 1 while $i++ < 5e6`)
			job.Token = "a-usage-" + name
			job.Limits = executor.Limits{MemoryMiB: 256, CPUMilli: 1500}
			h := start(t, &Executor{Cgroups: tr}, job)
			ex := wait(t, h)
			require.True(t, ex.Success(), "exit %+v", ex)
			m, ok := h.(executor.Meter)
			require.True(t, ok, "the local handle is a Meter")
			u, ok := m.Usage()
			require.True(t, ok, "an ended attempt still has its last reading")
			require.Positive(t, u.CPUSeconds)
			require.GreaterOrEqual(t, u.PeakBytes, int64(32<<20))
			require.Equal(t, int64(256<<20), u.LimitBytes)
			if tr.Features().CPU {
				require.Equal(t, int64(1500), u.CPULimitMilli)
			}
		})
	}
}

func TestOOMReason(t *testing.T) {
	require.Equal(t, "out of memory (limit 4 GiB, peak 4.0 GiB)", OOMReason(4<<30, 4<<30-1<<20))
	require.Equal(t, "out of memory (limit 64 MiB, peak 63.9 MiB)", OOMReason(64<<20, 64<<20-100<<10))
	require.Equal(t, "out of memory (limit 1536 MiB, peak 1.5 GiB)", OOMReason(1536<<20, 1536<<20))
	require.Equal(t, "out of memory (peak 12.0 MiB)", OOMReason(0, 12<<20))
}

// TestModeSaysWhichIsInForce: the executor names its way of finding an
// attempt's processes.
func TestModeSaysWhichIsInForce(t *testing.T) {
	require.Contains(t, (&Executor{NoCgroup: "no cgroup hierarchy is mounted"}).Mode(), "token scan")
	require.Contains(t, (&Executor{NoCgroup: "no cgroup hierarchy is mounted"}).Mode(), "no cgroup hierarchy is mounted")
	for name, tr := range trees(t) {
		require.Contains(t, (&Executor{Cgroups: tr}).Mode(), "cgroup v"+name[1:], name)
	}
}

// The grace period is a stored deadline: a new owner's Stop of an attempt
// its predecessor stopped (and died during the grace period) sends no
// second SIGTERM and kills at the deadline already stored, not after a
// grace period of its own.
func TestStopDeadlineSurvivesTheOwner(t *testing.T) {
	t.Parallel()
	job := newJob(t)
	log := filepath.Join(job.RunDir, "terms")
	fifo := filepath.Join(job.RunDir, "release")
	ready := filepath.Join(job.RunDir, "ready")
	mkfifo(t, fifo)
	job.Argv = helperArgv(t, log, fifo, ready)
	job.Env[helperEnv] = "count-term"
	h := start(t, New(), job)
	waitForFile(t, ready)

	// The first owner stops it with a long grace, and dies (its Stop's
	// context ends) once the command has had SIGTERM.
	ctx, die := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- h.Stop(ctx, time.Hour) }()
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(log)
		return len(b) > 0
	}, 20*time.Second, 5*time.Millisecond, "the command never got SIGTERM")
	die()
	require.ErrorIs(t, <-stopped, context.Canceled)
	deadline, ok := readStopFile(h.(*handle).stopFile())
	require.True(t, ok, "the deadline is stored")
	require.WithinDuration(t, time.Now().Add(time.Hour), deadline, time.Minute)

	// As if that hour had passed while no one owned the attempt.
	require.NoError(t, writeStopFile(h.(*handle).stopFile(), time.Now().Add(-time.Second)))
	adopted, err := New().Recover(context.Background(), job, h.Ref())
	require.NoError(t, err)
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, adopted.Stop(sctx, time.Hour), "killed at the stored deadline, not an hour after this Stop")
	ex := wait(t, adopted)
	require.False(t, ex.Success())
	require.Equal(t, "TERM\n", readFile(t, log), "SIGTERM once, from the first owner")
}
