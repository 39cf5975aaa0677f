//go:build linux && cgo

package gpumon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLOptions tunes an NVML source. The zero value is usable.
type NVMLOptions struct {
	// SlowEvery is how long slow attributes (name, PCI bus id, temperature
	// thresholds, power limit, ECC counts, MIG mode) are cached; default 5 s.
	SlowEvery time.Duration
	// Owners maps a GPU process to its Niuma run; nil leaves owners unknown.
	Owners OwnerResolver
	// OnHealth, when set, is told of every health event WatchHealth sees.
	OnHealth func(HealthEvent)
	// Logger receives what WatchHealth cannot act on; nil discards it.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now. Tests set it.
	Now func() time.Time
}

// NVML is the source for a machine with NVIDIA GPUs. Open it with OpenNVML;
// Close it when done.
type NVML struct {
	lib  nvml.Interface
	opts NVMLOptions

	// newEventReasons is whether the driver has
	// nvmlDeviceGetCurrentClocksEventReasons (drivers from 535 on), which
	// replaced the deprecated ...ClocksThrottleReasons.
	newEventReasons bool
	driver          string

	mu       sync.Mutex
	slow     map[string]slowAttrs // by UUID
	health   map[string]string    // UUID -> why it is unhealthy; sticky until restart
	xids     map[string][]uint64  // UUID -> XIDs seen since the last snapshot
	lastSeen []GPU                // the previous sample's GPUs, to notice one that vanished
	closed   bool
	// topology is the NVLink group of each GPU, by UUID, read once for the
	// set of GPUs topoKey names (links do not change while it stays).
	topology map[string]string
	topoKey  string
}

// slowAttrs are the attributes that change rarely, read every SlowEvery.
type slowAttrs struct {
	at                   time.Time
	name, pciBusID       string
	slowdownC, shutdownC *float64
	powerLimitW          *float64
	eccCorr, eccUncorr   *int64
	migEnabled           *bool
}

// OpenNVML loads the NVIDIA management library and initialises it. On a
// machine without the driver it returns an error that says so in words
// (the reason to show the user); nothing else has been called on the
// library then, which is the only safe thing after a failed Init.
func OpenNVML(opts NVMLOptions) (*NVML, error) {
	return openNVML(nvml.New(), opts)
}

func openNVML(lib nvml.Interface, opts NVMLOptions) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, initError(ret)
	}
	if opts.SlowEvery <= 0 {
		opts.SlowEvery = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &NVML{lib: lib, opts: opts, slow: map[string]slowAttrs{}, health: map[string]string{}, xids: map[string][]uint64{}}
	// Newer symbols are looked up before they are called: calling one the
	// installed driver lacks is a fatal symbol lookup error.
	n.newEventReasons = lib.Extensions().LookupSymbol("nvmlDeviceGetCurrentClocksEventReasons") == nil
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		n.driver = v
	}
	return n, nil
}

// initError turns a failed nvmlInit into the sentence a user reads.
func initError(ret nvml.Return) error {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return errors.New("NVML library not found: is the NVIDIA driver installed?")
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return errors.New("NVIDIA driver is not loaded: check `nvidia-smi`, or reboot after installing the driver")
	case nvml.ERROR_NO_PERMISSION:
		return errors.New("no permission to talk to the NVIDIA driver: check the permissions of /dev/nvidia*")
	default:
		return fmt.Errorf("nvmlInit: %v", ret)
	}
}

// Driver is the NVIDIA driver version, or "" when NVML did not say.
func (n *NVML) Driver() string { return n.driver }

// Close shuts NVML down. Snapshot must not be called afterwards.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %v", ret)
	}
	return nil
}

// Snapshot implements Source: one sample of every GPU. Only a failure to
// count the GPUs fails the whole snapshot; a call failing for one GPU is
// recorded in that GPU's Errors.
func (n *NVML) Snapshot(ctx context.Context) (Snapshot, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Snapshot{}, errors.New("GPU snapshot: NVML is already shut down")
	}
	now := n.opts.Now()
	snap := Snapshot{Source: SourceNVML, At: now, Driver: n.driver}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return Snapshot{}, fmt.Errorf("nvmlDeviceGetCount: %v", ret)
	}
	seen := map[string]bool{}
	devs := make([]nvml.Device, 0, count)
	for i := 0; i < count; i++ {
		g, dev := n.sampleDevice(ctx, i, now)
		if g.UUID != "" {
			seen[g.UUID] = true
		}
		snap.GPUs = append(snap.GPUs, g)
		devs = append(devs, dev)
	}
	n.groups(snap.GPUs, devs)
	// A GPU that was there a moment ago and is gone now has fallen off the
	// bus (or was unbound): show it, unhealthy, rather than let it vanish.
	for _, old := range n.lastSeen {
		if old.UUID == "" || seen[old.UUID] {
			continue
		}
		n.health[old.UUID] = "the GPU is no longer visible to NVML (fell off the bus?): check `nvidia-smi` and dmesg"
		snap.GPUs = append(snap.GPUs, GPU{Index: old.Index, UUID: old.UUID, Name: old.Name, PCIBusID: old.PCIBusID,
			MemTotalMiB: old.MemTotalMiB, HealthReason: n.health[old.UUID]})
	}
	n.lastSeen = snap.GPUs
	if len(snap.GPUs) == 0 {
		snap.Reason = "NVML sees no GPU"
	}
	return snap, nil
}

// lostReason is what a GPU that fell off the bus shows.
const lostReason = "the GPU has fallen off the bus (NVML: GPU is lost): reboot, and reseat it if it happens again"

// probe checks NVML returns for one device.
type probe struct {
	g    *GPU
	lost bool
}

// ok reports whether ret is SUCCESS. NOT_SUPPORTED is a normal answer (the
// field stays absent); GPU_IS_LOST stops every further call on the device;
// any other error is recorded under the call's name.
func (p *probe) ok(call string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED:
	case nvml.ERROR_GPU_IS_LOST:
		p.lost = true
	default:
		p.g.Errors = append(p.g.Errors, fmt.Sprintf("%s: %v", call, ret))
	}
	return false
}

func (n *NVML) sampleDevice(ctx context.Context, i int, now time.Time) (g GPU, dev nvml.Device) {
	g = GPU{Index: i}
	p := &probe{g: &g}
	// Health is settled last, whichever return the sample took.
	defer func() {
		switch {
		case p.lost:
			g.HealthReason = lostReason
			if g.UUID != "" {
				n.health[g.UUID] = lostReason
			}
		case g.UUID == "":
			// Without a UUID the GPU cannot be assigned; never offer it.
			g.HealthReason = "NVML could not identify this GPU: " + strings.Join(g.Errors, "; ")
		}
		if why, bad := n.health[g.UUID]; bad && g.UUID != "" {
			g.HealthReason = why
		}
		g.Healthy = g.HealthReason == ""
	}()
	dev, ret := n.lib.DeviceGetHandleByIndex(i)
	if !p.ok("nvmlDeviceGetHandleByIndex", ret) {
		return g, nil
	}
	uuid, ret := dev.GetUUID()
	if !p.ok("nvmlDeviceGetUUID", ret) {
		return g, nil
	}
	g.UUID = uuid
	if x := n.xids[uuid]; len(x) > 0 {
		g.XIDs = x
		delete(n.xids, uuid)
	}

	sa, cached := n.slow[uuid]
	if !cached || now.Sub(sa.at) >= n.opts.SlowEvery {
		sa = n.readSlow(dev, p, now)
		if p.lost {
			return g, dev
		}
		n.slow[uuid] = sa
	}
	g.Name, g.PCIBusID = sa.name, sa.pciBusID
	g.TempSlowdownC, g.TempShutdownC, g.PowerLimitW = sa.slowdownC, sa.shutdownC, sa.powerLimitW
	g.ECCCorrected, g.ECCUncorrected, g.MIGEnabled = sa.eccCorr, sa.eccUncorr, sa.migEnabled

	if m, ret := dev.GetMemoryInfo(); p.ok("nvmlDeviceGetMemoryInfo", ret) {
		g.MemTotalMiB, g.MemUsedMiB, g.MemFreeMiB = int64(m.Total>>20), int64(m.Used>>20), int64(m.Free>>20)
	}
	if p.lost {
		return g, dev
	}
	// With MIG enabled utilisation is per instance: NVML answers
	// NOT_SUPPORTED here, and the fields stay absent.
	if u, ret := dev.GetUtilizationRates(); p.ok("nvmlDeviceGetUtilizationRates", ret) {
		g.UtilPercent, g.MemUtilPercent = ptr(float64(u.Gpu)), ptr(float64(u.Memory))
	}
	if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); p.ok("nvmlDeviceGetTemperature", ret) {
		g.TempC = ptr(float64(t))
	}
	if mw, ret := dev.GetPowerUsage(); p.ok("nvmlDeviceGetPowerUsage", ret) {
		g.PowerW = ptr(float64(mw) / 1000)
	}
	if c, ret := dev.GetClockInfo(nvml.CLOCK_SM); p.ok("nvmlDeviceGetClockInfo(SM)", ret) {
		g.SMClockMHz = ptr(int64(c))
	}
	if c, ret := dev.GetClockInfo(nvml.CLOCK_MEM); p.ok("nvmlDeviceGetClockInfo(MEM)", ret) {
		g.MemClockMHz = ptr(int64(c))
	}
	if n.newEventReasons {
		if r, ret := dev.GetCurrentClocksEventReasons(); p.ok("nvmlDeviceGetCurrentClocksEventReasons", ret) {
			g.ThrottleReasons, g.ThrottleMask = throttleNames(r), ptr(r)
		}
	} else if r, ret := dev.GetCurrentClocksThrottleReasons(); p.ok("nvmlDeviceGetCurrentClocksThrottleReasons", ret) {
		g.ThrottleReasons, g.ThrottleMask = throttleNames(r), ptr(r)
	}
	if f, ret := dev.GetFanSpeed(); p.ok("nvmlDeviceGetFanSpeed", ret) {
		g.FanPercent = ptr(float64(f))
	}
	if p.lost {
		return g, dev
	}
	if procs, ret := dev.GetComputeRunningProcesses(); p.ok("nvmlDeviceGetComputeRunningProcesses", ret) {
		g.Processes = make([]Process, 0, len(procs))
		for _, pr := range procs {
			proc := Process{PID: int(pr.Pid), MemMiB: int64(pr.UsedGpuMemory >> 20)}
			if n.opts.Owners != nil {
				if o, ok := n.opts.Owners.Owner(ctx, proc.PID); ok {
					proc.Owner = &o
				}
			}
			g.Processes = append(g.Processes, proc)
		}
	}
	if g.MIGEnabled != nil && *g.MIGEnabled && !p.lost {
		g.MIG = n.sampleMIG(ctx, dev, p)
	}
	return g, dev
}

// sampleMIG reads the MIG slices of a GPU in MIG mode: each slice's UUID,
// profile, memory and processes. An index without a slice is skipped; a
// call failing for one slice is recorded in that slice's Errors.
func (n *NVML) sampleMIG(ctx context.Context, dev nvml.Device, p *probe) []MIGDevice {
	count, ret := dev.GetMaxMigDeviceCount()
	if !p.ok("nvmlDeviceGetMaxMigDeviceCount", ret) {
		return nil
	}
	out := []MIGDevice{}
	for i := 0; i < count; i++ {
		m, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no slice at this index
		}
		if !p.ok(fmt.Sprintf("nvmlDeviceGetMigDeviceHandleByIndex(%d)", i), ret) {
			continue
		}
		d := MIGDevice{Index: i, Processes: []Process{}}
		mp := &probe{g: &GPU{}}
		if uuid, ret := m.GetUUID(); mp.ok("nvmlDeviceGetUUID", ret) {
			d.UUID = uuid
		}
		if name, ret := m.GetName(); mp.ok("nvmlDeviceGetName", ret) {
			d.Profile = migProfile(name)
		}
		if mem, ret := m.GetMemoryInfo(); mp.ok("nvmlDeviceGetMemoryInfo", ret) {
			d.MemTotalMiB, d.MemUsedMiB, d.MemFreeMiB = int64(mem.Total>>20), int64(mem.Used>>20), int64(mem.Free>>20)
		}
		if procs, ret := m.GetComputeRunningProcesses(); mp.ok("nvmlDeviceGetComputeRunningProcesses", ret) {
			for _, pr := range procs {
				proc := Process{PID: int(pr.Pid), MemMiB: int64(pr.UsedGpuMemory >> 20)}
				if n.opts.Owners != nil {
					if o, ok := n.opts.Owners.Owner(ctx, proc.PID); ok {
						proc.Owner = &o
					}
				}
				d.Processes = append(d.Processes, proc)
			}
		}
		d.Errors = mp.g.Errors
		if mp.lost {
			p.lost = true
		}
		out = append(out, d)
	}
	return out
}

// migProfile reads the profile from a MIG device's name, "NVIDIA A100-SXM4-80GB MIG 3g.40gb".
func migProfile(name string) string {
	if i := strings.LastIndex(name, "MIG "); i >= 0 {
		return strings.TrimSpace(name[i+4:])
	}
	return name
}

// groups sets each GPU's NVLink group: GPUs joined by NVLink (NVML's P2P
// status over NVLink, transitively) share a group named after the lowest
// index in it, "nvlink0"; a GPU without NVLink peers gets its own group.
// When no two GPUs are linked, none is grouped. The links are read once
// per set of GPUs.
func (n *NVML) groups(gpus []GPU, devs []nvml.Device) {
	var key strings.Builder
	for _, g := range gpus {
		key.WriteString(g.UUID + " ")
	}
	if key.String() != n.topoKey || n.topology == nil {
		n.topoKey, n.topology = key.String(), n.readTopology(gpus, devs)
	}
	for i := range gpus {
		gpus[i].Group = n.topology[gpus[i].UUID]
	}
}

func (n *NVML) readTopology(gpus []GPU, devs []nvml.Device) map[string]string {
	parent := make([]int, len(gpus))
	for i := range parent {
		parent[i] = i
	}
	var root func(int) int
	root = func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	linked := false
	for i := range gpus {
		for j := i + 1; j < len(gpus); j++ {
			if devs[i] == nil || devs[j] == nil || gpus[i].UUID == "" || gpus[j].UUID == "" {
				continue
			}
			st, ret := devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_NVLINK)
			if ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK {
				linked = true
				if a, b := root(i), root(j); a != b {
					parent[max(a, b)] = min(a, b)
				}
			}
		}
	}
	out := map[string]string{}
	if !linked {
		return out
	}
	for i, g := range gpus {
		if g.UUID != "" {
			out[g.UUID] = fmt.Sprintf("nvlink%d", gpus[root(i)].Index)
		}
	}
	return out
}

// readSlow reads the attributes cached for SlowEvery.
func (n *NVML) readSlow(dev nvml.Device, p *probe, now time.Time) slowAttrs {
	sa := slowAttrs{at: now}
	if s, ret := dev.GetName(); p.ok("nvmlDeviceGetName", ret) {
		sa.name = s
	}
	if p.lost {
		return sa
	}
	if pci, ret := dev.GetPciInfo(); p.ok("nvmlDeviceGetPciInfo", ret) {
		sa.pciBusID = cString(pci.BusId[:])
	}
	if p.lost {
		return sa
	}
	if t, ret := dev.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN); p.ok("nvmlDeviceGetTemperatureThreshold(SLOWDOWN)", ret) {
		sa.slowdownC = ptr(float64(t))
	}
	if p.lost {
		return sa
	}
	if t, ret := dev.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SHUTDOWN); p.ok("nvmlDeviceGetTemperatureThreshold(SHUTDOWN)", ret) {
		sa.shutdownC = ptr(float64(t))
	}
	if mw, ret := dev.GetEnforcedPowerLimit(); p.ok("nvmlDeviceGetEnforcedPowerLimit", ret) {
		sa.powerLimitW = ptr(float64(mw) / 1000)
	}
	if p.lost {
		return sa
	}
	if c, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); p.ok("nvmlDeviceGetTotalEccErrors(CORRECTED)", ret) {
		sa.eccCorr = ptr(int64(c))
	}
	if c, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); p.ok("nvmlDeviceGetTotalEccErrors(UNCORRECTED)", ret) {
		sa.eccUncorr = ptr(int64(c))
	}
	if cur, _, ret := dev.GetMigMode(); p.ok("nvmlDeviceGetMigMode", ret) {
		sa.migEnabled = ptr(cur == nvml.DEVICE_MIG_ENABLE)
	}
	return sa
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// throttleBits names the clock event reasons; the bit values are the same
// under the old "throttle" and the new "event" names.
var throttleBits = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksEventReasonGpuIdle, "gpu_idle"},
	{nvml.ClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
	{nvml.ClocksEventReasonSwPowerCap, "sw_power_cap"},
	{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"},
	{nvml.ClocksEventReasonSyncBoost, "sync_boost"},
	{nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
	{nvml.ClocksEventReasonDisplayClockSetting, "display_clock_setting"},
}

func throttleNames(mask uint64) []string {
	out := []string{}
	for _, b := range throttleBits {
		if mask&b.bit != 0 {
			out = append(out, b.name)
		}
	}
	return out
}
