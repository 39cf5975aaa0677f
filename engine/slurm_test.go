package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/local"
	"niuma/engine/executor/slurm"
	"niuma/engine/executor/slurm/slurmtest"
)

// These tests drive runs through the slurm executor on the real
// single-node clusters scripts/slurm-up.sh starts (with and without
// accounting); they skip when a cluster does not answer, and fail in CI.

// slurmEngine is an engine over the harness with the local executor and a
// slurm executor on cluster c that looks often.
func (h *harness) slurmEngine(c slurmtest.Cluster) *Engine {
	slurmtest.Need(h.t, c)
	sx := slurm.New(slurm.CLI{Conf: c.Conf}, slurm.Config{PollMin: 100 * time.Millisecond, PollMax: time.Second,
		ExitPoll: 100 * time.Millisecond, Settle: 3 * time.Second})
	return h.engine(func(o *Options) {
		o.Executors = []executor.Executor{local.New(), sx}
	})
}

// onBothClusters runs f on each cluster, in parallel.
func onBothClusters(t *testing.T, f func(t *testing.T, c slurmtest.Cluster)) {
	for _, c := range slurmtest.Both {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			f(t, c)
		})
	}
}

func slurmYAML(stages string) string {
	return "name: s\nruntime: {kind: slurm}\nparams:\n  n: {type: int, default: 20, min: 1, max: 1000}\nstages:\n" + stages
}

// waitSlurm follows a run to its end, for as long as a cluster may take.
func waitSlurm(t *testing.T, e *Engine, id string, d time.Duration) RunInfo {
	t.Helper()
	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return waitFor(t, ctx, e, sub, id, func(r RunInfo) bool { return r.State.Done() })
}

func TestSlurmRunsAFourStageDAGWithMetrics(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		h := newHarness(t)
		e := h.slurmEngine(c)
		h.drive(e)
		tm := parse(t, slurmYAML(`
  - name: prep
    command: [sh, -c, 'mkdir -p prep && echo "$NIUMA_PARAM_N" > prep/n']
  - name: train
    needs: [prep]
    command: [sh, -c, 'n=$(cat prep/n); i=0; while [ $i -lt $n ]; do echo "{\"step\": $i, \"loss\": 1.5}"; i=$((i+1)); done']
  - name: validate
    needs: [train]
    command: [sh, -c, 'echo "{\"step\": 0, \"val_acc\": 0.9}"']
  - name: analyze
    needs: [validate]
    command: [sh, -c, 'test "$NIUMA_STAGE" = analyze && test -f params.json && test -f prep/n']
`))
		info, err := e.Submit(context.Background(), RunSpec{Template: tm})
		require.NoError(t, err)
		require.Equal(t, "slurm", info.Executor, "a template of kind slurm runs on Slurm")
		r := waitSlurm(t, e, info.ID, 3*time.Minute)
		require.Equal(t, Succeeded, r.State, "%s %+v", r.Error, r.Stages)
		for _, s := range r.Stages {
			require.Equal(t, Succeeded, s.State, s.Name)
			require.Equal(t, 1, s.Attempts, s.Name)
		}
		series, err := e.Series(context.Background(), r.ID, "train", "loss")
		require.NoError(t, err)
		require.Len(t, series, 20, "every point once")
		n, err := e.MetricCount(context.Background(), r.ID)
		require.NoError(t, err)
		require.Equal(t, 21, n)
		script, err := os.ReadFile(filepath.Join(r.Dir, "train", "attempt-1.sbatch"))
		require.NoError(t, err)
		require.Contains(t, string(script), "'--comment=niuma run="+r.ID+" stage=train attempt=1 token=")
	})
}

func TestSlurmRetriesAFailingStage(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		h := newHarness(t)
		e := h.slurmEngine(c)
		h.drive(e)
		tm := parse(t, slurmYAML(`
  - name: flaky
    retries: 2
    command: [sh, -c, 'echo "attempt $NIUMA_ATTEMPT"; [ "$NIUMA_ATTEMPT" -ge 2 ] || exit 3']
`))
		info, err := e.Submit(context.Background(), RunSpec{Template: tm})
		require.NoError(t, err)
		r := waitSlurm(t, e, info.ID, 3*time.Minute)
		require.Equal(t, Succeeded, r.State, r.Error)
		s := r.Stages[0]
		require.Equal(t, 2, s.Attempts)
		require.Equal(t, "failed", s.History[0].State)
		require.Equal(t, 3, *s.History[0].ExitCode)
		require.Equal(t, "succeeded", s.History[1].State)
	})
}

func TestSlurmStageOutOfMemory(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		h := newHarness(t)
		e := h.slurmEngine(c)
		h.drive(e)
		tm := parse(t, "name: s\nruntime: {kind: slurm, memory: 64MiB}\nstages:\n"+`
  - name: hog
    command: [/usr/bin/python3, -c, "import time\nx = bytearray(400 << 20)\ntime.sleep(5)"]
`)
		info, err := e.Submit(context.Background(), RunSpec{Template: tm})
		require.NoError(t, err)
		r := waitSlurm(t, e, info.ID, 3*time.Minute)
		require.Equal(t, Failed, r.State)
		require.Contains(t, r.Stages[0].Reason, "out of memory")
		require.Contains(t, r.Stages[0].Reason, "64 MiB (--mem)")
	})
}

func TestSlurmStageTimeout(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		h := newHarness(t)
		e := h.slurmEngine(c)
		h.drive(e)
		tm := parse(t, slurmYAML(`
  - name: slow
    timeout: 3s
    command: [sh, -c, 'echo started; sleep 300']
`))
		info, err := e.Submit(context.Background(), RunSpec{Template: tm})
		require.NoError(t, err)
		r := waitSlurm(t, e, info.ID, 3*time.Minute)
		require.Equal(t, Failed, r.State)
		require.Contains(t, r.Stages[0].Reason, "timed out after 3s")
		script, err := os.ReadFile(filepath.Join(r.Dir, "slow", "attempt-1.sbatch"))
		require.NoError(t, err)
		require.Contains(t, string(script), "--time=1 ", "Slurm enforces it too, in whole minutes, while Niuma is away")
	})
}

func TestSlurmCancelMidRun(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		h := newHarness(t)
		e := h.slurmEngine(c)
		h.drive(e)
		tm := parse(t, slurmYAML(`
  - name: long
    command: [sh, -c, 'trap "echo got TERM; exit 0" TERM; echo started; while :; do sleep 0.1; done']
  - name: after
    needs: [long]
    command: ["true"]
`))
		info, err := e.Submit(context.Background(), RunSpec{Template: tm})
		require.NoError(t, err)
		log := filepath.Join(info.Dir, "long", "attempt-1.stdout.log")
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(log)
			return strings.Contains(string(b), "started")
		}, 2*time.Minute, 50*time.Millisecond)
		require.NoError(t, e.Cancel(context.Background(), info.ID))
		r := waitSlurm(t, e, info.ID, 2*time.Minute)
		require.Equal(t, Cancelled, r.State, r.Error)
		b, err := os.ReadFile(log)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(string(b), "got TERM"), "the stage got SIGTERM once, to checkpoint")
		require.Equal(t, Cancelled, r.Stages[1].State)
	})
}

func TestSlurmGPUStageGetsItsGRES(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		h := newHarness(t)
		e := h.slurmEngine(c) // this machine has no GPU: Slurm's are the ones that count
		h.drive(e)
		tm := parse(t, slurmYAML(`
  - name: train
    gpus: 2
    gpu_memory: 10GiB
    command: [sh, -c, 'echo "cuda=$CUDA_VISIBLE_DEVICES jobgpus=$SLURM_JOB_GPUS"']
`))
		info, err := e.Submit(context.Background(), RunSpec{Template: tm})
		require.NoError(t, err)
		r := waitSlurm(t, e, info.ID, 3*time.Minute)
		require.Equal(t, Succeeded, r.State, "%s %+v", r.Error, r.Stages)
		b, err := os.ReadFile(filepath.Join(r.Dir, "train", "attempt-1.stdout.log"))
		require.NoError(t, err)
		f := strings.Fields(string(b))
		require.Len(t, f, 2, string(b))
		require.Len(t, strings.Split(strings.TrimPrefix(f[0], "cuda="), ","), 2, string(b))
		require.Len(t, strings.Split(strings.TrimPrefix(f[1], "jobgpus="), ","), 2, string(b))
	})
}

func TestSlurmPendingStageShowsSlurmsReason(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		h := newHarness(t)
		e := h.slurmEngine(c)
		h.drive(e)
		// A job of someone else's holds every GPU of the node.
		release := filepath.Join(t.TempDir(), "go")
		out, err := c.Run(context.Background(), "sbatch", "--parsable", "--gres=gpu:4", "--output=/dev/null",
			"--wrap", "while [ ! -e "+release+" ]; do sleep 0.2; done")
		require.NoError(t, err)
		holder := strings.TrimSpace(string(out))
		t.Cleanup(func() { slurmtest.Cancel(c, holder) })
		require.Eventually(t, func() bool {
			out, _ := c.Run(context.Background(), "squeue", "--noheader", "--jobs="+holder, "--format=%T")
			return strings.TrimSpace(string(out)) == "RUNNING"
		}, 2*time.Minute, 100*time.Millisecond)

		tm := parse(t, slurmYAML(`
  - name: train
    gpus: 1
    command: [sh, -c, 'echo ran']
`))
		info, err := e.Submit(context.Background(), RunSpec{Template: tm})
		require.NoError(t, err)
		sub := e.Subscribe(256)
		defer sub.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool { return strings.Contains(r.Stages[0].Reason, "(Slurm: Resources)") })
		require.Equal(t, Running, r.Stages[0].State)
		require.Regexp(t, `^in Slurm's queue as job \d+: the GPUs, CPUs or memory it asks for are in use; it starts when they free up \(Slurm: Resources\)$`, r.Stages[0].Reason)

		require.NoError(t, os.WriteFile(release, nil, 0o644))
		r = waitSlurm(t, e, info.ID, 2*time.Minute)
		require.Equal(t, Succeeded, r.State, r.Error)
		require.Equal(t, "", r.Stages[0].Reason)
	})
}

// At start the engine cancels this install's Slurm jobs that no run's
// attempt names (their Niuma died, and nothing will ever follow them), and
// leaves the jobs of its runs, of other installs and of other tools.
func TestSlurmEngineStartCancelsJobsNoAttemptNames(t *testing.T) {
	onBothClusters(t, func(t *testing.T, c slurmtest.Cluster) {
		slurmtest.Need(t, c)
		h := newHarness(t)
		cfg := func(home string) slurm.Config {
			return slurm.Config{PollMin: 100 * time.Millisecond, PollMax: time.Second, ExitPoll: 100 * time.Millisecond,
				Settle: 3 * time.Second, Home: home, SweepGrace: time.Nanosecond, ExtraArgs: []string{"--hold"}}
		}
		engine := func() *Engine {
			sx := slurm.New(slurm.CLI{Conf: c.Conf}, cfg(h.home))
			return h.engine(func(o *Options) { o.Executors = []executor.Executor{local.New(), sx} })
		}
		state := func(id string) string {
			out, err := c.Run(context.Background(), "squeue", "--noheader", "--states=all", "--jobs="+id, "--format=%T")
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(out))
		}

		// A run whose job waits (held) when its Niuma stops.
		e := engine()
		stop := h.drive(e)
		info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, slurmYAML(`
  - name: a
    command: [sh, -c, 'echo ran']
`))})
		require.NoError(t, err)
		sub := e.Subscribe(256)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool { return strings.Contains(r.Stages[0].Reason, "JobHeldUser") })
		sub.Close()
		mine := slurm.RecordedJobID(filepath.Join(r.Dir, "a"), 1)
		require.NotEmpty(t, mine)
		t.Cleanup(func() { slurmtest.Cancel(c, mine) })
		stop()

		// Jobs whose Niuma died before anything recorded them.
		submit := func(home, stage string) string {
			dir := filepath.Join(h.home, "runs", "gone")
			hd, err := slurm.New(slurm.CLI{Conf: c.Conf}, cfg(home)).Start(context.Background(), executor.Job{
				RunID: "gone", Stage: stage, Attempt: 1, Token: "gone-" + stage + "-" + c.Name, Argv: []string{"true"},
				RunDir: dir, StageDir: filepath.Join(dir, stage),
				StdoutPath: filepath.Join(dir, stage, "out"), StderrPath: filepath.Join(dir, stage, "err"),
			})
			require.NoError(t, err)
			hd.(executor.Releaser).Release()
			var ref struct {
				JobID string `json:"job_id"`
			}
			require.NoError(t, json.Unmarshal([]byte(hd.Ref()), &ref))
			t.Cleanup(func() { slurmtest.Cancel(c, ref.JobID) })
			return ref.JobID
		}
		orphan := submit(h.home, "orphan")
		other := submit(t.TempDir(), "other")
		// Slurm's submit times have whole seconds.
		require.Eventually(t, func() bool { return time.Now().Add(-time.Second).After(submittedAt(t, c, orphan)) },
			10*time.Second, 50*time.Millisecond)

		e = engine()
		h.drive(e) // returns once the engine owns the data dir and has swept
		require.Eventually(t, func() bool { s := state(orphan); return s == "" || s == "CANCELLED" }, time.Minute, 100*time.Millisecond,
			"the orphan job was not cancelled")
		require.Equal(t, "PENDING", state(other), "another install's job is not this engine's")
		require.Equal(t, "PENDING", state(mine), "the job of a run's attempt is the run's")
		_, err = c.Run(context.Background(), "scontrol", "release", mine)
		require.NoError(t, err)
		r = waitSlurm(t, e, info.ID, 2*time.Minute)
		require.Equal(t, Succeeded, r.State, r.Error)
		require.Equal(t, 1, r.Stages[0].Attempts, "the held job was adopted, not submitted again")
	})
}

// submittedAt is when Slurm says it accepted job id.
func submittedAt(t *testing.T, c slurmtest.Cluster, id string) time.Time {
	t.Helper()
	out, err := c.Run(context.Background(), "squeue", "--noheader", "--jobs="+id, "--format=%V")
	require.NoError(t, err)
	at, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(string(out)), time.Local)
	require.NoError(t, err)
	return at
}
