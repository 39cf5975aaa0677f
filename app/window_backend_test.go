//go:build !nowindow

package app

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/ui"
)

// The window's launch path, on the real engine with simulated GPUs: a run
// submitted through the window's backend with the Resources step's choices
// is stored with those needs (`niuma show` says so), and the board's ETA
// comes from the template's earlier runs once there are some.
func TestWindowBackendSubmitsWithResourcesAndGivesTheETA(t *testing.T) {
	home := tempHome(t)
	t.Setenv("NIUMA_SIMULATE_GPUS", "2xA100-80GB")
	path := writeTemplate(t, `name: res
params:
  n: {type: int, default: 1, min: 1, max: 99}
sentinel:
  nan: {do: retry, set: {n: "*2"}}
stages:
  - name: prep
    command: [sh, -c, 'sleep 0.2']
  - name: train
    needs: [prep]
    gpus: 1
    gpu_memory: 10GiB
    command: [sh, -c, 'sleep 0.2']
`)
	s, err := open(io.Discard)
	require.NoError(t, err)
	defer s.close()
	var b ui.Backend = windowBackend{Engine: s.engine, store: s.store, home: s.home}
	rb, ok := b.(interface {
		SubmitWithResources(context.Context, engine.RunSpec, ui.Resources) (engine.RunInfo, error)
	})
	require.True(t, ok, "the window's backend takes a run's own resources")
	eb, ok := b.(interface {
		RunETA(context.Context, string) (engine.ETA, error)
	})
	require.True(t, ok, "the window's backend gives the board its ETAs")
	tm, err := loadTemplate(home, path)
	require.NoError(t, err)
	ctx := context.Background()

	// Before any run of the template has finished, nothing tells how long
	// one takes.
	first, err := rb.SubmitWithResources(ctx, engine.RunSpec{Template: tm}, ui.Resources{Spot: true})
	require.NoError(t, err)
	est, err := eb.RunETA(ctx, first.ID)
	require.NoError(t, err)
	require.False(t, est.Known, "no history: no ETA (%v)", est)
	require.NoError(t, s.engine.Cancel(ctx, first.ID))

	for _, n := range []string{"2", "3", "4"} {
		code, _, errOut := niuma(t, "run", path, "--set", "n="+n, "--wait")
		require.Equal(t, 0, code, errOut)
	}

	res := ui.Resources{GPUs: 2, UseGPUs: true, GPUMemMiB: 20 * 1024, CPUMilli: 1500, Spot: true, Share: true, FlagOnly: true}
	info, err := rb.SubmitWithResources(ctx, engine.RunSpec{Template: tm, Values: map[string]any{"n": int64(9)}}, res)
	require.NoError(t, err)
	require.Zero(t, tm.Stages[0].CPUMilli, "the template the window holds is not changed")

	code, out, errOut := niuma(t, "show", info.ID, "--json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Spot, Share bool
		FlagOnly    bool `json:"flag_only"`
		ETA         string
		Stages      []struct {
			Name         string
			GPUs         int
			GPUMemoryMiB int64 `json:"gpu_memory_mib"`
			CPUMilli     int64 `json:"cpu_milli"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.True(t, got.Spot)
	require.True(t, got.Share)
	require.True(t, got.FlagOnly)
	require.Len(t, got.Stages, 2)
	require.Equal(t, "prep", got.Stages[0].Name)
	require.Equal(t, 0, got.Stages[0].GPUs, "GPUs go to the stage that uses them")
	require.Equal(t, int64(1500), got.Stages[0].CPUMilli, "CPUs to every stage")
	require.Equal(t, "train", got.Stages[1].Name)
	require.Equal(t, 2, got.Stages[1].GPUs)
	require.Equal(t, int64(20*1024), got.Stages[1].GPUMemoryMiB)
	require.Equal(t, int64(1500), got.Stages[1].CPUMilli)
	require.Regexp(t, `^ETA [0-9]+ s, from 3 earlier runs \(unlike them: n 9, theirs 2–4\)$`, got.ETA, "n 9 is past twice the earlier runs' 2–4")

	code, out, errOut = niuma(t, "show", info.ID)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "spot (may be preempted)   share (may share a GPU)   sentinel only flags (no retry or stop)")

	est, err = eb.RunETA(ctx, info.ID)
	require.NoError(t, err)
	require.True(t, est.Known)
	require.Equal(t, 3, est.Runs, "learnt from the three earlier runs")
	require.Greater(t, est.Left, 200*time.Millisecond, "two stages of about 0.2 s each still to run")
	require.Less(t, est.Left, 5*time.Second)
	require.LessOrEqual(t, est.Low, est.Left)
	require.GreaterOrEqual(t, est.High, est.Left)
	require.Regexp(t, `^[0-9]+ s, from 3 earlier runs \(unlike them: n 9, theirs 2–4\)$`, est.Words(), "as the board writes it after \"ETA \"")

	// The user's estimate says it for the stage it is given to.
	withEst, err := rb.SubmitWithResources(ctx, engine.RunSpec{Template: tm, Values: map[string]any{"n": int64(8)}}, ui.Resources{Estimate: 2 * time.Hour})
	require.NoError(t, err)
	est, err = eb.RunETA(ctx, withEst.ID)
	require.NoError(t, err)
	require.Greater(t, est.Left, 2*time.Hour)
	require.Regexp(t, `^2\.[0-9] h, from 3 earlier runs and the estimates given$`, est.Words())

	// What this machine can never hold is refused, and nothing is stored.
	before := runDirs(t, home)
	_, err = rb.SubmitWithResources(ctx, engine.RunSpec{Template: tm}, ui.Resources{GPUs: 3, UseGPUs: true})
	require.ErrorContains(t, err, "stage train can never start on this machine: it needs 3 GPUs with 10 GiB each and this machine has 2 usable GPU(s), at most 80 GiB each. Ask for fewer GPUs")
	_, err = rb.SubmitWithResources(ctx, engine.RunSpec{Template: tm}, ui.Resources{GPUMemMiB: 100 * 1024})
	require.ErrorContains(t, err, "it needs 1 GPU with 100 GiB and this machine has 2 usable GPU(s)")
	require.Equal(t, before, runDirs(t, home), "nothing stored")

	// The archive's study view and the launched-vs-ran values reach the
	// window through the same backend.
	_, ok = b.(interface {
		Studies(context.Context) ([]ui.StudyInfo, error)
	})
	require.True(t, ok, "the window's backend lists the studies")
	_, ok = b.(interface {
		LaunchedParams(context.Context, string) (map[string]any, error)
		AttemptParams(context.Context, string, string) (map[int]map[string]any, error)
	})
	require.True(t, ok, "the window's backend says what a run was launched with")
}

// The archive's study view lists a study `niuma tune` ran, with its
// progress, from the window's backend.
func TestWindowBackendListsStudies(t *testing.T) {
	tempHome(t)
	path := writeTemplate(t, `name: quick
objective: {metric: loss, goal: min}
params:
  x: {type: float, default: 0.5, min: 0, max: 1}
tune:
  search: [x]
stages:
  - name: train
    command: [sh, -c, 'echo "{\"step\": 1, \"loss\": ${params.x}}"']
`)
	code, out, errOut := niuma(t, "tune", path, "--budget", "3", "--parallel", "1", "--wait")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	s, err := open(io.Discard)
	require.NoError(t, err)
	defer s.close()
	studies, err := windowBackend{Engine: s.engine, store: s.store, home: s.home}.Studies(context.Background())
	require.NoError(t, err)
	require.Len(t, studies, 1)
	st := studies[0]
	require.Equal(t, "quick", st.Template)
	require.Equal(t, 3, st.Budget)
	require.Equal(t, 3, st.Done+st.Pruned, "every trial ended: %+v", st)
	require.True(t, st.HasBest)
	require.LessOrEqual(t, st.Best, 0.5, "at least as good as the default")
}

// The window's backend gives the run view each stage's stored host use
// (ui reads it through an optional interface: a missing method would
// silently show nothing).
var _ interface {
	HostUsage(ctx context.Context, runID string) ([]engine.HostUsage, error)
} = windowBackend{}
