package engine

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/gpumon"
)

func TestSentinelSampleFromGPUSnapshot(t *testing.T) {
	temp, slow, mask, ecc := 81.0, 87.0, uint64(0x20), int64(2)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	g := gpumon.GPU{UUID: "GPU-1", MemUsedMiB: 3000, MemTotalMiB: 81920, TempC: &temp, TempSlowdownC: &slow,
		ThrottleMask: &mask, ECCUncorrected: &ecc, XIDs: []uint64{79},
		Processes: []gpumon.Process{
			{MemMiB: 1000, Owner: &gpumon.Owner{RunID: "r1", Stage: "train"}},
			{MemMiB: 500, Owner: &gpumon.Owner{RunID: "r1", Stage: "train"}},
			{MemMiB: 1500}, // not a Niuma run
		}}
	s := sentinelSample(at, g)
	require.True(t, math.IsNaN(s.UtilPercent), "a utilisation the GPU did not report is NaN, not 0")
	require.Equal(t, 81.0, s.TempC)
	require.Equal(t, 87.0, s.SlowdownTempC)
	require.Equal(t, map[string]float64{"r1": 1500}, s.RunMemMiB, "summed over the run's processes; others left out")
	require.Equal(t, "train", s.Stage["r1"])
	require.Equal(t, []int{79}, s.XIDs)
	require.Equal(t, int64(2), s.ECCUncorrected)
	require.Equal(t, at, s.Time)

	require.Equal(t, int64(-1), sentinelSample(at, gpumon.GPU{UUID: "GPU-2"}).ECCUncorrected, "not reported")
}
