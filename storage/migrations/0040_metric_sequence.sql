-- 0040_metric_sequence: no metric point is ever collapsed.
--
-- A point is now keyed by (series, step, seq): seq numbers the points of a
-- series in the order they arrived (1, 2, ...), so points that share a step
-- (a replay, a counter that resets, many scalars logged at step 0) are all
-- kept, readable by step, by arrival or by wall time.
--
-- A series keeps its summary as points are written (count, last point,
-- finite min/max, how many arrived at a step not above an earlier one, and
-- which field gave the step), so reading the last values of a run with
-- millions of points is one row per series, not a scan.
--
-- metric_cursors holds, per attempt and source (stdout, stderr, a
-- TensorBoard or CSV file), how far the source has been read into stored
-- points; it is written in the same transaction as the points, so a log
-- read again after a restart is ingested exactly once.

DROP VIEW metric_points_flat;

ALTER TABLE metric_series ADD COLUMN points      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE metric_series ADD COLUMN repeats     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE metric_series ADD COLUMN nonfinite   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE metric_series ADD COLUMN min_value   REAL;
ALTER TABLE metric_series ADD COLUMN max_value   REAL;
ALTER TABLE metric_series ADD COLUMN max_step    INTEGER;
ALTER TABLE metric_series ADD COLUMN last_step   INTEGER;
ALTER TABLE metric_series ADD COLUMN last_seq    INTEGER;
ALTER TABLE metric_series ADD COLUMN last_value  REAL;
ALTER TABLE metric_series ADD COLUMN last_wall_ns INTEGER;
ALTER TABLE metric_series ADD COLUMN step_source TEXT NOT NULL DEFAULT '';
-- Where the extremes and the first non-finite value are, (step, seq), so a
-- curve's envelope is read by a few index seeks.
ALTER TABLE metric_series ADD COLUMN min_at_step INTEGER;
ALTER TABLE metric_series ADD COLUMN min_at_seq  INTEGER;
ALTER TABLE metric_series ADD COLUMN max_at_step INTEGER;
ALTER TABLE metric_series ADD COLUMN max_at_seq  INTEGER;
ALTER TABLE metric_series ADD COLUMN nonfinite_at_step INTEGER;
ALTER TABLE metric_series ADD COLUMN nonfinite_at_seq  INTEGER;
ALTER TABLE metric_series ADD COLUMN min_step    INTEGER;

CREATE TABLE metric_points_seq (
    series_id INTEGER NOT NULL REFERENCES metric_series (id) ON DELETE CASCADE,
    step      INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    value     REAL,
    wall_ns   INTEGER,
    PRIMARY KEY (series_id, step, seq)
) WITHOUT ROWID;

INSERT INTO metric_points_seq (series_id, step, seq, value, wall_ns)
SELECT series_id, step, row_number() OVER (PARTITION BY series_id ORDER BY step), value, wall_ns
  FROM metric_points;

DROP TABLE metric_points;
ALTER TABLE metric_points_seq RENAME TO metric_points;

-- Summaries of the points stored before this version (one point per step
-- then, so nothing repeats; the step field was "step").
UPDATE metric_series SET
    points     = (SELECT count(*) FROM metric_points p WHERE p.series_id = metric_series.id),
    nonfinite  = (SELECT count(*) FROM metric_points p WHERE p.series_id = metric_series.id
                     AND (p.value IS NULL OR p.value IN (9e999, -9e999))),
    min_value  = (SELECT min(value) FROM metric_points p WHERE p.series_id = metric_series.id
                     AND p.value NOT IN (9e999, -9e999)),
    max_value  = (SELECT max(value) FROM metric_points p WHERE p.series_id = metric_series.id
                     AND p.value NOT IN (9e999, -9e999)),
    max_step   = (SELECT max(step) FROM metric_points p WHERE p.series_id = metric_series.id),
    min_step   = (SELECT min(step) FROM metric_points p WHERE p.series_id = metric_series.id),
    last_step  = (SELECT max(step) FROM metric_points p WHERE p.series_id = metric_series.id),
    step_source = 'step';
UPDATE metric_series SET
    last_seq     = (SELECT seq FROM metric_points p WHERE p.series_id = metric_series.id AND p.step = metric_series.last_step),
    last_value   = (SELECT value FROM metric_points p WHERE p.series_id = metric_series.id AND p.step = metric_series.last_step),
    last_wall_ns = (SELECT wall_ns FROM metric_points p WHERE p.series_id = metric_series.id AND p.step = metric_series.last_step)
 WHERE points > 0;
UPDATE metric_series SET
    min_at_step = (SELECT step FROM metric_points p WHERE p.series_id = metric_series.id AND p.value = metric_series.min_value ORDER BY step LIMIT 1),
    max_at_step = (SELECT step FROM metric_points p WHERE p.series_id = metric_series.id AND p.value = metric_series.max_value ORDER BY step LIMIT 1),
    nonfinite_at_step = (SELECT step FROM metric_points p WHERE p.series_id = metric_series.id
                            AND (p.value IS NULL OR p.value IN (9e999, -9e999)) ORDER BY step LIMIT 1)
 WHERE points > 0;
UPDATE metric_series SET
    min_at_seq = (SELECT seq FROM metric_points p WHERE p.series_id = metric_series.id AND p.step = metric_series.min_at_step),
    max_at_seq = (SELECT seq FROM metric_points p WHERE p.series_id = metric_series.id AND p.step = metric_series.max_at_step),
    nonfinite_at_seq = (SELECT seq FROM metric_points p WHERE p.series_id = metric_series.id AND p.step = metric_series.nonfinite_at_step)
 WHERE points > 0;

-- The flat shape, for ad-hoc queries and exports.
CREATE VIEW metric_points_flat AS
SELECT s.run_id, s.stage, s.attempt, s.key, p.step, p.seq, p.value, p.wall_ns
  FROM metric_points p
  JOIN metric_series s ON s.id = p.series_id;

CREATE TABLE metric_cursors (
    run_id  TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    stage   TEXT    NOT NULL,
    attempt INTEGER NOT NULL,
    source  TEXT    NOT NULL CHECK (source <> ''),
    offset  INTEGER NOT NULL CHECK (offset >= 0),
    state   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, stage, attempt, source)
) WITHOUT ROWID;
