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

// DismissEvent marks an event as seen by the user; it stays in the record.
func (db *DB) DismissEvent(ctx context.Context, id int64, at time.Time) error {
	res, err := db.w.ExecContext(ctx, `UPDATE events SET dismissed_ns = ? WHERE id = ?`, at.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("dismiss event %d: %w", id, err)
	}
	return mustAffect(res, "dismiss event %d", id)
}
