package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/shepherd"
	"niuma/storage"
)

// These tests drive the live path: real local processes, placed by the
// shepherd on simulated GPUs and this engine's CPU slots.

// gateYAML is a stage that holds its place until the file named by GATE
// appears (a condition the test makes true), recording the devices it
// was given.
const gateYAML = `
name: gate
params:
  gate: {type: string, default: ""}
stages:
  - name: work
    gpus: 1
    gpu_memory: 20GiB
    command: [sh, -c, 'echo "$CUDA_VISIBLE_DEVICES" > work/devices; while [ ! -e "$NIUMA_PARAM_GATE" ]; do sleep 0.05; done']
`

// simulated returns a simulated GPU source for a spec.
func simulated(t *testing.T, spec string) *gpumon.Simulated {
	t.Helper()
	sim, err := gpumon.NewSimulated(spec, gpumon.SimOptions{Seed: 1})
	require.NoError(t, err)
	return sim
}

// until polls cond until it holds or the deadline passes.
func until(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stageOf(t *testing.T, e *Engine, id string) StageInfo {
	t.Helper()
	r, err := e.Run(context.Background(), id)
	require.NoError(t, err)
	return r.Stages[0]
}

func TestCPUSlotsHoldStagesWithTheirReason(t *testing.T) {
	h := newHarness(t)
	e := h.engine(func(o *Options) { o.Host = shepherd.Host{CPUMilli: 2000} })
	h.drive(e)
	gate := filepath.Join(t.TempDir(), "go")
	tm := parse(t, strings.Replace(strings.Replace(gateYAML, "    gpus: 1\n", "", 1), "    gpu_memory: 20GiB\n", "", 1))
	var ids []string
	for range 3 {
		info, err := e.Submit(context.Background(), RunSpec{Template: tm, Values: mustValues(t, tm, "gate", gate)})
		require.NoError(t, err)
		ids = append(ids, info.ID)
	}
	var waiting StageInfo
	until(t, 20*time.Second, "two stages running and one waiting for a CPU", func() bool {
		running := 0
		for _, id := range ids {
			s := stageOf(t, e, id)
			switch {
			case s.State == Running:
				running++
			case s.State == Queued && s.ReasonCode != "":
				waiting = s
			}
		}
		return running == 2 && waiting.ReasonCode != ""
	})
	require.Equal(t, string(shepherd.WaitCPU), waiting.ReasonCode, "the code is stored with the stage: %q", waiting.Reason)
	require.Equal(t, "waiting for a CPU: 2 of 2 in use; first in line", waiting.Reason)
	require.Equal(t, int64(1000), waiting.CPUMilli, "a stage that does not say asks for one CPU")

	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	for _, id := range ids {
		require.Equal(t, Succeeded, waitDone(t, e, id).State)
	}
}

func TestShareableRunsShareOneGPU(t *testing.T) {
	h := newHarness(t)
	sim := simulated(t, "1xA100-80GB")
	e := h.engine(func(o *Options) { o.GPUs = sim; o.Host = shepherd.Host{CPUMilli: 16000} })
	h.drive(e)
	gate := filepath.Join(t.TempDir(), "go")
	tm := parse(t, gateYAML)
	submit := func(share bool) string {
		info, err := e.Submit(context.Background(), RunSpec{Template: tm, Values: mustValues(t, tm, "gate", gate), Share: share})
		require.NoError(t, err)
		return info.ID
	}
	a, b := submit(true), submit(true)
	until(t, 20*time.Second, "both shareable runs running", func() bool {
		return stageOf(t, e, a).State == Running && stageOf(t, e, b).State == Running
	})
	c := submit(false)
	until(t, 20*time.Second, "the exclusive run waiting", func() bool { return stageOf(t, e, c).ReasonCode != "" })
	sc := stageOf(t, e, c)
	require.Equal(t, Queued, sc.State)
	require.Equal(t, string(shepherd.WaitGPUBusy), sc.ReasonCode, "reason: %s", sc.Reason)

	sa, sb := stageOf(t, e, a), stageOf(t, e, b)
	require.Len(t, sa.History, 1)
	require.Len(t, sb.History, 1)
	require.Equal(t, sa.History[0].GPUs, sb.History[0].GPUs, "both on the one GPU")
	snap, err := sim.Snapshot(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.GPUs[0].Processes, 2, "the GPU holds both")
	require.Equal(t, int64(40*1024), snap.GPUs[0].MemUsedMiB)

	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	for _, id := range []string{a, b, c} {
		require.Equal(t, Succeeded, waitDone(t, e, id).State)
	}
}

func TestMIGSliceIsPlacedAndItsGPUIsNot(t *testing.T) {
	h := newHarness(t)
	sim := simulated(t, "1xA100-80GB:mig=3g.40gb+2x2g.20gb")
	snap, err := sim.Snapshot(context.Background())
	require.NoError(t, err)
	gpu := snap.GPUs[0]
	require.Len(t, gpu.MIG, 3)
	e := h.engine(func(o *Options) { o.GPUs = sim; o.Host = shepherd.Host{CPUMilli: 16000} })
	h.drive(e)
	gate := filepath.Join(t.TempDir(), "go")
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	tm := parse(t, strings.Replace(gateYAML, "gpu_memory: 20GiB", "gpu_memory: 30GiB", 1))
	info, err := e.Submit(context.Background(), RunSpec{Template: tm, Values: mustValues(t, tm, "gate", gate)})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State)
	got, err := os.ReadFile(filepath.Join(r.Dir, "work", "devices"))
	require.NoError(t, err)
	require.Equal(t, gpu.MIG[0].UUID+"\n", string(got), "30 GiB fits only the 3g.40gb slice")
	require.Equal(t, []string{gpu.MIG[0].UUID}, r.Stages[0].History[0].GPUs)

	// 50 GiB would fit the physical GPU, which is never offered whole: the
	// slices are all this machine has, and Submit says so.
	big := 50 * 1024
	_, err = e.Submit(context.Background(), RunSpec{Template: tm, Values: mustValues(t, tm, "gate", gate),
		Needs: Needs{GPUMemoryMiB: int64(big)}})
	require.ErrorContains(t, err, "stage work can never start on this machine: it needs 1 GPU with 50 GiB and this machine has 3 usable GPU(s), at most 40 GiB each")
	runs, err := h.store.ListRuns(context.Background(), storage.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 1, "only the run that fitted is stored")
}

// spotYAML checkpoints on SIGTERM and, when resumed, checks that
// NIUMA_RESUME names the stage directory that kept its checkpoint.
const spotYAML = `
name: spot
stages:
  - name: train
    gpus: 1
    gpu_memory: 60GiB
    command: [sh, -c, 'if [ -n "$NIUMA_RESUME" ]; then cat "$NIUMA_RESUME/ckpt" > "$NIUMA_RESUME/resumed" && echo "$NIUMA_RESUME" >> "$NIUMA_RESUME/resumed"; exit 0; fi; trap "echo step-7 > train/ckpt; exit 143" TERM; touch train/started; while :; do sleep 0.05; done']
`

const urgentYAML = `
name: urgent
stages:
  - name: train
    gpus: 1
    gpu_memory: 60GiB
    command: [sh, -c, 'echo "$CUDA_VISIBLE_DEVICES" > train/devices']
`

func TestSpotRunIsPreemptedRecordedAndResumes(t *testing.T) {
	h := newHarness(t)
	sim := simulated(t, "1xA100-80GB")
	e := h.engine(func(o *Options) {
		o.GPUs = sim
		o.Host = shepherd.Host{CPUMilli: 16000}
		o.Policy = shepherd.Herd(shepherd.HerdOptions{PreemptAfter: time.Nanosecond})
	})
	h.drive(e)
	spot, err := e.Submit(context.Background(), RunSpec{Template: parse(t, spotYAML), Spot: true})
	require.NoError(t, err)
	require.True(t, spot.Spot)
	until(t, 20*time.Second, "the spot run started", func() bool {
		_, err := os.Stat(filepath.Join(spot.Dir, "train", "started"))
		return err == nil
	})
	urgent, err := e.Submit(context.Background(), RunSpec{Template: parse(t, urgentYAML), Priority: 1})
	require.NoError(t, err)

	u := waitDone(t, e, urgent.ID)
	require.Equal(t, Succeeded, u.State)
	s := waitDone(t, e, spot.ID)
	require.Equal(t, Succeeded, s.State, "the spot run resumed and finished: %+v", s.Stages)
	st := s.Stages[0]
	require.Len(t, st.History, 2)
	require.Equal(t, storage.AttemptPreempted, st.History[0].State, "recorded as preempted, not failed: %s", st.History[0].Reason)
	require.Contains(t, st.History[0].Reason, "preempted for run "+urgent.ID)
	require.Equal(t, storage.AttemptSucceeded, st.History[1].State)
	require.Equal(t, 2, st.MaxAttempts, "the template allows no retries: the one attempt it allows, and the free one the preemption gave")
	require.True(t, st.History[1].StartedAt.After(u.Stages[0].StartedAt), "it resumed after the urgent run took its GPU")

	resumed, err := os.ReadFile(filepath.Join(spot.Dir, "train", "resumed"))
	require.NoError(t, err)
	require.Equal(t, "step-7\n"+filepath.Join(spot.Dir, "train")+"\n", string(resumed),
		"the resumed attempt read its checkpoint from the stage directory NIUMA_RESUME names")
}

// mustValues resolves CLI-style parameter values.
func mustValues(t *testing.T, tm *template.Template, kv ...string) template.Values {
	t.Helper()
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	v, err := tm.Resolve(m)
	require.NoError(t, err)
	return v
}

// largeYAML asks for most of both GPUs of the machine.
const largeYAML = `
name: large
params:
  gate: {type: string, default: ""}
stages:
  - name: work
    gpus: 2
    gpu_memory: 70GiB
    command: [sh, -c, 'while [ ! -e "$NIUMA_PARAM_GATE" ]; do sleep 0.05; done']
`

// A large run waiting for GPUs that a long run holds must not hold up the
// many small runs that fit beside it: they run and finish while it waits,
// whether or not the archive has earlier runs to estimate them by, under
// each policy a user may choose (settings.yaml). Once the GPUs free up, the
// large run runs too. (Herd with HerdOptions.Reserve fails this: it holds
// the free GPU for the large run while the long one runs.)
func TestSmallRunsAreNotBlockedBehindALargeOne(t *testing.T) {
	for _, name := range shepherd.Policies {
		policy, err := shepherd.ByName(name)
		require.NoError(t, err)
		t.Run(name, func(t *testing.T) { smallAndLarge(t, policy) })
	}
}

func smallAndLarge(t *testing.T, policy shepherd.Policy) {
	h := newHarness(t)
	sim := simulated(t, "2xA100-80GB")
	e := h.engine(func(o *Options) {
		o.GPUs = sim
		o.Host = shepherd.Host{CPUMilli: 16000}
		o.Policy = policy
	})
	h.drive(e)
	small, large := parse(t, gateYAML), parse(t, largeYAML)
	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.WriteFile(open, nil, 0o644))

	for _, history := range []bool{false, true} {
		t.Run(map[bool]string{false: "no history", true: "with history"}[history], func(t *testing.T) {
			ctx := context.Background()
			held := filepath.Join(t.TempDir(), "held")
			blocker, err := e.Submit(ctx, RunSpec{Template: small, Values: mustValues(t, small, "gate", held)})
			require.NoError(t, err)
			until(t, 20*time.Second, "the long run holding a GPU", func() bool { return stageOf(t, e, blocker.ID).State == Running })
			// The large run is the more urgent: first in line.
			big, err := e.Submit(ctx, RunSpec{Template: large, Values: mustValues(t, large, "gate", open), Priority: 1})
			require.NoError(t, err)
			until(t, 20*time.Second, "the large run waiting", func() bool { return stageOf(t, e, big.ID).ReasonCode != "" })
			if history {
				eta, err := e.ETA(ctx, mustRun(t, e, big.ID))
				require.NoError(t, err)
				require.True(t, eta.Known, "the archive has an earlier large run")
				require.Contains(t, eta.String(), "from 1 earlier run")
			}
			var smalls []string
			for range 6 {
				info, err := e.Submit(ctx, RunSpec{Template: small, Values: mustValues(t, small, "gate", open)})
				require.NoError(t, err)
				smalls = append(smalls, info.ID)
			}
			for _, id := range smalls {
				require.Equal(t, Succeeded, waitDone(t, e, id).State)
			}
			require.Equal(t, Running, stageOf(t, e, blocker.ID).State, "the long run still holds its GPU")
			wait := stageOf(t, e, big.ID)
			require.Equal(t, Queued, wait.State)
			require.NotEmpty(t, wait.ReasonCode, "reason: %s", wait.Reason)

			require.NoError(t, os.WriteFile(held, nil, 0o644))
			require.Equal(t, Succeeded, waitDone(t, e, blocker.ID).State)
			require.Equal(t, Succeeded, waitDone(t, e, big.ID).State, "the large run runs once the GPUs are free")
		})
	}
}

func mustRun(t *testing.T, e *Engine, id string) RunInfo {
	t.Helper()
	r, err := e.Run(context.Background(), id)
	require.NoError(t, err)
	return r
}

// A preemption is stored, not only known to the engine that made it: the
// next engine resumes the preempted stage (NIUMA_RESUME set) without
// spending a retry, and places it by what the stage holds, adopted.
func TestPreemptedStageResumesAfterARestart(t *testing.T) {
	h := newHarness(t)
	sim := simulated(t, "1xA100-80GB")
	opts := func(o *Options) {
		o.GPUs = sim
		o.Host = shepherd.Host{CPUMilli: 16000}
		o.Policy = shepherd.Herd(shepherd.HerdOptions{PreemptAfter: time.Nanosecond})
	}
	first := h.engine(opts)
	stopFirst := h.drive(first)
	spot, err := first.Submit(context.Background(), RunSpec{Template: parse(t, spotYAML), Spot: true})
	require.NoError(t, err)
	until(t, 20*time.Second, "the spot run started", func() bool {
		_, err := os.Stat(filepath.Join(spot.Dir, "train", "started"))
		return err == nil
	})
	// The urgent run holds the GPU until the gate opens.
	gate := filepath.Join(t.TempDir(), "go")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	urgentTm := parse(t, gateYAML)
	urgent, err := first.Submit(context.Background(), RunSpec{Template: urgentTm, Values: mustValues(t, urgentTm, "gate", gate),
		Priority: 1, Needs: Needs{GPUMemoryMiB: 60 * 1024}})
	require.NoError(t, err)
	until(t, 20*time.Second, "the spot run preempted and the urgent one running", func() bool {
		s := stageOf(t, first, spot.ID)
		return s.State == Queued && len(s.History) == 1 && stageOf(t, first, urgent.ID).State == Running
	})
	s := stageOf(t, first, spot.ID)
	require.Equal(t, storage.AttemptPreempted, s.History[0].State)
	until(t, 20*time.Second, "the urgent attempt's handle recorded, for the next engine to adopt", func() bool {
		as, err := h.store.Attempts(context.Background(), urgent.ID)
		require.NoError(t, err)
		return len(as) == 1 && as[0].Handle != ""
	})
	stopFirst()

	second := h.engine(opts)
	h.drive(second)
	// The adopted urgent run still holds the GPU: the spot run waits.
	until(t, 20*time.Second, "the spot run waiting for the adopted run's GPU", func() bool {
		s := stageOf(t, second, spot.ID)
		return s.ReasonCode != "" && s.ReasonCode != WaitPreempted
	})
	require.Equal(t, Queued, stageOf(t, second, spot.ID).State)
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	ur := waitDone(t, second, urgent.ID)
	require.Equal(t, Succeeded, ur.State, "%+v", ur.Stages[0])
	r := waitDone(t, second, spot.ID)
	require.Equal(t, Succeeded, r.State, "resumed without spending a retry: %+v", r.Stages[0])
	require.Len(t, r.Stages[0].History, 2)
	resumed, err := os.ReadFile(filepath.Join(spot.Dir, "train", "resumed"))
	require.NoError(t, err)
	require.Equal(t, "step-7\n"+filepath.Join(spot.Dir, "train")+"\n", string(resumed))
}
