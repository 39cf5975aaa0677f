// Package sim replays GPU-cluster job traces (Microsoft Philly, Alibaba PAI
// 2023) through the shepherd's policies: a discrete-event simulation of one
// workstation's GPUs that calls shepherd.Schedule — the same code the engine
// runs — at every arrival and completion, and reports job completion times,
// queueing delays, utilisation, stranded memory, starvation and preemptions.
//
// The traces record neither GPU memory nor priorities, so loaders derive
// them with a seeded generator (documented on Derive); the same seed gives
// the same jobs. Like shepherd, sim does no I/O of its own: loaders read an
// io.Reader the caller opened.
package sim
