package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/local"
	"niuma/shepherd"
	"niuma/storage"
)

// onceYAML is a stage that notes each start and end of its process in
// the run's folder (launches), prints two points, waits for a go-ahead
// file (or for its run's folder to vanish, when a test ends), prints a
// third and exits. A stage that ran twice, or twice at once, shows in
// launches.
const onceYAML = `
name: once
stages:
  - name: a
    retries: 1
    command: [sh, -c, 'echo start >> "$NIUMA_RUN_DIR/launches"; echo "{\"step\": 0, \"loss\": 2}"; echo "{\"step\": 1, \"loss\": 1}"; touch a/ready; while [ ! -e "$NIUMA_RUN_DIR/go" ] && [ -d "$NIUMA_RUN_DIR" ]; do sleep 0.02; done; echo "{\"step\": 2, \"loss\": 0.5}"; echo end >> "$NIUMA_RUN_DIR/launches"']
`

func launches(t *testing.T, dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "launches"))
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ",")
}

func letGo(t *testing.T, dir string) {
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o644))
}

// untilFile polls for a file with a deadline.
func untilFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 30*time.Second, 10*time.Millisecond, path)
}

// steps is the steps of the stage's loss series.
func steps(t *testing.T, e *Engine, id string) []int64 {
	series, err := e.Series(context.Background(), id, "a", "loss")
	require.NoError(t, err)
	var out []int64
	for _, p := range series {
		out = append(out, p.Step)
	}
	return out
}

// asIfStarting rewrites the stage's current attempt as the last owner
// would have left it had it died between recording the attempt and
// learning its handle: starting, no handle, only its token.
func asIfStarting(t *testing.T, h *harness, id string) {
	ctx := context.Background()
	as, err := h.store.Attempts(ctx, id)
	require.NoError(t, err)
	a := as[len(as)-1]
	require.NotEmpty(t, a.Token, "the attempt was recorded with its token")
	a.State, a.Handle = storage.AttemptStarting, ""
	require.NoError(t, h.store.UpdateAttempt(ctx, a))
}

// startedAndStopped runs a first owner until the stage's process has
// started and printed its first points, and stops it (the process lives
// on).
func startedAndStopped(t *testing.T, h *harness) RunInfo {
	first := h.engine()
	stop := h.drive(first)
	info, err := first.Submit(context.Background(), RunSpec{Template: parse(t, onceYAML)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "go"), nil, 0o644) })
	waitHolding(t, first, info, 2, 30*time.Second)
	stop()
	return info
}

// Adoption by token: the owner died before it recorded the handle; the
// process is alive and is adopted, never launched again.
func TestAdoptAliveByToken(t *testing.T) {
	h := newHarness(t)
	info := startedAndStopped(t, h)
	asIfStarting(t, h, info.ID)

	second := h.engine()
	h.drive(second)
	letGo(t, info.Dir)
	r := waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	assert.Equal(t, 1, r.Stages[0].Attempts)
	assert.Equal(t, "start,end", launches(t, info.Dir), "one process")
	assert.Equal(t, []int64{0, 1, 2}, steps(t, second, info.ID))
}

// The process ended while no one owned it: its exit status is read from
// the exit file (never guessed), and its last points are stored once.
func TestAdoptExitedWhileAway(t *testing.T) {
	for _, starting := range []bool{false, true} {
		t.Run("starting="+strconv.FormatBool(starting), func(t *testing.T) {
			h := newHarness(t)
			info := startedAndStopped(t, h)
			if starting {
				asIfStarting(t, h, info.ID)
			}
			letGo(t, info.Dir)
			exitFile := filepath.Join(info.Dir, "a", ".attempt-1.exit")
			require.Eventually(t, func() bool {
				b, _ := os.ReadFile(exitFile)
				return strings.HasPrefix(string(b), "0\n")
			}, 30*time.Second, 10*time.Millisecond)

			second := h.engine()
			h.drive(second)
			r := waitDone(t, second, info.ID)
			require.Equal(t, Succeeded, r.State, r.Error)
			assert.Equal(t, 1, r.Stages[0].Attempts)
			require.NotNil(t, r.Stages[0].ExitCode)
			assert.Equal(t, 0, *r.Stages[0].ExitCode)
			assert.Equal(t, "start,end", launches(t, info.Dir))
			assert.Equal(t, []int64{0, 1, 2}, steps(t, second, info.ID))
		})
	}
}

// recordStarting leaves a submitted run as an owner that died right after
// recording its first attempt would: the stage running, the attempt
// starting with its token, nothing launched.
func recordStarting(t *testing.T, h *harness, info RunInfo, token string) {
	ctx := context.Background()
	stages, err := h.store.Stages(ctx, info.ID)
	require.NoError(t, err)
	run, err := h.store.GetRun(ctx, info.ID)
	require.NoError(t, err)
	st := stages[0]
	now := time.Now()
	st.State, st.Attempts, st.StartedAt = storage.StageRunning, 1, now
	run.State, run.StartedAt = storage.RunRunning, now
	require.NoError(t, h.store.Apply(ctx, storage.Transition{Run: &run, Stages: []storage.Stage{st},
		NewAttempt: &storage.Attempt{RunID: info.ID, Stage: "a", Number: 1, State: storage.AttemptStarting,
			Executor: "local", Token: token, StartedAt: now}}))
}

// Recorded but never launched: the next owner launches it, once, as the
// same attempt.
func TestNeverLaunchedAttemptIsLaunchedByTheNextOwner(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, onceYAML)})
	require.NoError(t, err)
	recordStarting(t, h, info, "aneverlaunched")
	letGo(t, info.Dir)

	h.drive(e)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	assert.Equal(t, 1, r.Stages[0].Attempts, "the recorded attempt, not a new one")
	assert.Equal(t, "succeeded", r.Stages[0].History[0].State)
	assert.Equal(t, "start,end", launches(t, info.Dir))
}

// Provably gone (its pid file names a process that no longer exists, no
// exit status, no process with its token): lost, and retried.
func TestGoneAttemptIsLostAndRetried(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, onceYAML)})
	require.NoError(t, err)
	recordStarting(t, h, info, "agone")
	stageDir := filepath.Join(info.Dir, "a")
	require.NoError(t, os.MkdirAll(stageDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stageDir, ".attempt-1.pid"), []byte("999999999 agone 12345\n"), 0o644))
	letGo(t, info.Dir)

	h.drive(e)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	require.Equal(t, 2, r.Stages[0].Attempts)
	assert.Equal(t, "lost", r.Stages[0].History[0].State)
	assert.Equal(t, "start,end", launches(t, info.Dir), "only the retry ran")
}

// A shim killed while its command lives on: the attempt is not lost while
// a process with its token exists, so the retry never runs beside it.
func TestLostAttemptIsNotRetriedWhileItsProcessesLive(t *testing.T) {
	h := newHarness(t)
	info := startedAndStopped(t, h)
	as, err := h.store.Attempts(context.Background(), info.ID)
	require.NoError(t, err)
	var ref struct{ PID int }
	require.NoError(t, json.Unmarshal([]byte(as[0].Handle), &ref))
	killShim(t, ref.PID, as[0].Token) // the shim (and its wrapper), not its command

	second := h.engine()
	h.drive(second)
	// The new owner follows what is left; the command ends when told.
	letGo(t, info.Dir)
	r := waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	require.Equal(t, 2, r.Stages[0].Attempts)
	assert.Equal(t, "lost", r.Stages[0].History[0].State)
	assert.Equal(t, "start,end,start,end", launches(t, info.Dir), "the retry began after the first process ended")
}

// crashingExec stands for an owner killed while it launches: before the
// process starts, or after it started and before its handle is recorded.
type crashingExec struct {
	executor.Executor
	afterStart bool
	crash      func()
	once       sync.Once
}

func (c *crashingExec) Start(ctx context.Context, job executor.Job) (executor.Handle, error) {
	var h executor.Handle
	var err error
	first := false
	c.once.Do(func() { first = true })
	if !first || c.afterStart {
		h, err = c.Executor.Start(ctx, job)
	}
	if first {
		c.crash()
		<-ctx.Done()
		if !c.afterStart {
			return nil, ctx.Err()
		}
	}
	return h, err
}

// An owner killed while the attempt is starting, before or after its
// process starts: the next owner launches it or adopts it, and the stage
// runs exactly once.
func TestKillDuringStarting(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run("after_start="+strconv.FormatBool(after), func(t *testing.T) {
			h := newHarness(t)
			ctx, cancel := context.WithCancel(context.Background())
			cx := &crashingExec{Executor: local.New(), afterStart: after, crash: cancel}
			first := h.engine(func(o *Options) { o.Executors = []executor.Executor{cx} })
			done := make(chan struct{})
			go func() { defer close(done); _ = first.Drive(ctx) }()
			info, err := first.Submit(context.Background(), RunSpec{Template: parse(t, onceYAML)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "go"), nil, 0o644) })
			<-done

			r, err := first.Run(context.Background(), info.ID)
			require.NoError(t, err)
			require.Equal(t, "starting", r.Stages[0].History[0].State, "the attempt was recorded before the launch")

			second := h.engine()
			h.drive(second)
			letGo(t, info.Dir)
			r = waitDone(t, second, info.ID)
			require.Equal(t, Succeeded, r.State, r.Error)
			assert.Equal(t, 1, r.Stages[0].Attempts)
			assert.Equal(t, "start,end", launches(t, info.Dir))
			assert.Equal(t, []int64{0, 1, 2}, steps(t, second, info.ID))
		})
	}
}

// syncBuffer is a log sink for a test to read while the engine writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A stage whose attempt cannot be recorded (the database refuses the
// write) is never launched; it starts once the write works.
func TestStageIsNotStartedWhenItsAttemptCannotBeRecorded(t *testing.T) {
	h := newHarness(t)
	var logs syncBuffer
	e := h.engine(func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, onceYAML)})
	require.NoError(t, err)
	letGo(t, info.Dir)
	_, err = h.store.SQL().Exec(`CREATE TRIGGER refuse_attempts BEFORE INSERT ON attempts
		BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`)
	require.NoError(t, err)

	h.drive(e)
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "record start") >= 2 },
		30*time.Second, 10*time.Millisecond, "the engine tried to start the stage")
	r, err := e.Run(context.Background(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, Queued, r.Stages[0].State)
	assert.Equal(t, 0, r.Stages[0].Attempts, "nothing recorded in part")
	assert.Equal(t, Queued, r.State)
	assert.Empty(t, launches(t, info.Dir), "nothing launched")

	_, err = h.store.SQL().Exec(`DROP TRIGGER refuse_attempts`)
	require.NoError(t, err)
	r = waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	assert.Equal(t, 1, r.Stages[0].Attempts)
	assert.Equal(t, "start,end", launches(t, info.Dir))
}

// An owner that stops cleanly while it drives runs logs no error: what it
// was doing is cancelled, and that is not a failure.
func TestCleanStopLogsNoError(t *testing.T) {
	h := newHarness(t)
	var logs syncBuffer
	e := h.engine(func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		o.Host = shepherd.Host{CPUMilli: 8000} // room for the three stages at once, on any machine
	})
	stop := h.drive(e)
	var infos []RunInfo
	for range 3 {
		info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, onceYAML)})
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "go"), nil, 0o644) })
		infos = append(infos, info)
	}
	waitHolding(t, e, infos[2], 2, 30*time.Second)
	stop()
	for _, info := range infos {
		letGo(t, info.Dir)
		require.Eventually(t, func() bool { return strings.HasSuffix(launches(t, info.Dir), "end") },
			30*time.Second, 10*time.Millisecond, "the stage ends")
	}
	out := logs.String()
	assert.NotContains(t, out, "level=ERROR", out)
	assert.NotContains(t, out, "context canceled", out)
}

// fullDiskYAML waits for a go-ahead file outside the data directory and
// exits 0, writing nothing more.
const fullDiskYAML = `
name: fulldisk
params:
  ctl: {type: string, default: ""}
stages:
  - name: a
    command: [sh, -c, 'echo "{\"step\": 0, \"loss\": 1}"; touch a/ready; while [ ! -e "$0/go" ] && [ -d "$0" ]; do sleep 0.02; done', "${params.ctl}"]
`

// A stage that exits 0 while the data directory's disk is full has its
// status recorded all the same (over the line its exit file was given
// before it started), so the next owner finds it succeeded, not gone.
func TestExitStatusIsKeptOnAFullDisk(t *testing.T) {
	needRoot(t)
	home := smallDisk(t, "8m")
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	defer db.Close()
	h := &harness{t: t, home: home, store: db}
	first := h.engine()
	stopFirst := h.drive(first)
	ctl := t.TempDir()
	info, err := first.Submit(context.Background(), RunSpec{Template: parse(t, fullDiskYAML), Values: map[string]any{"ctl": ctl}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644) })
	waitHolding(t, first, info, 1, 30*time.Second)
	stopFirst()

	release := fill(t, home)
	require.NoError(t, os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644))
	exitFile := filepath.Join(info.Dir, "a", ".attempt-1.exit")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(exitFile)
		return strings.HasPrefix(string(b), "0\n")
	}, 30*time.Second, 10*time.Millisecond, "the status is written on the full disk")
	release()

	second := h.engine()
	h.drive(second)
	r := waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	require.Equal(t, 1, r.Stages[0].Attempts)
	require.Equal(t, "succeeded", r.Stages[0].History[0].State)
}

// flakyRecover is an executor whose service does not answer the first
// time it is asked about an attempt.
type flakyRecover struct {
	executor.Executor
	mu    sync.Mutex
	calls int
}

func (f *flakyRecover) Recover(ctx context.Context, job executor.Job, ref string) (executor.Handle, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n == 1 {
		return nil, errors.New("the service did not answer")
	}
	return f.Executor.Recover(ctx, job, ref)
}

// An attempt the executor cannot resolve now is not lost: it is asked
// about again, then adopted, and runs once.
func TestUnresolvedAttemptIsAskedAgainNotLost(t *testing.T) {
	h := newHarness(t)
	info := startedAndStopped(t, h)
	fx := &flakyRecover{Executor: local.New()}
	second := h.engine(func(o *Options) { o.Executors = []executor.Executor{fx} })
	h.drive(second)
	letGo(t, info.Dir)
	r := waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	assert.Equal(t, 1, r.Stages[0].Attempts)
	assert.Equal(t, "start,end", launches(t, info.Dir))
	fx.mu.Lock()
	defer fx.mu.Unlock()
	assert.GreaterOrEqual(t, fx.calls, 2)
}

// The same with the database write-locked by another process for longer
// than the busy timeout: the stage waits, unlaunched, and starts once the
// lock is let go.
func TestStageIsNotStartedWhileTheDatabaseIsLocked(t *testing.T) {
	h := newHarness(t)
	var logs syncBuffer
	e := h.engine(func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, onceYAML)})
	require.NoError(t, err)
	letGo(t, info.Dir)

	releaseFile := filepath.Join(t.TempDir(), "release")
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsDatabaseLock$")
	helper.Env = append(os.Environ(), lockEnv+"="+filepath.Join(h.home, "niuma.db")+"|"+releaseFile)
	stdout, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	defer func() { _ = os.WriteFile(releaseFile, nil, 0o644); _ = helper.Wait() }()
	buf := make([]byte, 64)
	k, _ := stdout.Read(buf)
	require.Contains(t, string(buf[:k]), "locked")

	h.drive(e)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "record start") },
		60*time.Second, 20*time.Millisecond, "the engine tried to start the stage")
	r, err := e.Run(context.Background(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, Queued, r.Stages[0].State)
	assert.Equal(t, 0, r.Stages[0].Attempts)
	assert.Empty(t, launches(t, info.Dir), "nothing launched")

	require.NoError(t, os.WriteFile(releaseFile, nil, 0o644))
	r = waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	assert.Equal(t, 1, r.Stages[0].Attempts)
	assert.Equal(t, "start,end", launches(t, info.Dir))
}

// killShim kills with SIGKILL the processes of an attempt that record its
// status: the shim's wrapper (pid) and the shim, a subshell of it, sharing
// its command line; not the command, nor the log capper.
func killShim(t *testing.T, pid int, token string) {
	t.Helper()
	wrapper, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	require.NoError(t, err)
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	killed := 0
	for _, ent := range ents {
		p, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		env, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		cmdline, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err1 != nil || err2 != nil || !bytes.Contains(env, []byte("NIUMA_ATTEMPT_TOKEN="+token+"\x00")) ||
			!bytes.Equal(cmdline, wrapper) {
			continue
		}
		require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
		killed++
	}
	require.GreaterOrEqual(t, killed, 1, "the shim of attempt %s", token)
}
