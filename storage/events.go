package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// ---- events ----

// AddEvent stores an event and returns its id. An empty RunID makes it a
// machine-wide event; a zero At is set to now.
func (db *DB) AddEvent(ctx context.Context, e Event) (int64, error) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	var run any
	if e.RunID != "" {
		run = e.RunID
	}
	res, err := db.w.ExecContext(ctx, `INSERT INTO events (run_id, stage, gpu, kind, severity, message, fix, evidence, at_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run, e.Stage, e.GPU, e.Kind, e.Severity, e.Message, e.Fix, e.Evidence, e.At.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("add %s event for run %q: %w", e.Kind, e.RunID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("add %s event for run %q: %w", e.Kind, e.RunID, err)
	}
	return id, nil
}

const eventColumns = `id, run_id, stage, gpu, kind, severity, message, fix, evidence, at_ns, dismissed_ns`

// Events returns the events of a run ordered by At, then ID. An empty runID
// returns the machine-wide events (those with no run).
func (db *DB) Events(ctx context.Context, runID string) ([]Event, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if runID == "" {
		rows, err = db.r.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE run_id IS NULL ORDER BY at_ns, id`)
	} else {
		rows, err = db.r.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE run_id = ? ORDER BY at_ns, id`, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("events of run %q: %w", runID, err)
	}
	return scanEvents(rows, fmt.Sprintf("events of run %q", runID))
}

// EventsBetween returns all events (of any run or none) with from <= At < to,
// ordered by At, then ID; a zero from or to leaves that end open.
func (db *DB) EventsBetween(ctx context.Context, from, to time.Time) ([]Event, error) {
	lo, hi := rangeNs(from, to)
	rows, err := db.r.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE at_ns >= ? AND at_ns < ? ORDER BY at_ns, id`, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("events between %v and %v: %w", from, to, err)
	}
	return scanEvents(rows, fmt.Sprintf("events between %v and %v", from, to))
}

func scanEvents(rows *sql.Rows, what string) ([]Event, error) {
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var (
			e         Event
			run       sql.NullString
			at        int64
			dismissed sql.NullInt64
		)
		if err := rows.Scan(&e.ID, &run, &e.Stage, &e.GPU, &e.Kind, &e.Severity, &e.Message, &e.Fix, &e.Evidence, &at, &dismissed); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		e.RunID = run.String
		e.At = time.Unix(0, at)
		e.DismissedAt = timeOf(dismissed)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// rangeNs turns a half-open time range into unix nanoseconds, zero ends
// being open.
func rangeNs(from, to time.Time) (lo, hi int64) {
	lo, hi = -1<<63, 1<<63-1
	if !from.IsZero() {
		lo = from.UnixNano()
	}
	if !to.IsZero() {
		hi = to.UnixNano()
	}
	return lo, hi
}

// ---- GPU samples ----

// AddGPUSamples stores per-minute samples in one transaction. Minute is
// truncated to the minute; a sample for a (GPU, minute) already stored
// replaces it.
func (db *DB) AddGPUSamples(ctx context.Context, s []GPUSample) error {
	if len(s) == 0 {
		return nil
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add %d GPU samples: %w", len(s), err)
	}
	defer rollback(tx)
	st, err := tx.PrepareContext(ctx, `INSERT INTO gpu_samples (gpu, minute_ns, util_min, util_mean, util_max,
		mem_used_min, mem_used_mean, mem_used_max, temp_max, power_mean)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (gpu, minute_ns) DO UPDATE SET
		util_min = excluded.util_min, util_mean = excluded.util_mean, util_max = excluded.util_max,
		mem_used_min = excluded.mem_used_min, mem_used_mean = excluded.mem_used_mean,
		mem_used_max = excluded.mem_used_max, temp_max = excluded.temp_max, power_mean = excluded.power_mean`)
	if err != nil {
		return fmt.Errorf("add %d GPU samples: %w", len(s), err)
	}
	defer st.Close()
	for _, g := range s {
		if _, err := st.ExecContext(ctx, g.GPU, g.Minute.Truncate(time.Minute).UnixNano(),
			floatArg(g.UtilMin), floatArg(g.UtilMean), floatArg(g.UtilMax),
			g.MemUsedMin, g.MemUsedMean, g.MemUsedMax, floatArg(g.TempMax), floatArg(g.PowerMean),
		); err != nil {
			return fmt.Errorf("add GPU sample of %s at %v: %w", g.GPU, g.Minute, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add %d GPU samples: commit: %w", len(s), err)
	}
	return nil
}

// GPUSamples returns the samples of one GPU with from <= Minute < to,
// ordered by minute; a zero from or to leaves that end open. An empty gpu
// returns the samples of all GPUs, ordered by minute, then GPU.
func (db *DB) GPUSamples(ctx context.Context, gpu string, from, to time.Time) ([]GPUSample, error) {
	lo, hi := rangeNs(from, to)
	const cols = `gpu, minute_ns, util_min, util_mean, util_max, mem_used_min, mem_used_mean, mem_used_max, temp_max, power_mean`
	var (
		rows *sql.Rows
		err  error
	)
	if gpu == "" {
		rows, err = db.r.QueryContext(ctx, `SELECT `+cols+` FROM gpu_samples
			WHERE minute_ns >= ? AND minute_ns < ? ORDER BY minute_ns, gpu`, lo, hi)
	} else {
		rows, err = db.r.QueryContext(ctx, `SELECT `+cols+` FROM gpu_samples
			WHERE gpu = ? AND minute_ns >= ? AND minute_ns < ? ORDER BY minute_ns`, gpu, lo, hi)
	}
	if err != nil {
		return nil, fmt.Errorf("GPU samples of %q: %w", gpu, err)
	}
	defer rows.Close()
	var out []GPUSample
	for rows.Next() {
		var (
			g                              GPUSample
			minute                         int64
			umin, umean, umax, temp, power sql.NullFloat64
		)
		if err := rows.Scan(&g.GPU, &minute, &umin, &umean, &umax,
			&g.MemUsedMin, &g.MemUsedMean, &g.MemUsedMax, &temp, &power); err != nil {
			return nil, fmt.Errorf("GPU samples of %q: %w", gpu, err)
		}
		g.Minute = time.Unix(0, minute)
		g.UtilMin, g.UtilMean, g.UtilMax = floatOf(umin), floatOf(umean), floatOf(umax)
		g.TempMax, g.PowerMean = floatOf(temp), floatOf(power)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("GPU samples of %q: %w", gpu, err)
	}
	return out, nil
}

// DeleteGPUSamplesBefore drops per-minute GPU records older than before
// (retention), and says how many went.
func (db *DB) DeleteGPUSamplesBefore(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM gpu_samples WHERE minute_ns < ?`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("delete GPU samples before %s: %w", before.Format(time.DateTime), err)
	}
	return res.RowsAffected()
}

// DismissEvent marks an event as seen by the user; it stays in the record.
func (db *DB) DismissEvent(ctx context.Context, id int64, at time.Time) error {
	res, err := db.w.ExecContext(ctx, `UPDATE events SET dismissed_ns = ? WHERE id = ?`, at.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("dismiss event %d: %w", id, err)
	}
	return mustAffect(res, "dismiss event %d", id)
}
