package shepherd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCPUsAndHostMemory: a host's CPUs and memory are resources like GPU
// memory: a CPU-only stage waits for a CPU, a GPU stage for the host's
// memory, each with its code and the counts behind it.
func TestCPUsAndHostMemory(t *testing.T) {
	ws := []Host{{CPUMilli: 2000, MemMiB: 64 * gib}}
	busy := []Running{
		{ID: "a", CPUMilli: 1000, MemMiB: 8 * gib, Start: t0},
		{ID: "b", CPUMilli: 1000, MemMiB: 8 * gib, Start: t0},
	}
	for _, p := range allPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			ds := Schedule(p, State{Inventory: Inventory{Hosts: ws}, Running: busy, Now: t0,
				Queue: []Request{{ID: "c", CPUMilli: 1000, Submit: t0}}})
			require.False(t, ds[0].Placed())
			require.Equal(t, WaitCPU, ds[0].Reason.Code)
			require.Equal(t, "waiting for a CPU: 2 of 2 in use; first in line", ds[0].Wait)
			require.Equal(t, int64(0), ds[0].Reason.CPUMilliFree)
			require.Equal(t, int64(2000), ds[0].Reason.CPUMilliTotal)

			// One CPU free: the CPU-only stage goes; a second waits behind it.
			ds = Schedule(p, State{Inventory: Inventory{Hosts: ws}, Running: busy[:1], Now: t0,
				Queue: []Request{{ID: "c", CPUMilli: 1000, Submit: t0}, {ID: "d", CPUMilli: 500, Submit: t0.Add(time.Second)}}})
			require.True(t, ds[0].Placed(), ds[0].Wait)
			require.Empty(t, ds[0].GPUs)
			require.Equal(t, "waiting for 0.5 CPUs: 2 of 2 in use; first in line", ds[1].Wait)

			// A GPU stage needs 60 GiB of host memory; 48 of 64 are free.
			inv := machine(8, 80)
			inv.Hosts = ws
			ds = Schedule(p, State{Inventory: inv, Running: busy[:1], Now: t0,
				Queue: []Request{{ID: "g", GPUs: 1, MemPerGPUMiB: 10 * gib, MemMiB: 60 * gib, Submit: t0}}})
			require.False(t, ds[0].Placed())
			require.Equal(t, WaitHostMemory, ds[0].Reason.Code)
			require.Contains(t, ds[0].Wait, "waiting for 60 GiB of host memory: 8 GiB of 64 GiB in use")

			// More than the host has: never.
			ds = Schedule(p, State{Inventory: Inventory{Hosts: ws}, Now: t0,
				Queue: []Request{{ID: "big", CPUMilli: 4000, Submit: t0}}})
			require.Equal(t, WaitNeverFits, ds[0].Reason.Code)
			require.Equal(t, "this machine can never hold it (2 CPUs and 64 GiB of memory for stages); first in line", ds[0].Wait)
		})
	}
}

// TestNoHostsMeansNoLimit: an inventory without hosts (as before CPUs were
// counted) never holds a stage back for CPUs.
func TestNoHostsMeansNoLimit(t *testing.T) {
	ds := Schedule(Herd(HerdOptions{}), State{Inventory: machine(8, 80), Now: t0,
		Queue: []Request{{ID: "c", CPUMilli: 64000, MemMiB: 1 << 30, Submit: t0}, {ID: "g", GPUs: 1, CPUMilli: 64000, Submit: t0}}})
	require.True(t, ds[0].Placed())
	require.True(t, ds[1].Placed())
}

// TestMIGSlicesArePlacedAndTheirGPUIsNot: GPU 0 is split into two slices
// (its own free memory is what NVML reports for the whole device); a run
// goes on a slice, never on GPU 0 itself, and a run larger than any slice
// waits though GPU 0 would hold it whole.
func TestMIGSlicesArePlacedAndTheirGPUIsNot(t *testing.T) {
	inv := Inventory{GPUs: []GPU{
		{Index: 0, UUID: "GPU-0", TotalMiB: 80 * gib, FreeMiB: 80 * gib, Healthy: true},
		{Index: 1, UUID: "MIG-a", TotalMiB: 40 * gib, FreeMiB: 40 * gib, Healthy: true, Parent: "GPU-0"},
		{Index: 2, UUID: "MIG-b", TotalMiB: 40 * gib, FreeMiB: 10 * gib, Healthy: true, Parent: "GPU-0"},
	}}
	for _, p := range allPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			ds := Schedule(p, State{Inventory: inv, Now: t0, Queue: []Request{
				{ID: "small", GPUs: 1, MemPerGPUMiB: 20 * gib, Submit: t0},
				{ID: "whole", GPUs: 1, MemPerGPUMiB: 60 * gib, Submit: t0.Add(time.Second)},
			}})
			require.True(t, ds[0].Placed(), ds[0].Wait)
			require.Equal(t, "MIG-a", ds[0].GPUs[0].UUID)
			require.False(t, ds[1].Placed())
			require.Equal(t, WaitNeverFits, ds[1].Reason.Code, ds[1].Wait)
			require.Contains(t, ds[1].Wait, "at most 40 GiB each")
			require.False(t, FirstFit(inv, Request{GPUs: 1, MemPerGPUMiB: 60 * gib}).Placed(), "nor does FirstFit offer GPU 0")
		})
	}
}

// TestOneHostPerPlacement: on two hosts of two GPUs each, a 2-GPU run goes
// on one host and a 3-GPU run never fits, whatever the policy.
func TestOneHostPerPlacement(t *testing.T) {
	inv := Inventory{Hosts: []Host{{Name: "a", CPUMilli: 8000}, {Name: "b", CPUMilli: 8000}}}
	for i, h := range []string{"a", "a", "b", "b"} {
		inv.GPUs = append(inv.GPUs, GPU{Index: i, UUID: h + string(rune('0'+i)), TotalMiB: 80 * gib, FreeMiB: 80 * gib, Healthy: true, Host: h})
	}
	inv.GPUs[1].FreeMiB = 0 // host a has one GPU free
	for _, p := range allPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			ds := Schedule(p, State{Inventory: inv, Now: t0, Queue: []Request{
				{ID: "two", GPUs: 2, MemPerGPUMiB: 40 * gib, CPUMilli: 6000, Submit: t0},
				{ID: "three", GPUs: 3, MemPerGPUMiB: gib, Submit: t0.Add(time.Second)},
			}})
			require.True(t, ds[0].Placed(), ds[0].Wait)
			require.Equal(t, "b", ds[0].Host)
			require.Equal(t, []int{2, 3}, placedOn(ds[0]))
			require.Equal(t, WaitNeverFits, ds[1].Reason.Code, ds[1].Wait)
		})
	}
}

// TestWaitReasonsNameSlices: a wait reason names a MIG slice by its label.
func TestWaitReasonsNameSlices(t *testing.T) {
	inv := Inventory{GPUs: []GPU{
		{Index: 0, UUID: "GPU-0", TotalMiB: 80 * gib, FreeMiB: 30 * gib, Healthy: true},
		{Index: 0, UUID: "MIG-a", TotalMiB: 40 * gib, FreeMiB: 20 * gib, Healthy: true, Parent: "GPU-0", Label: "GPU 0 MIG 1 (3g.40gb)"},
		{Index: 0, UUID: "MIG-b", TotalMiB: 40 * gib, FreeMiB: 10 * gib, Healthy: true, Parent: "GPU-0", Label: "GPU 0 MIG 2 (3g.40gb)"},
	}}
	d := Schedule(Herd(HerdOptions{}), State{Inventory: inv, Now: t0, Queue: []Request{{ID: "a", GPUs: 1, MemPerGPUMiB: 30 * gib, Submit: t0}}})[0]
	require.Equal(t, WaitGPUMemory, d.Reason.Code)
	require.Equal(t, "GPU 0 MIG 1 (3g.40gb)", d.Reason.LargestFreeOn)
	require.Equal(t, "needs 1×30 GiB; largest free is 20 GiB on GPU 0 MIG 1 (3g.40gb); first in line", d.Wait)
}

// TestCPUOnlyStagesSpareHostsWithFreeGPUs: herd puts a CPU-only stage on
// the host whose GPUs are taken, not on the one (tighter on CPUs, which
// best fit would choose) whose free GPU would be left without CPUs.
func TestCPUOnlyStagesSpareHostsWithFreeGPUs(t *testing.T) {
	inv := Inventory{
		GPUs: []GPU{
			{Index: 0, UUID: "a0", TotalMiB: 80 * gib, FreeMiB: 80 * gib, Healthy: true, Host: "a"},
			{Index: 1, UUID: "b0", TotalMiB: 80 * gib, FreeMiB: 0, Healthy: true, Host: "b"},
		},
		Hosts: []Host{{Name: "a", CPUMilli: 8000, MemMiB: 64 * gib}, {Name: "b", CPUMilli: 16000, MemMiB: 64 * gib}},
	}
	busy := []Running{{ID: "on-b", GPUs: []string{"b0"}, Host: "b", MemPerGPUMiB: 80 * gib, CPUMilli: 4000, Start: t0}}
	q := []Request{{ID: "cpu", CPUMilli: 6000, Submit: t0}}
	herd := Schedule(Herd(HerdOptions{}), State{Inventory: inv, Running: busy, Queue: q, Now: t0})
	require.True(t, herd[0].Placed(), herd[0].Wait)
	require.Equal(t, "b", herd[0].Host)
	bf := Schedule(BestFit(), State{Inventory: inv, Running: busy, Queue: q, Now: t0})
	require.Equal(t, "a", bf[0].Host, "best fit takes the host with the fewest CPUs left")
	// The GPU stage that follows still finds CPUs next to the free GPU.
	q = []Request{{ID: "cpu", CPUMilli: 6000, Submit: t0}, {ID: "gpu", GPUs: 1, MemPerGPUMiB: 40 * gib, CPUMilli: 4000, Submit: t0.Add(time.Second)}}
	herd = Schedule(Herd(HerdOptions{}), State{Inventory: inv, Running: busy, Queue: q, Now: t0})
	require.True(t, herd[0].Placed() && herd[1].Placed(), "%s / %s", herd[0].Wait, herd[1].Wait)
}
