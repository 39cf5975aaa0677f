// Package shepherd decides where queued stages may run: given a snapshot of
// the GPUs and hosts, the runs already placed and the queue, it places each
// request on GPUs (and a host's CPUs and memory), says why it waits — a
// reason code with its parameters and a sentence — or asks for spot runs to
// be preempted for it.
//
// It is pure and deterministic: no I/O, no clocks (the caller passes Now),
// no randomness. The engine and shepherd/sim both make requests with Build
// from a Need (what a stage asks for, and the estimate a user gave or
// shepherd/predict learnt), and both run the same Schedule.
//
// A pass (Schedule) is shaped like the Kubernetes scheduler framework:
//
//	queue ──Rank──► for each request, best first:
//	                  GPUs ──Filters──► feasible ──Scorers──► pick (one host; a gang on one linked group)
//	                  fits?      yes ─► place (the pass's view of the GPUs and hosts is updated)
//	                             no  ─► wait, with a Reason (code, parameters, words);
//	                                    the first that could ever fit is the head:
//	                                    preempt spot runs for it, or reserve the GPUs
//	                                    it will get (others backfill them only if
//	                                    their high estimate ends before the reservation)
//
// Filters (Healthy, Cool, Memory, HostRoom, Share, Reserved) answer per GPU
// with a *Status (nil = fits); Scorers (Fragmentation, FewestTenants,
// LeastFree, LowestIndex, LeastFragment) rank the GPUs that pass. Policies
// compose them: Herd is the default, BestFit, LAS (Tiresias-style) and FIFO
// the references. FirstFit is the older one-request helper.
//
// Herd is built to hold up when estimates are missing or wrong:
//   - rank: priority aged towards the top (capped there, so that an old,
//     large run does not jump every short one), then least attained
//     service (a preempted run goes behind fresh ones), then the shortest
//     estimated GPU-time, then a spot run before one that may not be
//     stopped (if it runs long it can be stopped again; the other holds
//     its GPUs to its end), then — with no estimate — the fewest GPUs;
//   - preempt spot runs for a higher priority run, or for a fresh one of
//     the same priority when they have had more than a GPU-hour; but never
//     for a run with more work than the stopped runs have left (or, of
//     unknown length, wider than them): a run that cannot be stopped holds
//     its GPUs to the end;
//   - no reservation by default (measured: it costs the many small runs
//     more than it saves the large one); when asked for (HerdOptions.
//     Reserve), GPUs are held for the head only when it is expected to
//     start within HoldLimit (expected ends come from estimates, or,
//     without one, a run is expected to run as long again as it has), and
//     others backfill them by their high estimate;
//   - place to keep free memory usable by the mix of runs the machine
//     serves (Fragmentation, after FGD), at most three runs on a GPU;
//     CPU-only stages on the host whose GPUs are most taken, so that CPUs
//     next to free GPUs stay for GPU stages (SpareGPUHosts).
//
// A physical GPU that is a MIG slice's Parent is never offered; its slices
// are. This package must never import an I/O package (os, net,
// database/sql, the engine or gpumon).
package shepherd
