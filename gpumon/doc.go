// Package gpumon will give the rest of Niuma one picture of the machine's
// GPUs: an inventory for the shepherd, telemetry for the board and the
// sentinel. Until the NVML and simulated sources land it reports a machine
// without GPUs, which is the truth on a machine with no NVIDIA driver.
package gpumon
