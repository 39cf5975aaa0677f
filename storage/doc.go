// Package storage is Niuma's source of truth: a SQLite database (through
// mattn/go-sqlite3) in WAL mode with foreign keys and a busy timeout,
// versioned migrations embedded in the binary, and repositories for runs,
// stages, stage attempts, metric points, events and GPU samples.
//
// Nothing in Niuma lives only in memory: the engine writes here first and
// rebuilds its view from here after a restart.
package storage
