package app

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/gpumon"
)

// The acceptance lines of `niuma gpus`, on a machine without a GPU.
func TestGPUsCommand(t *testing.T) {
	t.Setenv(gpumon.EnvSimulate, "")
	code, out, errOut := niuma(t, "gpus", "--json")
	require.Equal(t, 0, code, errOut)
	var snap gpumon.Snapshot
	require.NoError(t, json.Unmarshal([]byte(out), &snap))
	if snap.Source == gpumon.SourceNVML {
		t.Skip("this machine has real GPUs")
	}

	tests := []struct {
		name     string
		args     []string
		env      string
		contains []string
	}{
		{"no GPU: a clear line, exit 0", []string{"gpus"}, "", []string{"no GPU: ", "NVML"}},
		{"simulated from the flag, labelled", []string{"gpus", "--simulate-gpus", "2xA100-80GB"}, "",
			[]string{"SIMULATED GPUs (2xA100-80GB)", "NVIDIA A100-SXM4-80GB", "[simulated]"}},
		{"simulated from the environment", []string{"gpus"}, "1xT4", []string{"SIMULATED GPUs (1xT4)", "Tesla T4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(gpumon.EnvSimulate, tt.env)
			code, out, errOut := niuma(t, tt.args...)
			require.Equal(t, 0, code, errOut)
			for _, s := range tt.contains {
				assert.Contains(t, out, s)
			}
		})
	}

	code, out, errOut = niuma(t, "gpus", "--simulate-gpus", "2xA100-80GB", "--json")
	require.Equal(t, 0, code, errOut)
	snap = gpumon.Snapshot{}
	require.NoError(t, json.Unmarshal([]byte(out), &snap))
	assert.True(t, snap.Simulated)
	assert.Equal(t, gpumon.SourceSimulated, snap.Source)
	assert.Len(t, snap.GPUs, 2)

	code, _, errOut = niuma(t, "gpus", "--simulate-gpus", "3xB9000")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "unknown model")
}
