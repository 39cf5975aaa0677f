package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ---- GPU samples ----

// AddGPUSamples stores per-minute samples, with the memory each run held,
// in one transaction. Minute is truncated to the minute; a sample for a
// (GPU, minute) already stored replaces it, its run rows included.
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
		mem_used_min, mem_used_mean, mem_used_max, temp_max, power_mean,
		simulated, samples, temp_mean, power_max, throttled, throttle_reasons, xids)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (gpu, minute_ns) DO UPDATE SET
		util_min = excluded.util_min, util_mean = excluded.util_mean, util_max = excluded.util_max,
		mem_used_min = excluded.mem_used_min, mem_used_mean = excluded.mem_used_mean,
		mem_used_max = excluded.mem_used_max, temp_max = excluded.temp_max, power_mean = excluded.power_mean,
		simulated = excluded.simulated, samples = excluded.samples, temp_mean = excluded.temp_mean,
		power_max = excluded.power_max, throttled = excluded.throttled,
		throttle_reasons = excluded.throttle_reasons, xids = excluded.xids`)
	if err != nil {
		return fmt.Errorf("add %d GPU samples: %w", len(s), err)
	}
	defer st.Close()
	clearRuns, err := tx.PrepareContext(ctx, `DELETE FROM gpu_run_samples WHERE gpu = ? AND minute_ns = ?`)
	if err != nil {
		return fmt.Errorf("add %d GPU samples: %w", len(s), err)
	}
	defer clearRuns.Close()
	addRun, err := tx.PrepareContext(ctx, `INSERT INTO gpu_run_samples (gpu, minute_ns, run_id, stage, samples, mem_mean, mem_max)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (gpu, minute_ns, run_id, stage) DO UPDATE SET
		samples = excluded.samples, mem_mean = excluded.mem_mean, mem_max = excluded.mem_max`)
	if err != nil {
		return fmt.Errorf("add %d GPU samples: %w", len(s), err)
	}
	defer addRun.Close()
	for _, g := range s {
		minute := g.Minute.Truncate(time.Minute).UnixNano()
		reasons, err := json.Marshal(nonNil(g.ThrottleReasons))
		if err != nil {
			return fmt.Errorf("add GPU sample of %s at %v: %w", g.GPU, g.Minute, err)
		}
		xids, err := json.Marshal(nonNil(g.XIDs))
		if err != nil {
			return fmt.Errorf("add GPU sample of %s at %v: %w", g.GPU, g.Minute, err)
		}
		if _, err := st.ExecContext(ctx, g.GPU, minute,
			floatArg(g.UtilMin), floatArg(g.UtilMean), floatArg(g.UtilMax),
			g.MemUsedMin, g.MemUsedMean, g.MemUsedMax, floatArg(g.TempMax), floatArg(g.PowerMean),
			boolArg(g.Simulated), g.Samples, floatArg(g.TempMean), floatArg(g.PowerMax), g.Throttled,
			string(reasons), string(xids),
		); err != nil {
			return fmt.Errorf("add GPU sample of %s at %v: %w", g.GPU, g.Minute, err)
		}
		if _, err := clearRuns.ExecContext(ctx, g.GPU, minute); err != nil {
			return fmt.Errorf("add GPU sample of %s at %v: %w", g.GPU, g.Minute, err)
		}
		for _, r := range g.Runs {
			if r.RunID == "" {
				continue
			}
			if _, err := addRun.ExecContext(ctx, g.GPU, minute, r.RunID, r.Stage, r.Samples, r.MemMeanMiB, r.MemMaxMiB); err != nil {
				return fmt.Errorf("add GPU use of run %s on %s at %v: %w", r.RunID, g.GPU, g.Minute, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add %d GPU samples: commit: %w", len(s), err)
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

const gpuSampleColumns = `gpu, minute_ns, util_min, util_mean, util_max, mem_used_min, mem_used_mean, mem_used_max,
	temp_max, power_mean, simulated, samples, temp_mean, power_max, throttled, throttle_reasons, xids`

// GPUSamples returns the samples of one GPU with from <= Minute < to,
// ordered by minute, each with the memory every run held; a zero from or
// to leaves that end open. An empty gpu returns the samples of all GPUs,
// ordered by minute, then GPU.
func (db *DB) GPUSamples(ctx context.Context, gpu string, from, to time.Time) ([]GPUSample, error) {
	lo, hi := rangeNs(from, to)
	var (
		rows *sql.Rows
		err  error
	)
	if gpu == "" {
		rows, err = db.r.QueryContext(ctx, `SELECT `+gpuSampleColumns+` FROM gpu_samples
			WHERE minute_ns >= ? AND minute_ns < ? ORDER BY minute_ns, gpu`, lo, hi)
	} else {
		rows, err = db.r.QueryContext(ctx, `SELECT `+gpuSampleColumns+` FROM gpu_samples
			WHERE gpu = ? AND minute_ns >= ? AND minute_ns < ? ORDER BY minute_ns`, gpu, lo, hi)
	}
	if err != nil {
		return nil, fmt.Errorf("GPU samples of %q: %w", gpu, err)
	}
	out, err := scanGPUSamples(rows, nil)
	if err != nil {
		return nil, fmt.Errorf("GPU samples of %q: %w", gpu, err)
	}
	if len(out) == 0 {
		return out, nil
	}
	// The run rows of the same range, attached to their minute.
	if gpu == "" {
		rows, err = db.r.QueryContext(ctx, `SELECT gpu, minute_ns, run_id, stage, samples, mem_mean, mem_max
			FROM gpu_run_samples WHERE minute_ns >= ? AND minute_ns < ? ORDER BY minute_ns, gpu, run_id, stage`, lo, hi)
	} else {
		rows, err = db.r.QueryContext(ctx, `SELECT gpu, minute_ns, run_id, stage, samples, mem_mean, mem_max
			FROM gpu_run_samples WHERE gpu = ? AND minute_ns >= ? AND minute_ns < ? ORDER BY minute_ns, run_id, stage`, gpu, lo, hi)
	}
	if err != nil {
		return nil, fmt.Errorf("GPU use of %q: %w", gpu, err)
	}
	defer rows.Close()
	type key struct {
		gpu    string
		minute int64
	}
	at := make(map[key]int, len(out))
	for i, g := range out {
		at[key{g.GPU, g.Minute.UnixNano()}] = i
	}
	for rows.Next() {
		var (
			k key
			r GPURunSample
		)
		if err := rows.Scan(&k.gpu, &k.minute, &r.RunID, &r.Stage, &r.Samples, &r.MemMeanMiB, &r.MemMaxMiB); err != nil {
			return nil, fmt.Errorf("GPU use of %q: %w", gpu, err)
		}
		if i, ok := at[k]; ok {
			out[i].Runs = append(out[i].Runs, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("GPU use of %q: %w", gpu, err)
	}
	return out, nil
}

// scanGPUSamples reads gpuSampleColumns rows (and, with extra, more
// columns after them into extra's pointers).
func scanGPUSamples(rows *sql.Rows, extra func() []any) ([]GPUSample, error) {
	defer rows.Close()
	var out []GPUSample
	for rows.Next() {
		var (
			g                              GPUSample
			minute                         int64
			umin, umean, umax, temp, power sql.NullFloat64
			tmean, pmax                    sql.NullFloat64
			simulated                      int64
			reasons, xids                  string
		)
		dest := []any{&g.GPU, &minute, &umin, &umean, &umax,
			&g.MemUsedMin, &g.MemUsedMean, &g.MemUsedMax, &temp, &power,
			&simulated, &g.Samples, &tmean, &pmax, &g.Throttled, &reasons, &xids}
		if extra != nil {
			dest = append(dest, extra()...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		g.Minute = time.Unix(0, minute)
		g.UtilMin, g.UtilMean, g.UtilMax = floatOf(umin), floatOf(umean), floatOf(umax)
		g.TempMax, g.PowerMean = floatOf(temp), floatOf(power)
		g.TempMean, g.PowerMax = floatOf(tmean), floatOf(pmax)
		g.Simulated = simulated != 0
		if err := json.Unmarshal([]byte(reasons), &g.ThrottleReasons); err != nil {
			return nil, fmt.Errorf("throttle reasons of %s at %v: %w", g.GPU, g.Minute, err)
		}
		if err := json.Unmarshal([]byte(xids), &g.XIDs); err != nil {
			return nil, fmt.Errorf("XIDs of %s at %v: %w", g.GPU, g.Minute, err)
		}
		if len(g.ThrottleReasons) == 0 {
			g.ThrottleReasons = nil
		}
		if len(g.XIDs) == 0 {
			g.XIDs = nil
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// GPUUses returns, minute by minute, how one run used one GPU with
// from <= Minute < to: every stored minute of the GPU in the range, with the
// memory the run's processes held (0 in a minute it held none); the other
// runs' rows are left out (Runs is nil). A zero from or to leaves that end
// open.
func (db *DB) GPUUses(ctx context.Context, runID, gpu string, from, to time.Time) ([]GPUUse, error) {
	lo, hi := rangeNs(from, to)
	var cols []string
	for _, c := range strings.Split(gpuSampleColumns, ",") {
		cols = append(cols, "s."+strings.TrimSpace(c))
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+`,
			COALESCE((SELECT CAST(sum(r.mem_mean) AS INTEGER) FROM gpu_run_samples r
			          WHERE r.gpu = s.gpu AND r.minute_ns = s.minute_ns AND r.run_id = ?), 0),
			COALESCE((SELECT CAST(sum(r.mem_max) AS INTEGER) FROM gpu_run_samples r
			          WHERE r.gpu = s.gpu AND r.minute_ns = s.minute_ns AND r.run_id = ?), 0)
		FROM gpu_samples s WHERE s.gpu = ? AND s.minute_ns >= ? AND s.minute_ns < ? ORDER BY s.minute_ns`,
		runID, runID, gpu, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("GPU use of run %s on %s: %w", runID, gpu, err)
	}
	var means, maxes []*int64
	samples, err := scanGPUSamples(rows, func() []any {
		m, x := new(int64), new(int64)
		means, maxes = append(means, m), append(maxes, x)
		return []any{m, x}
	})
	if err != nil {
		return nil, fmt.Errorf("GPU use of run %s on %s: %w", runID, gpu, err)
	}
	out := make([]GPUUse, len(samples))
	for i, s := range samples {
		out[i] = GPUUse{GPUSample: s, RunMemMeanMiB: *means[i], RunMemMaxMiB: *maxes[i]}
	}
	return out, nil
}

// DeleteGPUSamplesBefore drops per-minute GPU records (and the runs' GPU
// use) older than before (retention), and says how many minutes went.
func (db *DB) DeleteGPUSamplesBefore(ctx context.Context, before time.Time) (int64, error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("delete GPU samples before %s: %w", before.Format(time.DateTime), err)
	}
	defer rollback(tx)
	res, err := tx.ExecContext(ctx, `DELETE FROM gpu_samples WHERE minute_ns < ?`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("delete GPU samples before %s: %w", before.Format(time.DateTime), err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM gpu_run_samples WHERE minute_ns < ?`, before.UnixNano()); err != nil {
		return 0, fmt.Errorf("delete GPU use before %s: %w", before.Format(time.DateTime), err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("delete GPU samples before %s: %w", before.Format(time.DateTime), err)
	}
	return res.RowsAffected()
}

// ---- the GPUs ever sampled ----

// RecordGPUs notes GPUs as seen at their LastSeen: new ones are added, known
// ones get their current index, name, memory, power limit and simulated
// mark (FirstSeen stays the first).
func (db *DB) RecordGPUs(ctx context.Context, gs []GPUInfo) error {
	if len(gs) == 0 {
		return nil
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record %d GPUs: %w", len(gs), err)
	}
	defer rollback(tx)
	st, err := tx.PrepareContext(ctx, `INSERT INTO gpus (uuid, idx, name, simulated, mem_total, power_limit, first_seen_ns, last_seen_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (uuid) DO UPDATE SET idx = excluded.idx, name = excluded.name, simulated = excluded.simulated,
		mem_total = excluded.mem_total, power_limit = excluded.power_limit,
		first_seen_ns = min(gpus.first_seen_ns, excluded.first_seen_ns),
		last_seen_ns = max(gpus.last_seen_ns, excluded.last_seen_ns)`)
	if err != nil {
		return fmt.Errorf("record %d GPUs: %w", len(gs), err)
	}
	defer st.Close()
	for _, g := range gs {
		if g.UUID == "" {
			continue
		}
		seen := g.LastSeen
		if seen.IsZero() {
			seen = time.Now()
		}
		first := g.FirstSeen
		if first.IsZero() || first.After(seen) {
			first = seen
		}
		if _, err := st.ExecContext(ctx, g.UUID, g.Index, g.Name, boolArg(g.Simulated), g.MemTotalMiB,
			floatArg(g.PowerLimitW), first.UnixNano(), seen.UnixNano()); err != nil {
			return fmt.Errorf("record GPU %s: %w", g.UUID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record %d GPUs: commit: %w", len(gs), err)
	}
	return nil
}

// GPUs returns what is recorded of the GPUs with these UUIDs (all of them
// for none), ordered by index, then UUID. A UUID never sampled is left out.
func (db *DB) GPUs(ctx context.Context, uuids ...string) ([]GPUInfo, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT uuid, idx, name, simulated, mem_total, power_limit, first_seen_ns, last_seen_ns
		FROM gpus ORDER BY idx, uuid`)
	if err != nil {
		return nil, fmt.Errorf("recorded GPUs: %w", err)
	}
	defer rows.Close()
	var out []GPUInfo
	for rows.Next() {
		var (
			g           GPUInfo
			sim         int64
			limit       sql.NullFloat64
			first, last int64
		)
		if err := rows.Scan(&g.UUID, &g.Index, &g.Name, &sim, &g.MemTotalMiB, &limit, &first, &last); err != nil {
			return nil, fmt.Errorf("recorded GPUs: %w", err)
		}
		if len(uuids) > 0 && !slices.Contains(uuids, g.UUID) {
			continue
		}
		g.Simulated, g.PowerLimitW = sim != 0, floatOf(limit)
		g.FirstSeen, g.LastSeen = time.Unix(0, first), time.Unix(0, last)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recorded GPUs: %w", err)
	}
	return out, nil
}
