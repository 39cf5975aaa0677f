// Package gpumon gives the rest of Niuma one picture of the machine's GPUs:
// the inventory the engine hands to the shepherd, the telemetry the board
// and the sentinel read, and the per-minute record a report shows after a
// run has ended. There is no second GPU model anywhere else in the code.
//
// Three sources yield a Snapshot:
//
//   - NVML (nvml_linux.go): live telemetry through github.com/NVIDIA/go-nvml.
//     Nothing but Init is called unless Init succeeded, because any other
//     NVML call on a failed library kills the process. A field NVML answers
//     ERROR_NOT_SUPPORTED for is absent (a nil pointer), never zero. Health
//     events (XID critical errors, uncorrectable ECC) mark a GPU unhealthy,
//     and the shepherd does not offer an unhealthy GPU.
//   - Simulated (sim.go): GPUs described by a spec such as "4xH100-80GB"
//     (or, in MIG mode, "1xA100-80GB:mig=3g.40gb+2x2g.20gb"), whose
//     telemetry follows the holders the engine assigned to them. Every
//     snapshot of it says Simulated, and Open never picks it when NVML sees a
//     real GPU.
//   - Absent: no GPU, with the reason in words.
//
// A GPU in MIG mode lists its slices (mig.go); Snapshot.Devices is what may
// be placed on: whole GPUs and slices, never a GPU in MIG mode itself. NVML's
// NVLink peers give each GPU its Group.
//
// A Sampler (sampler.go) polls a source at 1 Hz, keeps an hour of history
// per GPU in memory, and hands per-minute min/mean/max records to a store.
// Owners (owners.go) maps a GPU process to the Niuma run that owns it,
// through its process group (local stages) or its container's labels.
//
// gpumon imports no other Niuma package: the engine, the app and the UI
// import it. It reads /proc and talks to NVML; it never writes the database
// itself (the Sampler hands records to a function the app provides).
package gpumon
