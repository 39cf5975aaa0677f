package storage

import (
	"context"
	"fmt"
)

// RunDirs returns every run's folder by run ID, without reading the rest
// of the rows (the archive's check of folders against rows).
func (db *DB) RunDirs(ctx context.Context) (map[string]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, dir FROM runs`)
	if err != nil {
		return nil, fmt.Errorf("list run folders: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, dir string
		if err := rows.Scan(&id, &dir); err != nil {
			return nil, fmt.Errorf("list run folders: %w", err)
		}
		out[id] = dir
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list run folders: %w", err)
	}
	return out, nil
}
