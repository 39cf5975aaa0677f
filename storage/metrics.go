package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// The metric insert fast path.
//
// Points are stored as (series_id, step, seq, value, wall_ns) rows in a
// WITHOUT ROWID table keyed by (series_id, step, seq); a series is one key of
// one attempt of one stage (table metric_series), and seq numbers its points
// in arrival order, so no two points ever collide: points that share a step
// are all kept. InsertMetrics
//
//   - maps each point to its series through a cache of committed series ids
//     (creating missing series inside the transaction),
//   - groups the batch by series with a counting sort (stable, so the
//     points of a series stay in arrival order), so that consecutive rows
//     land on the same b-tree leaf instead of hopping between the series'
//     ends of the tree, which is by far the largest cost of an indexed insert,
//   - reads each series' summary once, numbers its points and writes the
//     summary back (count, last point, finite min/max, repeats), so readers
//     of the last values never scan points,
//   - binds the points into cached, prepared multi-row INSERTs of
//     metricChunk rows (remainders with 64, 32, ..., 1-row statements),
//     reusing one argument slice,
//   - stores the readers' cursors given with the batch,
//
// all in one transaction.
//
// A cached series id whose series was deleted meanwhile (say, by another
// process deleting the run) makes the foreign key on metric_points fail;
// series ids are never reused (AUTOINCREMENT), so that is the only way a
// stale id shows, and the insert then retries once with an empty cache.

// metricChunk is the number of rows of the big multi-row INSERT.
const metricChunk = 128

const metricCols = 5 // series_id, step, seq, value, wall_ns

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

// summary is a series' row in metric_series, as the insert updates it.
type summary struct {
	points, repeats, nonfinite int64
	min, max                   sql.NullFloat64
	maxStep, lastStep, lastSeq sql.NullInt64
	lastValue                  sql.NullFloat64
	lastWall                   sql.NullInt64
	stepSource                 string
	// where the extremes and the first non-finite value are, and the
	// lowest step: a curve's envelope is read by seeks from them
	minAtStep, minAtSeq, maxAtStep, maxAtSeq sql.NullInt64
	nfAtStep, nfAtSeq, minStep               sql.NullInt64
}

// add takes one more point, the summary's points+1-th: it returns its seq.
func (s *summary) add(p *MetricPoint) int64 {
	s.points++
	seq := s.points
	if s.maxStep.Valid && p.Step <= s.maxStep.Int64 {
		s.repeats++
	}
	if !s.maxStep.Valid || p.Step > s.maxStep.Int64 {
		s.maxStep = sql.NullInt64{Int64: p.Step, Valid: true}
	}
	if !s.minStep.Valid || p.Step < s.minStep.Int64 {
		s.minStep = sql.NullInt64{Int64: p.Step, Valid: true}
	}
	at := func(step, sq *sql.NullInt64) {
		*step, *sq = sql.NullInt64{Int64: p.Step, Valid: true}, sql.NullInt64{Int64: seq, Valid: true}
	}
	if v := p.Value; math.IsNaN(v) || math.IsInf(v, 0) {
		s.nonfinite++
		if !s.nfAtStep.Valid {
			at(&s.nfAtStep, &s.nfAtSeq)
		}
	} else {
		if !s.min.Valid || v < s.min.Float64 {
			s.min = sql.NullFloat64{Float64: v, Valid: true}
			at(&s.minAtStep, &s.minAtSeq)
		}
		if !s.max.Valid || v > s.max.Float64 {
			s.max = sql.NullFloat64{Float64: v, Valid: true}
			at(&s.maxAtStep, &s.maxAtSeq)
		}
	}
	if !s.lastStep.Valid || p.Step >= s.lastStep.Int64 {
		s.lastStep = sql.NullInt64{Int64: p.Step, Valid: true}
		s.lastSeq = sql.NullInt64{Int64: seq, Valid: true}
		s.lastValue = sql.NullFloat64{Float64: p.Value, Valid: !math.IsNaN(p.Value)}
		s.lastWall = sql.NullInt64{Int64: p.Wall.UnixNano(), Valid: !p.Wall.IsZero()}
	}
	if p.StepSource != "" {
		s.stepSource = p.StepSource
	}
	return seq
}

// metricWriter is the state of the fast path; guarded by DB.metricMu.
type metricWriter struct {
	chunk      [len(metricChunkSizes)]*sql.Stmt
	findSeries *sql.Stmt
	addSeries  *sql.Stmt
	getSummary *sql.Stmt
	setSummary *sql.Stmt
	setCursor  *sql.Stmt
	ids        map[seriesKey]int64 // committed series ids

	// scratch, reused across calls
	args     []any
	series   []batchSeries
	seriesOf map[seriesKey]int32 // used when a batch has many series
	of       []int32             // point index -> index in series
	order    []int32             // point indices grouped by series
	counts   []int32
	seqs     []int64 // point index -> its seq
}

func metricInsertSQL(rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO metric_points (series_id, step, seq, value, wall_ns) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?,?)`)
	}
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
	if w.getSummary, err = db.PrepareContext(ctx, `SELECT points, repeats, nonfinite, min_value, max_value,
		max_step, last_step, last_seq, last_value, last_wall_ns, step_source,
		min_at_step, min_at_seq, max_at_step, max_at_seq, nonfinite_at_step, nonfinite_at_seq, min_step
		FROM metric_series WHERE id = ?`); err != nil {
		return err
	}
	if w.setSummary, err = db.PrepareContext(ctx, `UPDATE metric_series SET points = ?, repeats = ?, nonfinite = ?,
		min_value = ?, max_value = ?, max_step = ?, last_step = ?, last_seq = ?, last_value = ?, last_wall_ns = ?,
		step_source = ?, min_at_step = ?, min_at_seq = ?, max_at_step = ?, max_at_seq = ?,
		nonfinite_at_step = ?, nonfinite_at_seq = ?, min_step = ? WHERE id = ?`); err != nil {
		return err
	}
	if w.setCursor, err = db.PrepareContext(ctx, `INSERT INTO metric_cursors (run_id, stage, attempt, source, offset, state)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, stage, attempt, source) DO UPDATE SET offset = excluded.offset, state = excluded.state`); err != nil {
		return err
	}
	w.ids = make(map[seriesKey]int64)
	w.args = make([]any, metricChunk*metricCols)
	return nil
}

func (w *metricWriter) close() error {
	var errs []error
	for _, st := range append(w.chunk[:], w.findSeries, w.addSeries, w.getSummary, w.setSummary, w.setCursor) {
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

// InsertMetricPoints stores points in one transaction: all or none. See
// InsertMetrics.
func (db *DB) InsertMetricPoints(ctx context.Context, pts []MetricPoint) error {
	return db.InsertMetrics(ctx, pts, nil)
}

// InsertMetrics stores points and the cursors of the readers that produced
// them in one transaction: all or none. It is the hot path of the metrics
// writer (see the comment at the top of this file). The run must exist.
// Every point is kept, also when another point of its series has the same
// step; each gets the next seq of its series. NaN is stored as NULL and read
// back as NaN; ±Inf are stored as is. A cursor replaces the one stored for
// its (run, stage, attempt, source).
func (db *DB) InsertMetrics(ctx context.Context, pts []MetricPoint, cursors []MetricCursor) error {
	if len(pts) == 0 && len(cursors) == 0 {
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
	usedCache, err := db.insertGrouped(ctx, pts, cursors)
	if usedCache && isForeignKeyErr(err) {
		// A cached series may have been deleted since: look them all up again.
		clear(w.ids)
		_, err = db.insertGrouped(ctx, pts, cursors)
	}
	if err != nil {
		run, stage := "", ""
		switch {
		case len(pts) > 0:
			run, stage = pts[0].RunID, pts[0].Stage
		case len(cursors) > 0:
			run, stage = cursors[0].RunID, cursors[0].Stage
		}
		return fmt.Errorf("insert %d metric points (run %s, stage %s): %w", len(pts), run, stage, err)
	}
	return nil
}

// isForeignKeyErr matches SQLite's own message rather than sqlite3.Error,
// so that this package still compiles without cgo (ui's tests build the
// engine, and with it storage, with CGO_ENABLED=0).
func isForeignKeyErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FOREIGN KEY constraint failed")
}

// insertGrouped runs the transaction of InsertMetrics on points grouped by
// w.group. usedCache reports whether a cached series id was used.
func (db *DB) insertGrouped(ctx context.Context, pts []MetricPoint, cursors []MetricCursor) (usedCache bool, err error) {
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

	// Summaries: read, number the series' points in arrival order, write.
	if len(w.series) > 0 {
		get, set := tx.StmtContext(bg, w.getSummary), tx.StmtContext(bg, w.setSummary)
		defer get.Close()
		defer set.Close()
		if cap(w.seqs) < len(pts) {
			w.seqs = make([]int64, len(pts))
		}
		w.seqs = w.seqs[:len(pts)]
		from := int32(0)
		for j := range w.series {
			s := &w.series[j]
			var sum summary
			if err := get.QueryRowContext(bg, s.id).Scan(&sum.points, &sum.repeats, &sum.nonfinite, &sum.min, &sum.max,
				&sum.maxStep, &sum.lastStep, &sum.lastSeq, &sum.lastValue, &sum.lastWall, &sum.stepSource,
				&sum.minAtStep, &sum.minAtSeq, &sum.maxAtStep, &sum.maxAtSeq, &sum.nfAtStep, &sum.nfAtSeq, &sum.minStep); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					// The cached series is gone: the same answer as the
					// foreign key would give, so the caller looks it up again.
					return usedCache, errors.New("FOREIGN KEY constraint failed (series deleted)")
				}
				return usedCache, fmt.Errorf("read summary of series %s: %w", s.k.key, err)
			}
			to := w.counts[j]
			for _, i := range w.order[from:to] {
				w.seqs[i] = sum.add(&pts[i])
			}
			from = to
			if _, err := set.ExecContext(bg, sum.points, sum.repeats, sum.nonfinite, sum.min, sum.max, sum.maxStep,
				sum.lastStep, sum.lastSeq, sum.lastValue, sum.lastWall, sum.stepSource,
				sum.minAtStep, sum.minAtSeq, sum.maxAtStep, sum.maxAtSeq, sum.nfAtStep, sum.nfAtSeq, sum.minStep, s.id); err != nil {
				return usedCache, fmt.Errorf("update summary of series %s: %w", s.k.key, err)
			}
		}
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
				row[2] = w.seqs[i]
				if math.IsNaN(p.Value) {
					row[3] = nil
				} else {
					row[3] = p.Value
				}
				if p.Wall.IsZero() {
					row[4] = nil
				} else {
					row[4] = p.Wall.UnixNano()
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
	if len(cursors) > 0 {
		st := tx.StmtContext(bg, w.setCursor)
		defer st.Close()
		for _, c := range cursors {
			if _, err := st.ExecContext(bg, c.RunID, c.Stage, c.Attempt, c.Source, c.Offset, c.State); err != nil {
				return usedCache, fmt.Errorf("store the read position of %s: %w", c.Source, err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return usedCache, err
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

// MetricSummaries returns the summary of every metric of a run, one per
// (stage, key), from the highest attempt that logged the key, ordered by
// stage position (stages the run does not declare last, by name), then key.
// It reads only the series rows, however many points they have.
func (db *DB) MetricSummaries(ctx context.Context, runID string) ([]SeriesSummary, error) {
	rows, err := db.r.QueryContext(ctx, `
SELECT s.stage, s.key, s.attempt, s.points, s.repeats, s.nonfinite, s.min_value, s.max_value,
       s.last_step, s.last_seq, s.last_value, s.last_wall_ns, s.step_source
  FROM metric_series s
  LEFT JOIN stages st ON st.run_id = s.run_id AND st.name = s.stage
 WHERE s.run_id = ?1 AND s.points > 0
   AND s.attempt = (SELECT max(attempt) FROM metric_series
                     WHERE run_id = ?1 AND stage = s.stage AND key = s.key AND points > 0)
 ORDER BY st.position IS NULL, st.position, s.stage, s.key`, runID)
	if err != nil {
		return nil, fmt.Errorf("metric summaries of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []SeriesSummary
	for rows.Next() {
		var (
			s        SeriesSummary
			min, max sql.NullFloat64
			v        sql.NullFloat64
			wall     sql.NullInt64
		)
		if err := rows.Scan(&s.Stage, &s.Key, &s.Attempt, &s.Points, &s.Repeats, &s.NonFinite, &min, &max,
			&s.Last.Step, &s.Last.Seq, &v, &wall, &s.StepSource); err != nil {
			return nil, fmt.Errorf("metric summaries of run %s: %w", runID, err)
		}
		s.Min, s.Max = floatOf(min), floatOf(max)
		s.Last.RunID, s.Last.Stage, s.Last.Key, s.Last.Attempt = runID, s.Stage, s.Key, s.Attempt
		s.Last.Value, s.Last.Wall = floatOf(v), timeOf(wall)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("metric summaries of run %s: %w", runID, err)
	}
	return out, nil
}

// LastMetrics returns, for every (stage, key) of a run, the point of the
// highest attempt with the highest step (the latest stored among those that
// share it), ordered as MetricSummaries.
func (db *DB) LastMetrics(ctx context.Context, runID string) ([]MetricPoint, error) {
	sums, err := db.MetricSummaries(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]MetricPoint, len(sums))
	for i, s := range sums {
		out[i] = s.Last
	}
	return out, nil
}

// FirstMetricPoint is the point with the lowest step (the first to arrive
// at it) of one key of one attempt of a stage; ok is false when there is
// none. One row read, however long the series: the ETA asks it of every
// running stage each time the board redraws.
func (db *DB) FirstMetricPoint(ctx context.Context, runID, stage, key string, attempt int) (p MetricPoint, ok bool, err error) {
	var (
		v    sql.NullFloat64
		wall sql.NullInt64
	)
	err = db.r.QueryRowContext(ctx, `SELECT p.step, p.seq, p.value, p.wall_ns FROM metric_series s
		JOIN metric_points p ON p.series_id = s.id
		WHERE s.run_id = ? AND s.stage = ? AND s.key = ? AND s.attempt = ?
		ORDER BY p.step, p.seq LIMIT 1`, runID, stage, key, attempt).Scan(&p.Step, &p.Seq, &v, &wall)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return p, false, nil
	case err != nil:
		return p, false, fmt.Errorf("first point of %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	p.RunID, p.Stage, p.Key, p.Attempt = runID, stage, key, attempt
	p.Value, p.Wall = floatOf(v), timeOf(wall)
	return p, true, nil
}

// MetricSeries returns the points of one key of one stage from the latest
// attempt that logged that key, ordered by step and, within a step, by
// arrival (Seq). No points is not an error.
func (db *DB) MetricSeries(ctx context.Context, runID, stage, key string) ([]MetricPoint, error) {
	var (
		id      int64
		attempt int
		n       int64
	)
	err := db.r.QueryRowContext(ctx, `SELECT id, attempt, points FROM metric_series
		WHERE run_id = ? AND stage = ? AND key = ? ORDER BY attempt DESC LIMIT 1`, runID, stage, key).Scan(&id, &attempt, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	// In primary-key order: no sort.
	rows, err := db.r.QueryContext(ctx, `SELECT step, seq, value, wall_ns FROM metric_points
		WHERE series_id = ? ORDER BY step, seq`, id)
	if err != nil {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	defer rows.Close()
	var out []MetricPoint
	if n > 0 {
		out = make([]MetricPoint, 0, n)
	}
	for rows.Next() {
		var (
			v    sql.NullFloat64
			wall sql.NullInt64
		)
		p := MetricPoint{RunID: runID, Stage: stage, Key: key, Attempt: attempt}
		if err := rows.Scan(&p.Step, &p.Seq, &v, &wall); err != nil {
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

// MetricCursors returns the stored read positions of one attempt's metric
// sources, by source.
func (db *DB) MetricCursors(ctx context.Context, runID, stage string, attempt int) (map[string]MetricCursor, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT source, offset, state FROM metric_cursors
		WHERE run_id = ? AND stage = ? AND attempt = ?`, runID, stage, attempt)
	if err != nil {
		return nil, fmt.Errorf("read positions of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
	}
	defer rows.Close()
	out := map[string]MetricCursor{}
	for rows.Next() {
		c := MetricCursor{RunID: runID, Stage: stage, Attempt: attempt}
		if err := rows.Scan(&c.Source, &c.Offset, &c.State); err != nil {
			return nil, fmt.Errorf("read positions of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
		}
		out[c.Source] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read positions of attempt %d of stage %s of run %s: %w", attempt, stage, runID, err)
	}
	return out, nil
}

// MaxSteps returns, for each key logged by one attempt of one stage, the
// highest step stored. A reader resuming an attempt that has stored points
// but no cursors (written before cursors existed) skips points up to it.
// Keys the attempt never logged are absent.
func (db *DB) MaxSteps(ctx context.Context, runID, stage string, attempt int) (map[string]int64, error) {
	rows, err := db.r.QueryContext(ctx, `
SELECT key, max_step FROM metric_series
 WHERE run_id = ? AND stage = ? AND attempt = ? AND max_step IS NOT NULL`, runID, stage, attempt)
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

// CountMetricPoints returns how many metric points a run has (all
// attempts), from the series' summaries.
func (db *DB) CountMetricPoints(ctx context.Context, runID string) (int, error) {
	var n sql.NullInt64
	if err := db.r.QueryRowContext(ctx, `SELECT sum(points) FROM metric_series WHERE run_id = ?`, runID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count metric points of run %s: %w", runID, err)
	}
	return int(n.Int64), nil
}

// Transient says whether a failed write is worth retrying as it is: the
// disk is full, the file system failed, or another process holds the
// database's lock past the busy timeout. reason names the cause in a few
// words for the user ("disk full"). Anything else (a constraint, a deleted
// run) fails the same way again. SQLite's messages are matched rather than
// its error codes so that this package builds without cgo.
func Transient(err error) (reason string, ok bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "database or disk is full"), strings.Contains(msg, "no space left on device"):
		return "disk full", true
	case strings.Contains(msg, "disk I/O error"), strings.Contains(msg, "input/output error"):
		return "disk I/O error", true
	case strings.Contains(msg, "database is locked"), strings.Contains(msg, "database table is locked"),
		strings.Contains(msg, "database is busy"):
		return "database busy (another process holds its lock)", true
	case strings.Contains(msg, "attempt to write a readonly database"), strings.Contains(msg, "read-only file system"):
		return "database read-only", true
	case strings.Contains(msg, "unable to open database file"):
		return "database file cannot be opened", true
	}
	return "", false
}

// MetricSeriesEnvelope is MetricSeries for drawing a long series: about
// buckets points spread evenly over its steps (the first point at or after
// each of buckets evenly spaced steps), plus its lowest and highest points
// and its first NaN or ±Inf (kept where the summary says they are), ordered
// by step and arrival. A series with at most 2·buckets points comes back
// whole. Each point is one index seek, so a curve of millions of points is
// read at once; a series whose steps span fewer than buckets values (many
// points at one step) is sampled by arrival in one pass instead.
func (db *DB) MetricSeriesEnvelope(ctx context.Context, runID, stage, key string, buckets int) ([]MetricPoint, error) {
	var (
		id                    int64
		attempt               int
		n                     int64
		minStep, maxStep      sql.NullInt64
		loStep, loSeq, hiStep sql.NullInt64
		hiSeq, nfStep, nfSeq  sql.NullInt64
	)
	err := db.r.QueryRowContext(ctx, `SELECT id, attempt, points, min_step, max_step, min_at_step, min_at_seq,
		max_at_step, max_at_seq, nonfinite_at_step, nonfinite_at_seq FROM metric_series
		WHERE run_id = ? AND stage = ? AND key = ? ORDER BY attempt DESC LIMIT 1`, runID, stage, key).Scan(
		&id, &attempt, &n, &minStep, &maxStep, &loStep, &loSeq, &hiStep, &hiSeq, &nfStep, &nfSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	if buckets <= 0 || n <= int64(2*buckets) || !minStep.Valid || !maxStep.Valid {
		return db.MetricSeries(ctx, runID, stage, key)
	}
	fail := func(err error) ([]MetricPoint, error) {
		return nil, fmt.Errorf("metric series %s of stage %s of run %s: %w", key, stage, runID, err)
	}
	conn, err := db.r.Conn(ctx)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	type at struct{ step, seq int64 }
	seen := map[at]bool{}
	var out []MetricPoint
	scan := func(row interface{ Scan(...any) error }) error {
		var (
			v    sql.NullFloat64
			wall sql.NullInt64
		)
		p := MetricPoint{RunID: runID, Stage: stage, Key: key, Attempt: attempt}
		if err := row.Scan(&p.Step, &p.Seq, &v, &wall); err != nil {
			return err
		}
		if k := (at{p.Step, p.Seq}); !seen[k] {
			seen[k] = true
			p.Value, p.Wall = floatOf(v), timeOf(wall)
			out = append(out, p)
		}
		return nil
	}
	span := maxStep.Int64 - minStep.Int64
	if span >= int64(buckets) {
		seek, err := conn.PrepareContext(ctx, `SELECT step, seq, value, wall_ns FROM metric_points
			WHERE series_id = ? AND step >= ? ORDER BY step, seq LIMIT 1`)
		if err != nil {
			return fail(err)
		}
		defer seek.Close()
		for i := 0; i <= buckets; i++ {
			s := minStep.Int64 + int64(float64(span)*float64(i)/float64(buckets))
			if err := scan(seek.QueryRowContext(ctx, id, s)); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fail(err)
			}
		}
	} else {
		every := (n + int64(buckets) - 1) / int64(buckets)
		rows, err := conn.QueryContext(ctx, `SELECT step, seq, value, wall_ns FROM metric_points
			WHERE series_id = ? AND (seq - 1) % ? = 0 ORDER BY step, seq`, id, every)
		if err != nil {
			return fail(err)
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				rows.Close()
				return fail(err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fail(err)
		}
	}
	one, err := conn.PrepareContext(ctx, `SELECT step, seq, value, wall_ns FROM metric_points WHERE series_id = ? AND step = ? AND seq = ?`)
	if err != nil {
		return fail(err)
	}
	defer one.Close()
	for _, e := range [][2]sql.NullInt64{{loStep, loSeq}, {hiStep, hiSeq}, {nfStep, nfSeq}} {
		if !e[0].Valid || !e[1].Valid {
			continue
		}
		if err := scan(one.QueryRowContext(ctx, id, e[0].Int64, e[1].Int64)); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fail(err)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Step != out[j].Step {
			return out[i].Step < out[j].Step
		}
		return out[i].Seq < out[j].Seq
	})
	return out, nil
}
