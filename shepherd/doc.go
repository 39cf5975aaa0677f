// Package shepherd decides where queued stages may run: given a snapshot of
// the GPUs and the queue, it places each request on GPUs or says, in plain
// words, why it waits.
//
// It is pure and deterministic: no I/O, no clocks, no randomness. The engine
// calls it with gpumon's snapshot; the simulator will call the same code.
package shepherd
