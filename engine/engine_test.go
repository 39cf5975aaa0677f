package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/local"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/storage"
)

// harness is one data directory with a database, for engines to share.
type harness struct {
	t     *testing.T
	home  string
	store *storage.DB
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	home := t.TempDir()
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return &harness{t: t, home: home, store: db}
}

// engine returns a new engine over the harness's data directory with fast
// retries and polling.
func (h *harness) engine(tweaks ...func(*Options)) *Engine {
	opts := Options{
		Home: h.home, Store: h.store,
		Executors:    []executor.Executor{local.New()},
		Backoff:      func(int) time.Duration { return 10 * time.Millisecond },
		StopGrace:    2 * time.Second,
		PollInterval: 50 * time.Millisecond,
	}
	for _, tw := range tweaks {
		tw(&opts)
	}
	e, err := New(opts)
	require.NoError(h.t, err)
	return e
}

// drive runs an engine until the test ends (or stop is called) and waits
// until it owns the data directory.
func (h *harness) drive(e *Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Drive(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	h.t.Cleanup(stop)
	select {
	case <-e.Ready():
	case <-time.After(10 * time.Second):
		h.t.Fatal("engine did not become the owner")
	}
	return stop
}

func parse(t *testing.T, yaml string) *template.Template {
	t.Helper()
	tm, err := template.Parse("test.yaml", []byte(yaml))
	require.NoError(t, err)
	return tm
}

// waitDone follows the engine's events until the run has ended.
func waitDone(t *testing.T, e *Engine, id string) RunInfo {
	t.Helper()
	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return waitFor(t, ctx, e, sub, id, func(r RunInfo) bool { return r.State.Done() })
}

// waitFor re-reads the run after every event (and a slow tick, for changes
// made by another engine) until cond holds.
func waitFor(t *testing.T, ctx context.Context, e *Engine, sub *Subscription, id string, cond func(RunInfo) bool) RunInfo {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := e.Run(context.Background(), id)
		require.NoError(t, err)
		if cond(r) {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s: condition not met; last state %s, stages %+v", id, r.State, r.Stages)
		case <-sub.C:
		case <-tick.C:
		}
	}
}

const dagYAML = `
name: dag
version: "2"
params:
  n: {type: int, default: 3, min: 1, max: 100}
stages:
  - name: prep
    command: [sh, -c, 'mkdir -p prep && echo "$NIUMA_PARAM_N" > prep/n && echo prepared']
  - name: train
    needs: [prep]
    command: [sh, -c, 'n=$(cat prep/n); i=0; while [ $i -lt $n ]; do echo "{\"step\": $i, \"loss\": 1.5}"; i=$((i+1)); done; echo "not a metric"', "${params.n}"]
  - name: report
    needs: [train]
    command: [sh, -c, 'test "$NIUMA_STAGE" = report && test -n "$NIUMA_SEED" && test -f params.json']
`

func TestRunGoesThroughItsDAG(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, dagYAML)
	vals, err := tm.Resolve(map[string]string{"n": "25"})
	require.NoError(t, err)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm, Values: vals, Seed: 42})
	require.NoError(t, err)

	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	require.Len(t, r.Stages, 3)
	for _, s := range r.Stages {
		require.Equal(t, Succeeded, s.State, s.Name)
		require.Equal(t, 1, s.Attempts)
		require.NotNil(t, s.ExitCode)
		require.Equal(t, 0, *s.ExitCode)
	}
	require.Equal(t, int64(42), r.Seed)
	series, err := e.Series(context.Background(), r.ID, "train", "loss")
	require.NoError(t, err)
	require.Len(t, series, 25)
	require.Equal(t, int64(24), series[24].Step)
	out, err := os.ReadFile(filepath.Join(r.Dir, "train", "attempt-1.stdout.log"))
	require.NoError(t, err)
	require.Contains(t, string(out), "not a metric")
}

func TestFailingStageIsRetriedThenFailsTheRun(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: flaky
stages:
  - name: a
    command: [sh, -c, 'echo attempt $NIUMA_ATTEMPT >&2; exit 3']
    retries: 2
  - name: b
    needs: [a]
    command: ["true"]
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)

	require.Equal(t, Failed, r.State)
	a, b := r.Stages[0], r.Stages[1]
	require.Equal(t, Failed, a.State)
	require.Equal(t, 3, a.Attempts)
	require.Equal(t, 3, *a.ExitCode)
	require.Contains(t, a.Reason, "exited with code 3")
	require.Contains(t, a.Reason, "attempt 3 of 3")
	require.Len(t, a.History, 3)
	for i, at := range a.History {
		require.Equal(t, i+1, at.Number)
		require.Equal(t, "failed", at.State)
		require.Equal(t, 3, *at.ExitCode)
	}
	require.Equal(t, Cancelled, b.State, "a stage whose need failed never runs")
	require.Contains(t, b.Reason, "stage a failed")
	require.Contains(t, r.Error, "stage a failed")
	errLog, err := os.ReadFile(filepath.Join(r.Dir, "a", "attempt-3.stderr.log"))
	require.NoError(t, err)
	require.Equal(t, "attempt 3\n", string(errLog))
}

func TestRetrySucceedsOnSecondAttempt(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: second-time-lucky
stages:
  - name: a
    command: [sh, -c, 'test "$NIUMA_ATTEMPT" = 2']
    retries: 1
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State)
	require.Equal(t, 2, r.Stages[0].Attempts)
	require.Equal(t, "failed", r.Stages[0].History[0].State)
	require.Equal(t, "succeeded", r.Stages[0].History[1].State)
}

func TestCancelStopsARunningStage(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: long
stages:
  - name: a
    command: [sh, -c, 'mkdir -p a; touch a/started; sleep 60']
  - name: b
    needs: [a]
    command: ["true"]
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(info.Dir, "a", "started"))
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)

	require.NoError(t, e.Cancel(context.Background(), info.ID))
	r := waitDone(t, e, info.ID)
	require.Equal(t, Cancelled, r.State)
	require.Equal(t, Cancelled, r.Stages[0].State)
	require.Equal(t, Cancelled, r.Stages[1].State)
	require.Equal(t, 0, r.Stages[1].Attempts)
	require.Less(t, r.FinishedAt.Sub(r.StartedAt), 30*time.Second, "SIGTERM ended sleep, not its own end")
	require.Error(t, e.Cancel(context.Background(), info.ID), "a finished run cannot be cancelled")
}

func TestTimeoutFailsTheStage(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: slow
stages:
  - name: a
    command: [sleep, "60"]
    timeout: 1s
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Failed, r.State)
	require.Contains(t, r.Stages[0].Reason, "timed out after 1s")
}

func TestInvalidSpecWritesNothing(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	tm := parse(t, dagYAML)
	tests := []struct {
		name string
		spec RunSpec
		want string
	}{
		{"value out of range", RunSpec{Template: tm, Values: template.Values{"n": int64(1000)}}, "n"},
		{"unknown executor", RunSpec{Template: tm, Executor: "slurm"}, `executor "slurm" is not available`},
		{"no template", RunSpec{}, "no template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Submit(context.Background(), tt.spec)
			require.ErrorContains(t, err, tt.want)
		})
	}
	runs, err := h.store.ListRuns(context.Background(), storage.RunFilter{})
	require.NoError(t, err)
	require.Empty(t, runs)
	entries, _ := os.ReadDir(filepath.Join(h.home, "runs"))
	require.Empty(t, entries)
}

func TestOnlyOneEngineDrivesADataDir(t *testing.T) {
	h := newHarness(t)
	first, second := h.engine(), h.engine()
	h.drive(first)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = second.Drive(ctx) }()
	require.True(t, first.Owner())
	require.False(t, second.Owner())
	require.True(t, OwnerAlive(h.home))

	// A run submitted through the non-owner is driven by the owner.
	info, err := second.Submit(context.Background(), RunSpec{Template: parse(t, "name: x\nstages:\n  - name: a\n    command: [\"true\"]\n")})
	require.NoError(t, err)
	r := waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State)
	require.False(t, second.Owner())
}

// An engine that stops (the window closes, the process is killed) leaves
// its attempts running; the next one adopts them, follows them to the end
// and does not store their metrics twice.
func TestNextEngineAdoptsARunningAttempt(t *testing.T) {
	h := newHarness(t)
	first := h.engine()
	stopFirst := h.drive(first)
	tm := parse(t, `
name: adopt
stages:
  - name: a
    command: [sh, -c, 'mkdir -p a; echo "{\"step\": 1, \"loss\": 2}"; echo "{\"step\": 2, \"loss\": 1}"; touch a/ready; while [ ! -f a/go ]; do sleep 0.05; done; echo "{\"step\": 3, \"loss\": 0.5}"; exit 7']
  - name: b
    needs: [a]
    command: ["true"]
`)
	info, err := first.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	// However the test ends, the stage's wait loop ends with it.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "a", "go"), nil, 0o644) })
	waitHolding(t, first, info, 2, 30*time.Second)
	stopFirst()

	r, err := first.Run(context.Background(), info.ID)
	require.NoError(t, err)
	require.Equal(t, Running, r.Stages[0].State, "stopping the engine does not stop the attempt")

	second := h.engine()
	h.drive(second)
	require.NoError(t, os.WriteFile(filepath.Join(info.Dir, "a", "go"), nil, 0o644))
	r = waitDone(t, second, info.ID)
	require.Equal(t, Failed, r.State)
	require.Equal(t, 1, r.Stages[0].Attempts, "adopted, not restarted")
	require.Equal(t, 7, *r.Stages[0].ExitCode, "the exit code of an adopted attempt is known")
	series, err := second.Series(context.Background(), info.ID, "a", "loss")
	require.NoError(t, err)
	steps := []int64{}
	for _, p := range series {
		steps = append(steps, p.Step)
	}
	require.Equal(t, []int64{1, 2, 3}, steps, "points stored before the restart are not stored again")
}

// A stage recorded as running whose process is gone is marked lost and
// retried; out of retries, it fails. It is never left running.
func TestLostAttemptIsRetriedOrFailed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		retries int
		want    State
	}{
		{"retried when it may be", 1, Succeeded},
		{"failed when out of retries", 0, Failed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			tm := parse(t, "name: lost\nstages:\n  - name: a\n    command: [\"true\"]\n    retries: "+string(rune('0'+tt.retries))+"\n")
			e := h.engine()
			info, err := e.Submit(ctx, RunSpec{Template: tm})
			require.NoError(t, err)

			// What a crashed process leaves behind: a running attempt whose
			// process no longer exists.
			stages, err := h.store.Stages(ctx, info.ID)
			require.NoError(t, err)
			st := stages[0]
			st.State, st.Attempts, st.StartedAt = storage.StageRunning, 1, time.Now()
			require.NoError(t, h.store.UpdateStage(ctx, st))
			require.NoError(t, h.store.CreateAttempt(ctx, storage.Attempt{RunID: info.ID, Stage: "a", Number: 1, State: "running",
				Executor: "local", Handle: `{"pid": 999999999, "start_time": 1, "exit_file": "/nonexistent"}`, StartedAt: time.Now()}))
			run, err := h.store.GetRun(ctx, info.ID)
			require.NoError(t, err)
			run.State = storage.RunRunning
			require.NoError(t, h.store.UpdateRun(ctx, run))

			h.drive(e)
			r := waitDone(t, e, info.ID)
			require.Equal(t, tt.want, r.State)
			require.Equal(t, "lost", r.Stages[0].History[0].State)
			require.Contains(t, r.Stages[0].History[0].Reason, "gone")
		})
	}
}

func TestSubscribersSeeStagesAndMetrics(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	sub := e.Subscribe(1024)
	defer sub.Close()
	h.drive(e)
	info, err := e.Submit(context.Background(), RunSpec{Template: parse(t, dagYAML)})
	require.NoError(t, err)
	waitDone(t, e, info.ID)

	kinds := map[EventKind]int{}
	var points int
	for len(sub.C) > 0 {
		ev := <-sub.C
		kinds[ev.Kind]++
		points += len(ev.Points)
	}
	require.Equal(t, 1, kinds[RunSubmitted])
	require.GreaterOrEqual(t, kinds[StageChanged], 6, "each of 3 stages starts and ends")
	require.Equal(t, 3, points, "3 loss points")
	require.False(t, sub.Lagged())
}

func TestOutcome(t *testing.T) {
	st := func(name string, s storage.StageState, reason string) storage.Stage {
		return storage.Stage{Name: name, State: s, Reason: reason}
	}
	tests := []struct {
		name      string
		stages    []storage.Stage
		cancelled bool
		prune     *storage.Prune
		want      storage.RunState
		wantWhy   string
	}{
		{"not done while one is queued", []storage.Stage{st("a", storage.StageSucceeded, ""), st("b", storage.StageQueued, "")}, false, nil, "", ""},
		{"not done while one runs", []storage.Stage{st("a", storage.StageRunning, "")}, true, nil, "", ""},
		{"all succeeded", []storage.Stage{st("a", storage.StageSucceeded, ""), st("b", storage.StageSucceeded, "")}, false, nil, storage.RunSucceeded, ""},
		{"a failure names the stage", []storage.Stage{st("a", storage.StageFailed, "exited with code 3"), st("b", storage.StageCancelled, "skipped")}, false, nil, storage.RunFailed, "stage a failed: exited with code 3"},
		{"cancelled on request", []storage.Stage{st("a", storage.StageSucceeded, ""), st("b", storage.StageCancelled, "")}, true, nil, storage.RunCancelled, "cancelled by request"},
		{"cancel after everything succeeded", []storage.Stage{st("a", storage.StageSucceeded, "")}, true, nil, storage.RunSucceeded, ""},
		{"pruned by a study", []storage.Stage{st("a", storage.StageCancelled, "")}, true, &storage.Prune{Evidence: "val_acc 0.8 at step 3, median 0.9"}, storage.RunPruned, "stopped early by its study's pruner: val_acc 0.8 at step 3, median 0.9"},
		{"pruned too late: it had succeeded", []storage.Stage{st("a", storage.StageSucceeded, "")}, true, &storage.Prune{Evidence: "x"}, storage.RunSucceeded, ""},
		{"a failure is a failure even when pruned", []storage.Stage{st("a", storage.StageFailed, "exited with code 1")}, true, &storage.Prune{Evidence: "x"}, storage.RunFailed, "stage a failed: exited with code 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := outcome(tt.stages, tt.cancelled, tt.prune)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantWhy, why)
		})
	}
}

func TestDefaultBackoff(t *testing.T) {
	got := []time.Duration{}
	for n := 1; n <= 7; n++ {
		got = append(got, DefaultBackoff(n))
	}
	require.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}, got)
}

func TestEnvName(t *testing.T) {
	require.Equal(t, "BATCH_SIZE", envName("batch-size"))
	require.Equal(t, "LR", envName("lr"))
	require.True(t, strings.HasPrefix(newRunID(time.Date(2026, 11, 29, 17, 57, 0, 0, time.UTC)), "20261129-175700-"))
}

// The shepherd places stages on the GPUs gpumon reports, and a stage that
// cannot be placed waits with the shepherd's reason in plain words.
func TestShepherdPlacesOnGPUsOrSaysWhy(t *testing.T) {
	h := newHarness(t)
	sim, err := gpumon.NewSimulated("1xA100-80GB", gpumon.SimOptions{Seed: 1})
	require.NoError(t, err)
	snap, err := sim.Snapshot(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 1)
	e := h.engine(func(o *Options) { o.GPUs = sim })
	h.drive(e)
	tm := parse(t, `
name: gpu
stages:
  - name: fits
    gpus: 1
    gpu_memory: 40GiB
    command: [sh, -c, 'echo "$CUDA_VISIBLE_DEVICES" > fits.txt']
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State)
	got, err := os.ReadFile(filepath.Join(r.Dir, "fits.txt"))
	require.NoError(t, err)
	require.Equal(t, snap.GPUs[0].UUID+"\n", string(got), "the stage sees exactly the GPU it was given")
}

// A stage asking for more GPUs, or more memory per GPU, than this machine
// has is refused at Submit with the shepherd's reason, and nothing is
// stored; one that fits only later (the GPU is busy now) is accepted.
func TestSubmitRefusesGPUNeedsThisMachineNeverHolds(t *testing.T) {
	h := newHarness(t)
	e := h.engine(func(o *Options) { o.GPUs = simulated(t, "2xA100-80GB") })
	tm := parse(t, `
name: gpu
stages:
  - name: prep
    command: ["true"]
  - name: train
    needs: [prep]
    gpus: 1
    gpu_memory: 40GiB
    command: ["true"]
`)
	three, huge, two := 3, int64(100*1024), 2
	for _, tt := range []struct {
		name  string
		needs Needs
		want  string
	}{
		{"more GPUs", Needs{GPUs: &three}, "stage train can never start on this machine: it needs 3 GPUs with 40 GiB each and this machine has 2 usable GPU(s), at most 80 GiB each. "},
		{"more memory per GPU", Needs{GPUMemoryMiB: huge}, "stage train can never start on this machine: it needs 1 GPU with 100 GiB and this machine has 2 usable GPU(s), at most 80 GiB each. "},
	} {
		_, err := e.Submit(context.Background(), RunSpec{Template: tm, Needs: tt.needs})
		require.ErrorContains(t, err, tt.want, tt.name)
		require.ErrorContains(t, err, "Ask for fewer GPUs or less memory per GPU", tt.name)
	}
	runs, err := h.store.ListRuns(context.Background(), storage.RunFilter{})
	require.NoError(t, err)
	require.Empty(t, runs, "nothing stored")
	entries, _ := os.ReadDir(filepath.Join(h.home, "runs"))
	require.Empty(t, entries, "no run folder left")

	_, err = e.Submit(context.Background(), RunSpec{Template: tm, Needs: Needs{GPUs: &two, GPUMemoryMiB: 80 * 1024}})
	require.NoError(t, err, "two whole GPUs fit this machine")
}

// A machine whose GPUs cannot be seen refuses nothing: a driver missing now
// may answer later, and the stage says why it waits.
func TestSubmitWithoutGPUsRefusesNothing(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	tm := parse(t, "name: gpu\nstages:\n  - name: train\n    gpus: 8\n    command: [\"true\"]\n")
	_, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
}

// The sentinel sees a NaN the moment it is printed; the template's answer
// decides what follows: a retry with a smaller learning rate, or a stop.
func TestSentinelActsOnAnomalies(t *testing.T) {
	const workload = `
params:
  lr: {type: float, default: 1, min: 0.0001, max: 10}
stages:
  - name: train
    command: [sh, -c, 'if [ "$NIUMA_PARAM_LR" = 1 ]; then echo "{\"step\": 1, \"loss\": NaN}"; sleep 30; fi; echo "{\"step\": 1, \"loss\": 0.5}"']
`
	for _, tt := range []struct {
		name, action string
		want         State
	}{
		{"retry with changed parameters", `{do: retry, set: {lr: "*0.1"}}`, Succeeded},
		{"stop", `{do: stop}`, Failed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			e := h.engine()
			h.drive(e)
			tm := parse(t, "name: nan\nsentinel:\n  nan: "+tt.action+"\n"+workload)
			info, err := e.Submit(context.Background(), RunSpec{Template: tm})
			require.NoError(t, err)
			r := waitDone(t, e, info.ID)
			require.Equal(t, tt.want, r.State, r.Error)

			anomalies, err := e.Anomalies(context.Background(), info.ID)
			require.NoError(t, err)
			require.NotEmpty(t, anomalies)
			require.Equal(t, "nan", anomalies[0].Kind)
			require.NotEmpty(t, anomalies[0].Fix, "an anomaly says what to do")
			require.NoError(t, e.Dismiss(context.Background(), info.ID, anomalies[0].ID))
			require.Error(t, e.Dismiss(context.Background(), info.ID, anomalies[0].ID+1000))
			after, err := e.Anomalies(context.Background(), info.ID)
			require.NoError(t, err)
			require.False(t, after[0].DismissedAt.IsZero(), "dismissed, and still in the record")
			train := r.Stages[0]
			if tt.want == Succeeded {
				require.Equal(t, 2, train.Attempts)
				require.Equal(t, 0.1, r.Params["lr"], "the retry ran with lr*0.1")
				params, err := os.ReadFile(filepath.Join(r.Dir, "params.json"))
				require.NoError(t, err)
				require.Contains(t, string(params), `"lr":0.1`)
			} else {
				require.Equal(t, 1, train.Attempts)
				require.Contains(t, train.Reason, "stopped by the sentinel")
			}
		})
	}
}

// waitHolding waits until stage a of a run has stored points metric points
// and written a/ready: it is running, and holds until a/go appears.
func waitHolding(t *testing.T, e *Engine, info RunInfo, points int, timeout time.Duration) {
	t.Helper()
	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	waitFor(t, ctx, e, sub, info.ID, func(RunInfo) bool {
		n, _ := e.MetricCount(context.Background(), info.ID)
		_, err := os.Stat(filepath.Join(info.Dir, "a", "ready"))
		return n == points && err == nil
	})
}
