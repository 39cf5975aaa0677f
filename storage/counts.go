package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CountRuns returns how many runs are in each state.
func (db *DB) CountRuns(ctx context.Context) (map[RunState]int, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT state, count(*) FROM runs GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	out := map[RunState]int{}
	for rows.Next() {
		var (
			s RunState
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count runs: %w", err)
		}
		out[s] = n
	}
	return out, rows.Err()
}

// FinishedStage is a stage that has ended, with its run's template.
type FinishedStage struct {
	RunID, Template, Stage string
	State                  StageState
	StartedAt, FinishedAt  time.Time // StartedAt is zero for a stage that never started
}

// FinishedStages returns up to limit stages that finished after after,
// oldest first (limit 0: all).
func (db *DB) FinishedStages(ctx context.Context, after time.Time, limit int) ([]FinishedStage, error) {
	q := `SELECT s.run_id, r.template, s.name, s.state, s.started_ns, s.finished_ns
		FROM stages s JOIN runs r ON r.id = s.run_id
		WHERE s.finished_ns IS NOT NULL AND s.finished_ns > ? ORDER BY s.finished_ns`
	args := []any{after.UnixNano()}
	if after.IsZero() {
		args[0] = int64(-1 << 63)
	}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("finished stages: %w", err)
	}
	defer rows.Close()
	var out []FinishedStage
	for rows.Next() {
		var (
			f        FinishedStage
			started  sql.NullInt64
			finished int64
		)
		if err := rows.Scan(&f.RunID, &f.Template, &f.Stage, &f.State, &started, &finished); err != nil {
			return nil, fmt.Errorf("finished stages: %w", err)
		}
		f.StartedAt, f.FinishedAt = timeOf(started), time.Unix(0, finished)
		out = append(out, f)
	}
	return out, rows.Err()
}

// EventKindsAfter counts the events with an id above after by kind, and
// returns the highest id it counted (after when there are none): a reader
// that passes it back next time counts every event once.
func (db *DB) EventKindsAfter(ctx context.Context, after int64) (map[string]int, int64, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT kind, count(*), max(id) FROM events WHERE id > ? GROUP BY kind`, after)
	if err != nil {
		return nil, after, fmt.Errorf("count events: %w", err)
	}
	defer rows.Close()
	out, last := map[string]int{}, after
	for rows.Next() {
		var (
			k    string
			n    int
			upto int64
		)
		if err := rows.Scan(&k, &n, &upto); err != nil {
			return nil, after, fmt.Errorf("count events: %w", err)
		}
		out[k] = n
		last = max(last, upto)
	}
	return out, last, rows.Err()
}
