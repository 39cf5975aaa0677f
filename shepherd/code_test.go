package shepherd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every wait comes with a code beside its words, the largest free memory
// the words speak of, and the runs ahead, so that nobody parses the words.
func TestWaitCodes(t *testing.T) {
	now := t0.Add(time.Hour)
	one := func(id string, g int, memGiB int64) Request {
		return Request{ID: id, GPUs: g, MemPerGPUMiB: memGiB * gib, Submit: t0}
	}
	hot := machine(8, 80, 80)
	hot.GPUs[0].TempC, hot.GPUs[1].TempC = 95, 95
	tests := []struct {
		name    string
		p       Policy
		inv     Inventory
		running []Running
		queue   []Request
		code    ReasonCode
		largest int64
		ahead   int
	}{
		{"no GPU at all", Herd(HerdOptions{}), Inventory{Reason: "NVML library not found"}, nil,
			[]Request{one("a", 1, 10)}, WaitNoGPUs, 0, 0},
		{"can never fit", Herd(HerdOptions{}), machine(8, 80, 80), nil,
			[]Request{one("a", 1, 100)}, WaitNeverFits, 80 * gib, 0},
		{"not enough free memory now", BestFit(), machine(8, 20, 30), nil,
			[]Request{one("a", 1, 40)}, WaitGPUMemory, 30 * gib, 0},
		{"memory would do but the GPUs are too hot", Herd(HerdOptions{}), hot, nil,
			[]Request{one("a", 1, 10)}, WaitGPUHot, 80 * gib, 0},
		{"next in line, GPUs reserved", Herd(HerdOptions{Reserve: true}), machine(8, 10), []Running{{ID: "r", GPUs: []string{"G0"},
			MemPerGPUMiB: 70 * gib, Start: t0, Estimate: 2 * time.Hour}},
			[]Request{one("a", 1, 40)}, WaitGPUMemory, 10 * gib, 0},
		{"behind another that waits", BestFit(), machine(8, 20), nil,
			[]Request{one("a", 1, 40), {ID: "b", GPUs: 1, MemPerGPUMiB: 40 * gib, Submit: t0.Add(time.Minute)}},
			WaitGPUMemory, 20 * gib, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := Schedule(tt.p, State{Inventory: tt.inv, Running: tt.running, Queue: tt.queue, Now: now})
			d := ds[len(ds)-1]
			require.False(t, d.Placed(), d.Wait)
			require.Equal(t, tt.code, d.Reason.Code, d.Wait)
			require.Equal(t, tt.largest, d.Reason.LargestFreeMiB)
			require.Equal(t, tt.ahead, d.Reason.Ahead)
			if tt.p.Reserve {
				require.NotEmpty(t, d.Reason.Reserved, "the head of the queue has GPUs kept for it")
			}
		})
	}
	placed := Schedule(BestFit(), State{Inventory: machine(8, 80), Queue: []Request{one("a", 1, 10)}, Now: now})[0]
	require.True(t, placed.Placed())
	require.Empty(t, placed.Reason.Code)

	ff := FirstFit(machine(8, 20, 30), one("a", 2, 25))
	require.Equal(t, WaitGPUMemory, ff.Reason.Code, "one fits, not two")
	require.Equal(t, 1, ff.Reason.Fit)
	require.Equal(t, WaitGPUMemory, FirstFit(machine(8, 20), one("a", 1, 25)).Reason.Code)
	require.Equal(t, WaitNoGPUs, FirstFit(Inventory{}, one("a", 1, 25)).Reason.Code)
}
