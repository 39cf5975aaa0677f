package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/slurm/slurmtest"
)

// The test binary doubles as a Niuma that submits an attempt and is then
// killed with SIGKILL: with helperEnv set it starts the job described in
// the file named by its first argument, writes the handle's Ref next to
// it, and waits to be killed.
const helperEnv = "NIUMA_SLURM_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "" {
		os.Exit(m.Run())
	}
	var in struct {
		Conf string
		Home string
		Job  executor.Job
	}
	b, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	x := New(CLI{Conf: in.Conf}, Config{PollMin: 100 * time.Millisecond, PollMax: time.Second, Home: in.Home})
	h, err := x.Start(context.Background(), in.Job)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	if err := os.WriteFile(os.Args[1]+".ref", []byte(h.Ref()), 0o644); err != nil {
		os.Exit(4)
	}
	select {} // following the job until SIGKILL
}

// startAndKill submits job from a child process that is killed with
// SIGKILL once the job is submitted, as Niuma dies; it returns the Ref the
// child learnt.
func startAndKill(t *testing.T, c slurmtest.Cluster, job executor.Job) string {
	t.Helper()
	return startAndKillFor(t, c, "", job)
}

// startAndKillFor is startAndKill from a Niuma of data directory home.
func startAndKillFor(t *testing.T, c slurmtest.Cluster, home string, job executor.Job) string {
	t.Helper()
	in, err := json.Marshal(struct {
		Conf string
		Home string
		Job  executor.Job
	}{c.Conf, home, job})
	require.NoError(t, err)
	spec := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(spec, in, 0o644))
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, spec)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	var refJSON []byte
	until(t, time.Minute, "the child did not submit the job", func() bool {
		refJSON, err = os.ReadFile(spec + ".ref")
		return err == nil && len(refJSON) > 0
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	var r ref
	require.NoError(t, json.Unmarshal(refJSON, &r))
	t.Cleanup(func() { slurmtest.Cancel(c, r.JobID) })
	return string(refJSON)
}

// jobsNamed counts the jobs Slurm has under the attempt's name: the
// controller's, and accounting's where there is one.
func jobsNamed(t *testing.T, c slurmtest.Cluster, job executor.Job) int {
	t.Helper()
	ctx := context.Background()
	name := jobName(token(job))
	ids := map[string]bool{}
	out, err := c.Run(ctx, "squeue", "--noheader", "--states=all", "--name="+name, "--format=%i")
	require.NoError(t, err)
	for _, id := range strings.Fields(string(out)) {
		ids[id] = true
	}
	if c.Accounting {
		out, err := c.Run(ctx, "sacct", "--noheader", "--parsable2", "-X", "--name="+name, "--starttime=2000-01-01", "-o", "JobIDRaw")
		require.NoError(t, err)
		for _, id := range strings.Fields(string(out)) {
			ids[id] = true
		}
	}
	return len(ids)
}

// gate is a stage that says it is ready and runs until a file appears.
func gate(t *testing.T, code int) (executor.Job, func()) {
	job := newJob(t)
	release := filepath.Join(job.RunDir, "go")
	job.Argv = sh(fmt.Sprintf(`echo ready; for i in 1 2 3; do printf '{"step": %%d, "loss": 1}\n' $i; done; while [ ! -e %s ]; do sleep 0.1; done; exit %d`, quote(release), code))
	return job, func() { require.NoError(t, os.WriteFile(release, nil, 0o644)) }
}

func ready(t *testing.T, job executor.Job) {
	t.Helper()
	until(t, 2*time.Minute, "the stage did not start", func() bool {
		b, _ := os.ReadFile(job.StdoutPath)
		return strings.Contains(string(b), "ready")
	})
}

func TestSlurmRecoverFollowsAJobItsKilledOwnerStarted(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		t.Run("from the Ref", func(t *testing.T) {
			job, release := gate(t, 0)
			ref := startAndKill(t, c, job)
			ready(t, job)
			h, err := testExecutor(t, c).Recover(context.Background(), job, ref)
			require.NoError(t, err)
			require.Equal(t, ref, h.Ref())
			release()
			ex := wait(t, h, time.Minute)
			require.True(t, ex.Success(), "%+v", ex)
			require.Equal(t, 1, jobsNamed(t, c, job), "the job was followed, not submitted again")
		})
		t.Run("from the token alone", func(t *testing.T) {
			job, release := gate(t, 4)
			ref := startAndKill(t, c, job)
			ready(t, job)
			h, err := testExecutor(t, c).Recover(context.Background(), job, "")
			require.NoError(t, err)
			var want, got struct {
				JobID string `json:"job_id"`
			}
			require.NoError(t, json.Unmarshal([]byte(ref), &want))
			require.NoError(t, json.Unmarshal([]byte(h.Ref()), &got))
			require.Equal(t, want.JobID, got.JobID, "it found the job by its name and comment")
			release()
			ex := wait(t, h, time.Minute)
			require.Equal(t, 4, ex.Code)
			require.Equal(t, 1, jobsNamed(t, c, job))
		})
		t.Run("a job still pending", func(t *testing.T) {
			job := newJob(t, sh("echo ran")...)
			x := testExecutor(t, c, func(cfg *Config) { cfg.ExtraArgs = []string{"--hold"} })
			h0 := start(t, x, job)
			h0.Release()
			h, err := testExecutor(t, c).Recover(context.Background(), job, "")
			require.NoError(t, err)
			until(t, 30*time.Second, "no reason for the wait", func() bool {
				return strings.Contains(h.(executor.Waiter).Waiting(), "JobHeldUser")
			})
			_, err = c.Run(context.Background(), "scontrol", "release", h0.JobID())
			require.NoError(t, err)
			ex := wait(t, h, time.Minute)
			require.True(t, ex.Success(), "%+v", ex)
			require.Equal(t, "ran\n", read(t, job.StdoutPath))
		})
	})
}

func TestSlurmRecoverSaysWhenNothingWasSubmitted(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		job := newJob(t, sh("true")...)
		_, err := x.Recover(context.Background(), job, "")
		require.ErrorIs(t, err, executor.ErrNotLaunched)
	})
}

// A job that ends while no Niuma follows it, and that the controller then
// forgets (MinJobAge is 2 s on the cluster without accounting): its end
// is still known, exactly, from accounting or from the files it left.
func TestSlurmRecoverResolvesAJobThatEndedAndWasForgotten(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, x *Executor) {
		t.Run("an exit code", func(t *testing.T) {
			job, release := gate(t, 5)
			ref := startAndKill(t, c, job)
			ready(t, job)
			release()
			forgotten(t, c, job, ref)
			h, err := testExecutor(t, c).Recover(context.Background(), job, ref)
			require.NoError(t, err)
			ex := wait(t, h, time.Minute)
			require.Equal(t, 5, ex.Code, "%+v", ex)
			// And once more from the token alone.
			h, err = testExecutor(t, c).Recover(context.Background(), job, "")
			require.NoError(t, err)
			require.Equal(t, 5, wait(t, h, time.Minute).Code)
			// And as if the owner had died before it wrote the job id down:
			// accounting has the job by its name; without accounting, the
			// batch script's own marks name it.
			require.NoError(t, os.Remove(filepath.Join(job.StageDir, ".attempt-1.job")))
			h, err = testExecutor(t, c).Recover(context.Background(), job, "")
			require.NoError(t, err)
			require.Equal(t, 5, wait(t, h, time.Minute).Code)
		})
		t.Run("out of memory", func(t *testing.T) {
			job := newJob(t, "/usr/bin/python3", "-c", "import time\nprint('ready', flush=True)\ntime.sleep(1)\nx = bytearray(400 << 20)\ntime.sleep(5)")
			job.Container.MemoryMiB = 64
			ref := startAndKill(t, c, job)
			forgotten(t, c, job, ref)
			h, err := testExecutor(t, c).Recover(context.Background(), job, ref)
			require.NoError(t, err)
			ex := wait(t, h, time.Minute)
			require.True(t, ex.OOMKilled, "%+v; stderr: %s", ex, read(t, job.StderrPath))
			require.Contains(t, ex.Describe(), "out of memory")
		})
		if c.Accounting {
			return
		}
		t.Run("vanished without a trace", func(t *testing.T) {
			job, release := gate(t, 0)
			refJSON := startAndKill(t, c, job)
			ready(t, job)
			release()
			forgotten(t, c, job, refJSON)
			// The node's disk lost what the job left.
			for _, p := range []string{".attempt-1.exit", ".attempt-1.started", "attempt-1.stderr.log"} {
				require.NoError(t, os.Remove(filepath.Join(job.StageDir, p)))
			}
			// As a Niuma restarted well after the submission sees it.
			var r ref
			require.NoError(t, json.Unmarshal([]byte(refJSON), &r))
			r.Submitted -= 3600
			old, _ := json.Marshal(r)
			_, err := testExecutor(t, c).Recover(context.Background(), job, string(old))
			require.ErrorIs(t, err, executor.ErrGone)
		})
	})
}

// forgotten waits until the job has ended and, on the cluster without
// accounting, until the controller has forgotten it.
func forgotten(t *testing.T, c slurmtest.Cluster, job executor.Job, refJSON string) {
	t.Helper()
	var r ref
	require.NoError(t, json.Unmarshal([]byte(refJSON), &r))
	if c.Accounting {
		until(t, 2*time.Minute, "the job did not end", func() bool {
			out, err := c.Run(context.Background(), "sacct", "--noheader", "--parsable2", "-X", "-j", r.JobID, "-o", "State")
			return err == nil && terminal(stateWord(string(out)))
		})
		return
	}
	slurmtest.Forget(t, c, r.JobID, 2*time.Minute)
}
