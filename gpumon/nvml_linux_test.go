//go:build linux && cgo

package gpumon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeGPU describes one mocked device. fail overrides the answer of one
// call, by the NVML method name ("GetFanSpeed"); lostAfter makes that call
// and, by the rule under test, nothing after it answer at all (its func is
// left nil, so a call panics).
type fakeGPU struct {
	uuid     string
	mig      bool
	slices   []fakeMIG       // MIG slices (with mig), at indices 0, 2, 4… (NVML leaves gaps)
	links    map[string]bool // UUIDs this GPU reaches over NVLink
	procs    []nvml.ProcessInfo
	fail     map[string]nvml.Return
	nilFuncs []string // calls that must not happen: their funcs stay nil
}

// fakeMIG is one mocked MIG slice.
type fakeMIG struct {
	uuid, profile string
	usedMiB       uint64
	procs         []nvml.ProcessInfo
}

func (f *fakeGPU) ret(call string) nvml.Return {
	if r, ok := f.fail[call]; ok {
		return r
	}
	return nvml.SUCCESS
}

func busID(s string) [32]int8 {
	var b [32]int8
	for i := range len(s) {
		b[i] = int8(s[i])
	}
	return b
}

// device builds a mock device with every telemetry func the NVML source
// calls, except those named in nilFuncs.
func (f *fakeGPU) device() *mock.Device {
	d := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return f.uuid, f.ret("GetUUID") },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", f.ret("GetName") },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busID("00000000:18:00.0")}, f.ret("GetPciInfo")
		},
		GetTemperatureThresholdFunc: func(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
			if t == nvml.TEMPERATURE_THRESHOLD_SLOWDOWN {
				return 87, f.ret("GetTemperatureThreshold")
			}
			return 92, f.ret("GetTemperatureThreshold")
		},
		GetEnforcedPowerLimitFunc: func() (uint32, nvml.Return) { return 700000, f.ret("GetEnforcedPowerLimit") },
		GetTotalEccErrorsFunc: func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
			if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
				return 3, f.ret("GetTotalEccErrors")
			}
			return 0, f.ret("GetTotalEccErrors")
		},
		GetMigModeFunc: func() (int, int, nvml.Return) {
			if f.mig {
				return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, f.ret("GetMigMode")
			}
			return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, f.ret("GetMigMode")
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 80 << 30, Used: 20 << 30, Free: 60 << 30}, f.ret("GetMemoryInfo")
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			if f.mig { // NVML has no whole-GPU utilisation under MIG
				return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.Utilization{Gpu: 87, Memory: 40}, f.ret("GetUtilizationRates")
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 64, f.ret("GetTemperature") },
		GetPowerUsageFunc:  func() (uint32, nvml.Return) { return 412500, f.ret("GetPowerUsage") },
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			if c == nvml.CLOCK_SM {
				return 1980, f.ret("GetClockInfo")
			}
			return 2619, f.ret("GetClockInfo")
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return nvml.ClocksEventReasonSwPowerCap, f.ret("GetCurrentClocksEventReasons")
		},
		GetCurrentClocksThrottleReasonsFunc: func() (uint64, nvml.Return) {
			return nvml.ClocksThrottleReasonHwThermalSlowdown, f.ret("GetCurrentClocksThrottleReasons")
		},
		GetFanSpeedFunc: func() (uint32, nvml.Return) { return 45, f.ret("GetFanSpeed") },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return f.procs, f.ret("GetComputeRunningProcesses")
		},
		GetSupportedEventTypesFunc: func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypePState, f.ret("GetSupportedEventTypes")
		},
		RegisterEventsFunc: func(uint64, nvml.EventSet) nvml.Return { return f.ret("RegisterEvents") },
		GetP2PStatusFunc: func(other nvml.Device, idx nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			u, _ := other.GetUUID()
			if idx == nvml.P2P_CAPS_INDEX_NVLINK && f.links[u] {
				return nvml.P2P_STATUS_OK, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		},
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return 7, f.ret("GetMaxMigDeviceCount") },
		GetMigDeviceHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i%2 != 0 || i/2 >= len(f.slices) {
				return nil, nvml.ERROR_NOT_FOUND
			}
			m := f.slices[i/2]
			return &mock.Device{
				GetUUIDFunc: func() (string, nvml.Return) { return m.uuid, nvml.SUCCESS },
				GetNameFunc: func() (string, nvml.Return) { return "NVIDIA A100-SXM4-80GB MIG " + m.profile, nvml.SUCCESS },
				GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
					total := uint64(40 << 30)
					return nvml.Memory{Total: total, Used: m.usedMiB << 20, Free: total - m.usedMiB<<20}, nvml.SUCCESS
				},
				GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return m.procs, nvml.SUCCESS },
			}, nvml.SUCCESS
		},
	}
	for _, name := range f.nilFuncs {
		switch name {
		case "GetUtilizationRates":
			d.GetUtilizationRatesFunc = nil
		case "GetTemperature":
			d.GetTemperatureFunc = nil
		case "GetPowerUsage":
			d.GetPowerUsageFunc = nil
		case "GetClockInfo":
			d.GetClockInfoFunc = nil
		case "GetCurrentClocksEventReasons":
			d.GetCurrentClocksEventReasonsFunc = nil
		case "GetCurrentClocksThrottleReasons":
			d.GetCurrentClocksThrottleReasonsFunc = nil
		case "GetFanSpeed":
			d.GetFanSpeedFunc = nil
		case "GetComputeRunningProcesses":
			d.GetComputeRunningProcessesFunc = nil
		default:
			panic("fakeGPU: no such func " + name)
		}
	}
	return d
}

// fakeMachine is a mocked NVML over a list of GPUs the test may change.
type fakeMachine struct {
	gpus       []*fakeGPU
	newSymbols bool // the driver has nvmlDeviceGetCurrentClocksEventReasons
	devs       map[*fakeGPU]*mock.Device
}

func (m *fakeMachine) dev(f *fakeGPU) *mock.Device {
	if m.devs == nil {
		m.devs = map[*fakeGPU]*mock.Device{}
	}
	if m.devs[f] == nil {
		m.devs[f] = f.device()
	}
	return m.devs[f]
}

func (m *fakeMachine) lib() *mock.Interface {
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
				if m.newSymbols {
					return nil
				}
				return fmt.Errorf("undefined symbol: %s", name)
			}}
		},
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(m.gpus), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i >= len(m.gpus) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return m.dev(m.gpus[i]), nvml.SUCCESS
		},
	}
}

func gpuN(i int) *fakeGPU { return &fakeGPU{uuid: fmt.Sprintf("GPU-%04d", i)} }

func TestOpenNVMLFailedInitCallsNothingElse(t *testing.T) {
	tests := []struct {
		name string
		ret  nvml.Return
		want string
	}{
		{"no library", nvml.ERROR_LIBRARY_NOT_FOUND, "NVML library not found: is the NVIDIA driver installed?"},
		{"driver not loaded", nvml.ERROR_DRIVER_NOT_LOADED, "NVIDIA driver is not loaded"},
		{"no permission", nvml.ERROR_NO_PERMISSION, "no permission to talk to the NVIDIA driver"},
		{"other error names the call", nvml.ERROR_UNKNOWN, "nvmlInit: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Only InitFunc is set: any other call would panic, as it
			// would kill the process with a real library that failed.
			lib := &mock.Interface{InitFunc: func() nvml.Return { return tt.ret }}
			n, err := openNVML(lib, NVMLOptions{})
			require.Error(t, err)
			assert.Nil(t, n)
			assert.Contains(t, err.Error(), tt.want)
			assert.Len(t, lib.InitCalls(), 1)
		})
	}
}

// On a machine without the driver the real library must fail cleanly; on
// one with it there is nothing to check here.
func TestOpenNVMLOnThisMachine(t *testing.T) {
	n, err := OpenNVML(NVMLOptions{})
	if err == nil {
		n.Close()
		t.Skip("this machine has a working NVML")
	}
	assert.Regexp(t, "NVML|NVIDIA", err.Error())
}

func TestSnapshotReadsEveryField(t *testing.T) {
	g := gpuN(0)
	g.procs = []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 18 << 30}, {Pid: 7, UsedGpuMemory: 1 << 30}}
	m := &fakeMachine{gpus: []*fakeGPU{g}, newSymbols: true}
	owners := ownerMap{4242: {RunID: "r1", Stage: "train", Attempt: 1}}
	n, err := openNVML(m.lib(), NVMLOptions{Owners: owners})
	require.NoError(t, err)
	snap, err := n.Snapshot(context.Background())
	require.NoError(t, err)

	assert.Equal(t, SourceNVML, snap.Source)
	assert.False(t, snap.Simulated)
	assert.Equal(t, "550.54.15", snap.Driver)
	require.Len(t, snap.GPUs, 1)
	got := snap.GPUs[0]
	assert.Equal(t, GPU{
		Index: 0, UUID: "GPU-0000", Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:18:00.0",
		MemTotalMiB: 80 << 10, MemUsedMiB: 20 << 10, MemFreeMiB: 60 << 10,
		UtilPercent: ptr(87.0), MemUtilPercent: ptr(40.0),
		TempC: ptr(64.0), TempSlowdownC: ptr(87.0), TempShutdownC: ptr(92.0),
		PowerW: ptr(412.5), PowerLimitW: ptr(700.0),
		SMClockMHz: ptr(int64(1980)), MemClockMHz: ptr(int64(2619)),
		ThrottleReasons: []string{"sw_power_cap"}, ThrottleMask: ptr(uint64(nvml.ClocksEventReasonSwPowerCap)), FanPercent: ptr(45.0),
		ECCCorrected: ptr(int64(3)), ECCUncorrected: ptr(int64(0)), MIGEnabled: ptr(false),
		Processes: []Process{
			{PID: 4242, MemMiB: 18 << 10, Owner: &Owner{RunID: "r1", Stage: "train", Attempt: 1}},
			{PID: 7, MemMiB: 1 << 10},
		},
		Healthy: true,
	}, got)
}

type ownerMap map[int]Owner

func (m ownerMap) Owner(_ context.Context, pid int) (Owner, bool) { o, ok := m[pid]; return o, ok }

func TestSnapshotOptionalFields(t *testing.T) {
	tests := []struct {
		name  string
		gpu   fakeGPU
		check func(t *testing.T, g GPU)
	}{
		{"fan not supported is absent, not zero",
			fakeGPU{fail: map[string]nvml.Return{"GetFanSpeed": nvml.ERROR_NOT_SUPPORTED}},
			func(t *testing.T, g GPU) {
				assert.Nil(t, g.FanPercent)
				assert.Empty(t, g.Errors)
				assert.True(t, g.Healthy)
			}},
		{"ECC not supported (consumer card)",
			fakeGPU{fail: map[string]nvml.Return{"GetTotalEccErrors": nvml.ERROR_NOT_SUPPORTED}},
			func(t *testing.T, g GPU) {
				assert.Nil(t, g.ECCCorrected)
				assert.Nil(t, g.ECCUncorrected)
				assert.Empty(t, g.Errors)
			}},
		{"MIG enabled: no whole-GPU utilisation",
			fakeGPU{mig: true},
			func(t *testing.T, g GPU) {
				assert.Equal(t, ptr(true), g.MIGEnabled)
				assert.Nil(t, g.UtilPercent)
				assert.Nil(t, g.MemUtilPercent)
				assert.Empty(t, g.Errors)
				assert.Equal(t, int64(20<<10), g.MemUsedMiB, "memory is still reported")
			}},
		{"processes not supported: nil, not empty",
			fakeGPU{fail: map[string]nvml.Return{"GetComputeRunningProcesses": nvml.ERROR_NOT_SUPPORTED}},
			func(t *testing.T, g GPU) { assert.Nil(t, g.Processes) }},
		{"other error names the call and leaves the field absent",
			fakeGPU{fail: map[string]nvml.Return{"GetPowerUsage": nvml.ERROR_UNKNOWN}},
			func(t *testing.T, g GPU) {
				assert.Nil(t, g.PowerW)
				require.Len(t, g.Errors, 1)
				assert.True(t, strings.HasPrefix(g.Errors[0], "nvmlDeviceGetPowerUsage: "), g.Errors[0])
				assert.True(t, g.Healthy, "a failed read is not a sick GPU")
			}},
		{"GPU lost mid-sample: unhealthy, and nothing more is asked of it",
			fakeGPU{fail: map[string]nvml.Return{"GetMemoryInfo": nvml.ERROR_GPU_IS_LOST},
				nilFuncs: []string{"GetUtilizationRates", "GetTemperature", "GetPowerUsage", "GetClockInfo",
					"GetCurrentClocksEventReasons", "GetCurrentClocksThrottleReasons", "GetFanSpeed", "GetComputeRunningProcesses"}},
			func(t *testing.T, g GPU) {
				assert.False(t, g.Healthy)
				assert.Contains(t, g.HealthReason, "fallen off the bus")
				assert.Equal(t, "GPU-x", g.UUID)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.gpu
			g.uuid = "GPU-x"
			m := &fakeMachine{gpus: []*fakeGPU{&g}, newSymbols: true}
			n, err := openNVML(m.lib(), NVMLOptions{})
			require.NoError(t, err)
			snap, err := n.Snapshot(context.Background())
			require.NoError(t, err)
			require.Len(t, snap.GPUs, 1)
			tt.check(t, snap.GPUs[0])
		})
	}
}

// TestSnapshotListsMIGSlices: a GPU in MIG mode reports its slices (UUID,
// profile, memory, processes with their owners), and Devices offers the
// slices and never the GPU itself; a GPU out of MIG mode is offered whole.
func TestSnapshotListsMIGSlices(t *testing.T) {
	whole := gpuN(0)
	split := gpuN(1)
	split.mig = true
	split.slices = []fakeMIG{
		{uuid: "MIG-aaaa", profile: "3g.40gb", usedMiB: 12 << 10, procs: []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 12 << 30}}},
		{uuid: "MIG-bbbb", profile: "3g.40gb"},
	}
	m := &fakeMachine{gpus: []*fakeGPU{whole, split}, newSymbols: true}
	n, err := openNVML(m.lib(), NVMLOptions{Owners: ownerMap{4242: {RunID: "r1", Stage: "train", Attempt: 1}}})
	require.NoError(t, err)
	snap, err := n.Snapshot(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 2)
	assert.Empty(t, snap.GPUs[0].MIG)
	g := snap.GPUs[1]
	require.Len(t, g.MIG, 2, "slices at MIG indices 0 and 2; the gaps are skipped")
	assert.Equal(t, MIGDevice{Index: 0, UUID: "MIG-aaaa", Profile: "3g.40gb", MemTotalMiB: 40 << 10, MemUsedMiB: 12 << 10,
		MemFreeMiB: 28 << 10, Processes: []Process{{PID: 4242, MemMiB: 12 << 10, Owner: &Owner{RunID: "r1", Stage: "train", Attempt: 1}}}}, g.MIG[0])
	assert.Equal(t, 2, g.MIG[1].Index)

	devs := snap.Devices()
	var uuids, labels []string
	for _, d := range devs {
		uuids, labels = append(uuids, d.UUID), append(labels, d.Label)
	}
	assert.Equal(t, []string{"GPU-0000", "MIG-aaaa", "MIG-bbbb"}, uuids, "the MIG GPU itself is never offered")
	assert.Equal(t, []string{"GPU 0", "GPU 1 MIG 0 (3g.40gb)", "GPU 1 MIG 2 (3g.40gb)"}, labels)
	assert.Equal(t, "GPU-0001", devs[1].Parent)
	assert.Equal(t, int64(28<<10), devs[1].MemFreeMiB)

	split.slices = nil
	snap, err = n.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Len(t, snap.Devices(), 1, "a GPU in MIG mode without slices offers nothing")
}

// TestNVLinkGroups: groups are NVML's NVLink peers, transitively; with no
// NVLink at all no GPU is grouped. The links are read once.
func TestNVLinkGroups(t *testing.T) {
	gs := []*fakeGPU{gpuN(0), gpuN(1), gpuN(2), gpuN(3), gpuN(4)}
	link := func(a, b int) {
		for _, p := range [][2]int{{a, b}, {b, a}} {
			if gs[p[0]].links == nil {
				gs[p[0]].links = map[string]bool{}
			}
			gs[p[0]].links[gs[p[1]].uuid] = true
		}
	}
	link(0, 1)
	link(2, 3)
	link(3, 4)
	m := &fakeMachine{gpus: gs, newSymbols: true}
	n, err := openNVML(m.lib(), NVMLOptions{})
	require.NoError(t, err)
	snap, err := n.Snapshot(context.Background())
	require.NoError(t, err)
	var groups []string
	for _, g := range snap.GPUs {
		groups = append(groups, g.Group)
	}
	assert.Equal(t, []string{"nvlink0", "nvlink0", "nvlink2", "nvlink2", "nvlink2"}, groups)
	calls := len(m.dev(gs[0]).GetP2PStatusCalls())
	_, err = n.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Equal(t, calls, len(m.dev(gs[0]).GetP2PStatusCalls()), "topology is read once for the same GPUs")

	plain := &fakeMachine{gpus: []*fakeGPU{gpuN(0), gpuN(1)}, newSymbols: true}
	n, err = openNVML(plain.lib(), NVMLOptions{})
	require.NoError(t, err)
	snap, err = n.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "", snap.GPUs[0].Group, "no NVLink: no groups")
	assert.Equal(t, "", snap.GPUs[1].Group)
}

func TestThrottleReasonsUseTheSymbolTheDriverHas(t *testing.T) {
	tests := []struct {
		name       string
		newSymbols bool
		unset      string // the func that must not be called
		want       []string
	}{
		{"new driver: clocks event reasons", true, "GetCurrentClocksThrottleReasons", []string{"sw_power_cap"}},
		{"old driver: clocks throttle reasons", false, "GetCurrentClocksEventReasons", []string{"hw_thermal_slowdown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gpuN(0)
			g.nilFuncs = []string{tt.unset}
			m := &fakeMachine{gpus: []*fakeGPU{g}, newSymbols: tt.newSymbols}
			n, err := openNVML(m.lib(), NVMLOptions{})
			require.NoError(t, err)
			snap, err := n.Snapshot(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, snap.GPUs[0].ThrottleReasons)
		})
	}
}

func TestSlowAttributesAreCached(t *testing.T) {
	m := &fakeMachine{gpus: []*fakeGPU{gpuN(0)}, newSymbols: true}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := openNVML(m.lib(), NVMLOptions{SlowEvery: 5 * time.Second, Now: func() time.Time { return now }})
	require.NoError(t, err)
	ctx := context.Background()
	for _, step := range []time.Duration{0, time.Second, 3 * time.Second} { // t = 0, 1, 4 s
		now = now.Add(step)
		_, err := n.Snapshot(ctx)
		require.NoError(t, err)
	}
	d := m.dev(m.gpus[0])
	assert.Len(t, d.GetNameCalls(), 1, "slow attributes read once within 5 s")
	assert.Len(t, d.GetMemoryInfoCalls(), 3, "fast ones every sample")
	now = now.Add(time.Second) // t = 5 s
	_, err = n.Snapshot(ctx)
	require.NoError(t, err)
	assert.Len(t, d.GetNameCalls(), 2, "slow attributes refreshed after 5 s")
}

func TestGPUThatDisappearsStaysVisibleAsUnhealthy(t *testing.T) {
	m := &fakeMachine{gpus: []*fakeGPU{gpuN(0), gpuN(1)}, newSymbols: true}
	n, err := openNVML(m.lib(), NVMLOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	snap, err := n.Snapshot(ctx)
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 2)

	m.gpus = m.gpus[:1] // GPU 1 falls off the bus
	snap, err = n.Snapshot(ctx)
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 2)
	assert.True(t, snap.GPUs[0].Healthy)
	gone := snap.GPUs[1]
	assert.Equal(t, "GPU-0001", gone.UUID)
	assert.False(t, gone.Healthy)
	assert.Contains(t, gone.HealthReason, "no longer visible")
}

func TestSnapshotFailsWhenCountFails(t *testing.T) {
	lib := (&fakeMachine{}).lib()
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	n, err := openNVML(lib, NVMLOptions{})
	require.NoError(t, err)
	_, err = n.Snapshot(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nvmlDeviceGetCount")
}

func TestCloseShutsDownOnce(t *testing.T) {
	lib := (&fakeMachine{}).lib()
	n, err := openNVML(lib, NVMLOptions{})
	require.NoError(t, err)
	require.NoError(t, n.Close())
	require.NoError(t, n.Close())
	assert.Len(t, lib.ShutdownCalls(), 1)
	_, err = n.Snapshot(context.Background())
	assert.Error(t, err)
}

func TestWatchHealthTurnsEventsIntoFlags(t *testing.T) {
	g0, g1, g2 := gpuN(0), gpuN(1), gpuN(2)
	m := &fakeMachine{gpus: []*fakeGPU{g0, g1, g2}, newSymbols: true}
	// GPU 2 reports no events at all: it is simply not watched.
	g2.fail = map[string]nvml.Return{"GetSupportedEventTypes": nvml.ERROR_NOT_SUPPORTED}
	lib := m.lib()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	script := []struct {
		data nvml.EventData
		ret  nvml.Return
	}{
		{nvml.EventData{Device: m.dev(g0), EventType: nvml.EventTypeXidCriticalError, EventData: 31}, nvml.SUCCESS},
		{nvml.EventData{}, nvml.ERROR_TIMEOUT},
		{nvml.EventData{Device: m.dev(g1), EventType: nvml.EventTypeDoubleBitEccError}, nvml.SUCCESS},
		{nvml.EventData{Device: m.dev(g0), EventType: nvml.EventTypeXidCriticalError, EventData: 79}, nvml.SUCCESS},
	}
	set := &mock.EventSet{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}
	set.WaitFunc = func(uint32) (nvml.EventData, nvml.Return) {
		i := len(set.WaitCalls()) - 1
		if i >= len(script) {
			cancel() // the script is done: end the loop
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		return script[i].data, script[i].ret
	}
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }

	var events []HealthEvent
	n, err := openNVML(lib, NVMLOptions{OnHealth: func(e HealthEvent) { events = append(events, e) }})
	require.NoError(t, err)
	require.NoError(t, n.WatchHealth(ctx))

	// Only the supported health events are registered.
	reg := m.dev(g0).RegisterEventsCalls()
	require.Len(t, reg, 1)
	assert.Equal(t, uint64(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError), reg[0].V)
	assert.Empty(t, m.dev(g2).RegisterEventsCalls())
	assert.Len(t, set.FreeCalls(), 1)

	require.Len(t, events, 3)
	assert.False(t, events[0].Critical, "XID 31 is the program's fault")
	assert.Equal(t, "ecc_uncorrectable", events[1].Kind)
	assert.True(t, events[2].Critical)
	assert.Equal(t, uint64(79), events[2].XID)

	snap, err := n.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []uint64{31, 79}, snap.GPUs[0].XIDs, "XIDs since the last snapshot, for the sentinel")
	assert.Nil(t, snap.GPUs[1].XIDs)
	assert.False(t, snap.GPUs[0].Healthy, "XID 79")
	assert.False(t, snap.GPUs[1].Healthy, "uncorrectable ECC")
	assert.True(t, snap.GPUs[2].Healthy)
	assert.Contains(t, snap.GPUs[1].HealthReason, "uncorrectable ECC")
	snap, err = n.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Nil(t, snap.GPUs[0].XIDs, "each XID is reported once")
	assert.False(t, snap.GPUs[0].Healthy, "but the GPU stays out of service")
}

func TestWatchHealthGivesUpOnARepeatedlyFailingWait(t *testing.T) {
	m := &fakeMachine{gpus: []*fakeGPU{gpuN(0)}, newSymbols: true}
	lib := m.lib()
	set := &mock.EventSet{
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_UNKNOWN },
	}
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	n, err := openNVML(lib, NVMLOptions{})
	require.NoError(t, err)
	err = n.WatchHealth(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nvmlEventSetWait")
	assert.True(t, errors.Is(err, err))
}

// BenchmarkNVMLSnapshot8GPUs is the cost of one sample of 8 GPUs through
// the NVML code path, one process each. The mock stands in for the driver,
// so this is Niuma's own cost plus the mock's call recording (a mutex and
// an append per call), without the driver's ioctl time.
func BenchmarkNVMLSnapshot8GPUs(b *testing.B) {
	for _, bc := range []struct {
		name      string
		slowEvery time.Duration
	}{
		{"slow attributes cached", time.Hour},
		{"slow attributes read every sample", time.Nanosecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := &fakeMachine{newSymbols: true}
			for i := range 8 {
				g := gpuN(i)
				g.procs = []nvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: 10 << 30}}
				m.gpus = append(m.gpus, g)
			}
			n, err := openNVML(m.lib(), NVMLOptions{Owners: ownerMap{}, SlowEvery: bc.slowEvery})
			require.NoError(b, err)
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := n.Snapshot(ctx); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time, not wall time: the target is under 1 ms of CPU.
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestGPUWithoutAUUIDIsNeverOffered(t *testing.T) {
	m := &fakeMachine{gpus: []*fakeGPU{gpuN(0), gpuN(1)}, newSymbols: true}
	lib := m.lib()
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 1 {
			return nil, nvml.ERROR_UNKNOWN
		}
		return m.dev(m.gpus[i]), nvml.SUCCESS
	}
	n, err := openNVML(lib, NVMLOptions{})
	require.NoError(t, err)
	snap, err := n.Snapshot(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 2)
	assert.True(t, snap.GPUs[0].Healthy)
	bad := snap.GPUs[1]
	assert.False(t, bad.Healthy)
	assert.Contains(t, bad.HealthReason, "nvmlDeviceGetHandleByIndex: ")
}
