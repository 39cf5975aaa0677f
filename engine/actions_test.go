package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/gpumon"
	"niuma/sentinel"
)

// holdUntilRetried runs until it is stopped on its first attempt and
// succeeds at once on any later one, so a retry is visible as attempt 2.
const holdUntilRetried = `
params:
  batch: {type: int, default: 64, min: 1, max: 1024}
stages:
  - name: train
    gpus: 1
    gpu_memory: 10GiB
    command: [sh, -c, 'if [ "$NIUMA_ATTEMPT" -ge 2 ]; then echo "{\"step\": 1, \"loss\": 0.5}"; exit 0; fi; for i in $(seq 1 600); do [ -e release ] && exit 0; sleep 0.1; done']
`

// sentinelEngine is an engine on one simulated GPU whose sentinel judges
// quickly (short windows), for tests that feed it GPU snapshots.
func sentinelEngine(t *testing.T, h *harness, spec string) *Engine {
	sim, err := gpumon.NewSimulated(spec, gpumon.SimOptions{Seed: 1})
	require.NoError(t, err)
	e := h.engine(func(o *Options) { o.GPUs = sim })
	e.sent = sentinel.New(sentinel.Config{HotSamples: 1, LeakWindow: 8, IdleAfter: time.Second, StallWindow: 16,
		QueueAfter: 300 * time.Millisecond})
	return e
}

// running waits until the run's first stage runs and returns the GPU it
// holds.
func running(t *testing.T, e *Engine, id string) string {
	t.Helper()
	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := waitFor(t, ctx, e, sub, id, func(r RunInfo) bool {
		return r.Stages[0].State == Running && len(r.Stages[0].History) > 0 && len(r.Stages[0].History[0].GPUs) == 1
	})
	return r.Stages[0].History[0].GPUs[0]
}

// gpuSnap is a GPU reading with the given runs' stages holding memory.
func gpuSnap(at time.Time, uuid string, util, temp float64, memMiB int64, xids []uint64, runs ...string) gpumon.Snapshot {
	slow := 87.0
	g := gpumon.GPU{UUID: uuid, MemTotalMiB: 81920, MemUsedMiB: memMiB * int64(len(runs)), UtilPercent: &util,
		TempC: &temp, TempSlowdownC: &slow, XIDs: xids, Healthy: true}
	for _, r := range runs {
		g.Processes = append(g.Processes, gpumon.Process{PID: 1, MemMiB: memMiB, Owner: &gpumon.Owner{RunID: r, Stage: "train"}})
	}
	return gpumon.Snapshot{Source: gpumon.SourceSimulated, Simulated: true, At: at, GPUs: []gpumon.GPU{g}}
}

// Every action a template can give a GPU anomaly changes what happens to
// the run on that GPU: stop fails it, retry starts attempt 2 (with the
// changed parameters), notify tells the user and lets it go on; flag only
// records it.
func TestSentinelActsOnGPUAnomalies(t *testing.T) {
	base := time.Now()
	type feed func(uuid, run string) []gpumon.Snapshot
	hot := func(uuid, run string) []gpumon.Snapshot {
		return []gpumon.Snapshot{gpuSnap(base, uuid, 95, 86, 10240, nil, run)}
	}
	xid := func(uuid, run string) []gpumon.Snapshot {
		return []gpumon.Snapshot{gpuSnap(base, uuid, 95, 60, 10240, []uint64{79}, run)}
	}
	leak := func(uuid, run string) []gpumon.Snapshot {
		var out []gpumon.Snapshot
		for i := range 8 {
			out = append(out, gpuSnap(base.Add(time.Duration(i)*time.Second), uuid, 95, 60, 10240+int64(100*i), nil, run))
		}
		return out
	}
	idle := func(uuid, run string) []gpumon.Snapshot {
		var out []gpumon.Snapshot
		for i := range 3 {
			out = append(out, gpuSnap(base.Add(time.Duration(i)*time.Second), uuid, 0, 40, 10240, nil, run))
		}
		return out
	}
	stall := func(uuid, run string) []gpumon.Snapshot {
		var out []gpumon.Snapshot
		for i := range 16 {
			u := 95.0
			if i%4 >= 2 {
				u = 0
			}
			out = append(out, gpuSnap(base.Add(time.Duration(i)*time.Second), uuid, u, 60, 10240, nil, run))
		}
		return out
	}
	tests := []struct {
		name, kind, action string
		feed               feed
		want               State
		attempts           int
		batch              float64
		note               string // the action event's kind
	}{
		{"overheating stops the run", "overheating", "{do: stop}", hot, Failed, 1, 64, "action_stop"},
		{"an XID retries the attempt", "gpu_health", "{do: retry}", xid, Succeeded, 2, 64, "action_retry"},
		{"a leak retries with a smaller batch", "memory_leak", `{do: retry, set: {batch: "/2"}}`, leak, Succeeded, 2, 32, "action_retry"},
		{"an idle GPU stops the run", "idle_gpu", "{do: stop}", idle, Failed, 1, 64, "action_stop"},
		{"a data stall notifies", "data_stall", "{do: notify}", stall, Succeeded, 1, 64, "action_notify"},
		{"a flagged overheating changes nothing", "overheating", "{do: flag}", hot, Succeeded, 1, 64, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			e := sentinelEngine(t, h, "1xA100-80GB")
			h.drive(e)
			tm := parse(t, "name: gpu-act\nsentinel:\n  "+tt.kind+": "+tt.action+"\n"+holdUntilRetried)
			info, err := e.Submit(context.Background(), RunSpec{Template: tm})
			require.NoError(t, err)
			uuid := running(t, e, info.ID)
			sub := e.Subscribe(1024)
			defer sub.Close()
			for _, s := range tt.feed(uuid, info.ID) {
				e.ObserveGPUs(context.Background(), s)
			}
			if tt.want == Succeeded && tt.attempts == 1 {
				// Nothing stops it: let it finish, once the anomaly is in.
				require.Eventually(t, func() bool {
					// A GPU's own anomaly is machine-wide (no run); one of a
					// run's use of it is the run's.
					return hasEvent(e, info.ID, tt.kind) || hasEvent(e, "", tt.kind)
				}, 10*time.Second, 20*time.Millisecond)
				if tt.note != "" {
					require.Eventually(t, func() bool { return hasEvent(e, info.ID, tt.note) }, 10*time.Second, 20*time.Millisecond)
				}
				require.NoError(t, os.WriteFile(filepath.Join(info.Dir, "release"), nil, 0o644))
			}
			r := waitDone(t, e, info.ID)
			require.Equal(t, tt.want, r.State, r.Error)
			require.Equal(t, tt.attempts, r.Stages[0].Attempts)
			require.EqualValues(t, tt.batch, r.Params["batch"])
			if tt.want == Failed {
				require.Contains(t, r.Stages[0].Reason, "stopped by the sentinel")
			}
			if tt.note != "" {
				require.True(t, hasEvent(e, info.ID, tt.note), "the record says what was done")
			}
			if tt.note == "action_notify" {
				require.True(t, sawEvent(sub, Notified, info.ID), "subscribers are told to notify")
			}
		})
	}
}

// Overheating is the GPU's, not one run's: it acts on the runs on that
// GPU, each by its own template, and on no run elsewhere.
func TestGPUAnomalyActsOnTheRunsOnThatGPU(t *testing.T) {
	h := newHarness(t)
	e := sentinelEngine(t, h, "2xA100-80GB")
	h.drive(e)
	stop := parse(t, "name: stop-when-hot\nsentinel:\n  overheating: {do: stop}\n"+holdUntilRetried)
	hot, err := e.Submit(context.Background(), RunSpec{Template: stop})
	require.NoError(t, err)
	hotGPU := running(t, e, hot.ID)
	cool, err := e.Submit(context.Background(), RunSpec{Template: stop})
	require.NoError(t, err)
	coolGPU := running(t, e, cool.ID)
	require.NotEqual(t, hotGPU, coolGPU)

	e.ObserveGPUs(context.Background(), gpuSnap(time.Now(), hotGPU, 95, 86, 10240, nil, hot.ID))
	r := waitDone(t, e, hot.ID)
	require.Equal(t, Failed, r.State)
	require.Contains(t, r.Stages[0].Reason, "stopped by the sentinel: GPU "+hotGPU+" is at 86 °C")
	require.Contains(t, r.Stages[0].Reason, "(A simulated GPU: pretend telemetry, not a measurement.)")
	require.True(t, hasEvent(e, hot.ID, "action_stop"), "the run's record says why it was stopped")

	other, err := e.Run(context.Background(), cool.ID)
	require.NoError(t, err)
	require.Equal(t, Running, other.State, "the run on the other GPU goes on")
	require.NoError(t, os.WriteFile(filepath.Join(other.Dir, "release"), nil, 0o644))
	require.Equal(t, Succeeded, waitDone(t, e, cool.ID).State)
}

// A queue anomaly acts on the waiting run: stop fails it with the reason,
// notify tells the user and it keeps waiting. The run that never fits was
// submitted by a process that sees no GPU (a CLI on a machine whose driver
// it cannot load refuses nothing); the engine that drives it sees the GPU.
func TestSentinelActsOnAStuckQueue(t *testing.T) {
	for _, tt := range []struct {
		action string
		want   State
	}{{"{do: stop}", Failed}, {"{do: notify}", Queued}} {
		t.Run(tt.action, func(t *testing.T) {
			h := newHarness(t)
			e := sentinelEngine(t, h, "1xA100-80GB")
			h.drive(e)
			tm := parse(t, `name: stuck
sentinel:
  queue_stuck: `+tt.action+`
stages:
  - name: train
    gpus: 1
    gpu_memory: 100GiB
    command: ["true"]
`)
			info, err := h.engine().Submit(context.Background(), RunSpec{Template: tm})
			require.NoError(t, err)
			sub := e.Subscribe(1024)
			defer sub.Close()
			require.Eventually(t, func() bool { return hasEvent(e, info.ID, "queue_stuck") }, 20*time.Second, 20*time.Millisecond)
			as, err := e.Anomalies(context.Background(), info.ID)
			require.NoError(t, err)
			a := as[0]
			require.Contains(t, a.Message, "this machine can never hold it")
			require.Contains(t, a.Fix, "No GPU of this machine can ever hold it")
			require.Contains(t, a.Evidence, `"largest_free_mib":81920`, "the largest free memory is the real figure")
			if tt.want == Failed {
				r := waitDone(t, e, info.ID)
				require.Equal(t, Failed, r.State)
				require.Contains(t, r.Stages[0].Reason, "stopped by the sentinel: Stage train has waited")
				return
			}
			require.Eventually(t, func() bool { return hasEvent(e, info.ID, "action_notify") }, 10*time.Second, 20*time.Millisecond)
			require.True(t, sawEvent(sub, Notified, info.ID))
			r, err := e.Run(context.Background(), info.ID)
			require.NoError(t, err)
			require.Equal(t, Queued, r.State, "notified, still waiting")
			require.NoError(t, e.Cancel(context.Background(), info.ID))
			waitDone(t, e, info.ID)
		})
	}
}

// The stuck-in-queue figures agree with the shepherd's reason: a stage
// that waits for a GPU another run holds is told the largest free memory
// there is, not 0, and is not told memory is short when it is not.
func TestQueueStuckFiguresAreTheShepherds(t *testing.T) {
	h := newHarness(t)
	e := sentinelEngine(t, h, "1xA100-80GB")
	h.drive(e)
	first, err := e.Submit(context.Background(), RunSpec{Template: parse(t, "name: holder\n"+holdUntilRetried)})
	require.NoError(t, err)
	running(t, e, first.ID)
	// 60 GiB fits the free 70 GiB, but herd keeps 2 runs to a GPU only when
	// both may share: this one asks for the GPU to itself (exclusive).
	second, err := e.Submit(context.Background(), RunSpec{Template: parse(t, `name: waiter
stages:
  - name: train
    gpus: 1
    gpu_memory: 75GiB
    command: ["true"]
`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return hasEvent(e, second.ID, "queue_stuck") }, 20*time.Second, 20*time.Millisecond)
	as, err := e.Anomalies(context.Background(), second.ID)
	require.NoError(t, err)
	a := as[0]
	require.Contains(t, a.Evidence, `"largest_free_mib":71680`, "80 GiB less the holder's 10 GiB: %s", a.Evidence)
	require.Contains(t, a.Fix, "the stage needs 75 GiB per GPU and the largest free is 70 GiB")
	require.NotContains(t, a.Message, "0 MiB")
	require.NoError(t, os.WriteFile(filepath.Join(first.Dir, "release"), nil, 0o644))
	require.Equal(t, Succeeded, waitDone(t, e, second.ID).State)
}

func hasEvent(e *Engine, runID, kind string) bool {
	as, err := e.Anomalies(context.Background(), runID)
	if err != nil {
		return false
	}
	for _, a := range as {
		if a.Kind == kind {
			return true
		}
	}
	return false
}

// sawEvent drains what a subscription has received, looking for kind.
func sawEvent(sub *Subscription, kind EventKind, runID string) bool {
	for {
		select {
		case ev := <-sub.C:
			if ev.Kind == kind && ev.RunID == runID && strings.Contains(ev.Reason, runID) {
				return true
			}
		default:
			return false
		}
	}
}
