// Package sim replays GPU-cluster job traces (Microsoft Philly, Alibaba PAI
// 2023) through the shepherd's policies: a discrete-event simulation of one
// workstation's GPUs that calls shepherd.Schedule — the same code the engine
// runs — at every arrival and completion, with every request made by
// shepherd.Build from a Need, as the engine makes a ready stage's. It
// reports job completion times, queueing delays, utilisation, stranded
// memory, starvation and preemptions.
//
// Run times are known as an estimate regime says (Estimates): not at all,
// from shepherd/predict fed with the trace's earlier completions, or as a
// user's noisy guess. Evaluate replays every virtual cluster's windows at
// several loads; Pack offers PAI's pods to a workstation or to PAI's own
// nodes until the first refusal.
//
// The traces record neither GPU memory nor priorities, so loaders derive
// them with a seeded generator (documented on Derive); the same seed gives
// the same jobs. Like shepherd, sim does no I/O of its own: loaders read an
// io.Reader the caller opened.
package sim
