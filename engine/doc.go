// Package engine runs experiments: it turns a template and chosen values into
// runs, writes them to storage first, and drives every stage through its
// state machine (queued → running → succeeded / failed / cancelled) from one
// reconciler goroutine that owns the in-memory view. Every change of state
// goes through one function, transition (transition.go), which writes all
// the rows it changes in one storage transaction before the view changes.
//
// The engine starts stages whose needs have succeeded through an executor
// (see engine/executor), retries failed attempts with backoff, cancels whole
// runs (SIGTERM, then SIGKILL after a grace period), and after a restart
// resolves every attempt an earlier process left starting or running by
// its token: adopts it, reads how it ended, launches it if it never was,
// or retries it once it is provably gone.
// Subscribers (the window, the CLI) follow it through an event stream.
//
// Stages that run on this machine are placed by the shepherd, one pass over
// every ready stage at a time: each stage's request is shepherd.Build of
// what its row and run say it needs (placement.go), with run times the
// predictor learnt from the archive (eta.go); what the pass decides — a
// wait reason and its code, a preemption and its resume — is written, as
// every state change, by the one transition function (transition.go).
//
// Only one engine process owns a data directory at a time (a lock file);
// others act as clients that submit and read through storage.
package engine
