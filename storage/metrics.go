package storage

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
)

// metricChunk is the number of rows of the big multi-row INSERT; smaller
// remainders are written with cached statements of 64, 32, ..., 1 rows.
const metricChunk = 128

const metricCols = 7 // run_id, stage, key, attempt, step, value, wall_ns

// metricChunkSizes are the statement sizes the fast path uses, largest first.
var metricChunkSizes = [...]int{metricChunk, 64, 32, 16, 8, 4, 2, 1}

func metricInsertSQL(rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO metric_points (run_id, stage, key, attempt, step, value, wall_ns) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?,?,?,?)`)
	}
	// The same point written twice keeps the last value.
	b.WriteString(` ON CONFLICT (run_id, stage, key, attempt, step) DO UPDATE SET value = excluded.value, wall_ns = excluded.wall_ns`)
	return b.String()
}

// metricStmt returns the cached prepared insert of n rows. Call with
// metricMu held.
func (db *DB) metricStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	if st := db.metricStmts[n]; st != nil {
		return st, nil
	}
	st, err := db.w.PrepareContext(ctx, metricInsertSQL(n))
	if err != nil {
		return nil, err
	}
	if db.metricStmts == nil {
		db.metricStmts = make(map[int]*sql.Stmt, len(metricChunkSizes))
	}
	db.metricStmts[n] = st
	return st, nil
}

// InsertMetricPoints stores points in one transaction. It is the hot path of
// the metrics writer: cached multi-row prepared statements with bound
// arguments, one argument slice reused across calls. The run must exist.
// NaN is stored as NULL and read back as NaN; ±Inf are stored as is.
// Writing a point that already exists (same run, stage, key, attempt, step)
// replaces its value and wall time.
func (db *DB) InsertMetricPoints(ctx context.Context, pts []MetricPoint) (err error) {
	if len(pts) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("insert %d metric points: %w", len(pts), err)
	}
	db.metricMu.Lock()
	defer db.metricMu.Unlock()
	if db.metricArgs == nil {
		db.metricArgs = make([]any, metricChunk*metricCols)
	}

	// Cancellation is checked between statements rather than watched by a
	// goroutine per statement (what go-sqlite3 does for a cancellable
	// context), which would cost more than the insert itself.
	bg := context.WithoutCancel(ctx)

	// Prepare (once per DB) the statements this batch needs before the
	// transaction takes the only write connection.
	var stmts [len(metricChunkSizes)]*sql.Stmt
	for i, n := 0, len(pts); i < len(metricChunkSizes); i++ {
		if n < metricChunkSizes[i] {
			continue
		}
		st, err := db.metricStmt(bg, metricChunkSizes[i])
		if err != nil {
			return fmt.Errorf("insert %d metric points: prepare: %w", len(pts), err)
		}
		stmts[i] = st
		n %= metricChunkSizes[i]
	}

	tx, err := db.w.BeginTx(bg, nil)
	if err != nil {
		return fmt.Errorf("insert %d metric points: %w", len(pts), err)
	}
	defer rollback(tx)

	var (
		args = db.metricArgs
		// Boxed copies of the last run, stage and key seen: consecutive
		// points almost always share them, and boxing a string allocates.
		lastRun, lastStage, lastKey string
		boxRun, boxStage, boxKey    any
		haveRun, haveStage, haveKey bool
	)
	rest := pts
	for si, size := range metricChunkSizes {
		if len(rest) < size {
			continue
		}
		txst := tx.StmtContext(bg, stmts[si])
		for len(rest) >= size {
			if err := ctx.Err(); err != nil {
				txst.Close()
				return fmt.Errorf("insert %d metric points: %w", len(pts), err)
			}
			a := args[:size*metricCols]
			for i := range size {
				p := &rest[i]
				if !haveRun || p.RunID != lastRun {
					lastRun, boxRun, haveRun = p.RunID, p.RunID, true
				}
				if !haveStage || p.Stage != lastStage {
					lastStage, boxStage, haveStage = p.Stage, p.Stage, true
				}
				if !haveKey || p.Key != lastKey {
					lastKey, boxKey, haveKey = p.Key, p.Key, true
				}
				r := a[i*metricCols : i*metricCols+metricCols : i*metricCols+metricCols]
				r[0] = boxRun
				r[1] = boxStage
				r[2] = boxKey
				r[3] = int64(p.Attempt)
				r[4] = p.Step
				if math.IsNaN(p.Value) {
					r[5] = nil
				} else {
					r[5] = p.Value
				}
				if p.Wall.IsZero() {
					r[6] = nil
				} else {
					r[6] = p.Wall.UnixNano()
				}
			}
			if _, err := txst.ExecContext(bg, a...); err != nil {
				txst.Close()
				return fmt.Errorf("insert %d metric points (run %s, stage %s): %w", len(pts), rest[0].RunID, rest[0].Stage, err)
			}
			rest = rest[size:]
		}
		txst.Close()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("insert %d metric points: commit: %w", len(pts), err)
	}
	return nil
}

// scanPoint reads (attempt, step, value, wall_ns).
func scanPointTail(rows *sql.Rows, p *MetricPoint, extra ...any) error {
	var (
		v    sql.NullFloat64
		wall sql.NullInt64
	)
	dest := append(extra, &p.Attempt, &p.Step, &v, &wall)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	p.Value = floatOf(v)
	p.Wall = timeOf(wall)
	return nil
}

// LastMetrics returns, for every (stage, key) of a run, the point of the
// highest attempt with the highest step, ordered by stage position (stages
// unknown to the run last), then key.
//
// Distinct stages and keys are found by seeks on the primary key (a
// "loose index scan" written as recursive CTEs), so the cost grows with the
// number of series, not with the number of points.
func (db *DB) LastMetrics(ctx context.Context, runID string) ([]MetricPoint, error) {
	rows, err := db.r.QueryContext(ctx, `
WITH RECURSIVE
  st(stage) AS (
    SELECT (SELECT min(stage) FROM metric_points WHERE run_id = ?1)
    UNION ALL
    SELECT (SELECT min(stage) FROM metric_points WHERE run_id = ?1 AND stage > st.stage)
      FROM st WHERE st.stage IS NOT NULL
  ),
  k(stage, key) AS (
    SELECT st.stage, (SELECT min(key) FROM metric_points WHERE run_id = ?1 AND stage = st.stage)
      FROM st WHERE st.stage IS NOT NULL
    UNION ALL
    SELECT k.stage, (SELECT min(key) FROM metric_points WHERE run_id = ?1 AND stage = k.stage AND key > k.key)
      FROM k WHERE k.key IS NOT NULL
  ),
  ka(stage, key, attempt) AS (
    SELECT k.stage, k.key,
      (SELECT max(attempt) FROM metric_points WHERE run_id = ?1 AND stage = k.stage AND key = k.key)
      FROM k WHERE k.key IS NOT NULL
  ),
  kas(stage, key, attempt, step) AS (
    SELECT ka.stage, ka.key, ka.attempt,
      (SELECT max(step) FROM metric_points
        WHERE run_id = ?1 AND stage = ka.stage AND key = ka.key AND attempt = ka.attempt)
      FROM ka
  )
SELECT m.stage, m.key, m.attempt, m.step, m.value, m.wall_ns
  FROM kas
  JOIN metric_points m
    ON m.run_id = ?1 AND m.stage = kas.stage AND m.key = kas.key AND m.attempt = kas.attempt AND m.step = kas.step
  LEFT JOIN stages s ON s.run_id = ?1 AND s.name = m.stage
 ORDER BY s.position IS NULL, s.position, m.stage, m.key`, runID)
	if err != nil {
		return nil, fmt.Errorf("last metrics of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []MetricPoint
	for rows.Next() {
		p := MetricPoint{RunID: runID}
		if err := scanPointTail(rows, &p, &p.Stage, &p.Key); err != nil {
			return nil, fmt.Errorf("last metrics of run %s: %w", runID, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("last metrics of run %s: %w", runID, err)
	}
	return out, nil
}

// MetricSeries returns the points of one key of one stage from the latest
// attempt that logged that key, ordered by step. No points is not an error.
func (db *DB) MetricSeries(ctx context.Context, runID, stage, key string) ([]MetricPoint, error) {
	rows, err := db.r.QueryContext(ctx, `
SELECT attempt, step, value, wall_ns FROM metric_points
 WHERE run_id = ?1 AND stage = ?2 AND key = ?3
   AND attempt = (SELECT max(attempt) FROM metric_points WHERE run_id = ?1 AND stage = ?2 AND key = ?3)
 ORDER BY step`, runID, stage, key)
	if err != nil {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	defer rows.Close()
	var out []MetricPoint
	for rows.Next() {
		p := MetricPoint{RunID: runID, Stage: stage, Key: key}
		if err := scanPointTail(rows, &p); err != nil {
			return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	return out, nil
}

// MaxSteps returns, for each key logged by one attempt of one stage, the
// highest step stored, so that a reader resuming a log can skip points it
// already wrote. Keys the attempt never logged are absent.
func (db *DB) MaxSteps(ctx context.Context, runID, stage string, attempt int) (map[string]int64, error) {
	rows, err := db.r.QueryContext(ctx, `
WITH RECURSIVE k(key) AS (
    SELECT (SELECT min(key) FROM metric_points WHERE run_id = ?1 AND stage = ?2)
    UNION ALL
    SELECT (SELECT min(key) FROM metric_points WHERE run_id = ?1 AND stage = ?2 AND key > k.key)
      FROM k WHERE k.key IS NOT NULL
  ),
  ks(key, step) AS (
    SELECT k.key, (SELECT max(step) FROM metric_points WHERE run_id = ?1 AND stage = ?2 AND key = k.key AND attempt = ?3)
      FROM k WHERE k.key IS NOT NULL
  )
SELECT key, step FROM ks WHERE step IS NOT NULL`, runID, stage, attempt)
	if err != nil {
		return nil, fmt.Errorf("max steps of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			k    string
			step int64
		)
		if err := rows.Scan(&k, &step); err != nil {
			return nil, fmt.Errorf("max steps of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
		}
		out[k] = step
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("max steps of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
	}
	return out, nil
}

// CountMetricPoints returns how many metric points a run has.
func (db *DB) CountMetricPoints(ctx context.Context, runID string) (int, error) {
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM metric_points WHERE run_id = ?`, runID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count metric points of run %s: %w", runID, err)
	}
	return n, nil
}
