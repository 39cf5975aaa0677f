package storage

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A stage's per-minute host record goes in and comes out as it was, ordered
// by stage, attempt and minute; a run not in the archive gets none.
func TestHostSampleRoundTrip(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r1", State: RunRunning}, nil))
	m0 := time.Unix(1_790_000_040, 0)
	a := HostSample{RunID: "r1", Stage: "train", Attempt: 1, Minute: m0.Add(17 * time.Second), Samples: 43,
		MemMean: 300 << 20, MemMax: 512 << 20, MemPeak: 530 << 20, MemLimit: 1 << 30,
		CPUSeconds: 41.5, CPUTotal: 41.5, CPULimitMilli: 2000}
	b := HostSample{RunID: "r1", Stage: "train", Attempt: 1, Minute: m0.Add(time.Minute), Samples: 60,
		MemMean: 400 << 20, MemMax: 600 << 20, MemPeak: 610 << 20, MemLimit: 1 << 30,
		CPUSeconds: 59.25, CPUTotal: 100.75, CPULimitMilli: 2000}
	c := HostSample{RunID: "r1", Stage: "prep", Attempt: 2, Minute: m0, Samples: 1, MemMean: 1 << 20, MemMax: 1 << 20, MemPeak: 2 << 20,
		CPUSeconds: 0.01, CPUTotal: 0.01}
	gone := HostSample{RunID: "deleted", Stage: "train", Attempt: 1, Minute: m0, Samples: 5, MemMax: 1}
	require.NoError(t, db.AddHostSamples(ctx, []HostSample{b, a, gone, c}))

	got, err := db.HostSamples(ctx, "r1")
	require.NoError(t, err)
	wa, wb := a, b
	wa.Minute = m0 // truncated on write
	require.Equal(t, []HostSample{c, wa, wb}, got)

	none, err := db.HostSamples(ctx, "deleted")
	require.NoError(t, err)
	require.Empty(t, none, "a minute of a run not in the archive is left out")

	total, err := db.HostCPUTotal(ctx, "r1", "train", 1)
	require.NoError(t, err)
	require.InDelta(t, 100.75, total, 1e-9)
	total, err = db.HostCPUTotal(ctx, "r1", "train", 2)
	require.NoError(t, err)
	require.Zero(t, total)
}

// The same attempt's minute written twice (an owner stopped within it, the
// next adopted the attempt) is merged: readings and CPU time add up, the
// mean is weighted, peaks and totals take the larger.
func TestHostSampleMergesAMinuteWrittenTwice(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r1", State: RunRunning}, nil))
	m0 := time.Unix(1_790_000_040, 0)
	first := HostSample{RunID: "r1", Stage: "train", Attempt: 1, Minute: m0, Samples: 30,
		MemMean: 100, MemMax: 200, MemPeak: 250, MemLimit: 1000, CPUSeconds: 10, CPUTotal: 70, CPULimitMilli: 500}
	second := HostSample{RunID: "r1", Stage: "train", Attempt: 1, Minute: m0.Add(40 * time.Second), Samples: 10,
		MemMean: 500, MemMax: 180, MemPeak: 240, CPUSeconds: 5, CPUTotal: 75}
	require.NoError(t, db.AddHostSamples(ctx, []HostSample{first}))
	require.NoError(t, db.AddHostSamples(ctx, []HostSample{second}))
	got, err := db.HostSamples(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, []HostSample{{RunID: "r1", Stage: "train", Attempt: 1, Minute: m0, Samples: 40,
		MemMean: 200, MemMax: 200, MemPeak: 250, MemLimit: 1000, CPUSeconds: 15, CPUTotal: 75, CPULimitMilli: 500}}, got)
}

// Deleting a run deletes its host records; retention deletes the minutes
// older than its bound, whoever's they are.
func TestHostSamplesDeletedWithRunAndByRetention(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r1", State: RunSucceeded}, nil))
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r2", State: RunSucceeded}, nil))
	m0 := time.Unix(1_790_000_040, 0)
	var in []HostSample
	for i := range 3 {
		for _, run := range []string{"r1", "r2"} {
			in = append(in, HostSample{RunID: run, Stage: "s", Attempt: 1, Minute: m0.Add(time.Duration(i) * time.Minute), Samples: 60})
		}
	}
	require.NoError(t, db.AddHostSamples(ctx, in))
	require.NoError(t, db.DeleteRun(ctx, "r1"))
	got, err := db.HostSamples(ctx, "r1")
	require.NoError(t, err)
	require.Empty(t, got)

	n, err := db.DeleteHostSamplesBefore(ctx, m0.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	got, err = db.HostSamples(ctx, "r2")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, m0.Add(2*time.Minute), got[0].Minute)
}
