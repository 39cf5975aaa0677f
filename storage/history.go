package storage

import (
	"context"
	"fmt"
	"time"
)

// StageRunTime is how long one succeeded stage ran, with its run's template
// and parameters: what the run-time predictor learns from.
type StageRunTime struct {
	RunID, Template, Stage string
	Params                 string // the run's parameter values, JSON
	// RunTime is the time its attempts ran that did the work: the one that
	// succeeded and the preempted ones before it, which it resumed from.
	RunTime    time.Duration
	FinishedAt time.Time
}

// StageRunTimes returns the run times of the succeeded stages of the most
// recent succeeded runs of a template ("" = every template), at most limit
// runs (0: all), oldest first.
func (db *DB) StageRunTimes(ctx context.Context, template string, limit int) ([]StageRunTime, error) {
	q := `WITH recent AS (
			SELECT id, template, params, finished_ns FROM runs
			 WHERE state = ? AND (? = '' OR template = ?)
			 ORDER BY finished_ns DESC, id DESC LIMIT ?)
		SELECT r.id, r.template, s.name, r.params, coalesce(s.finished_ns, r.finished_ns, 0),
		       sum(CASE WHEN a.state IN (?, ?) AND a.started_ns IS NOT NULL AND a.finished_ns IS NOT NULL
		                THEN a.finished_ns - a.started_ns ELSE 0 END)
		  FROM recent r
		  JOIN stages s ON s.run_id = r.id AND s.state = ?
		  JOIN attempts a ON a.run_id = s.run_id AND a.stage = s.name
		 GROUP BY r.id, s.name
		 ORDER BY r.finished_ns, r.id, s.position`
	lim := int64(limit)
	if limit <= 0 {
		lim = -1 // SQLite: no limit
	}
	rows, err := db.r.QueryContext(ctx, q, string(RunSucceeded), template, template, lim,
		AttemptSucceeded, AttemptPreempted, string(StageSucceeded))
	if err != nil {
		return nil, fmt.Errorf("stage run times: %w", err)
	}
	defer rows.Close()
	var out []StageRunTime
	for rows.Next() {
		var (
			x            StageRunTime
			finished, ns int64
		)
		if err := rows.Scan(&x.RunID, &x.Template, &x.Stage, &x.Params, &finished, &ns); err != nil {
			return nil, fmt.Errorf("stage run times: %w", err)
		}
		x.RunTime, x.FinishedAt = time.Duration(ns), time.Unix(0, finished)
		out = append(out, x)
	}
	return out, rows.Err()
}
