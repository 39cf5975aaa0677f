//go:build linux && cgo

package gpumon

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// healthEvents are the event types WatchHealth listens for.
const healthEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError

// waitMillis bounds one wait on the event set, and so how long WatchHealth
// takes to notice that ctx is done.
const waitMillis = 5000

// WatchHealth listens to NVML's event set for XID critical errors and ECC
// errors until ctx is done, marking a GPU unhealthy on a critical one (the
// next Snapshot shows it, and the shepherd stops offering it). Run it in
// its own goroutine. A GPU that cannot report events is simply not watched.
func (n *NVML) WatchHealth(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	set, ret := n.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		n.mu.Unlock()
		return fmt.Errorf("watch GPU health: nvmlEventSetCreate: %v", ret)
	}
	watched, err := n.register(set)
	n.mu.Unlock()
	defer set.Free()
	if err != nil {
		return err
	}
	if watched == 0 {
		n.opts.Logger.Info("no GPU reports health events; GPU health is not watched")
		return nil
	}
	failures := 0
	for ctx.Err() == nil {
		e, ret := set.Wait(waitMillis)
		switch ret {
		case nvml.SUCCESS:
			failures = 0
			n.apply(e)
		case nvml.ERROR_TIMEOUT:
			failures = 0
		case nvml.ERROR_GPU_IS_LOST:
			n.record(HealthEvent{At: n.opts.Now(), Kind: "gpu_lost", Critical: true,
				Message: "a GPU has fallen off the bus (NVML: GPU is lost): reboot, and reseat it if it happens again"}, true)
		default:
			// A wait that keeps failing would spin: give up after a few.
			failures++
			if failures >= 10 {
				return fmt.Errorf("watch GPU health: nvmlEventSetWait: %v", ret)
			}
		}
	}
	return nil
}

// register adds every GPU's supported health events to set.
func (n *NVML) register(set nvml.EventSet) (watched int, err error) {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("watch GPU health: nvmlDeviceGetCount: %v", ret)
	}
	for i := 0; i < count; i++ {
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			n.opts.Logger.Warn("GPU health not watched", "gpu", i, "err", fmt.Sprintf("nvmlDeviceGetHandleByIndex: %v", ret))
			continue
		}
		supported, ret := dev.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			if ret != nvml.ERROR_NOT_SUPPORTED {
				n.opts.Logger.Warn("GPU health not watched", "gpu", i, "err", fmt.Sprintf("nvmlDeviceGetSupportedEventTypes: %v", ret))
			}
			continue
		}
		mask := uint64(healthEvents) & supported
		if mask == 0 {
			continue
		}
		switch ret := dev.RegisterEvents(mask, set); ret {
		case nvml.SUCCESS:
			watched++
		case nvml.ERROR_NOT_SUPPORTED:
		default:
			n.opts.Logger.Warn("GPU health not watched", "gpu", i, "err", fmt.Sprintf("nvmlDeviceRegisterEvents: %v", ret))
		}
	}
	return watched, nil
}

// apply turns one NVML event into a health event.
func (n *NVML) apply(e nvml.EventData) {
	uuid := ""
	if e.Device != nil {
		if u, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
			uuid = u
		}
	}
	now := n.opts.Now()
	var he HealthEvent
	switch {
	case e.EventType&nvml.EventTypeXidCriticalError != 0:
		he = xidEvent(now, uuid, e.EventData)
	case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
		he = HealthEvent{At: now, GPU: uuid, Kind: "ecc_uncorrectable", Critical: true,
			Message: "uncorrectable ECC memory error; the GPU is taken out of service: reset it (nvidia-smi -r) or reboot"}
	case e.EventType&nvml.EventTypeSingleBitEccError != 0:
		he = HealthEvent{At: now, GPU: uuid, Kind: "ecc_correctable", Message: "correctable ECC memory error (corrected by the GPU)"}
	default:
		return
	}
	n.record(he, uuid == "")
}

// record applies a health event: a critical one marks its GPU unhealthy
// (all GPUs when the event names none, as the driver gave no better clue).
func (n *NVML) record(he HealthEvent, all bool) {
	if he.Kind == "xid" && he.GPU != "" {
		n.mu.Lock()
		n.xids[he.GPU] = append(n.xids[he.GPU], he.XID)
		n.mu.Unlock()
	}
	if he.Critical {
		n.mu.Lock()
		if all {
			for _, g := range n.lastSeen {
				if g.UUID != "" {
					n.health[g.UUID] = he.Message
				}
			}
		} else {
			n.health[he.GPU] = he.Message
		}
		n.mu.Unlock()
	}
	if n.opts.OnHealth != nil {
		n.opts.OnHealth(he)
	}
}
