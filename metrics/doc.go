// Package metrics gets numbers out of workloads, with no change to them,
// and writes them into storage exactly once.
//
// One Collector per stage attempt follows every source at once, each from
// the read position (cursor) stored with its points:
//
//	stdout, stderr, metrics.jsonl ─ Follower ─► Ingestor ─┐
//	TensorBoard event files ─────── TBFollower ───────────┼─► Writer ─► storage
//	CSV logs ────────────────────── CSVFollower ──────────┘  (batches with
//	                                                          cursors, retries)
//
// An Ingestor splits each line into its '\r' segments, drops terminal
// escapes and log prefixes (textrule), reads JSON lines with a lenient
// Parser (numbers as strings, epoch/global_step/iteration/iter as the step)
// and otherwise applies the stage's text rules (presets and patterns,
// textrule). Parser is a hand-written scanner that allocates nothing in
// steady state, checked against encoding/json by FuzzParseLine and
// FuzzParseLenient. Malformed lines are log text, never an error.
//
// A stage whose template names no rules has its format found (detect.go):
// every preset of textrule.Detect reads each line, and from the first line
// one reads, the stream's points are held until a preset has its evidence;
// then they are stored, and the presets found read the rest of the stream.
// The presets found are kept in the state stored with the stream's cursor,
// so a restart reads on with them and the engine can say how the stage's
// metrics were read (Format). A plain log stores nothing.
//
// TensorBoard files are read where tools write them (tb/, runs/,
// lightning_logs/, template globs; pathglob names the key prefixes):
// EventFileReader reads the TFRecord framing (length and data, each with a
// masked CRC-32C) and EventDecoder the Event/Summary protobuf fields by
// hand with protowire, so no TensorFlow is needed; HParams reads the
// hparams plugin's session data. CSVFollower reads Lightning's metrics.csv,
// Ultralytics' results.csv, timm's summary.csv and other CSV logs;
// JSONFollower the JSON lines of mmengine (scalars.json) and detectron2
// (metrics.json), and the log_history of Hugging Face's trainer_state.json
// (unless the Trainer's printed dicts were read from its output).
//
// A stage attempt may report at most DefaultMaxKeys distinct keys, across
// all of its sources (KeyLimit): the first keys keep flowing, points of
// later ones are dropped and the Collector notes it once
// ("metrics_keys_limit"), so that a workload printing ids as keys cannot
// grow the engine's memory or the archive without bound.
//
// The Writer batches points into storage from one goroutine, each batch
// with the cursors of the lines it holds, in one transaction; store faults
// that pass (disk full, I/O error, a lock held elsewhere) are retried while
// the readers wait, and its Backlog (and status file, for other processes)
// says how many points wait and why. No point is ever collapsed: points
// that share a step are all stored, in arrival order.
//
// metrics imports storage (for storage.MetricPoint and the Store it writes
// to), its own textrule and pathglob, and nothing above it: never engine,
// ui or app.
package metrics
