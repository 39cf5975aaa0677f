// Package shepherd decides where queued stages may run: given a snapshot of
// the GPUs, the runs already placed and the queue, it places each request on
// GPUs, says in plain words why it waits, or asks for spot runs to be
// preempted for it.
//
// It is pure and deterministic: no I/O, no clocks (the caller passes Now),
// no randomness. The engine calls it with gpumon's snapshot; shepherd/sim
// replays real traces through the same code.
//
// A pass (Schedule) is shaped like the Kubernetes scheduler framework:
//
//	queue ──Rank──► for each request, best first:
//	                  GPUs ──Filters──► feasible ──Scorers──► pick (a gang: one NVLink group)
//	                  fits?      yes ─► place (the pass's view of the GPUs is updated)
//	                             no  ─► wait, with the filters' reasons in words;
//	                                    the first that could ever fit is the head:
//	                                    preempt spot runs for it, or reserve the GPUs
//	                                    it will get (others backfill them only if
//	                                    their estimate ends before the reservation)
//
// Filters (Healthy, Cool, Memory, Share, Reserved) answer per GPU with a
// *Status (nil = fits); Scorers (LeastFree, LowestIndex, LeastFragment,
// FewestTenants) rank the GPUs that pass. Policies compose them: FIFO and
// BestFit are the references, Herd the default. FirstFit is the older
// one-request helper, kept for callers that place one stage at a time.
//
// This package must never import an I/O package (os, net, database/sql,
// the engine or gpumon).
package shepherd
