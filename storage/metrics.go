package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
)

// The metric insert fast path.
//
// Points are stored as (series_id, step, value, wall_ns) rows in a WITHOUT
// ROWID table keyed by (series_id, step); a series is one key of one attempt
// of one stage (table metric_series). InsertMetricPoints
//
//   - maps each point to its series through a cache of committed series ids
//     (creating missing series inside the transaction),
//   - groups the batch by series with a counting sort (stable, so steps stay
//     in the order given), so that consecutive rows land on the same b-tree
//     leaf instead of hopping between the series' ends of the tree, which
//     is by far the largest cost of an indexed insert,
//   - binds them into cached, prepared multi-row INSERTs of metricChunk
//     rows (remainders with 64, 32, ..., 1-row statements), reusing one
//     argument slice, in one transaction.
//
// A cached series id whose series was deleted meanwhile (say, by another
// process deleting the run) makes the foreign key on metric_points fail;
// series ids are never reused (AUTOINCREMENT), so that is the only way a
// stale id shows, and the insert then retries once with an empty cache.

// metricChunk is the number of rows of the big multi-row INSERT.
const metricChunk = 128

const metricCols = 4 // series_id, step, value, wall_ns

// metricChunkSizes are the statement sizes the fast path uses, largest first.
var metricChunkSizes = [...]int{metricChunk, 64, 32, 16, 8, 4, 2, 1}

// maxCachedSeries bounds the series-id cache; it is emptied when full.
const maxCachedSeries = 1 << 16

// linearSeriesLimit: up to this many distinct series in a batch are found
// by a linear scan, more through a map.
const linearSeriesLimit = 16

type seriesKey struct {
	run, stage, key string
	attempt         int
}

func (k *seriesKey) is(p *MetricPoint) bool {
	return k.key == p.Key && k.attempt == p.Attempt && k.stage == p.Stage && k.run == p.RunID
}

type batchSeries struct {
	k     seriesKey
	id    int64
	boxed any // id boxed once for binding
}

// metricWriter is the state of the fast path; guarded by DB.metricMu.
type metricWriter struct {
	chunk      [len(metricChunkSizes)]*sql.Stmt
	findSeries *sql.Stmt
	addSeries  *sql.Stmt
	ids        map[seriesKey]int64 // committed series ids

	// scratch, reused across calls
	args     []any
	series   []batchSeries
	seriesOf map[seriesKey]int32 // used when a batch has many series
	of       []int32             // point index -> index in series
	order    []int32             // point indices grouped by series
	counts   []int32
}

func metricInsertSQL(rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO metric_points (series_id, step, value, wall_ns) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?)`)
	}
	b.WriteString(` ON CONFLICT (series_id, step) DO UPDATE SET value = excluded.value, wall_ns = excluded.wall_ns`)
	return b.String()
}

// prepare prepares the fast path's statements once per DB. It must run
// before the insert's transaction takes the only write connection.
func (w *metricWriter) prepare(ctx context.Context, db *sql.DB) error {
	if w.addSeries != nil {
		return nil
	}
	var err error
	for i, n := range metricChunkSizes {
		if w.chunk[i], err = db.PrepareContext(ctx, metricInsertSQL(n)); err != nil {
			return err
		}
	}
	if w.findSeries, err = db.PrepareContext(ctx,
		`SELECT id FROM metric_series WHERE run_id = ? AND stage = ? AND key = ? AND attempt = ?`); err != nil {
		return err
	}
	if w.addSeries, err = db.PrepareContext(ctx,
		`INSERT INTO metric_series (run_id, stage, key, attempt) VALUES (?, ?, ?, ?)`); err != nil {
		return err
	}
	w.ids = make(map[seriesKey]int64)
	w.args = make([]any, metricChunk*metricCols)
	return nil
}

func (w *metricWriter) close() error {
	var errs []error
	for _, st := range append(w.chunk[:], w.findSeries, w.addSeries) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	*w = metricWriter{}
	return errors.Join(errs...)
}

// group finds the distinct series of pts and orders the points by series.
func (w *metricWriter) group(pts []MetricPoint) {
	n := len(pts)
	w.series = w.series[:0]
	clear(w.seriesOf)
	w.of = growInt32(w.of, n)
	last := int32(-1)
	for i := range pts {
		p := &pts[i]
		if last >= 0 && w.series[last].k.is(p) {
			w.of[i] = last
			continue
		}
		last = w.find(p)
		w.of[i] = last
	}

	ns := len(w.series)
	w.counts = growInt32(w.counts, ns+1)
	clear(w.counts)
	for _, j := range w.of {
		w.counts[j+1]++
	}
	for j := 1; j <= ns; j++ {
		w.counts[j] += w.counts[j-1]
	}
	w.order = growInt32(w.order, n)
	for i, j := range w.of {
		w.order[w.counts[j]] = int32(i)
		w.counts[j]++
	}
}

// find returns the index of p's series in w.series, adding it if new.
func (w *metricWriter) find(p *MetricPoint) int32 {
	if len(w.series) <= linearSeriesLimit {
		for j := range w.series {
			if w.series[j].k.is(p) {
				return int32(j)
			}
		}
	} else if j, ok := w.seriesOf[seriesKey{p.RunID, p.Stage, p.Key, p.Attempt}]; ok {
		return j
	}
	j := int32(len(w.series))
	k := seriesKey{p.RunID, p.Stage, p.Key, p.Attempt}
	w.series = append(w.series, batchSeries{k: k})
	if len(w.series) > linearSeriesLimit {
		if w.seriesOf == nil {
			w.seriesOf = make(map[seriesKey]int32)
		}
		if len(w.seriesOf) == 0 {
			for i := range w.series {
				w.seriesOf[w.series[i].k] = int32(i)
			}
		} else {
			w.seriesOf[k] = j
		}
	}
	return j
}

func growInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// InsertMetricPoints stores points in one transaction: all or none. It is
// the hot path of the metrics writer (see the comment at the top of this
// file). The run must exist. NaN is stored as NULL and read back as NaN;
// ±Inf are stored as is. Writing a point that already exists (same run,
// stage, key, attempt and step) replaces its value and wall time.
func (db *DB) InsertMetricPoints(ctx context.Context, pts []MetricPoint) error {
	if len(pts) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("insert %d metric points: %w", len(pts), err)
	}
	db.metricMu.Lock()
	defer db.metricMu.Unlock()
	w := &db.mw
	if err := w.prepare(ctx, db.w); err != nil {
		_ = w.close() // start from scratch next time
		return fmt.Errorf("insert %d metric points: prepare: %w", len(pts), err)
	}
	w.group(pts)
	usedCache, err := db.insertGrouped(ctx, pts)
	if usedCache && isForeignKeyErr(err) {
		// A cached series may have been deleted since: look them all up again.
		clear(w.ids)
		_, err = db.insertGrouped(ctx, pts)
	}
	if err != nil {
		return fmt.Errorf("insert %d metric points (run %s, stage %s): %w", len(pts), pts[0].RunID, pts[0].Stage, err)
	}
	return nil
}

// isForeignKeyErr matches SQLite's own message rather than sqlite3.Error,
// so that this package still compiles without cgo (ui's tests build the
// engine, and with it storage, with CGO_ENABLED=0).
func isForeignKeyErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FOREIGN KEY constraint failed")
}

// insertGrouped runs the transaction of InsertMetricPoints on points grouped
// by w.group. usedCache reports whether a cached series id was used.
func (db *DB) insertGrouped(ctx context.Context, pts []MetricPoint) (usedCache bool, err error) {
	w := &db.mw
	// Cancellation is checked between statements rather than watched by a
	// goroutine per statement (what go-sqlite3 does for a cancellable
	// context), which would cost more than the insert itself.
	bg := context.WithoutCancel(ctx)
	tx, err := db.w.BeginTx(bg, nil)
	if err != nil {
		return false, err
	}
	defer rollback(tx)

	// Series ids: from the cache, else from the table, else new.
	var find, add *sql.Stmt
	for j := range w.series {
		s := &w.series[j]
		if id, ok := w.ids[s.k]; ok {
			s.id, usedCache = id, true
		} else {
			if find == nil {
				find, add = tx.StmtContext(bg, w.findSeries), tx.StmtContext(bg, w.addSeries)
				defer find.Close()
				defer add.Close()
			}
			err := find.QueryRowContext(bg, s.k.run, s.k.stage, s.k.key, s.k.attempt).Scan(&s.id)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				res, err := add.ExecContext(bg, s.k.run, s.k.stage, s.k.key, s.k.attempt)
				if err != nil {
					return usedCache, fmt.Errorf("create series %s of stage %s attempt %d: %w", s.k.key, s.k.stage, s.k.attempt, err)
				}
				if s.id, err = res.LastInsertId(); err != nil {
					return usedCache, err
				}
			case err != nil:
				return usedCache, fmt.Errorf("find series %s of stage %s attempt %d: %w", s.k.key, s.k.stage, s.k.attempt, err)
			}
		}
		s.boxed = s.id
	}

	order := w.order
	for si, size := range metricChunkSizes {
		if len(order) < size {
			continue
		}
		st := tx.StmtContext(bg, w.chunk[si])
		for len(order) >= size {
			if err := ctx.Err(); err != nil {
				st.Close()
				return usedCache, err
			}
			a := w.args[:size*metricCols]
			for r, i := range order[:size] {
				p := &pts[i]
				row := a[r*metricCols : r*metricCols+metricCols : r*metricCols+metricCols]
				row[0] = w.series[w.of[i]].boxed
				row[1] = p.Step
				if math.IsNaN(p.Value) {
					row[2] = nil
				} else {
					row[2] = p.Value
				}
				if p.Wall.IsZero() {
					row[3] = nil
				} else {
					row[3] = p.Wall.UnixNano()
				}
			}
			if _, err := st.ExecContext(bg, a...); err != nil {
				st.Close()
				return usedCache, err
			}
			order = order[size:]
		}
		st.Close()
	}
	if err := tx.Commit(); err != nil {
		return usedCache, fmt.Errorf("commit: %w", err)
	}

	// Only committed ids go into the cache.
	if len(w.ids) > maxCachedSeries {
		clear(w.ids)
	}
	for j := range w.series {
		w.ids[w.series[j].k] = w.series[j].id
	}
	return usedCache, nil
}

// forgetSeries empties the series-id cache (after deletes).
func (db *DB) forgetSeries() {
	db.metricMu.Lock()
	clear(db.mw.ids)
	db.metricMu.Unlock()
}

// scanPointTail reads (attempt, step, value, wall_ns) after extra columns.
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
// the run does not declare last, by name), then key.
func (db *DB) LastMetrics(ctx context.Context, runID string) ([]MetricPoint, error) {
	rows, err := db.r.QueryContext(ctx, `
SELECT s.stage, s.key, s.attempt, p.step, p.value, p.wall_ns
  FROM metric_series s
  JOIN metric_points p
    ON p.series_id = s.id
   AND p.step = (SELECT max(step) FROM metric_points WHERE series_id = s.id)
  LEFT JOIN stages st ON st.run_id = s.run_id AND st.name = s.stage
 WHERE s.run_id = ?1
   AND s.attempt = (SELECT max(attempt) FROM metric_series WHERE run_id = ?1 AND stage = s.stage AND key = s.key)
 ORDER BY st.position IS NULL, st.position, s.stage, s.key`, runID)
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
	var (
		id      int64
		attempt int
	)
	err := db.r.QueryRowContext(ctx, `SELECT id, attempt FROM metric_series
		WHERE run_id = ? AND stage = ? AND key = ? ORDER BY attempt DESC LIMIT 1`, runID, stage, key).Scan(&id, &attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	// In primary-key order: no sort.
	rows, err := db.r.QueryContext(ctx, `SELECT step, value, wall_ns FROM metric_points
		WHERE series_id = ? ORDER BY step`, id)
	if err != nil {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	defer rows.Close()
	var out []MetricPoint
	for rows.Next() {
		var (
			v    sql.NullFloat64
			wall sql.NullInt64
		)
		p := MetricPoint{RunID: runID, Stage: stage, Key: key, Attempt: attempt}
		if err := rows.Scan(&p.Step, &v, &wall); err != nil {
			return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
		}
		p.Value, p.Wall = floatOf(v), timeOf(wall)
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
SELECT s.key, (SELECT max(step) FROM metric_points WHERE series_id = s.id)
  FROM metric_series s
 WHERE s.run_id = ? AND s.stage = ? AND s.attempt = ?`, runID, stage, attempt)
	if err != nil {
		return nil, fmt.Errorf("max steps of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			k    string
			step sql.NullInt64
		)
		if err := rows.Scan(&k, &step); err != nil {
			return nil, fmt.Errorf("max steps of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
		}
		if step.Valid {
			out[k] = step.Int64
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("max steps of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
	}
	return out, nil
}

// CountMetricPoints returns how many metric points a run has.
func (db *DB) CountMetricPoints(ctx context.Context, runID string) (int, error) {
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM metric_points
		WHERE series_id IN (SELECT id FROM metric_series WHERE run_id = ?)`, runID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count metric points of run %s: %w", runID, err)
	}
	return n, nil
}
