package slurm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/slurm/slurmtest"
)

// markEnv marks every process of one test's job: the job exports it, as
// it exports any variable of the stage's environment, so the batch shell,
// the shim, the command and whatever the command starts carry it (unless
// one clears its own environment). It is the test's, not the executor's:
// the tests look for it to see what is left of a job.
const markEnv = "NIUMA_TEST_LEFTOVER_MARK"

// marked lists the live processes (zombies are not) whose environment
// carries mark.
func marked(mark string) []int {
	want := []byte(markEnv + "=" + mark + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.HasPrefix(b, want) && !bytes.Contains(b, append([]byte{0}, want...)) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			s := string(st)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X') {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// describe names the processes for a failure message.
func describe(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		ppid := ""
		if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 1 {
			ppid = f[1]
		}
		b.WriteString("\n  pid " + strconv.Itoa(p) + " (parent " + ppid + "): " + strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return b.String()
}

// markJob gives job a fresh mark, and kills what carries it when the test
// ends, so that a failing test leaves nothing running on the machine.
func markJob(t *testing.T, job *executor.Job) string {
	t.Helper()
	mark := randomToken()
	job.Env[markEnv] = mark
	t.Cleanup(func() {
		for _, p := range marked(mark) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	return mark
}

// allGone waits until no process carries mark: the job's end as Slurm
// reports it may come a moment before its last process is killed.
func allGone(t *testing.T, mark string, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := marked(mark)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d processes of the job still run %s after it ended:%s", what, len(left), d, describe(left))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// escapees is a command that starts two children that leave its process
// tree and ignore SIGTERM: one in a session of its own (setsid), one
// double-forked (its parent exits, so it is reparented). Each writes its
// pid to $0 (the first argument after the script) once it runs; the command says "ready" when both do, then
// runs rest.
func escapees(rest string) []string {
	return sh(`pids=$0
loop='trap "" TERM; echo $$ >> "$0"; while :; do sleep 0.1; done'
setsid /bin/sh -c "$loop" "$pids" </dev/null >/dev/null 2>&1 &
( /bin/sh -c "$loop" "$pids" </dev/null >/dev/null 2>&1 & )
until [ "$(wc -l 2>/dev/null <"$pids")" -ge 2 ] 2>/dev/null; do sleep 0.05; done # 2> before <: quiet until the file exists
echo ready
` + rest)
}

// started waits for the job's "ready" on stdout, and checks that the
// escaped children it names run.
func started(t *testing.T, job executor.Job, pidFile string) {
	t.Helper()
	until(t, time.Minute, "the stage did not start", func() bool { b, _ := os.ReadFile(job.StdoutPath); return strings.Contains(string(b), "ready") })
	if pidFile == "" {
		return
	}
	pids := strings.Fields(read(t, pidFile))
	require.Len(t, pids, 2, "both children started")
}

// Nothing of an attempt outlives it, whatever the cluster's proctrack
// plugin: on the accounting cluster the job's cgroup holds every process;
// on the other (proctrack/linuxproc, which finds a job's processes by
// their parents) a process that left the job's process tree, or whose
// batch shell was killed under it, is found by the attempt's token.
func TestSlurmLeavesNoProcessBehind(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		t.Run("stopped: a stage that ignores SIGTERM", func(t *testing.T) {
			t.Parallel()
			job := newJob(t, sh("trap 'echo TERM' TERM; echo ready; while :; do sleep 0.1; done")...)
			mark := markJob(t, &job)
			h := start(t, x, job)
			started(t, job, "")
			require.NoError(t, h.Stop(context.Background(), 2*time.Second))
			ex := wait(t, h, time.Minute)
			require.False(t, ex.Success())
			require.Equal(t, 1, strings.Count(read(t, job.StdoutPath), "TERM"), "the command got SIGTERM once")
			allGone(t, mark, 20*time.Second, "after Stop")
		})
		t.Run("stopped: children that left the stage's process tree", func(t *testing.T) {
			t.Parallel()
			pids := filepath.Join(t.TempDir(), "pids")
			job := newJob(t, escapees("trap 'echo TERM' TERM; while :; do sleep 0.1; done")...)
			job.Argv = append(job.Argv, pids)
			mark := markJob(t, &job)
			h := start(t, x, job)
			started(t, job, pids)
			require.NoError(t, h.Stop(context.Background(), 2*time.Second))
			ex := wait(t, h, time.Minute)
			require.False(t, ex.Success())
			allGone(t, mark, 20*time.Second, "after Stop")
		})
		t.Run("cancelled in Slurm: children that left the stage's process tree", func(t *testing.T) {
			t.Parallel()
			pids := filepath.Join(t.TempDir(), "pids")
			job := newJob(t, escapees("while :; do sleep 0.1; done")...)
			job.Argv = append(job.Argv, pids)
			mark := markJob(t, &job)
			h := start(t, x, job)
			started(t, job, pids)
			slurmtest.Cancel(c, h.JobID()) // as a user's scancel: TERM to all, KILL after KillWait
			ex := wait(t, h, time.Minute)
			require.False(t, ex.Success())
			allGone(t, mark, 30*time.Second, "after scancel")
		})
		t.Run("succeeded: children that left the stage's process tree", func(t *testing.T) {
			t.Parallel()
			pids := filepath.Join(t.TempDir(), "pids")
			job := newJob(t, escapees("exit 0")...)
			job.Argv = append(job.Argv, pids)
			mark := markJob(t, &job)
			h := start(t, x, job)
			ex := wait(t, h, time.Minute)
			require.True(t, ex.Success(), "%+v; stderr %s", ex, read(t, job.StderrPath))
			require.Len(t, strings.Fields(read(t, pids)), 2, "both children started")
			allGone(t, mark, 20*time.Second, "after the stage succeeded")
		})
	})
}
