// Package executor is the contract between the engine and the backends that
// actually run a stage attempt: host processes (local), Docker containers,
// and later cluster engines. Backends live in sub-packages and are adapters
// only — no retry, placement or other policy inside.
package executor
