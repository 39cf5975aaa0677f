package ui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/gpumon"
)

// simSnapshot is a real simulated source's snapshot with the running run
// r1 on GPU 0.
func simSnapshot(t testing.TB, spec string) gpumon.Snapshot {
	t.Helper()
	sim, err := gpumon.NewSimulated(spec, gpumon.SimOptions{Seed: 1})
	require.NoError(t, err)
	first, err := sim.Snapshot(context.Background())
	require.NoError(t, err)
	sim.Assign(first.GPUs[0].UUID, "r1/train", 20*1024)
	snap, err := sim.Snapshot(context.Background())
	require.NoError(t, err)
	return snap
}

func newTestBoard(t *testing.T, b *fakeBackend) *Board {
	t.Helper()
	newTestApp(t)
	v := NewBoard(b)
	w := test.NewWindow(v.Content())
	w.Resize(fyne.NewSize(1100, 700))
	t.Cleanup(w.Close)
	return v
}

func boardRuns(now time.Time) []engine.RunInfo {
	running := stages(engine.Succeeded, engine.Running, engine.Queued, engine.Queued)
	waiting := stages(engine.Queued, engine.Queued)
	waiting[0].Reason = "needs 1 GPU with 70 GiB free; the most free is 60 GiB on GPU 0"
	waiting[1].Reason = "waiting for preprocess"
	return []engine.RunInfo{
		{ID: "r1", Template: "digits-mlp", State: engine.Running, CreatedAt: now.Add(-time.Minute), StartedAt: now.Add(-42 * time.Second), Stages: running},
		{ID: "r2", Template: "big-llm", State: engine.Queued, CreatedAt: now.Add(-10 * time.Second), Stages: waiting},
		{ID: "r0", Template: "digits-mlp", State: engine.Succeeded, CreatedAt: now.Add(-time.Hour), Stages: stages(engine.Succeeded)},
	}
}

func TestBoardShowsSimulatedGPUsAndTheQueue(t *testing.T) {
	b := &fakeBackend{snap: simSnapshot(t, "2xA100-80GB"), runs: boardRuns(time.Now())}
	v := newTestBoard(t, b)
	v.Reload(context.Background())

	require.Len(t, v.cards.Objects, 2)
	require.True(t, v.views[0].sim.Visible(), "a simulated GPU is tagged")
	card := strings.Join(texts(v.views[0].root), "\n")
	require.Contains(t, card, "GPU 0 · NVIDIA A100")
	require.Contains(t, card, "on it: r1/train")
	require.Contains(t, card, "simulated")
	require.Equal(t, "mem 20.0 / 80 GiB", v.views[0].memT)
	require.Contains(t, strings.Join(texts(v.views[1].root), "\n"), "idle")
	require.False(t, v.empty.Visible())

	require.Equal(t, 2, v.list.Length(), "finished runs stay in the archive")
	queue := strings.Join(texts(v.list), "\n")
	require.Contains(t, queue, "waiting — preprocess: needs 1 GPU with 70 GiB free; the most free is 60 GiB on GPU 0")
	require.Contains(t, queue, "running 42", "elapsed time")
	require.Contains(t, queue, "val_acc 0.973")
	require.Contains(t, queue, "⚠ 1 anomaly", "the running run's anomaly is a badge")
	require.Equal(t, "1 running · 1 waiting", v.counts.Text)
}

func TestBoardWithoutGPUsSaysWhyAndHowToSimulate(t *testing.T) {
	b := &fakeBackend{snap: gpumon.Snapshot{Source: gpumon.SourceNone, Reason: "NVML is not available: libnvidia-ml.so.1 not found"}}
	v := newTestBoard(t, b)
	v.Reload(context.Background())

	require.True(t, v.empty.Visible())
	require.False(t, v.cards.Visible())
	all := strings.Join(texts(v.empty), "\n")
	require.Contains(t, all, "libnvidia-ml.so.1 not found")
	require.Contains(t, all, "NIUMA_SIMULATE_GPUS=")
	require.True(t, v.noRuns.Visible())
}

func TestBoardOpensAPickedRun(t *testing.T) {
	b := &fakeBackend{snap: simSnapshot(t, "1xA100-80GB"), runs: boardRuns(time.Now())}
	v := newTestBoard(t, b)
	var opened string
	v.OnOpen = func(id string) { opened = id }
	v.Reload(context.Background())
	v.list.Select(1)
	require.Equal(t, "r2", opened)
}

func TestWaitReason(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		run  engine.RunInfo
		want string
	}{
		{"the shepherd's reason wins over a dependency", engine.RunInfo{State: engine.Queued, Stages: []engine.StageInfo{
			{Name: "a", State: engine.Queued, Reason: "waiting for b"},
			{Name: "b", State: engine.Queued, Reason: "no GPU free", ReasonCode: "gpu_busy"}}}, "b: no GPU free"},
		{"a CPU slot is the shepherd's reason too", engine.RunInfo{State: engine.Queued, Stages: []engine.StageInfo{
			{Name: "a", State: engine.Queued, Reason: "waiting for b"},
			{Name: "b", State: engine.Queued, Reason: "waiting for a CPU: 2 of 2 in use; first in line", ReasonCode: "cpu"}}},
			"b: waiting for a CPU: 2 of 2 in use; first in line"},
		{"no reason yet", engine.RunInfo{State: engine.Queued, CreatedAt: now.Add(-3 * time.Second),
			Stages: []engine.StageInfo{{Name: "a", State: engine.Queued}}}, "queued 3s ago"},
		{"a running run with nothing waiting", engine.RunInfo{State: engine.Running,
			Stages: []engine.StageInfo{{Name: "a", State: engine.Running}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Equal(t, tt.want, waitReason(tt.run, now)) })
	}
}

// BenchmarkBoardRefresh is one board refresh — read the fake engine, build
// the model, update the widgets — with 8 simulated GPUs and 200 active runs
// (half running, half waiting).
func BenchmarkBoardRefresh(b *testing.B) {
	newTestApp(b).Settings().SetTheme(NewTheme())
	now := time.Now()
	var runs []engine.RunInfo
	for i := range 200 {
		r := engine.RunInfo{ID: fmt.Sprintf("run-%03d", i), Template: "digits-mlp", CreatedAt: now, StartedAt: now.Add(-time.Minute)}
		if i%2 == 0 {
			r.State, r.Stages = engine.Running, stages(engine.Succeeded, engine.Running, engine.Queued, engine.Queued)
		} else {
			r.State, r.Stages = engine.Queued, stages(engine.Queued, engine.Queued, engine.Queued, engine.Queued)
			r.Stages[0].Reason = "needs 1 GPU with 70 GiB free"
		}
		runs = append(runs, r)
	}
	fb := &fakeBackend{snap: simSnapshot(b, "8xA100-80GB"), runs: runs}
	v := NewBoard(fb)
	w := test.NewWindow(v.Content())
	w.Resize(fyne.NewSize(1400, 900))
	defer w.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		v.apply(v.read(ctx))
	}
}

// The queue, what a researcher watches all day, keeps room for several
// runs under the GPU cards at a common window size, and the cards are
// still whole above it.
func TestBoardQueueShowsSeveralRuns(t *testing.T) {
	now := time.Now()
	var runs []engine.RunInfo
	for i := range 8 {
		runs = append(runs, engine.RunInfo{ID: fmt.Sprintf("r%d", i), Template: "digits-mlp", State: engine.Queued,
			CreatedAt: now, Stages: stages(engine.Queued, engine.Queued)})
	}
	b := &fakeBackend{snap: simSnapshot(t, "2xA100-80GB"), runs: runs}
	newTestApp(t)
	v := NewBoard(b)
	w := test.NewWindow(v.Content())
	defer w.Close()
	w.Resize(fyne.NewSize(1200, 780))
	v.Reload(context.Background())
	row := newQueueRow().MinSize().Height
	require.GreaterOrEqual(t, v.list.Size().Height, 3*row, "at least three runs of the queue in view (a row is %.0f, the list %.0f)", row, v.list.Size().Height)
	cardsBottom := fyne.CurrentApp().Driver().AbsolutePositionForObject(v.cards).Y + v.cards.Size().Height
	listTop := fyne.CurrentApp().Driver().AbsolutePositionForObject(v.list).Y
	require.Less(t, cardsBottom, listTop, "the GPU cards are whole above the queue")

	// On a large screen there is room for the process table too.
	w.Resize(fyne.NewSize(1920, 1080))
	procsBottom := fyne.CurrentApp().Driver().AbsolutePositionForObject(v.procs.content).Y + v.procs.content.Size().Height
	listTop = fyne.CurrentApp().Driver().AbsolutePositionForObject(v.list).Y
	require.Less(t, procsBottom, listTop, "the process table is whole above the queue")
	require.GreaterOrEqual(t, v.list.Size().Height, 3*row)
}
