// Package engine runs experiments: it turns a template and chosen values into
// runs, writes them to storage first, and drives every stage through its
// state machine (queued → running → succeeded / failed / cancelled) from one
// reconciler goroutine that owns the in-memory view.
//
// The engine starts stages whose needs have succeeded through an executor
// (see engine/executor), retries failed attempts with backoff, cancels whole
// runs (SIGTERM, then SIGKILL after a grace period), and after a restart
// adopts, finishes or retries whatever an earlier process left running.
// Subscribers (the window, the CLI) follow it through an event stream.
//
// Stages that run on this machine are placed by the shepherd, one pass over
// every ready stage at a time: each stage's request is shepherd.Build of
// what its row and run say it needs (placement.go), with run times the
// predictor learnt from the archive (eta.go); what the pass decides — a
// wait reason and its code, a preemption and its resume — is written by
// shepherdTransition.
//
// Only one engine process owns a data directory at a time (a lock file);
// others act as clients that submit and read through storage.
package engine
