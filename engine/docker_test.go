package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/docker"
	"niuma/engine/executor/docker/dockertest"
	"niuma/engine/executor/local"
	"niuma/engine/template"
)

// These tests drive runs through the docker executor on the machine's
// daemon; they skip when none answers.

// dockerEngine returns an engine over the harness with the local executor
// and a docker executor over the daemon DOCKER_HOST names.
func (h *harness) dockerEngine() *Engine {
	api, err := docker.NewMoby()
	require.NoError(h.t, err)
	h.t.Cleanup(func() { api.Close() })
	dx := docker.New(api, h.home)
	dx.RetryInterval = 50 * time.Millisecond
	e, err := New(Options{
		Home: h.home, Store: h.store,
		Executors:    []executor.Executor{local.New(), dx},
		Backoff:      func(int) time.Duration { return 10 * time.Millisecond },
		StopGrace:    2 * time.Second,
		PollInterval: 50 * time.Millisecond,
	})
	require.NoError(h.t, err)
	return e
}

func dockerYAML(stages string) string {
	return "name: d\nruntime: {kind: docker, image: " + dockertest.Image + "}\nparams:\n  msg: {type: string, default: hello}\nstages:\n" + stages
}

func TestDockerRunsTheDAGInContainers(t *testing.T) {
	dockertest.Need(t)
	h := newHarness(t)
	e := h.dockerEngine()
	h.drive(e)
	tm := parse(t, dockerYAML(`
  - name: make
    command: [/workload, write, "${stage_dir}/out.txt", "${params.msg}"]
  - name: metrics
    needs: [make]
    command: [/workload, metrics, "4"]
  - name: read
    needs: [metrics]
    command: [/workload, cat, "${run_dir}/make/out.txt"]
`))
	info, err := e.Submit(context.Background(), RunSpec{Template: tm, Values: map[string]any{"msg": "$(touch /tmp/pwned); x"}})
	require.NoError(t, err)
	require.Equal(t, "docker", info.Executor, "docker by default: the daemon answers and the image is here")
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, "%+v", r.Stages)
	out, _ := LogPaths(r, "read", 1)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "$(touch /tmp/pwned); x", string(b), "the second stage read the first's output, and the value arrived verbatim")
	_, err = os.Stat("/tmp/pwned")
	require.True(t, os.IsNotExist(err), "nothing ran the value as a command")
	n, err := e.MetricCount(context.Background(), info.ID)
	require.NoError(t, err)
	require.Equal(t, 4, n, "metrics parsed from the container's stdout")
}

func TestDockerRunSurvivesAnEngineRestart(t *testing.T) {
	dockertest.Need(t)
	h := newHarness(t)
	first := h.dockerEngine()
	stopFirst := h.drive(first)
	tm := parse(t, dockerYAML(`
  - name: a
    command: [/workload, hold, "2", "${stage_dir}/ready", "${stage_dir}/go", "5"]
`))
	info, err := first.Submit(context.Background(), RunSpec{Template: tm, Executor: "docker"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "a", "go"), nil, 0o644) })
	waitHolding(t, first, info, 2, 60*time.Second)
	stopFirst() // the engine goes; the container stays

	second := h.dockerEngine()
	h.drive(second)
	require.NoError(t, os.WriteFile(filepath.Join(info.Dir, "a", "go"), nil, 0o644))
	r := waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, "%+v", r.Stages)
	require.Equal(t, 1, r.Stages[0].Attempts, "adopted, not restarted")
	series, err := second.Series(context.Background(), info.ID, "a", "loss")
	require.NoError(t, err)
	var steps []int64
	for _, p := range series {
		steps = append(steps, p.Step)
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5}, steps, "every point exactly once")
	out, _ := LogPaths(r, "a", 1)
	b, _ := os.ReadFile(out)
	require.Equal(t, 5, strings.Count(string(b), "\n"), "the log holds each line once:\n%s", b)
}

func TestDockerUnreachableKeepsStagesQueued(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "dead.sock"))
	h := newHarness(t)
	e := h.dockerEngine()
	h.drive(e)
	tm := parse(t, dockerYAML("  - {name: a, command: [/workload, exit, \"0\"]}\n"))
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	require.Equal(t, "docker", info.Executor, "without a daemon a docker template waits for one; it never runs on the host unasked")
	require.Contains(t, info.ExecutorNote, "Docker daemon not reachable")
	require.Contains(t, info.ExecutorNote, "the run waits for it (or runs on the host with --executor local")
	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool {
		return strings.HasPrefix(r.Stages[0].Reason, "Docker daemon not reachable: ")
	})
	require.Equal(t, Queued, r.State)
	require.Equal(t, Queued, r.Stages[0].State)
	require.Zero(t, r.Stages[0].Attempts, "nothing was started, nothing failed")
	require.NoError(t, e.Cancel(context.Background(), info.ID))
	r = waitDone(t, e, info.ID)
	require.Equal(t, Cancelled, r.State, "the engine kept running")
}

func TestDockerMountsCodeAndDataReadOnly(t *testing.T) {
	dockertest.Need(t)
	h := newHarness(t)
	e := h.dockerEngine()
	h.drive(e)
	code := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(code, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(code, "data", "in.txt"), []byte("digits"), 0o644))
	tm := parse(t, "name: d\nruntime: {kind: docker, image: "+dockertest.Image+", data: data}\nstages:\n"+`
  - name: read
    command: [/workload, cat, "${data}/in.txt"]
  - name: write
    needs: [read]
    command: [/workload, write, "${data}/out.txt", x]
`)
	tm.Dir = code
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.Stages[0].State)
	out, _ := LogPaths(r, "read", 1)
	b, _ := os.ReadFile(out)
	require.Equal(t, "digits", string(b), "${data} names the template's data directory inside the container")
	require.Equal(t, Failed, r.Stages[1].State, "the data directory is read-only")
	_, errPath := LogPaths(r, "write", 1)
	b, _ = os.ReadFile(errPath)
	require.Contains(t, string(b), "read-only file system")
}

// At start the engine removes an exited container no run's attempt names,
// and leaves one that still runs: it may be an attempt whose record is
// still being written, and ending it could run that attempt twice.
func TestDockerEngineStartRemovesExitedContainersNoRunOwns(t *testing.T) {
	c := dockertest.Need(t)
	h := newHarness(t)
	api, err := docker.NewMoby()
	require.NoError(t, err)
	defer api.Close()
	dx := docker.New(api, h.home)
	stray := func(stage string) executor.Handle {
		dir := filepath.Join(h.home, "runs", "gone")
		h1, err := dx.Start(context.Background(), executor.Job{
			RunID: "gone", Stage: stage, Attempt: 1, Argv: []string{dockertest.Workload, "sleep"},
			RunDir: dir, StageDir: filepath.Join(dir, stage), Image: dockertest.Image,
			StdoutPath: filepath.Join(dir, stage, "out"), StderrPath: filepath.Join(dir, stage, "err"),
		})
		require.NoError(t, err)
		h1.(executor.Releaser).Release() // as if its Niuma had crashed before recording it
		return h1
	}
	stray("running")
	ended := stray("ended")
	var endedID string
	require.Eventually(t, func() bool {
		list, err := api.List(context.Background(), map[string]string{docker.LabelHome: h.home, docker.LabelStage: "ended"})
		require.NoError(t, err)
		if len(list) == 1 && endedID == "" {
			endedID = list[0].ID
			_, err = c.ContainerKill(context.Background(), endedID, client.ContainerKillOptions{Signal: "KILL"})
			require.NoError(t, err)
		}
		return len(list) == 1 && list[0].State == "exited"
	}, 30*time.Second, 20*time.Millisecond)
	require.Contains(t, ended.Ref(), endedID)
	t.Cleanup(func() {
		list, _ := api.List(context.Background(), map[string]string{docker.LabelHome: h.home})
		for _, s := range list {
			_ = api.Remove(context.Background(), s.ID)
		}
	})

	e := h.dockerEngine()
	h.drive(e) // returns once the engine owns the data dir and has swept
	list, err := api.List(context.Background(), map[string]string{docker.LabelHome: h.home})
	require.NoError(t, err)
	require.Len(t, list, 1, "the engine removed the exited container no run owns")
	require.Equal(t, "running", list[0].Labels[docker.LabelStage], "and left the running one")
}

// A docker template whose image is not here waits, saying why and what to
// do; it runs on the host only when the user asks, or when the template
// itself allows it (fallback: local), and then says what it goes without.
func TestDockerTemplateWithoutItsImageWaits(t *testing.T) {
	dockertest.Need(t)
	h := newHarness(t)
	e := h.dockerEngine()
	h.drive(e)
	const absent = "niuma-test/absent:never"
	doc := func(extra string) *template.Template {
		return parse(t, "name: d\nruntime: {kind: docker, image: "+absent+extra+"}\nstages:\n"+
			"  - {name: a, command: [/bin/sh, -c, \"echo on the host > ${stage_dir}/where\"]}\n")
	}
	info, err := e.Submit(context.Background(), RunSpec{Template: doc("")})
	require.NoError(t, err)
	require.Equal(t, "docker", info.Executor, "no silent downgrade")
	require.Contains(t, info.ExecutorNote, "image "+absent+" is not on this machine: ")
	require.Contains(t, info.ExecutorNote, "`docker pull "+absent+"`; the run waits for it (or runs on the host with --executor local, without the container's isolation")

	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool {
		return strings.Contains(r.Stages[0].Reason, "could not be pulled")
	})
	why := r.Stages[0].Reason
	require.True(t, strings.HasPrefix(why, "image "+absent+" is not on this machine and could not be pulled ("), why)
	require.Contains(t, why, "`make demo-image`")
	require.Contains(t, why, "`docker pull "+absent+"`")
	require.Contains(t, why, "or run on the host with --executor local")
	require.Equal(t, Queued, r.State)
	require.Equal(t, Queued, r.Stages[0].State)
	require.Zero(t, r.Stages[0].Attempts, "it waits: nothing was started, nothing failed")

	asked, err := e.Submit(context.Background(), RunSpec{Template: doc(""), Executor: "local"})
	require.NoError(t, err)
	require.Equal(t, "local", asked.Executor)
	require.Contains(t, asked.ExecutorNote, "runs on the host as asked (--executor local), without the container's isolation")
	done := waitDone(t, e, asked.ID)
	require.Equal(t, Succeeded, done.State, "%+v", done.Stages)
	b, err := os.ReadFile(filepath.Join(done.Dir, "a", "where"))
	require.NoError(t, err)
	require.Equal(t, "on the host\n", string(b))

	allowed, err := e.Submit(context.Background(), RunSpec{Template: doc(", fallback: local")})
	require.NoError(t, err)
	require.Equal(t, "local", allowed.Executor, "the template's own, visible choice")
	require.Contains(t, allowed.ExecutorNote, "is not on this machine")
	require.Contains(t, allowed.ExecutorNote, "so it runs on the host, as the template allows (fallback: local), without the container's isolation")
	require.Equal(t, Succeeded, waitDone(t, e, allowed.ID).State)

	r, err = e.Run(context.Background(), info.ID)
	require.NoError(t, err)
	require.Equal(t, Queued, r.State, "the first run still waits for its image")
	require.NoError(t, e.Cancel(context.Background(), info.ID))
	require.Equal(t, Cancelled, waitDone(t, e, info.ID).State)
}

// What the sandbox refuses is refused when the run is submitted, with the
// rule, and nothing is written.
func TestDockerSubmitRefusesWhatTheSandboxForbids(t *testing.T) {
	dockertest.Need(t)
	h := newHarness(t)
	api, err := docker.NewMoby()
	require.NoError(t, err)
	t.Cleanup(func() { api.Close() })
	dx := docker.New(api, h.home)
	dx.UID, dx.GID = 1000, 1000 // as if a user, not root, ran Niuma
	e, err := New(Options{Home: h.home, Store: h.store, Executors: []executor.Executor{local.New(), dx}})
	require.NoError(t, err)

	code := t.TempDir()
	require.NoError(t, os.Symlink("/var/run", filepath.Join(code, "data")))
	linked := parse(t, "name: d\nruntime: {kind: docker, image: "+dockertest.Image+", data: data}\nstages: [{name: a, command: [/workload, exit, \"0\"]}]\n")
	linked.Dir = code
	_, err = e.Submit(context.Background(), RunSpec{Template: linked})
	require.ErrorContains(t, err, "template d cannot run in a container here: the data directory "+filepath.Join(code, "data")+" resolves to the system path /run (rule: ")

	root := parse(t, "name: d\nruntime: {kind: docker, image: "+dockertest.Image+", user: \"0:0\"}\nstages: [{name: a, command: [/workload, exit, \"0\"]}]\n")
	_, err = e.Submit(context.Background(), RunSpec{Template: root})
	require.ErrorContains(t, err, "user: 0:0 is root's (rule: a container runs as the user running Niuma, 1000:1000 here")

	runs, err := e.Runs(context.Background(), 0)
	require.NoError(t, err)
	require.Empty(t, runs, "nothing was written")
	entries, _ := os.ReadDir(filepath.Join(h.home, "runs"))
	require.Empty(t, entries)
}
