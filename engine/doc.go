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
// Only one engine process owns a data directory at a time (a lock file);
// others act as clients that submit and read through storage.
package engine
