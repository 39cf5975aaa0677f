// Package sentinel will watch metric streams and GPU telemetry for trouble
// (NaN, divergence, exploding gradients, overheating, leaks, stalls) and turn
// what it sees into anomalies with evidence, a cause and a suggested fix.
//
// It is pure: streams in, anomalies out; it imports no I/O packages. It holds
// no detectors yet.
package sentinel
