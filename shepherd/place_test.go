package shepherd

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFirstFit(t *testing.T) {
	inv := Inventory{GPUs: []GPU{
		{Index: 1, UUID: "b", FreeMiB: 40 * 1024, Healthy: true},
		{Index: 0, UUID: "a", FreeMiB: 8 * 1024, Healthy: true},
		{Index: 2, UUID: "c", FreeMiB: 80 * 1024, Healthy: false},
	}}
	tests := []struct {
		name     string
		inv      Inventory
		req      Request
		wantUUID []string
		wantWait string
	}{
		{name: "cpu-only stage needs nothing", inv: Inventory{}, req: Request{}},
		{name: "no gpus on the machine", inv: Inventory{Reason: "no NVIDIA driver"}, req: Request{GPUs: 1, MemPerGPUMiB: 2048},
			wantWait: "needs 1×2 GiB; this machine has no GPUs (no NVIDIA driver)"},
		{name: "lowest index that fits", inv: inv, req: Request{GPUs: 1, MemPerGPUMiB: 4096}, wantUUID: []string{"a"}},
		{name: "skips a gpu too small", inv: inv, req: Request{GPUs: 1, MemPerGPUMiB: 16 * 1024}, wantUUID: []string{"b"}},
		{name: "never an unhealthy gpu", inv: inv, req: Request{GPUs: 1, MemPerGPUMiB: 60 * 1024},
			wantWait: "needs 1×60 GiB; 0 fit now, largest free is 40 GiB"},
		{name: "two gpus", inv: inv, req: Request{GPUs: 2, MemPerGPUMiB: 1024}, wantUUID: []string{"a", "b"}},
		{name: "more gpus than healthy", inv: inv, req: Request{GPUs: 3}, wantWait: "needs 3 GPU(s); 2 fit now, largest free is 40 GiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := FirstFit(tt.inv, tt.req)
			require.Equal(t, tt.wantWait, d.Wait)
			require.Equal(t, tt.wantWait == "", d.Placed())
			var got []string
			for _, g := range d.GPUs {
				got = append(got, g.UUID)
			}
			require.Equal(t, tt.wantUUID, got)
		})
	}
}
