package docker

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
	"niuma/engine/executor/docker/dockertest"
)

// The test binary doubles as a Niuma that starts an attempt's container and
// is then killed with SIGKILL: with helperEnv set it starts the job the
// file named by its first argument describes, writes the handle's Ref next
// to it, and follows the container until it is killed.
const helperEnv = "NIUMA_DOCKER_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "" {
		os.Exit(m.Run())
	}
	var in struct {
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
	api, err := NewMoby()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	h, err := New(api, in.Home).Start(context.Background(), in.Job)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	if err := os.WriteFile(os.Args[1]+".ref", []byte(h.Ref()), 0o644); err != nil {
		os.Exit(4)
	}
	select {} // following the container until SIGKILL
}

// startAndKill starts job from a child process that is killed with SIGKILL
// once the stage has written its ready file (the container runs, its first
// lines are in the log), as a Niuma dies before it records the Ref. It
// returns the Ref the child learnt.
func (f *fixture) startAndKill(job executor.Job, ready string) string {
	t := f.t
	t.Helper()
	in, err := json.Marshal(struct {
		Home string
		Job  executor.Job
	}{f.home, job})
	require.NoError(t, err)
	spec := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(spec, in, 0o644))
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, spec)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	var ref []byte
	require.Eventually(t, func() bool {
		ref, _ = os.ReadFile(spec + ".ref")
		return len(ref) > 0 && fileExists(ready)
	}, time.Minute, 20*time.Millisecond, "the child did not start the container")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	return string(ref)
}

// holdJob is a stage that prints steps 1 and 2, writes its ready file,
// waits for its go file, prints steps 3 and 4 and exits with code; the
// attempt carries tok.
func (f *fixture) holdJob(stage, tok string, code int) (job executor.Job, ready, release string) {
	job = f.job(stage, dockertest.Workload, "hold", "2", RunMount+"/"+stage+"/ready", RunMount+"/"+stage+"/go", "4", fmt.Sprint(code))
	job.Token = tok
	require.NoError(f.t, os.MkdirAll(job.StageDir, 0o755))
	return job, filepath.Join(job.StageDir, "ready"), filepath.Join(job.StageDir, "go")
}

func (f *fixture) containersOf(tok string) []Summary {
	f.t.Helper()
	list, err := f.api.List(context.Background(), map[string]string{LabelHome: f.home, LabelToken: tok})
	require.NoError(f.t, err)
	return list
}

func (f *fixture) untilState(tok, state string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		l := f.containersOf(tok)
		return len(l) == 1 && l[0].State == state
	}, time.Minute, 20*time.Millisecond, "the container of %s is not %s", tok, state)
}

const fourSteps = "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 0.5}\n{\"step\": 3, \"loss\": 0.3333333333333333}\n{\"step\": 4, \"loss\": 0.25}\n"

// A Niuma killed after it started a container but before it recorded the
// container finds it again by the attempt's token alone: running, it is
// adopted; ended while no one watched, its exit code is read; never
// created, the answer is ErrNotLaunched. No line of output is lost or
// written twice.
func TestRecoverByTokenAfterTheOwnerWasKilled(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	t.Run("running", func(t *testing.T) {
		job, ready, release := f.holdJob("run", "tok-running", 0)
		f.startAndKill(job, ready)
		f.untilState("tok-running", "running")
		h, err := New(f.api, f.home).Recover(ctx, job, "")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(release, nil, 0o644))
		ex := f.wait(h)
		require.True(t, ex.Success(), ex.Describe())
		require.Equal(t, fourSteps, readFile(job.StdoutPath), "every line once")
		require.Empty(t, f.containersOf("tok-running"), "the ended container is removed")
	})

	t.Run("exited while no one watched", func(t *testing.T) {
		job, ready, release := f.holdJob("exited", "tok-exited", 7)
		f.startAndKill(job, ready)
		require.NoError(t, os.WriteFile(release, nil, 0o644))
		f.untilState("tok-exited", "exited")
		h, err := New(f.api, f.home).Recover(ctx, job, "")
		require.NoError(t, err)
		ex := f.wait(h)
		require.Equal(t, 7, ex.Code, ex.Describe())
		require.Equal(t, fourSteps, readFile(job.StdoutPath), "the lines written after the kill are added once")
		require.Empty(t, f.containersOf("tok-exited"))

		// The container is gone now; its end is not: a Niuma that died
		// after the removal, before it recorded the end, still learns it.
		h, err = New(f.api, f.home).Recover(ctx, job, "")
		require.NoError(t, err)
		require.Equal(t, 7, f.wait(h).Code)
		require.Equal(t, fourSteps, readFile(job.StdoutPath))
	})

	t.Run("never created", func(t *testing.T) {
		job, _, _ := f.holdJob("never", "tok-never", 0)
		_, err := New(f.api, f.home).Recover(ctx, job, "")
		require.ErrorIs(t, err, executor.ErrNotLaunched)
	})

	t.Run("removed behind Niuma's back", func(t *testing.T) {
		job, ready, _ := f.holdJob("removed", "tok-removed", 0)
		f.startAndKill(job, ready)
		l := f.containersOf("tok-removed")
		require.Len(t, l, 1)
		require.NoError(t, f.api.Remove(ctx, l[0].ID))
		_, err := New(f.api, f.home).Recover(ctx, job, "")
		require.ErrorIs(t, err, executor.ErrGone, "it ran, and nothing says how it ended")
	})
}

// Start is idempotent: a second Start of an attempt whose container
// exists (its first owner died before recording it) adopts that container
// instead of failing, removing it, or making a second one.
func TestStartAdoptsTheContainerAKilledOwnerMade(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	t.Run("running", func(t *testing.T) {
		job, ready, release := f.holdJob("a", "tok-a", 3)
		f.startAndKill(job, ready)
		id := f.containersOf("tok-a")[0].ID
		h, err := New(f.api, f.home).Start(ctx, job)
		require.NoError(t, err)
		l := f.containersOf("tok-a")
		require.Len(t, l, 1, "no second container")
		require.Equal(t, id, l[0].ID, "the same container, never removed")
		require.NoError(t, os.WriteFile(release, nil, 0o644))
		require.Equal(t, 3, f.wait(h).Code)
		require.Equal(t, fourSteps, readFile(job.StdoutPath))
	})

	t.Run("created, never started", func(t *testing.T) {
		// The owner died between creating the container and starting it:
		// nothing ran, so Recover says so, and Start starts that container.
		job, _, release := f.holdJob("b", "tok-b", 0)
		x := New(f.api, f.home)
		b, err := x.check(job)
		require.NoError(t, err)
		id, err := f.api.Create(ctx, createOptions(f.home, b, job))
		require.NoError(t, err)
		_, err = x.Recover(ctx, job, "")
		require.ErrorIs(t, err, executor.ErrNotLaunched)
		require.NoError(t, os.WriteFile(release, nil, 0o644))
		h, err := x.Start(ctx, job)
		require.NoError(t, err)
		require.Contains(t, h.Ref(), id)
		require.True(t, f.wait(h).Success())
		require.Equal(t, fourSteps, readFile(job.StdoutPath))
		require.Empty(t, f.containersOf("tok-b"))
	})

	t.Run("another attempt's container under the name", func(t *testing.T) {
		job, _, _ := f.holdJob("c", "tok-c", 0)
		x := New(f.api, f.home)
		b, err := x.check(job)
		require.NoError(t, err)
		squatter := createOptions(f.home, b, job)
		squatter.Config.Labels[LabelToken] = "someone-else"
		_, err = f.api.Create(ctx, squatter)
		require.NoError(t, err)
		_, err = x.Start(ctx, job)
		require.ErrorContains(t, err, "exists that is not this attempt's")
		require.ErrorContains(t, err, "docker rm "+squatter.Name)
		require.Len(t, f.containersOf("someone-else"), 1, "left alone")
	})
}

// The sweep never removes the container of an attempt the archive
// records, running or not, nor one that still runs; it removes an exited
// container that no recorded attempt names.
func TestSweepRemovesOnlyExitedContainersNoAttemptNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	recRun, readyA, goA := f.holdJob("rec-running", "tok-rec-running", 0)
	f.startAndKill(recRun, readyA)
	recExit, readyB, goB := f.holdJob("rec-exited", "tok-rec-exited", 0)
	f.startAndKill(recExit, readyB)
	strayExit, readyC, goC := f.holdJob("stray-exited", "tok-stray-exited", 0)
	f.startAndKill(strayExit, readyC)
	strayRun, readyD, goD := f.holdJob("stray-running", "tok-stray-running", 0)
	f.startAndKill(strayRun, readyD)
	for _, p := range []string{goB, goC} {
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	f.untilState("tok-rec-exited", "exited")
	f.untilState("tok-stray-exited", "exited")

	removed, err := New(f.api, t.TempDir()).Sweep(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, removed, "another install's sweep sees none of them")

	removed, err = New(f.api, f.home).Sweep(ctx, []string{"tok-rec-running", "tok-rec-exited", "tok-of-a-finished-attempt"})
	require.NoError(t, err)
	require.Len(t, removed, 1, "%v", removed)
	require.Contains(t, removed[0], "stage stray-exited")
	require.Empty(t, f.containersOf("tok-stray-exited"))
	require.Len(t, f.containersOf("tok-rec-running"), 1, "a recorded running container stays")
	require.Len(t, f.containersOf("tok-rec-exited"), 1, "a recorded exited container stays, for Recover to read")
	require.Len(t, f.containersOf("tok-stray-running"), 1, "a running container stays, recorded or not")

	// The recorded attempts are still whole for the next owner.
	x := New(f.api, f.home)
	h, err := x.Recover(ctx, recExit, "")
	require.NoError(t, err)
	require.True(t, f.wait(h).Success())
	require.Equal(t, fourSteps, readFile(recExit.StdoutPath))
	h, err = x.Recover(ctx, recRun, "")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(goA, nil, 0o644))
	require.True(t, f.wait(h).Success())
	require.Equal(t, fourSteps, readFile(recRun.StdoutPath))
	require.NoError(t, os.WriteFile(goD, nil, 0o644))
	f.untilState("tok-stray-running", "exited")
	removed, err = x.Sweep(ctx, []string{"tok-rec-running", "tok-rec-exited"})
	require.NoError(t, err)
	require.Len(t, removed, 1, "once it has exited, the unrecorded one goes")
	require.Empty(t, f.containers())
	require.False(t, strings.Contains(removed[0], "rec-"), removed[0])
}

// When the end cannot be recorded (a full disk; here the mark's path is
// taken), the container is not removed: its status stays with Docker for
// the next owner, who reads it and only then removes it.
func TestAnEndThatCannotBeRecordedKeepsTheContainer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	job := f.job("a", dockertest.Workload, "exit", "9")
	job.Token = "tok-unrecorded"
	blocker := filepath.Join(attemptMarks(job).Exit, "x")
	require.NoError(t, os.MkdirAll(blocker, 0o755))
	require.Equal(t, 9, f.run(job).Code)
	l := f.containersOf("tok-unrecorded")
	require.Len(t, l, 1, "the container holds the only record of the end")
	require.Equal(t, "exited", l[0].State)

	require.NoError(t, os.RemoveAll(attemptMarks(job).Exit)) // space again
	h, err := New(f.api, f.home).Recover(ctx, job, "")
	require.NoError(t, err)
	require.Equal(t, 9, f.wait(h).Code)
	require.Empty(t, f.containersOf("tok-unrecorded"))
	h, err = New(f.api, f.home).Recover(ctx, job, "")
	require.NoError(t, err)
	require.Equal(t, 9, f.wait(h).Code, "and now the mark has it")
}
