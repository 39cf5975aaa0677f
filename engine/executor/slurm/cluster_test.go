package slurm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/slurm/slurmtest"
)

// These tests submit real jobs to the single-node clusters that
// scripts/slurm-up.sh starts, one with accounting and one without; they
// skip when a cluster does not answer (and fail in CI, which starts both).

// eachCluster runs f against both clusters, in parallel.
func eachCluster(t *testing.T, f func(t *testing.T, c slurmtest.Cluster, x *Executor)) {
	for _, c := range slurmtest.Both {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			f(t, c, testExecutor(t, c))
		})
	}
}

// testExecutor is an executor on cluster c that looks often, so that
// tests are quick; each test gets its own, as each Niuma process has one.
func testExecutor(t *testing.T, c slurmtest.Cluster, tweaks ...func(*Config)) *Executor {
	t.Helper()
	slurmtest.Need(t, c)
	cli := CLI{Conf: c.Conf}
	cfg := Config{PollMin: 100 * time.Millisecond, PollMax: time.Second, ExitPoll: 100 * time.Millisecond,
		Settle: 3 * time.Second, SignalGrace: 30 * time.Second}
	for _, tw := range tweaks {
		tw(&cfg)
	}
	return New(cli, cfg)
}

func randomToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newJob is an attempt of stage "train" in a fresh run directory.
func newJob(t *testing.T, argv ...string) executor.Job {
	t.Helper()
	run := t.TempDir()
	stage := filepath.Join(run, "train")
	return executor.Job{
		RunID: "run-" + randomToken()[:6], Stage: "train", Attempt: 1, Token: randomToken(),
		Argv:   argv,
		Env:    map[string]string{"NIUMA_RUN_ID": "run-1", "NIUMA_STAGE": "train", "NIUMA_ATTEMPT": "1", "ODD": "it's $HOME `x` \"q\"\nline 2"},
		RunDir: run, StageDir: stage,
		StdoutPath: filepath.Join(stage, "attempt-1.stdout.log"),
		StderrPath: filepath.Join(stage, "attempt-1.stderr.log"),
	}
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// start submits the job and cancels it when the test ends.
func start(t *testing.T, x *Executor, job executor.Job) *handle {
	t.Helper()
	h, err := x.Start(context.Background(), job)
	require.NoError(t, err)
	hh := h.(*handle)
	t.Cleanup(func() { slurmtest.Cancel(slurmtest.Cluster{Conf: x.cmd.(CLI).Conf}, hh.JobID()) })
	return hh
}

func wait(t *testing.T, h executor.Handle, d time.Duration) executor.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ex, err := h.Wait(ctx)
	require.NoError(t, err, "the job did not end within %s", d)
	return ex
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// until polls cond every 100 ms until it holds, or fails after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSlurmRunsTheStageContract(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		job := newJob(t, sh(`printf '{"step": 1, "loss": 0.5}\n'; echo "cwd=$(pwd)"; echo "stage=$NIUMA_STAGE"; echo "odd=$ODD"; echo "cuda=[$CUDA_VISIBLE_DEVICES]"; echo "args=$0 $1"; echo oops >&2`)...)
		job.Argv = append(job.Argv, "a b", "c'd")
		h := start(t, x, job)
		ex := wait(t, h, time.Minute)
		require.True(t, ex.Success(), "exit: %+v; stderr: %s", ex, read(t, job.StderrPath))
		out := read(t, job.StdoutPath)
		require.Contains(t, out, `{"step": 1, "loss": 0.5}`)
		require.Contains(t, out, "cwd="+job.RunDir)
		require.Contains(t, out, "stage=train")
		require.Contains(t, out, "odd="+job.Env["ODD"], "values reach the stage literally")
		require.Contains(t, out, "cuda=[]", "a stage that asks for no GPU sees none")
		require.Contains(t, out, "args=a b c'd")
		require.Contains(t, read(t, job.StderrPath), "oops")
		script := read(t, filepath.Join(job.StageDir, "attempt-1.sbatch"))
		require.Contains(t, script, "# Submitted as: sbatch --parsable --job-name=niuma-"+job.Token)
		require.Equal(t, "0", strings.Fields(read(t, filepath.Join(job.StageDir, ".attempt-1.exit")))[0])
	})
}

func TestSlurmReportsTheExitCode(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		job := newJob(t, sh("exit 3")...)
		ex := wait(t, start(t, x, job), time.Minute)
		require.Equal(t, 3, ex.Code)
		require.False(t, ex.Success())
		require.Equal(t, "exited with code 3", ex.Describe())
	})
}

func TestSlurmGivesAGPUStageItsGRES(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		job := newJob(t, sh(`echo "cuda=$CUDA_VISIBLE_DEVICES gpus=$SLURM_JOB_GPUS"`)...)
		job.GPUCount = 2
		ex := wait(t, start(t, x, job), 2*time.Minute)
		require.True(t, ex.Success(), "%+v", ex)
		out := read(t, job.StdoutPath)
		var cuda, gpus string
		for _, f := range strings.Fields(out) {
			if v, ok := strings.CutPrefix(f, "cuda="); ok {
				cuda = v
			}
			if v, ok := strings.CutPrefix(f, "gpus="); ok {
				gpus = v
			}
		}
		require.Len(t, strings.Split(cuda, ","), 2, "CUDA_VISIBLE_DEVICES lists the two GPUs Slurm gave it: %q", out)
		require.Len(t, strings.Split(gpus, ","), 2, "SLURM_JOB_GPUS too: %q", out)
	})
}

func TestSlurmReportsOutOfMemory(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		// 64 MiB allowed, 400 MiB touched: the cgroup (accounting cluster)
		// or the step's memory polling (the other) kills it.
		job := newJob(t, "/usr/bin/python3", "-c", "import time\nx = bytearray(400 << 20)\ntime.sleep(5)\nprint('survived')")
		job.Container.MemoryMiB = 64
		ex := wait(t, start(t, x, job), 2*time.Minute)
		require.True(t, ex.OOMKilled, "%+v; stderr: %s", ex, read(t, job.StderrPath))
		require.Contains(t, ex.Describe(), "out of memory")
		require.Contains(t, ex.Describe(), "64 MiB")
		require.NotContains(t, read(t, job.StdoutPath), "survived")
	})
}

func TestSlurmEnforcesTheTimeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("a time limit takes Slurm over a minute to reach")
	}
	t.Parallel() // with the other tests: it only waits
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		// Slurm's limits are whole minutes, checked every 30 s, and its
		// warning may come a minute early: a two-minute limit, warned
		// 30 s before. The workload ignores the warning, so it is Slurm's
		// limit that ends it, as when Niuma is not there to.
		job := newJob(t, sh("trap 'echo warned at $(date +%s)' TERM; date +%s; while :; do sleep 1; done")...)
		job.Timeout = 61 * time.Second
		h := start(t, x, job)
		ex := wait(t, h, 5*time.Minute)
		require.False(t, ex.Success())
		require.Contains(t, ex.Describe(), "timeout", "%+v", ex)
		require.Contains(t, ex.Describe(), "time limit of 2m0s")
		out := read(t, job.StdoutPath)
		require.Contains(t, out, "warned", "--signal gave the checkpoint warning first")
		f := strings.Fields(out)
		began, _ := strconv.ParseInt(f[0], 10, 64)
		warned, _ := strconv.ParseInt(f[3], 10, 64)
		require.GreaterOrEqual(t, warned-began, int64(20), "not as it started: %q", out)
	})
}

func TestSlurmStopsWithSIGTERMThenKills(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		t.Run("a stage that checkpoints on SIGTERM", func(t *testing.T) {
			job := newJob(t, sh("trap 'echo TERM; exit 7' TERM; echo ready; while :; do sleep 0.1; done")...)
			h := start(t, x, job)
			until(t, time.Minute, "the stage did not start", func() bool { b, _ := os.ReadFile(job.StdoutPath); return strings.Contains(string(b), "ready") })
			require.NoError(t, h.Stop(context.Background(), 20*time.Second))
			ex := wait(t, h, time.Minute)
			require.Equal(t, 7, ex.Code, "%+v", ex)
			require.Equal(t, 1, strings.Count(read(t, job.StdoutPath), "TERM"), "the command gets SIGTERM exactly once")
		})
		t.Run("a stage that ignores SIGTERM", func(t *testing.T) {
			job := newJob(t, sh("trap 'echo TERM' TERM; echo ready; while :; do sleep 0.1; done")...)
			h := start(t, x, job)
			until(t, time.Minute, "the stage did not start", func() bool { b, _ := os.ReadFile(job.StdoutPath); return strings.Contains(string(b), "ready") })
			began := time.Now()
			require.NoError(t, h.Stop(context.Background(), 2*time.Second))
			ex := wait(t, h, time.Minute)
			require.False(t, ex.Success())
			require.GreaterOrEqual(t, time.Since(began), 2*time.Second, "killed only after the grace period: %+v, stdout %q, stderr %q", ex, read(t, job.StdoutPath), read(t, job.StderrPath))
			require.Contains(t, read(t, job.StdoutPath), "TERM")
		})
		t.Run("a pending job is cancelled", func(t *testing.T) {
			x := testExecutor(t, c, func(cfg *Config) { cfg.ExtraArgs = []string{"--hold"} })
			job := newJob(t, sh("echo ran")...)
			h := start(t, x, job)
			until(t, 30*time.Second, "the held job never said it waits", func() bool { return h.Waiting() != "" })
			require.Contains(t, h.Waiting(), "held by its owner (scontrol release JOBID lets it go) (Slurm: JobHeldUser)")
			require.NoError(t, h.Stop(context.Background(), 10*time.Second))
			ex := wait(t, h, time.Minute)
			require.False(t, ex.Success())
			require.Contains(t, ex.Describe(), "before it started", "%+v", ex)
			_, err := os.Stat(job.StdoutPath)
			require.True(t, errors.Is(err, os.ErrNotExist), "nothing of it ran")
		})
	})
}

func TestSlurmSaysWhyAJobWaits(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		// Every GPU of the node held, then one more asked for.
		hold := newJob(t, sh("echo ready; sleep 300")...)
		hold.GPUCount = 4
		hh := start(t, x, hold)
		until(t, 2*time.Minute, "the job holding the GPUs did not start", func() bool {
			b, _ := os.ReadFile(hold.StdoutPath)
			return strings.Contains(string(b), "ready")
		})
		job := newJob(t, sh("echo ran")...)
		job.GPUCount = 1
		h := start(t, x, job)
		until(t, 30*time.Second, "the waiting job gave no reason", func() bool { return strings.Contains(h.Waiting(), "Resources") })
		require.Equal(t, "in Slurm's queue as job "+h.JobID()+": the GPUs, CPUs or memory it asks for are in use; it starts when they free up (Slurm: Resources)", h.Waiting())
		require.NoError(t, hh.Stop(context.Background(), time.Second))
		ex := wait(t, h, 2*time.Minute)
		require.True(t, ex.Success(), "it ran once the GPUs were free: %+v", ex)
		require.Equal(t, "", h.Waiting())
	})
}

func TestSlurmTranslatesAQOSLimit(t *testing.T) {
	c := slurmtest.WithAccounting // QOS limits need accounting
	x := testExecutor(t, c)
	job := newJob(t, sh("echo ran")...)
	job.GPUCount = 2
	job.Cluster.QOS = "onegpu" // at most 1 GPU per user (slurm-up.sh)
	h := start(t, x, job)
	until(t, 30*time.Second, "the job gave no QOS reason", func() bool { return strings.Contains(h.Waiting(), "QOSMaxGRESPerUser") })
	require.Contains(t, h.Waiting(), "your QOS allows you no more GPUs at once")
}

func TestSlurmRefusesARunDirectoryTheNodesCannotSee(t *testing.T) {
	// A partition whose node is not this machine, as sinfo would list it.
	fake := fakeCommands{"sinfo": "gpu01|gpu01|10.1.2.3|gpu*\ngpu02|gpu02|10.1.2.4|gpu*\n"}
	x := New(fake, Config{})
	job := newJob(t, sh("true")...)
	_, err := x.Start(context.Background(), job)
	require.Error(t, err)
	require.Contains(t, err.Error(), job.RunDir+" is on this machine's own disk")
	require.Contains(t, err.Error(), "(gpu01, gpu02) cannot see: set NIUMA_HOME to a directory on a filesystem every node mounts")
	_, err = os.Stat(filepath.Join(job.StageDir, "attempt-1.sbatch"))
	require.True(t, errors.Is(err, os.ErrNotExist), "nothing was submitted")

	x = New(fake, Config{SharedDirs: []string{filepath.Dir(job.RunDir)}})
	require.NoError(t, x.checkShared(context.Background(), "", job.RunDir), "a directory the site lists as shared is")
}

// fakeCommands answers each tool with fixed output.
type fakeCommands map[string]string

func (f fakeCommands) Run(_ context.Context, name string, _ ...string) ([]byte, error) {
	out, ok := f[name]
	if !ok {
		return nil, &CommandError{Name: name, Code: 1, Stderr: name + ": not faked"}
	}
	return []byte(out), nil
}
