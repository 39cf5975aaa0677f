package slurm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/slurm/slurmtest"
)

func TestParseSweepReadsSubmitTimes(t *testing.T) {
	jobs := parseSweep([]byte("12|RUNNING|2026-12-02T00:37:09|niuma-abc|niuma run=r stage=s attempt=1 token=abc home=0123456789ab\n" +
		"13|PENDING|N/A|wrap|a comment | with bars\nnot a job\n"))
	require.Len(t, jobs, 2)
	require.Equal(t, orphan{ID: "12", State: "RUNNING", Name: "niuma-abc", Comment: "niuma run=r stage=s attempt=1 token=abc home=0123456789ab",
		Submitted: time.Date(2026, 12, 2, 0, 37, 9, 0, time.Local)}, jobs[0])
	require.True(t, jobs[1].Submitted.IsZero(), "no time: never old enough to cancel")
	require.Equal(t, "a comment | with bars", jobs[1].Comment)
	require.Equal(t, "0123456789ab", commentField(jobs[0].Comment, "home"))
}

// stateOf is the job's state in the controller's queue ("" once forgotten).
func stateOf(t *testing.T, c slurmtest.Cluster, id string) string {
	t.Helper()
	out, err := c.Run(context.Background(), "squeue", "--noheader", "--states=all", "--jobs="+id, "--format=%T")
	if err != nil && strings.Contains(err.Error(), "Invalid job id") {
		return ""
	}
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// The sweep cancels this install's jobs whose token no recorded attempt
// carries, running or pending, and nothing else: not a recorded attempt's
// job in any state, not a job another data directory's Niuma submitted,
// not a job younger than SweepGrace, not a job that is not Niuma's.
func TestSlurmSweepCancelsOnlyJobsNoAttemptNames(t *testing.T) {
	eachCluster(t, func(t *testing.T, c slurmtest.Cluster, _ *Executor) {
		ctx := context.Background()
		home, otherHome := t.TempDir(), t.TempDir()
		held := func(cfg *Config) { cfg.ExtraArgs = []string{"--hold"} }
		mine := func(cfg *Config) { cfg.Home = home }
		x := testExecutor(t, c, mine)
		submit := func(x *Executor, job executor.Job) string {
			h := start(t, x, job)
			h.Release()
			return h.JobID()
		}

		recordedRun, release := gate(t, 0)
		recRun := submit(x, recordedRun)
		recordedPending := newJob(t, sh("echo ran")...)
		recPending := submit(testExecutor(t, c, mine, held), recordedPending)
		strayPending := submit(testExecutor(t, c, mine, held), newJob(t, sh("echo ran")...))
		// A job whose Niuma was killed right after it submitted it.
		strayRunning, _ := gate(t, 0)
		var r ref
		require.NoError(t, json.Unmarshal([]byte(startAndKillFor(t, c, home, strayRunning)), &r))
		strayRun := r.JobID
		others := submit(testExecutor(t, c, func(cfg *Config) { cfg.Home = otherHome }, held), newJob(t, sh("echo ran")...))
		out, err := c.Run(ctx, "sbatch", "--parsable", "--hold", "--output=/dev/null", "--comment=niuma lookalike", "--wrap", "true")
		require.NoError(t, err)
		foreign := strings.TrimSpace(string(out))
		t.Cleanup(func() { slurmtest.Cancel(c, foreign) })
		ready(t, recordedRun)
		ready(t, strayRunning)

		owned := []string{recordedRun.Token, recordedPending.Token, "a-finished-attempt"}
		young, err := x.Sweep(ctx, owned)
		require.NoError(t, err)
		require.Empty(t, young, "every job is younger than the default SweepGrace")

		// Submit times have whole seconds: until the last submission's
		// second is past.
		sweeper := testExecutor(t, c, mine, func(cfg *Config) { cfg.SweepGrace = time.Nanosecond })
		until(t, 10*time.Second, "submissions not yet a second old", func() bool {
			return time.Now().Truncate(time.Second).After(time.Unix(r.Submitted, 0))
		})
		cancelled, err := sweeper.Sweep(ctx, owned)
		require.NoError(t, err)
		require.Len(t, cancelled, 2, "%v", cancelled)
		joined := strings.Join(cancelled, "\n")
		require.Contains(t, joined, "Slurm job "+strayPending+" (run ")
		require.Contains(t, joined, "Slurm job "+strayRun+" (run "+strayRunning.RunID+", stage train, attempt 1, running)")
		until(t, time.Minute, "the orphans were not cancelled", func() bool {
			a, b := stateOf(t, c, strayPending), stateOf(t, c, strayRun)
			return (a == "" || a == "CANCELLED") && (b == "" || b == "CANCELLED")
		})
		require.Equal(t, "RUNNING", stateOf(t, c, recRun), "a recorded attempt's job runs on")
		require.Equal(t, "PENDING", stateOf(t, c, recPending))
		require.Equal(t, "PENDING", stateOf(t, c, others), "another install's job is not this sweep's")
		require.Equal(t, "PENDING", stateOf(t, c, foreign), "a job that is not Niuma's is left alone")

		// A sweep by an executor given no data directory cancels nothing.
		none, err := testExecutor(t, c, func(cfg *Config) { cfg.SweepGrace = time.Nanosecond }).Sweep(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)

		// The recorded running job is still the engine's to follow.
		h, err := testExecutor(t, c, mine).Recover(ctx, recordedRun, "")
		require.NoError(t, err)
		release()
		require.True(t, wait(t, h, time.Minute).Success())
	})
}
