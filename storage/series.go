package storage

import (
	"context"
	"database/sql"
	"fmt"
)

// MetricSeriesAllAttempts returns the points of one key of one stage from
// every attempt that logged it, ordered by attempt, then step: the run
// view draws each attempt (a diverged first one under its retry). No
// points is not an error.
func (db *DB) MetricSeriesAllAttempts(ctx context.Context, runID, stage, key string) ([]MetricPoint, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT s.attempt, p.step, p.value, p.wall_ns
		FROM metric_series s JOIN metric_points p ON p.series_id = s.id
		WHERE s.run_id = ? AND s.stage = ? AND s.key = ? ORDER BY s.attempt, p.step`, runID, stage, key)
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
		p := MetricPoint{RunID: runID, Stage: stage, Key: key}
		if err := rows.Scan(&p.Attempt, &p.Step, &v, &wall); err != nil {
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
