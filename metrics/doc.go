// Package metrics gets numbers out of workloads: it parses JSON-lines that a
// stage prints on stdout (or writes to metrics.jsonl) into points, follows
// growing log files, and writes points into storage in batches through one
// writer, so that a chatty training loop is never slowed by its own logging.
// Malformed lines are log text, never an error.
package metrics
