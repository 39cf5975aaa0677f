package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
)

func TestSubmissionAsksForWhatTheStageNeeds(t *testing.T) {
	job := executor.Job{
		RunID: "r1", Stage: "train", Attempt: 2, Token: "tok,en 1",
		Argv: []string{"/usr/bin/python3", "train.py"}, RunDir: "/shared/runs/r1", StageDir: "/shared/runs/r1/train",
		StdoutPath: "/shared/runs/r1/train/attempt-2.stdout.log", StderrPath: "/shared/runs/r1/train/attempt-2.stderr.log",
		GPUCount: 2, Timeout: 90 * time.Minute, Container: executor.Container{MemoryMiB: 16384, CPUs: 3.5},
		Cluster: executor.Cluster{Partition: "a100"},
	}
	sub, err := buildSubmission(job, Queue{Partition: "gpu", Account: "lab", QOS: "normal"}, time.Minute, []string{"--constraint=nvlink"}, "")
	require.NoError(t, err)
	require.Equal(t, []string{
		"--parsable",
		"--job-name=niuma-tok_en_1",
		"--comment=niuma run=r1 stage=train attempt=2 token=tok,en 1",
		"--output=/shared/runs/r1/train/attempt-2.stdout.log",
		"--error=/shared/runs/r1/train/attempt-2.stderr.log",
		"--open-mode=append",
		"--chdir=/shared/runs/r1",
		"--no-requeue", "--nodes=1", "--ntasks=1",
		"--cpus-per-task=4", // rounded up: Slurm counts whole CPUs
		"--mem=16384M",
		"--gres=gpu:2",
		"--time=90",
		"--signal=B:TERM@60",
		"--partition=a100", // the template's, over the settings'
		"--account=lab", "--qos=normal",
		"--constraint=nvlink",
		"/shared/runs/r1/train/attempt-2.sbatch",
	}, sub.Args)
	require.Equal(t, limits{MemoryMiB: 16384, TimeLimit: 90 * time.Minute}, sub.Limits)
	mine, err := buildSubmission(job, Queue{}, time.Minute, nil, homeMark("/home/u/niuma"))
	require.NoError(t, err)
	require.Contains(t, mine.Args, "--comment=niuma run=r1 stage=train attempt=2 token=tok,en 1 home="+homeMark("/home/u/niuma"),
		"the data directory, for Sweep")
	require.Regexp(t, `^[0-9a-f]{12}$`, homeMark("/home/u/niuma"))
	require.Equal(t, homeMark("/home/u/niuma"), homeMark("/home/u/niuma/"))
	require.NotEqual(t, homeMark("/home/u/niuma"), homeMark("/home/v/niuma"))
	// Slurm may send the warning up to a minute early: none for a
	// one-minute limit, and at most half of what the minute leaves.
	job.Timeout = 20 * time.Second
	short, err := buildSubmission(job, Queue{}, time.Minute, nil, "")
	require.NoError(t, err)
	require.Contains(t, short.Args, "--time=1")
	require.NotContains(t, strings.Join(short.Args, " "), "--signal")
	job.Timeout = 2 * time.Minute
	short, err = buildSubmission(job, Queue{}, time.Minute, nil, "")
	require.NoError(t, err)
	require.Contains(t, short.Args, "--signal=B:TERM@30")
	require.NotContains(t, sub.Script, "CUDA_VISIBLE_DEVICES=", "Slurm sets it for a GPU job")

	job.GPUCount, job.Timeout, job.Container = 0, 0, executor.Container{}
	sub, err = buildSubmission(job, Queue{}, time.Minute, nil, "")
	require.NoError(t, err)
	for _, a := range sub.Args {
		require.False(t, strings.HasPrefix(a, "--gres") || strings.HasPrefix(a, "--time") || strings.HasPrefix(a, "--mem") || strings.HasPrefix(a, "--signal") || strings.HasPrefix(a, "--account"), a)
	}
	require.Contains(t, sub.Script, "export CUDA_VISIBLE_DEVICES=\n", "a stage that asks for no GPU sees none")

	_, err = buildSubmission(executor.Job{Argv: []string{"x"}, RunDir: "rel", StageDir: "/a", StdoutPath: "/a/o", StderrPath: "/a/e"}, Queue{}, 0, nil, "")
	require.ErrorContains(t, err, `the run directory "rel" is not an absolute path`)
	job.Cluster.QOS = "a b"
	_, err = buildSubmission(job, Queue{}, 0, nil, "")
	require.ErrorContains(t, err, `Slurm QOS "a b" has characters Slurm does not allow`)
	job.Cluster.QOS, job.Env = "", map[string]string{"A-B": "1"}
	_, err = buildSubmission(job, Queue{}, 0, nil, "")
	require.ErrorContains(t, err, `environment variable name "A-B"`)
}

// The batch script runs under plain bash here, as slurmd would run it: the
// shim and the signal passing are the script's, not Slurm's.
func TestBatchScriptRecordsTheStatusAndPassesSIGTERMOnce(t *testing.T) {
	run := t.TempDir()
	job := executor.Job{RunID: "r", Stage: "s", Attempt: 1, RunDir: run, StageDir: filepath.Join(run, "s"),
		StdoutPath: filepath.Join(run, "s", "o"), StderrPath: filepath.Join(run, "s", "e"),
		Env: map[string]string{"NIUMA_X": "a 'b' $c\n"}}
	require.NoError(t, os.MkdirAll(job.StageDir, 0o755))
	runScript := func(t *testing.T, argv ...string) (*exec.Cmd, submission) {
		j := job
		j.Argv = argv
		sub, err := buildSubmission(j, Queue{}, 0, nil, "")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(sub.Files.Script, []byte(sub.Script), 0o755))
		_ = os.Remove(sub.Files.Exit)
		cmd := exec.Command("/bin/bash", sub.Files.Script)
		cmd.Env = append(os.Environ(), "SLURM_JOB_ID=77")
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd, sub
	}

	t.Run("the command's exit status", func(t *testing.T) {
		cmd, sub := runScript(t, "/bin/sh", "-c", `[ "$NIUMA_X" = "a 'b' \$c
" ] && [ "$(pwd)" = "$1" ] || exit 9; exit 4`, "sh", run)
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 4, ee.ExitCode(), "the job ends with the command's status")
		require.Equal(t, 4, readExitMark(sub.Files.Exit).Code)
		m := readStartMark(sub.Files.Started)
		require.Equal(t, "77", m.Job)
		require.WithinDuration(t, time.Now(), m.At, time.Minute)
	})
	t.Run("SIGTERM to the batch shell reaches the command once", func(t *testing.T) {
		log := filepath.Join(run, "terms")
		ready := filepath.Join(run, "ready")
		cmd, sub := runScript(t, "/bin/sh", "-c", `trap 'echo TERM >> "$1"; exit 0' TERM; touch "$2"; while :; do sleep 0.05; done`, "sh", log, ready)
		require.NoError(t, cmd.Start())
		until(t, 10*time.Second, "the command did not start", func() bool { _, err := os.Stat(ready); return err == nil })
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM)) // as scancel --batch --signal=TERM
		require.NoError(t, cmd.Wait())
		require.Equal(t, "TERM\n", read(t, log))
		require.Equal(t, 0, readExitMark(sub.Files.Exit).Code)
	})
	t.Run("a command that dies of SIGTERM", func(t *testing.T) {
		ready := filepath.Join(run, "ready2")
		cmd, sub := runScript(t, "/bin/sh", "-c", `touch "$1"; exec sleep 30`, "sh", ready)
		require.NoError(t, cmd.Start())
		until(t, 10*time.Second, "the command did not start", func() bool { _, err := os.Stat(ready); return err == nil })
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		_ = cmd.Wait()
		require.Equal(t, 143, cmd.ProcessState.ExitCode())
		require.Equal(t, 143, readExitMark(sub.Files.Exit).Code)
	})
}

func TestJudge(t *testing.T) {
	x := New(fakeCommands{}, Config{Settle: 10 * time.Second})
	t0 := time.Unix(10000, 0)
	newWatch := func(t *testing.T) *watch {
		dir := t.TempDir()
		return &watch{ref: ref{JobID: "5"}, submitted: t0, done: make(chan struct{}),
			files:  files{Exit: filepath.Join(dir, "exit"), Started: filepath.Join(dir, "started")},
			stderr: filepath.Join(dir, "err")}
	}
	seen := func(recs ...*record) map[string]*record {
		m := map[string]*record{}
		for _, r := range recs {
			m[r.ID] = r
		}
		return m
	}
	acct := func(q, a map[string]*record) observation {
		return observation{queue: q, queueOK: true, acct: a, acctOn: true, acctOK: true}
	}
	noacct := func(q map[string]*record) observation { return observation{queue: q, queueOK: true} }

	t.Run("pending says why", func(t *testing.T) {
		v := x.judge(newWatch(t), noacct(seen(&record{ID: "5", State: "PENDING", Reason: "Priority"})), t0)
		require.Equal(t, "in Slurm's queue as job 5: jobs of higher priority are ahead of it in the partition (Slurm: Priority)", v.waiting)
		require.Nil(t, v.done)
	})
	t.Run("accounting's final record decides", func(t *testing.T) {
		v := x.judge(newWatch(t), acct(seen(&record{ID: "5", State: "RUNNING"}), seen(&record{ID: "5", State: "COMPLETED", Code: 0})), t0)
		require.Equal(t, &executor.Exit{Code: 0}, v.done)
	})
	t.Run("the controller's end waits a moment for accounting's", func(t *testing.T) {
		w := newWatch(t)
		q := seen(&record{ID: "5", State: "TIMEOUT", Code: -1})
		v := x.judge(w, acct(q, nil), t0)
		require.Nil(t, v.done)
		require.True(t, v.hurry)
		v = x.judge(w, acct(q, nil), t0.Add(11*time.Second))
		require.Equal(t, "timeout: Slurm stopped it at its partition's time limit", v.done.Reason)
	})
	t.Run("without accounting the controller's end decides at once", func(t *testing.T) {
		w := newWatch(t)
		require.NoError(t, os.WriteFile(w.files.Exit, []byte("3 10005\n"), 0o644))
		require.NoError(t, os.WriteFile(w.files.Started, []byte("5 10000 vm\n"), 0o644))
		v := x.judge(w, noacct(seen(&record{ID: "5", State: "FAILED", Code: -1})), t0)
		require.Equal(t, &executor.Exit{Code: 3}, v.done)
	})
	t.Run("forgotten with an exit file", func(t *testing.T) {
		w := newWatch(t)
		w.known = true
		require.NoError(t, os.WriteFile(w.files.Exit, []byte("6 10005\n"), 0o644))
		v := x.judge(w, noacct(nil), t0.Add(time.Second))
		require.Equal(t, &executor.Exit{Code: 6}, v.done)
	})
	t.Run("forgotten without a trace is gone once it had time to show", func(t *testing.T) {
		w := newWatch(t)
		w.known = true
		require.NoError(t, os.WriteFile(w.files.Started, []byte("5 10000 vm\n"), 0o644))
		v := x.judge(w, noacct(nil), t0.Add(time.Second))
		require.Nil(t, v.done, "a shared filesystem may show the exit file late")
		v = x.judge(w, noacct(nil), t0.Add(12*time.Second))
		require.True(t, v.gone)
		require.True(t, v.done.Lost)
	})
	t.Run("forgotten, the log says out of memory: not gone", func(t *testing.T) {
		w := newWatch(t)
		w.known = true
		require.NoError(t, os.WriteFile(w.stderr, []byte("slurmstepd: error: Exceeded job memory limit\n"), 0o644))
		x.judge(w, noacct(nil), t0)
		v := x.judge(w, noacct(nil), t0.Add(11*time.Second))
		require.False(t, v.gone)
		require.True(t, v.done.OOMKilled)
	})
	t.Run("nobody answers: nothing is decided", func(t *testing.T) {
		w := newWatch(t)
		v := x.judge(w, observation{queue: map[string]*record{}, acct: map[string]*record{}, acctOn: true}, t0.Add(time.Hour))
		require.Equal(t, verdict{}, v)
	})
	t.Run("accounting knows a job the controller lost", func(t *testing.T) {
		v := x.judge(newWatch(t), acct(nil, seen(&record{ID: "5", State: "PENDING", Reason: "Resources"})), t0)
		require.Contains(t, v.waiting, "(Slurm: Resources)")
	})
}

func TestFollowingAJobTwiceSharesItsEnd(t *testing.T) {
	x := New(fakeCommands{}, Config{})
	w1 := &watch{ref: ref{JobID: "9"}, done: make(chan struct{})}
	w2 := &watch{ref: ref{JobID: "9"}, done: make(chan struct{})}
	require.Same(t, w1, x.follow(w1))
	require.Same(t, w1, x.follow(w2), "a second handle on the job sees the first one's end")
	x.unfollow(w1)
	w1.finish(executor.Exit{Code: 0})
	require.Same(t, w2, x.follow(w2), "a watch that ended is not reused")
	x.unfollow(w2)
}

// The batch script under plain bash again, with no Slurm to kill what it
// leaves: whatever the command started ends with the attempt, also when
// the batch shell itself is killed (scancel --batch --signal=KILL, or a
// proctrack plugin that kills only the processes it finds).
func TestBatchScriptLeavesNoProcessBehind(t *testing.T) {
	var stderr strings.Builder
	runScript := func(t *testing.T, argv ...string) (*exec.Cmd, string) {
		stderr.Reset()
		run := t.TempDir()
		job := executor.Job{RunID: "r", Stage: "s", Attempt: 1, Token: randomToken(), RunDir: run, StageDir: filepath.Join(run, "s"),
			StdoutPath: filepath.Join(run, "s", "o"), StderrPath: filepath.Join(run, "s", "e"),
			Env: map[string]string{}, Argv: argv}
		mark := markJob(t, &job)
		require.NoError(t, os.MkdirAll(job.StageDir, 0o755))
		sub, err := buildSubmission(job, Queue{}, 0, nil, "")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(sub.Files.Script, []byte(sub.Script), 0o755))
		cmd := exec.Command("/bin/bash", sub.Files.Script)
		cmd.Dir = "/"
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd, mark
	}
	t.Run("children the command left running when it ended", func(t *testing.T) {
		pids := filepath.Join(t.TempDir(), "pids")
		cmd, mark := runScript(t, append(escapees(`[ -n "$NIUMA_ATTEMPT_TOKEN" ] || exit 9; exit 5`), pids)...)
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 5, ee.ExitCode(), "the job still ends with the command's status, and the command carries the token")
		require.Empty(t, stderr.String(), "the batch script says nothing of its own")
		require.Len(t, strings.Fields(read(t, pids)), 2, "both children started")
		allGone(t, mark, 10*time.Second, "after the command ended")
	})
	t.Run("the batch shell killed under a command that ignores SIGTERM", func(t *testing.T) {
		pids := filepath.Join(t.TempDir(), "pids")
		cmd, mark := runScript(t, append(escapees("trap 'echo TERM' TERM; while :; do sleep 0.1; done"), pids)...)
		require.NoError(t, cmd.Start())
		until(t, 10*time.Second, "the children did not start", func() bool { return len(strings.Fields(readOr(pids))) == 2 })
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL)) // as scancel --batch --signal=KILL
		_ = cmd.Wait()
		allGone(t, mark, 10*time.Second, "after the batch shell was killed")
	})
}

func readOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
