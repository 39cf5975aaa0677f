package gpumon

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run against the real NVML loader: on a machine without the
// NVIDIA driver (like CI) Open must fall back; on one with GPUs, the real
// GPUs win and there is nothing more to check.
func TestOpenPicksASource(t *testing.T) {
	tests := []struct {
		name     string
		simulate string
		env      string
		want     string
	}{
		{"no GPU, nothing configured: absent with the reason", "", "", SourceNone},
		{"no GPU, --simulate-gpus: simulated", "2xA100-80GB", "", SourceSimulated},
		{"no GPU, environment variable: simulated", "", "1xT4", SourceSimulated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvSimulate, tt.env)
			o, err := Open(context.Background(), Config{Simulate: tt.simulate})
			require.NoError(t, err)
			defer o.Close()
			if o.NVML != nil {
				t.Skip("this machine has real GPUs: they are always chosen")
			}
			snap, err := o.Source.Snapshot(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, snap.Source)
			if tt.want == SourceNone {
				assert.NotEmpty(t, snap.Reason)
				assert.Empty(t, snap.GPUs)
			} else {
				assert.True(t, snap.Simulated)
				assert.Contains(t, o.Note, "simulated GPUs")
			}
		})
	}
}

func TestOpenRejectsABadSpec(t *testing.T) {
	_, err := Open(context.Background(), Config{Simulate: "9xNotAGPU"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unknown model")
}
