package storage

import (
	"context"
	"database/sql"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A whole per-minute record goes in and comes out as it was: the simulated
// mark, the throttling, the XIDs and the memory of each run.
func TestGPUSampleRoundTrip(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	m0 := time.Unix(1_790_000_040, 0)
	in := GPUSample{GPU: "GPU-sim-0", Minute: m0.Add(12 * time.Second), Simulated: true, Samples: 60,
		UtilMin: 3, UtilMean: 71.5, UtilMax: 98, MemUsedMin: 1000, MemUsedMean: 15000, MemUsedMax: 16384,
		TempMean: 64.25, TempMax: 71, PowerMean: 512.5, PowerMax: 698.1,
		Throttled: 12, ThrottleReasons: []string{"hw_thermal_slowdown", "sw_power_cap"}, XIDs: []uint64{13, 79},
		Runs: []GPURunSample{{RunID: "r1", Stage: "train", Samples: 60, MemMeanMiB: 14000, MemMaxMiB: 16000},
			{RunID: "r2", Stage: "eval", Samples: 10, MemMeanMiB: 300, MemMaxMiB: 384}}}
	nan := GPUSample{GPU: "GPU-real-1", Minute: m0, Samples: 2, UtilMin: math.NaN(), UtilMean: math.NaN(), UtilMax: math.NaN(),
		TempMean: math.NaN(), TempMax: math.NaN(), PowerMean: math.NaN(), PowerMax: math.NaN()}
	require.NoError(t, db.AddGPUSamples(ctx, []GPUSample{in, nan}))

	got, err := db.GPUSamples(ctx, "GPU-sim-0", time.Time{}, time.Time{})
	require.NoError(t, err)
	want := in
	want.Minute = m0 // truncated on write
	require.Equal(t, []GPUSample{want}, got)

	got, err = db.GPUSamples(ctx, "GPU-real-1", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.False(t, got[0].Simulated)
	for name, v := range map[string]float64{"util": got[0].UtilMean, "temp mean": got[0].TempMean, "temp max": got[0].TempMax,
		"power mean": got[0].PowerMean, "power max": got[0].PowerMax} {
		require.True(t, math.IsNaN(v), "%s: NaN (not reported) round-trips", name)
	}
	require.Nil(t, got[0].Runs)

	all, err := db.GPUSamples(ctx, "", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Len(t, all[1].Runs, 2, "the run rows follow their minute in the all-GPU read too")

	// The same minute again replaces the record and its run rows.
	again := in
	again.Runs = []GPURunSample{{RunID: "r1", Stage: "train", Samples: 30, MemMeanMiB: 100, MemMaxMiB: 200}}
	again.XIDs, again.ThrottleReasons = nil, nil
	require.NoError(t, db.AddGPUSamples(ctx, []GPUSample{again}))
	got, err = db.GPUSamples(ctx, "GPU-sim-0", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, again.Runs, got[0].Runs)
	require.Nil(t, got[0].XIDs)
	require.Nil(t, got[0].ThrottleReasons)
}

// GPUUses is one run's view: every minute of the GPU in the range, with the
// run's memory summed over its stages, 0 where it held none.
func TestGPUUses(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	m0 := time.Unix(1_790_000_040, 0)
	var in []GPUSample
	for i := range 4 {
		s := GPUSample{GPU: "g", Minute: m0.Add(time.Duration(i) * time.Minute), Samples: 60, UtilMean: float64(10 * i),
			TempMean: 50, TempMax: 60, PowerMean: 100, PowerMax: 120, UtilMin: 0, UtilMax: 100}
		if i == 1 || i == 2 {
			s.Runs = []GPURunSample{{RunID: "r1", Stage: "train", Samples: 60, MemMeanMiB: 1000, MemMaxMiB: 1500},
				{RunID: "r1", Stage: "eval", Samples: 60, MemMeanMiB: 10, MemMaxMiB: 20},
				{RunID: "other", Stage: "train", Samples: 60, MemMeanMiB: 5000, MemMaxMiB: 5000}}
		}
		in = append(in, s)
	}
	require.NoError(t, db.AddGPUSamples(ctx, in))
	uses, err := db.GPUUses(ctx, "r1", "g", m0.Add(time.Minute), time.Time{})
	require.NoError(t, err)
	require.Len(t, uses, 3)
	require.Equal(t, int64(1010), uses[0].RunMemMeanMiB)
	require.Equal(t, int64(1520), uses[0].RunMemMaxMiB)
	require.Equal(t, 10.0, uses[0].UtilMean)
	require.Equal(t, int64(0), uses[2].RunMemMaxMiB, "a minute the run held nothing")
	require.Nil(t, uses[0].Runs, "only this run's memory, not every run's rows")

	none, err := db.GPUUses(ctx, "r1", "elsewhere", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestRecordGPUs(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	t0 := time.Unix(1_790_000_000, 0)
	require.NoError(t, db.RecordGPUs(ctx, []GPUInfo{
		{UUID: "GPU-b", Index: 1, Name: "NVIDIA H100 80GB HBM3", Simulated: true, MemTotalMiB: 81559, PowerLimitW: 700, LastSeen: t0},
		{UUID: "GPU-a", Index: 0, Name: "NVIDIA A100", MemTotalMiB: 40960, PowerLimitW: math.NaN(), LastSeen: t0},
	}))
	// Seen again later, as another index: the first sighting stays.
	require.NoError(t, db.RecordGPUs(ctx, []GPUInfo{
		{UUID: "GPU-b", Index: 2, Name: "NVIDIA H100 80GB HBM3", Simulated: true, MemTotalMiB: 81559, PowerLimitW: 700, LastSeen: t0.Add(time.Hour)}}))
	all, err := db.GPUs(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "GPU-a", all[0].UUID)
	require.True(t, math.IsNaN(all[0].PowerLimitW))
	require.False(t, all[0].Simulated)
	b := all[1]
	require.Equal(t, GPUInfo{UUID: "GPU-b", Index: 2, Name: "NVIDIA H100 80GB HBM3", Simulated: true, MemTotalMiB: 81559,
		PowerLimitW: 700, FirstSeen: t0, LastSeen: t0.Add(time.Hour)}, b)
	some, err := db.GPUs(ctx, "GPU-b", "GPU-never")
	require.NoError(t, err)
	require.Len(t, some, 1)
}

// Deleting a run deletes its GPU use (the trigger), not the GPU's record;
// retention deletes both.
func TestGPUUseDeletedWithRunAndByRetention(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r1", State: RunSucceeded}, nil))
	m0 := time.Unix(1_790_000_040, 0)
	require.NoError(t, db.AddGPUSamples(ctx, []GPUSample{
		{GPU: "g", Minute: m0, Runs: []GPURunSample{{RunID: "r1", MemMaxMiB: 1}, {RunID: "r2", MemMaxMiB: 2}}},
		{GPU: "g", Minute: m0.Add(time.Minute), Runs: []GPURunSample{{RunID: "r2", MemMaxMiB: 3}}},
	}))
	require.NoError(t, db.DeleteRun(ctx, "r1"))
	got, err := db.GPUSamples(ctx, "g", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 2, "the GPU's own record stays")
	require.Equal(t, []GPURunSample{{RunID: "r2", MemMaxMiB: 2}}, got[0].Runs)

	n, err := db.DeleteGPUSamplesBefore(ctx, m0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	var left int
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM gpu_run_samples`).Scan(&left))
	require.Equal(t, 1, left)
}

// A database written before the richer records opens, and its old rows
// read back with the new fields at their defaults (not simulated, no
// throttling, NaN for what was never measured).
func TestGPURecordsMigrateOldRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "niuma.db")
	raw, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	ms, err := loadMigrations()
	require.NoError(t, err)
	_, err = raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
	require.NoError(t, err)
	for _, m := range ms {
		if m.version >= 80 {
			break
		}
		_, err = raw.Exec(m.sql)
		require.NoError(t, err, m.name)
		_, err = raw.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, m.version)
		require.NoError(t, err)
	}
	m0 := time.Unix(1_790_000_040, 0)
	_, err = raw.Exec(`INSERT INTO gpu_samples (gpu, minute_ns, util_min, util_mean, util_max, mem_used_min, mem_used_mean,
		mem_used_max, temp_max, power_mean) VALUES ('g', ?, 1, 2, 3, 4, 5, 6, 70, 250)`, m0.UnixNano())
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	db, err := Open(path)
	require.NoError(t, err)
	defer db.Close()
	got, err := db.GPUSamples(context.Background(), "g", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	g := got[0]
	require.Equal(t, 2.0, g.UtilMean)
	require.Equal(t, 70.0, g.TempMax)
	require.False(t, g.Simulated)
	require.Zero(t, g.Throttled)
	require.True(t, math.IsNaN(g.TempMean))
	require.True(t, math.IsNaN(g.PowerMax))
}
