package storage

import (
	"context"
	"fmt"
	"time"
)

// ---- host use of runs ----

// HostSample is one minute of what one attempt of a stage used of the host
// (the local executor reads it from the attempt's cgroup). Memory is in
// bytes, CPU time in seconds.
type HostSample struct {
	RunID   string
	Stage   string
	Attempt int
	Minute  time.Time // truncated to the minute on write
	Samples int       // readings the minute is made of
	// MemMean and MemMax are the memory in use over the readings; MemPeak
	// the cgroup's own high-water mark at the minute's last reading (it
	// catches what fell between readings); MemLimit its limit, 0 = none.
	MemMean, MemMax, MemPeak, MemLimit int64
	// CPUSeconds is the CPU time used in the minute; CPUTotal what the
	// attempt had used by its last reading.
	CPUSeconds, CPUTotal float64
	CPULimitMilli        int64 // thousandths of a CPU; 0 = none
}

// AddHostSamples stores per-minute host records in one transaction. A
// minute already stored for the same attempt (an owner stopped within it,
// and the next one adopted the attempt) is merged with it: readings and
// CPU time add up, means are weighted by readings, peaks and totals take
// the larger. A minute of a run that is no longer in the archive is left
// out.
func (db *DB) AddHostSamples(ctx context.Context, s []HostSample) error {
	if len(s) == 0 {
		return nil
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add %d host samples: %w", len(s), err)
	}
	defer rollback(tx)
	st, err := tx.PrepareContext(ctx, `INSERT INTO host_run_samples (run_id, stage, attempt, minute_ns, samples,
		mem_mean, mem_max, mem_peak, mem_limit, cpu_seconds, cpu_total, cpu_limit_milli)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?)
		ON CONFLICT (run_id, stage, attempt, minute_ns) DO UPDATE SET
		mem_mean = CASE WHEN samples + excluded.samples > 0
			THEN (mem_mean * samples + excluded.mem_mean * excluded.samples) / (samples + excluded.samples)
			ELSE max(mem_mean, excluded.mem_mean) END,
		samples = samples + excluded.samples,
		mem_max = max(mem_max, excluded.mem_max), mem_peak = max(mem_peak, excluded.mem_peak),
		mem_limit = CASE WHEN excluded.mem_limit > 0 THEN excluded.mem_limit ELSE mem_limit END,
		cpu_seconds = cpu_seconds + excluded.cpu_seconds, cpu_total = max(cpu_total, excluded.cpu_total),
		cpu_limit_milli = CASE WHEN excluded.cpu_limit_milli > 0 THEN excluded.cpu_limit_milli ELSE cpu_limit_milli END`)
	if err != nil {
		return fmt.Errorf("add %d host samples: %w", len(s), err)
	}
	defer st.Close()
	for _, h := range s {
		if _, err := st.ExecContext(ctx, h.RunID, h.Stage, h.Attempt, h.Minute.Truncate(time.Minute).UnixNano(), h.Samples,
			h.MemMean, h.MemMax, h.MemPeak, h.MemLimit, h.CPUSeconds, h.CPUTotal, h.CPULimitMilli, h.RunID); err != nil {
			return fmt.Errorf("add host sample of run %s stage %s at %v: %w", h.RunID, h.Stage, h.Minute, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add %d host samples: commit: %w", len(s), err)
	}
	return nil
}

// HostSamples returns the per-minute host records of one run, ordered by
// stage, attempt and minute.
func (db *DB) HostSamples(ctx context.Context, runID string) ([]HostSample, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT run_id, stage, attempt, minute_ns, samples, mem_mean, mem_max, mem_peak,
		mem_limit, cpu_seconds, cpu_total, cpu_limit_milli
		FROM host_run_samples WHERE run_id = ? ORDER BY stage, attempt, minute_ns`, runID)
	if err != nil {
		return nil, fmt.Errorf("host samples of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []HostSample
	for rows.Next() {
		var (
			h      HostSample
			minute int64
		)
		if err := rows.Scan(&h.RunID, &h.Stage, &h.Attempt, &minute, &h.Samples, &h.MemMean, &h.MemMax, &h.MemPeak,
			&h.MemLimit, &h.CPUSeconds, &h.CPUTotal, &h.CPULimitMilli); err != nil {
			return nil, fmt.Errorf("host samples of run %s: %w", runID, err)
		}
		h.Minute = time.Unix(0, minute)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("host samples of run %s: %w", runID, err)
	}
	return out, nil
}

// HostCPUTotal is the CPU time one attempt had used by its last stored
// minute (0 when none is stored): where a new owner that adopts the
// attempt counts on from.
func (db *DB) HostCPUTotal(ctx context.Context, runID, stage string, attempt int) (float64, error) {
	var total float64
	err := db.r.QueryRowContext(ctx, `SELECT COALESCE(max(cpu_total), 0) FROM host_run_samples
		WHERE run_id = ? AND stage = ? AND attempt = ?`, runID, stage, attempt).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("CPU time recorded of run %s stage %s attempt %d: %w", runID, stage, attempt, err)
	}
	return total, nil
}

// DeleteHostSamplesBefore drops per-minute host records older than before
// (retention, as DeleteGPUSamplesBefore), and says how many went.
func (db *DB) DeleteHostSamplesBefore(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM host_run_samples WHERE minute_ns < ?`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("delete host samples before %s: %w", before.Format(time.DateTime), err)
	}
	return res.RowsAffected()
}
