// Package storage is Niuma's source of truth: a SQLite database (through
// mattn/go-sqlite3) in WAL mode with foreign keys and a busy timeout,
// versioned migrations embedded in the binary, and repositories for runs,
// stages, stage attempts, metric points, events and GPU samples.
//
// Nothing in Niuma lives only in memory: the engine writes here first and
// rebuilds its view from here after a restart.
//
// # Connections
//
// Open gives every connection foreign_keys=ON, busy_timeout=5000 ms,
// journal_mode=WAL, synchronous=NORMAL and BEGIN IMMEDIATE transactions
// (go-sqlite3 DSN parameters; TestPragmasAreSet checks they took). A DB
// holds two pools: one write connection, so writers in one process queue in
// Go instead of polling SQLite's lock, and a few read-only connections that
// WAL lets read alongside the writer. Several DB values or processes on one
// file wait for each other through the busy timeout and immediate
// transactions instead of failing with SQLITE_BUSY.
//
// # Migrations
//
// migrations/NNNN_what.sql are embedded and applied in version order, each
// in its own transaction, recorded in schema_migrations(version,
// applied_at). Opening a database whose schema is newer than the binary
// fails with ErrSchemaTooNew. Once released, a migration is never edited:
// add the next one.
//
// # Conventions
//
//   - Times are INTEGER unix nanoseconds, NULL for Go's zero time; they read
//     back in the local zone without a monotonic reading.
//   - Lists (stage needs, attempt GPUs) are JSON arrays; empty reads as nil.
//   - A missing row is an error satisfying errors.Is(err, ErrNotFound);
//     errors carry what was being done ("get run 2026...: not found").
//   - SQLite cannot store NaN: a NaN metric or telemetry value is stored as
//     NULL and read back as NaN; ±Inf are stored as REAL infinities.
//
// # Metrics
//
// Metric points are the bulk of the data and InsertMetricPoints is a hot
// path. A series (run, stage, key, attempt) is a row of metric_series; a
// point is a (series_id, step, value, wall_ns) row of a WITHOUT ROWID table
// keyed by (series_id, step). The insert caches series ids, groups a batch
// by series (so each series grows at its own end of the b-tree) and writes
// it in one transaction through cached multi-row prepared statements; see
// metrics.go. The view metric_points_flat shows the flat shape for ad-hoc
// queries. BenchmarkInsertMetricPoints measures it.
package storage
