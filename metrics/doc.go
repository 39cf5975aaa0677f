// Package metrics gets numbers out of workloads: it parses JSON-lines that a
// stage prints on stdout (or writes to metrics.jsonl) into points, follows
// growing log files, and writes points into storage in batches through one
// writer, so that a chatty training loop is never slowed by its own logging.
// Malformed lines are log text, never an error.
//
// The path of a line, one stage attempt at a time:
//
//	Follower (a growing stdout file)  ->  Ingestor.Line  ->  Writer  ->  storage
//	                                       (Parser; skip       (batches, one
//	                                        steps stored)       goroutine)
//
// Parser implements the metric line contract of docs/ARCHITECTURE.md (its
// doc comment spells it out): a JSON object per line with a numeric integral
// "step"; Python's NaN and ±Infinity are accepted. It is a
// hand-written scanner that allocates nothing in steady state, checked
// against encoding/json by FuzzParseLine.
//
// metrics imports storage (for storage.MetricPoint and the Store it writes
// to) and nothing above it: never engine, ui or app.
package metrics
