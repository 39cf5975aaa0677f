-- 0001_init: the first schema of Niuma's archive.
--
-- Conventions:
--   * times are INTEGER unix nanoseconds; NULL means "not set" (Go's zero time);
--   * lists (stage needs, GPU UUIDs) are JSON arrays in TEXT columns;
--   * a metric value NULL means NaN (SQLite cannot store NaN; ±Inf are stored as REAL).

CREATE TABLE runs (
    id               TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    template         TEXT    NOT NULL DEFAULT '',
    template_version TEXT    NOT NULL DEFAULT '',
    template_source  TEXT    NOT NULL DEFAULT '',
    template_yaml    TEXT    NOT NULL DEFAULT '',
    params           TEXT    NOT NULL DEFAULT '',
    seed             INTEGER NOT NULL DEFAULT 0,
    priority         INTEGER NOT NULL DEFAULT 0,
    executor         TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL CHECK (state <> ''),
    error            TEXT    NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    fingerprint      TEXT    NOT NULL DEFAULT '',
    dir              TEXT    NOT NULL DEFAULT '',
    code_dir         TEXT    NOT NULL DEFAULT '',
    created_ns       INTEGER NOT NULL,
    started_ns       INTEGER,
    finished_ns      INTEGER
);

-- ListRuns: newest first.
CREATE INDEX runs_by_created ON runs (created_ns DESC, id DESC);
-- ListRuns with a state filter (the board asks for queued/running often).
CREATE INDEX runs_by_state ON runs (state, created_ns DESC, id DESC);

CREATE TABLE stages (
    run_id          TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name            TEXT    NOT NULL CHECK (name <> ''),
    position        INTEGER NOT NULL,
    needs           TEXT    NOT NULL DEFAULT '[]',
    gpus            INTEGER NOT NULL DEFAULT 0 CHECK (gpus >= 0),
    gpu_memory_mib  INTEGER NOT NULL DEFAULT 0 CHECK (gpu_memory_mib >= 0),
    retries         INTEGER NOT NULL DEFAULT 0 CHECK (retries >= 0),
    timeout_sec     INTEGER NOT NULL DEFAULT 0 CHECK (timeout_sec >= 0),
    state           TEXT    NOT NULL CHECK (state <> ''),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    exit_code       INTEGER,
    reason          TEXT    NOT NULL DEFAULT '',
    next_attempt_ns INTEGER,
    started_ns      INTEGER,
    finished_ns     INTEGER,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;

CREATE TABLE attempts (
    run_id      TEXT    NOT NULL,
    stage       TEXT    NOT NULL,
    number      INTEGER NOT NULL CHECK (number >= 1),
    state       TEXT    NOT NULL CHECK (state <> ''),
    executor    TEXT    NOT NULL DEFAULT '',
    handle      TEXT    NOT NULL DEFAULT '',
    gpus        TEXT    NOT NULL DEFAULT '[]',
    exit_code   INTEGER,
    reason      TEXT    NOT NULL DEFAULT '',
    started_ns  INTEGER,
    finished_ns INTEGER,
    PRIMARY KEY (run_id, stage, number),
    FOREIGN KEY (run_id, stage) REFERENCES stages (run_id, name) ON DELETE CASCADE
) WITHOUT ROWID;

-- Metrics are split in two for write speed: a series is one key logged by
-- one attempt of one stage; a point is (series, step) -> value. Points are
-- small, integer-keyed rows in one b-tree, so the hot insert path binds no
-- strings and each series grows at its own end of the tree.
-- AUTOINCREMENT: a series id is never reused, so an id cached by a writer
-- can never silently point at another series after a delete.
CREATE TABLE metric_series (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    stage   TEXT    NOT NULL,
    key     TEXT    NOT NULL,
    attempt INTEGER NOT NULL,
    UNIQUE (run_id, stage, key, attempt)
);

-- Writing the same (series, step) twice keeps the last value.
CREATE TABLE metric_points (
    series_id INTEGER NOT NULL REFERENCES metric_series (id) ON DELETE CASCADE,
    step      INTEGER NOT NULL,
    value     REAL,
    wall_ns   INTEGER,
    PRIMARY KEY (series_id, step)
) WITHOUT ROWID;

-- The flat shape, for ad-hoc queries and exports.
CREATE VIEW metric_points_flat AS
SELECT s.run_id, s.stage, s.attempt, s.key, p.step, p.value, p.wall_ns
  FROM metric_points p
  JOIN metric_series s ON s.id = p.series_id;

CREATE TABLE events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id   TEXT    REFERENCES runs (id) ON DELETE CASCADE,
    stage    TEXT    NOT NULL DEFAULT '',
    gpu      TEXT    NOT NULL DEFAULT '',
    kind     TEXT    NOT NULL,
    severity TEXT    NOT NULL,
    message  TEXT    NOT NULL DEFAULT '',
    fix      TEXT    NOT NULL DEFAULT '',
    evidence TEXT    NOT NULL DEFAULT '',
    at_ns    INTEGER NOT NULL
);

CREATE INDEX events_by_run ON events (run_id, at_ns, id);
CREATE INDEX events_by_time ON events (at_ns, id);

-- Per-minute downsampled GPU telemetry; NULL in a REAL column means NaN
-- (the value was not available).
CREATE TABLE gpu_samples (
    gpu           TEXT    NOT NULL,
    minute_ns     INTEGER NOT NULL,
    util_min      REAL,
    util_mean     REAL,
    util_max      REAL,
    mem_used_min  INTEGER NOT NULL DEFAULT 0,
    mem_used_mean INTEGER NOT NULL DEFAULT 0,
    mem_used_max  INTEGER NOT NULL DEFAULT 0,
    temp_max      REAL,
    power_mean    REAL,
    PRIMARY KEY (gpu, minute_ns)
) WITHOUT ROWID;

CREATE INDEX gpu_samples_by_minute ON gpu_samples (minute_ns);
