package gpumon

import "time"

// HealthEvent is one thing the driver reported about a GPU's health.
type HealthEvent struct {
	At   time.Time `json:"at"`
	GPU  string    `json:"gpu"`  // UUID; "" when the event names no device
	Kind string    `json:"kind"` // "xid", "ecc_uncorrectable", "ecc_correctable", "gpu_lost"
	XID  uint64    `json:"xid,omitempty"`
	// Critical events make the GPU unhealthy: it is not offered again until
	// Niuma restarts (the driver usually needs a GPU reset too).
	Critical bool   `json:"critical"`
	Message  string `json:"message"`
}

// applicationXIDs are XIDs an application causes (a bad kernel, a fault
// inside the program, a killed context): the GPU itself is fine. The same
// list as NVIDIA's k8s-device-plugin.
var applicationXIDs = map[uint64]string{
	13:  "graphics engine exception (usually a bug in the program)",
	31:  "GPU memory page fault (usually a bug in the program)",
	43:  "GPU stopped processing (the program was killed or faulted)",
	45:  "preemptive cleanup after the program was killed",
	68:  "video processor exception",
	109: "context switch timeout (usually the program)",
}

// xidEvent classifies an XID critical error.
func xidEvent(at time.Time, uuid string, xid uint64) HealthEvent {
	if why, app := applicationXIDs[xid]; app {
		return HealthEvent{At: at, GPU: uuid, Kind: "xid", XID: xid,
			Message: "XID " + itoa(xid) + ": " + why + "; the GPU stays in service"}
	}
	return HealthEvent{At: at, GPU: uuid, Kind: "xid", XID: xid, Critical: true,
		Message: "XID " + itoa(xid) + ": critical GPU error; the GPU is taken out of service: check dmesg and reset the GPU (nvidia-smi -r) or reboot"}
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}
