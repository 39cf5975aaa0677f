package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/docker/dockertest"
)

// These tests run containers on the machine's Docker daemon; they skip
// when none answers.

// fixture is an executor over the real daemon with its own data dir, so
// its containers carry a label no other test shares.
type fixture struct {
	t    *testing.T
	x    *Executor
	api  *Moby
	home string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := dockertest.Need(t)
	api, err := NewMoby()
	require.NoError(t, err)
	t.Cleanup(func() { api.Close() })
	home := t.TempDir()
	x := New(api, home)
	x.RetryInterval = 50 * time.Millisecond
	t.Cleanup(func() {
		// Whatever a failed test left behind.
		list, _ := api.List(context.Background(), map[string]string{LabelHome: home})
		for _, s := range list {
			_, _ = c.ContainerRemove(context.Background(), s.ID, client.ContainerRemoveOptions{Force: true})
		}
	})
	return &fixture{t: t, x: x, api: api, home: home}
}

func (f *fixture) job(stage string, argv ...string) executor.Job {
	run := filepath.Join(f.home, "runs", "r1")
	dir := filepath.Join(run, stage)
	return executor.Job{
		RunID: "r1", Stage: stage, Attempt: 1, Argv: argv,
		Env:    map[string]string{"NIUMA_RUN_DIR": RunMount},
		RunDir: run, StageDir: dir, Image: dockertest.Image,
		StdoutPath: filepath.Join(dir, "attempt-1.stdout.log"),
		StderrPath: filepath.Join(dir, "attempt-1.stderr.log"),
	}
}

func (f *fixture) run(job executor.Job) executor.Exit {
	f.t.Helper()
	h, err := f.x.Start(context.Background(), job)
	require.NoError(f.t, err)
	return f.wait(h)
}

func (f *fixture) wait(h executor.Handle) executor.Exit {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ex, err := h.Wait(ctx)
	require.NoError(f.t, err)
	return ex
}

func (f *fixture) containers() []Summary {
	list, err := f.api.List(context.Background(), map[string]string{LabelHome: f.home})
	require.NoError(f.t, err)
	return list
}

func TestContainerRunsAndIsRemoved(t *testing.T) {
	f := newFixture(t)
	job := f.job("train", dockertest.Workload, "metrics", "3")
	ex := f.run(job)
	require.True(t, ex.Success(), ex.Describe())
	require.Equal(t, "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 0.5}\n{\"step\": 3, \"loss\": 0.3333333333333333}\n", readAll(t, job.StdoutPath))
	require.Empty(t, f.containers(), "a finished container is removed")
}

func TestExitCodesAndStderr(t *testing.T) {
	f := newFixture(t)
	job := f.job("a", dockertest.Workload, "exit", "3")
	ex := f.run(job)
	require.Equal(t, 3, ex.Code)
	require.False(t, ex.Success())

	job = f.job("b", dockertest.Workload, "nonsense")
	ex = f.run(job)
	require.Equal(t, 100, ex.Code)
	require.Equal(t, "workload: unknown op nonsense\n", readAll(t, job.StderrPath), "stderr is demultiplexed into its own file")
	require.Empty(t, readAll(t, job.StdoutPath))
}

func TestOOMIsReportedAsSuch(t *testing.T) {
	f := newFixture(t)
	job := f.job("a", dockertest.Workload, "alloc", "256")
	job.Container.MemoryMiB = 16
	ex := f.run(job)
	require.True(t, ex.OOMKilled, "exit %d: %s", ex.Code, ex.Describe())
	require.Contains(t, ex.Describe(), "out of memory")
}

func TestStopEndsARunningContainer(t *testing.T) {
	f := newFixture(t)
	job := f.job("a", dockertest.Workload, "sleep")
	h, err := f.x.Start(context.Background(), job)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(readFile(job.StdoutPath), "sleeping") }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, h.Stop(context.Background(), 5*time.Second))
	ex := f.wait(h)
	require.Equal(t, 143, ex.Code, "SIGTERM reached the workload through the container's init: %s", ex.Describe())
	require.Empty(t, f.containers())
}

func TestKeepLeavesTheContainer(t *testing.T) {
	f := newFixture(t)
	job := f.job("a", dockertest.Workload, "exit", "0")
	job.Container.Keep = true
	require.True(t, f.run(job).Success())
	list := f.containers()
	require.Len(t, list, 1)
	removed, err := f.x.Sweep(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, removed, "Sweep leaves containers the template asked to keep")
}

// An image that is not here is pulled; while it cannot be, the stage
// waits with the reason and the way out, and nothing is created.
func TestMissingImageThatCannotBePulled(t *testing.T) {
	f := newFixture(t)
	job := f.job("a", "x")
	job.Image = "niuma-test/does-not-exist:never"
	_, err := f.x.Start(context.Background(), job)
	require.ErrorIs(t, err, executor.ErrUnavailable, "the stage waits for the image; it does not fail")
	require.Contains(t, err.Error(), "pulling image niuma-test/does-not-exist:never")
	var msg string
	require.Eventually(t, func() bool {
		err := f.x.PrepareImage(context.Background(), job.Image)
		require.ErrorIs(t, err, executor.ErrUnavailable)
		msg = err.Error()
		return strings.Contains(msg, "could not be pulled")
	}, 60*time.Second, 50*time.Millisecond)
	require.Contains(t, msg, "image niuma-test/does-not-exist:never is not on this machine and could not be pulled (")
	require.Contains(t, msg, "`make demo-image`", "a hint")
	require.Contains(t, msg, "`docker pull niuma-test/does-not-exist:never`")
	require.Contains(t, msg, "or run on the host with --executor local")
	require.Regexp(t, `pulled \(.+\): `, msg, "the daemon's reason")
	_, err = f.x.Start(context.Background(), job)
	require.Contains(t, err.Error(), "could not be pulled", "no new pull before PullRetry")
	require.Empty(t, f.containers())
}

func TestGPUStageWithoutNvidiaRuntime(t *testing.T) {
	f := newFixture(t)
	job := f.job("a", dockertest.Workload, "exit", "0")
	job.GPUs = []executor.GPU{{Index: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000"}}
	_, err := f.x.Start(context.Background(), job)
	require.Error(t, err)
	require.Contains(t, err.Error(), "nvidia-container-toolkit")
	require.Empty(t, f.containers(), "the container that could not start is removed")

	job = f.job("b", dockertest.Workload, "exit", "0")
	require.True(t, f.run(job).Success(), "a stage needing no GPU still runs")
}

func TestUnreachableDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "dead.sock"))
	api, err := NewMoby()
	require.NoError(t, err)
	defer api.Close()
	x := New(api, t.TempDir())
	err = x.Available(context.Background())
	require.ErrorIs(t, err, executor.ErrUnavailable)
	require.Contains(t, err.Error(), "Docker daemon not reachable: ")
	_, err = x.Start(context.Background(), executor.Job{Argv: []string{"x"}, Image: "i"})
	require.ErrorIs(t, err, executor.ErrUnavailable)
}

func TestRecoverAContainerThatEndedWhileNiumaWasAway(t *testing.T) {
	f := newFixture(t)
	job := f.job("a", dockertest.Workload, "hold", "2", RunMount+"/a/ready", RunMount+"/a/go", "4")
	h, err := f.x.Start(context.Background(), job)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fileExists(filepath.Join(job.StageDir, "ready")) }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Count(readFile(job.StdoutPath), "\n") == 2 }, 30*time.Second, 20*time.Millisecond)
	ref := h.Ref()
	h.(executor.Releaser).Release() // as if this Niuma had died
	require.NoError(t, os.WriteFile(filepath.Join(job.StageDir, "go"), nil, 0o644))
	var id string
	require.Eventually(t, func() bool {
		list := f.containers()
		if len(list) == 1 && list[0].State == "exited" {
			id = list[0].ID
			return true
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the container ends on its own")
	require.Contains(t, ref, id)

	h2, err := f.x.Recover(context.Background(), job, ref)
	require.NoError(t, err)
	ex := f.wait(h2)
	require.True(t, ex.Success(), ex.Describe())
	require.Equal(t, 4, strings.Count(readFile(job.StdoutPath), "\n"), "the lines already in the file are not written again:\n%s", readFile(job.StdoutPath))
	require.Empty(t, f.containers())

	// The container is gone; the status it ended with is not.
	h3, err := f.x.Recover(context.Background(), job, ref)
	require.NoError(t, err)
	require.True(t, f.wait(h3).Success())
	require.NoError(t, os.Remove(filepath.Join(job.StageDir, ".attempt-1.container-exit")))
	_, err = f.x.Recover(context.Background(), job, ref)
	require.ErrorIs(t, err, executor.ErrGone, "a removed container whose end no one recorded is gone")
}

// An engine that passes the Refs of the attempts it drives (not every
// token the archive knows) still never loses a running container.
func TestSweepTakesRefsAndLeavesRunningContainers(t *testing.T) {
	f := newFixture(t)
	owned, err := f.x.Start(context.Background(), f.job("a", dockertest.Workload, "sleep"))
	require.NoError(t, err)
	stray, err := f.x.Start(context.Background(), f.job("b", dockertest.Workload, "sleep"))
	require.NoError(t, err)
	stray.(executor.Releaser).Release()
	removed, err := f.x.Sweep(context.Background(), []string{owned.Ref()})
	require.NoError(t, err)
	require.Empty(t, removed, "a running container is never removed")
	require.Len(t, f.containers(), 2)
	for _, h := range []executor.Handle{owned, stray} {
		require.NoError(t, h.Stop(context.Background(), time.Second))
	}
	f.wait(owned)
	require.Eventually(t, func() bool {
		l := f.containers()
		return len(l) == 1 && l[0].State == "exited"
	}, 30*time.Second, 20*time.Millisecond, "the released one stops and stays")
	removed, err = f.x.Sweep(context.Background(), []string{owned.Ref()})
	require.NoError(t, err)
	require.Len(t, removed, 1)
	require.Contains(t, removed[0], "stage b")
	require.Empty(t, f.containers())
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// A container killed from outside while the daemon stays up is a failure
// of the attempt, not an interruption: only a daemon restart earns a free
// run.
func TestKillFromOutsideIsNoInterruption(t *testing.T) {
	f := newFixture(t)
	c := dockertest.Need(t)
	job := f.job("a", dockertest.Workload, "sleep")
	h, err := f.x.Start(context.Background(), job)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(readFile(job.StdoutPath), "sleeping") }, 30*time.Second, 20*time.Millisecond)
	list := f.containers()
	require.Len(t, list, 1)
	_, err = c.ContainerKill(context.Background(), list[0].ID, client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	ex := f.wait(h)
	require.Equal(t, 137, ex.Code, ex.Describe())
	require.False(t, ex.Interrupted || ex.OOMKilled || ex.Success(), "%+v", ex)
}
