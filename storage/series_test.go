package storage

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMetricSeriesAllAttempts(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	// Attempt 1 diverged to NaN; attempt 2 ran with a lower learning rate.
	require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{
		{RunID: "r", Stage: "train", Attempt: 2, Key: "loss", Step: 1, Value: 0.9, Wall: ts(20)},
		{RunID: "r", Stage: "train", Attempt: 1, Key: "loss", Step: 1, Value: 2, Wall: ts(1)},
		{RunID: "r", Stage: "train", Attempt: 1, Key: "loss", Step: 2, Value: math.NaN(), Wall: ts(2)},
		{RunID: "r", Stage: "train", Attempt: 2, Key: "loss", Step: 2, Value: 0.5, Wall: ts(21)},
		{RunID: "r", Stage: "train", Attempt: 2, Key: "acc", Step: 2, Value: 0.5, Wall: ts(21)},
	}))
	got, err := db.MetricSeriesAllAttempts(ctx, "r", "train", "loss")
	require.NoError(t, err)
	require.Len(t, got, 4)
	var order []int
	for _, p := range got {
		order = append(order, p.Attempt*10+int(p.Step))
	}
	require.Equal(t, []int{11, 12, 21, 22}, order, "by attempt, then step")
	require.True(t, math.IsNaN(got[1].Value), "the NaN is kept")
	require.Equal(t, ts(20), got[2].Wall)

	latest, err := db.MetricSeries(ctx, "r", "train", "loss")
	require.NoError(t, err)
	require.Len(t, latest, 2, "MetricSeries still gives the latest attempt only")

	none, err := db.MetricSeriesAllAttempts(ctx, "r", "train", "missing")
	require.NoError(t, err)
	require.Empty(t, none)
}
