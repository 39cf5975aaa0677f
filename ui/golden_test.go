package ui

import (
	"context"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"niuma/engine"
	"niuma/gpumon"
)

// The golden markup tests pin the main views' structure: a change in what
// is drawn where shows up as a diff of testdata/*.xml. After an intended
// change, copy testdata/failed/NAME.xml over testdata/NAME.xml.

func f64(v float64) *float64 { return &v }

func TestBoardGolden(t *testing.T) {
	newTestApp(t)
	waiting := stages(engine.Queued, engine.Queued)
	waiting[0].Reason = "needs 2×70 GiB on one NVLink group; largest free is 60 GiB on GPU 0"
	b := &fakeBackend{
		snap: gpumon.Snapshot{Source: gpumon.SourceSimulated, Simulated: true, Driver: "simulated 2xA100-80GB", GPUs: []gpumon.GPU{
			{Index: 0, UUID: "GPU-0", Name: "NVIDIA A100-SXM4-80GB", MemTotalMiB: 81920, MemUsedMiB: 20480, UtilPercent: f64(71),
				TempC: f64(55), PowerW: f64(295), PowerLimitW: f64(400), Healthy: true,
				Processes: []gpumon.Process{{MemMiB: 20480, Owner: &gpumon.Owner{RunID: "r1", Stage: "train"}}}},
			{Index: 1, UUID: "GPU-1", Name: "NVIDIA A100-SXM4-80GB", MemTotalMiB: 81920, UtilPercent: f64(0),
				TempC: f64(32), PowerW: f64(52), PowerLimitW: f64(400), Healthy: true},
		}},
		runs: []engine.RunInfo{
			{ID: "r1", Template: "digits-mlp", State: engine.Running, Stages: stages(engine.Succeeded, engine.Running, engine.Queued)},
			{ID: "r2", Template: "llm-finetune", State: engine.Queued, Stages: waiting},
		},
	}
	v := NewBoard(b)
	w := test.NewWindow(v.Content())
	defer w.Close()
	w.Resize(fyne.NewSize(1000, 640))
	v.apply(v.read(context.Background()))
	test.AssertRendersToMarkup(t, "board.xml", w.Canvas())
}

func TestWizardParametersGolden(t *testing.T) {
	r := newWizardRig(t)
	r.w.list.Select(1)
	tap(r.w.next)
	tap(r.field("hidden").sweep)
	r.field("hidden").sweepEntry.SetText("32, 64, 128")
	test.AssertRendersToMarkup(t, "wizard_parameters.xml", r.win.Canvas())
}
