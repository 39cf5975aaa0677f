package gpumon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec    string
		want    []string // model keys
		wantErr string
	}{
		{"4xH100-80GB", []string{"H100-80GB", "H100-80GB", "H100-80GB", "H100-80GB"}, ""},
		{"2xa100-80gb", []string{"A100-80GB", "A100-80GB"}, ""},
		{"1xA100-40GB, 1xRTX4090", []string{"A100-40GB", "RTX4090"}, ""},
		{"T4", []string{"T4"}, ""},
		{"3xB200", nil, `unknown model "B200"`},
		{"0xH100-80GB", nil, "count 0 must be 1 to 64"},
		{" , ", nil, "empty spec"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseSpec(tt.spec)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var keys []string
			for _, m := range got {
				keys = append(keys, m.Key)
			}
			assert.Equal(t, tt.want, keys)
		})
	}
}

// fakeClock is a clock the test advances by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newSim(t *testing.T, spec string, seed int64) (*Simulated, *fakeClock) {
	t.Helper()
	c := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s, err := NewSimulated(spec, SimOptions{Seed: seed, Now: c.now})
	require.NoError(t, err)
	return s, c
}

// script drives a simulated source through a fixed story and returns
// every snapshot.
func script(t *testing.T, seed int64) []Snapshot {
	s, c := newSim(t, "2xA100-80GB", seed)
	uuid := func(i int) string { return "GPU-51a1a7ed-0000-4000-8000-00000000000" + string(rune('0'+i)) }
	var out []Snapshot
	take := func() {
		snap, err := s.Snapshot(context.Background())
		require.NoError(t, err)
		out = append(out, snap)
		c.t = c.t.Add(time.Second)
	}
	take()
	s.Assign(uuid(0), "r1/train", 30000)
	for range 60 {
		take()
	}
	s.Release(uuid(0), "r1/train")
	for range 60 {
		take()
	}
	return out
}

func TestSimulatedIsDeterministicForASeed(t *testing.T) {
	a, b := script(t, 7), script(t, 7)
	assert.Equal(t, a, b, "same seed, same clock: same telemetry")
	c := script(t, 8)
	assert.NotEqual(t, a, c, "another seed gives other noise")
}

func TestSimulatedFollowsAssignments(t *testing.T) {
	snaps := script(t, 1)
	first, loaded, released := snaps[0], snaps[60], snaps[120]

	assert.True(t, first.Simulated)
	assert.Equal(t, SourceSimulated, first.Source)
	require.Len(t, first.GPUs, 2)
	g0 := first.GPUs[0]
	assert.Equal(t, "NVIDIA A100-SXM4-80GB", g0.Name)
	assert.Equal(t, int64(81920), g0.MemTotalMiB)
	assert.Equal(t, 0.0, *g0.UtilPercent, "idle before any assignment")

	busy := loaded.GPUs[0]
	assert.Equal(t, int64(30000), busy.MemUsedMiB, "memory is what the holders hold")
	assert.Equal(t, int64(81920-30000), busy.MemFreeMiB)
	assert.Greater(t, *busy.UtilPercent, 60.0, "utilisation rises while held")
	assert.Greater(t, *busy.TempC, *g0.TempC, "and temperature follows")
	require.Len(t, busy.Processes, 1)
	assert.Equal(t, Owner{RunID: "r1", Stage: "train"}, *busy.Processes[0].Owner)
	assert.Equal(t, 0.0, *loaded.GPUs[1].UtilPercent, "the other GPU stays idle")

	after := released.GPUs[0]
	assert.Equal(t, int64(0), after.MemUsedMiB)
	assert.Empty(t, after.Processes)
	assert.Less(t, *after.UtilPercent, 5.0, "utilisation falls after release")
	assert.Less(t, *after.TempC, *busy.TempC, "and the GPU cools")

	for i, s := range snaps {
		for _, g := range s.GPUs {
			assert.LessOrEqual(t, *g.PowerW, *g.PowerLimitW, "snapshot %d: power within the model's limit", i)
			assert.Greater(t, *g.PowerW, 0.0)
		}
	}
}

func TestParseSimSpecMIG(t *testing.T) {
	tests := []struct {
		spec    string
		want    [][]string // MIG profiles per GPU
		wantErr string
	}{
		{"1xA100-80GB:mig=3g.40gb+2x2g.20gb", [][]string{{"3g.40gb", "2g.20gb", "2g.20gb"}}, ""},
		{"2xH100-80GB:mig=7g.80gb, 1xRTX4090", [][]string{{"7g.80gb"}, {"7g.80gb"}, nil}, ""},
		{"A100-40GB:mig=7x1g.5gb", [][]string{{"1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"}}, ""},
		{"1xRTX4090:mig=1g.10gb", nil, "RTX4090 has no MIG"},
		{"1xA100-80GB:mig=3g.20gb", nil, `MIG profile "3g.20gb": A100-80GB offers 1g.10gb`},
		{"1xA100-80GB:mig=2x4g.40gb", nil, "does not fit one A100-80GB: 8 of 7 compute slices"},
		{"1xA100-80GB:mig=", nil, "write MODEL:mig=LAYOUT"},
		{"1xA100-80GB:slices=2", nil, "write MODEL:mig=LAYOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseSimSpec(tt.spec)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var profiles [][]string
			for _, g := range got {
				var ps []string
				for _, p := range g.MIG {
					ps = append(ps, p.Name)
				}
				profiles = append(profiles, ps)
			}
			assert.Equal(t, tt.want, profiles)
		})
	}
}

// TestSimulatedMIG: a simulated GPU in MIG mode reports its slices, whose
// memory adds up to the GPU's; a holder assigned to a slice shows on that
// slice (and in the GPU's memory used), and Devices offers only the slices.
func TestSimulatedMIG(t *testing.T) {
	s, c := newSim(t, "1xA100-80GB:mig=3g.40gb+2x2g.20gb,1xA100-80GB", 1)
	snap, err := s.Snapshot(context.Background())
	require.NoError(t, err)
	g := snap.GPUs[0]
	require.Equal(t, ptr(true), g.MIGEnabled)
	require.Len(t, g.MIG, 3)
	var sum int64
	for _, m := range g.MIG {
		sum += m.MemTotalMiB
	}
	assert.Equal(t, g.MemTotalMiB, sum, "a full layout adds up to the GPU")
	assert.Equal(t, int64(40960), g.MIG[0].MemTotalMiB)
	assert.Nil(t, g.UtilPercent, "no whole-GPU utilisation in MIG mode, as NVML")
	assert.Equal(t, ptr(false), snap.GPUs[1].MIGEnabled)

	slice := g.MIG[1].UUID
	s.Assign(slice, "r1/train", 15000)
	c.t = c.t.Add(10 * time.Second)
	snap, err = s.Snapshot(context.Background())
	require.NoError(t, err)
	g = snap.GPUs[0]
	assert.Equal(t, int64(15000), g.MIG[1].MemUsedMiB)
	assert.Equal(t, int64(20480-15000), g.MIG[1].MemFreeMiB)
	assert.Equal(t, Owner{RunID: "r1", Stage: "train"}, *g.MIG[1].Processes[0].Owner)
	assert.Equal(t, int64(15000), g.MemUsedMiB)
	assert.Zero(t, g.MIG[0].MemUsedMiB)

	var uuids []string
	for _, d := range snap.Devices() {
		uuids = append(uuids, d.UUID)
		assert.NotEqual(t, g.UUID, d.UUID, "the MIG GPU is never offered whole")
	}
	assert.Equal(t, []string{g.MIG[0].UUID, g.MIG[1].UUID, g.MIG[2].UUID, snap.GPUs[1].UUID}, uuids)

	s.Release(slice, "r1/train")
	snap, err = s.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Zero(t, snap.GPUs[0].MIG[1].MemUsedMiB)
}
