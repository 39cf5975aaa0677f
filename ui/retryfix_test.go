package ui

import (
	"context"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
)

func TestRetryFix(t *testing.T) {
	run := engine.RunInfo{ID: "r1", Params: map[string]any{"lr": 0.5, "hidden": int64(256)}}
	named := engine.RunInfo{ID: "r2", Params: map[string]any{"learning_rate": 0.01}}
	noLR := engine.RunInfo{ID: "r3", Params: map[string]any{"hidden": int64(256)}}
	tests := []struct {
		name    string
		run     engine.RunInfo
		kind    string
		ok      bool
		lr      any
		changes []string
	}{
		{"divergence: lr ×0.1", run, "divergence", true, 0.05, []string{"lr: 0.5 → 0.05"}},
		{"a spike: lr halved", run, "loss_spike", true, 0.25, []string{"lr: 0.5 → 0.25"}},
		{"another name for lr", named, "nan", true, nil, []string{"learning_rate: 0.01 → 0.001"}},
		{"a hang: the same parameters", run, "hang", true, 0.5, nil},
		{"no learning rate to lower", noLR, "divergence", false, nil, nil},
		{"a GPU's anomaly", run, "overheating", false, nil, nil},
		{"the queue's", run, "queue_stuck", false, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fixed, changes, ok := retryFix(tt.run, tt.kind)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.changes, changes)
			if tt.lr != nil {
				require.InDelta(t, tt.lr, fixed.Params["lr"], 1e-12)
				require.Equal(t, tt.run.Params["hidden"], fixed.Params["hidden"], "other parameters stay")
			}
		})
	}
	require.Equal(t, 0.5, run.Params["lr"], "the run itself is not changed")
}

// retryButton finds the "Retry with the fix" button in the anomalies.
func retryButton(d *runDetail) *widget.Button {
	for _, o := range d.anomalies.Objects {
		if c, ok := o.(*fyne.Container); ok {
			for _, x := range c.Objects {
				if b, ok := x.(*widget.Button); ok && b.Text == "Retry with the fix" {
					return b
				}
			}
		}
	}
	return nil
}

func TestRetryWithTheFixOpensTheWizardChanged(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "demo", State: engine.Failed, CreatedAt: now,
		Params: map[string]any{"lr": 0.5, "hidden": float64(256), "optimizer": "sgd", "augment": true}, Stages: stages(engine.Failed)}}}
	v, _ := newTestView(t, b)
	v.SelectRun("r1")
	v.Reload(context.Background())
	require.Nil(t, retryButton(v.detail), "no wizard to open: no button")

	var cloned []engine.RunInfo
	v.OnClone = func(r engine.RunInfo) { cloned = append(cloned, r) }
	v.Reload(context.Background())
	btn := retryButton(v.detail)
	require.NotNil(t, btn, "the fake's divergence is a run-scope anomaly")
	tap(btn)
	require.Len(t, cloned, 1)
	require.InDelta(t, 0.05, cloned[0].Params["lr"], 1e-12)
	require.Equal(t, "Retry with the fix (lr: 0.5 → 0.05): check the parameters and launch.", v.status.Text)
}

func TestRetryWithTheFixPrefillsTheWizard(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "demo", State: engine.Failed, CreatedAt: now, Executor: "local",
		Params: map[string]any{"lr": 0.5, "hidden": float64(256), "optimizer": "sgd", "augment": true}, Stages: stages(engine.Failed)}}}
	s, _ := newTestShell(t, b)
	s.Runs.Reload(context.Background())
	s.OpenRun("r1")
	s.Runs.Reload(context.Background())
	btn := retryButton(s.Runs.detail)
	require.NotNil(t, btn)
	tap(btn)
	require.Equal(t, stepParams, s.wizard.step)
	require.Equal(t, "0.05", s.wizard.fields[0].entry.Text, "the learning rate, lowered")
	require.Equal(t, "256", s.wizard.fields[1].entry.Text)
}
