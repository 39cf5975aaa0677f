package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/local"
)

// clusterExec stands for a cluster's executor (Slurm's): it places its
// stages itself.
type clusterExec struct{ executor.Executor }

func (clusterExec) Name() string       { return "cluster" }
func (clusterExec) PlacesItself() bool { return true }

// A cluster places its own stages: this machine's GPUs refuse none of
// them, while the same need on the local executor is refused.
func TestGPUCheckLeavesAClusterExecutorAlone(t *testing.T) {
	h := newHarness(t)
	e := h.engine(func(o *Options) {
		o.GPUs = simulated(t, "2xA100-80GB")
		o.Executors = append(o.Executors, clusterExec{local.New()})
	})
	tm := parse(t, "name: wide\nstages:\n  - name: train\n    gpus: 8\n    command: [\"true\"]\n")
	_, err := e.Submit(context.Background(), RunSpec{Template: tm, Executor: "local"})
	require.ErrorContains(t, err, "stage train can never start on this machine: it needs 8 GPUs and this machine has 2 usable GPU(s)")
	_, err = e.Submit(context.Background(), RunSpec{Template: tm, Executor: "cluster"})
	require.NoError(t, err, "the cluster's nodes may have 8")
}
