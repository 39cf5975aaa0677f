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
// TensorBoard logs are a second source: TBFollower follows the event files
// a stage writes under its tb/ directory and turns their scalars into the
// same points (tag → key, step, wall time). EventFileReader reads the
// TFRecord framing (length and data, each with a masked CRC-32C) and
// EventDecoder the Event/Summary protobuf fields by hand with protowire, so
// no TensorFlow is needed: simple_value and one-element tensors count; a
// record still being written is waited for; a damaged file is reported once
// and read past where the framing allows.
//
// metrics imports storage (for storage.MetricPoint and the Store it writes
// to) and nothing above it: never engine, ui or app.
package metrics
