package storage

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func testStudy(id string) Study {
	return Study{ID: id, Template: "digits-mlp", TemplateName: "digits-mlp", TemplateYAML: "name: digits-mlp\n",
		Objective: "val_acc", Goal: "max", Space: `{"Params":[]}`, Fixed: `{}`, Budget: 4, Parallel: 2,
		ParallelRule: "auto", Pruner: "median", Warmup: 3, Seed: 7, CreatedAt: ts(1)}
}

func TestStudyRoundTrip(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	s := testStudy("t20261202-000000-aaaaaa")
	require.NoError(t, db.CreateStudy(ctx, s))
	require.Error(t, db.CreateStudy(ctx, s), "one study per ID")
	got, err := db.GetStudy(ctx, "t20261202")
	require.NoError(t, err)
	s.State = StudyRunning
	require.Equal(t, s, got)

	require.NoError(t, db.CreateStudy(ctx, testStudy("t20261202-000000-bbbbbb")))
	_, err = db.GetStudy(ctx, "t20261202")
	require.ErrorContains(t, err, "several studies")
	_, err = db.GetStudy(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
	all, err := db.ListStudies(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)

	require.NoError(t, db.SetStudyState(ctx, s.ID, StudyFinished, ""))
	got, err = db.GetStudy(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, StudyFinished, got.State)
	require.False(t, got.FinishedAt.IsZero())
}

func TestTrialsAreNumberedOnce(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	s := testStudy("t1")
	require.NoError(t, db.CreateStudy(ctx, s))
	require.NoError(t, db.CreateRun(ctx, testRun("r1", ts(2)), nil))

	tr := Trial{StudyID: "t1", Number: 0, Params: `{"lr":0.1}`, Method: "random", Objective: math.NaN(), CreatedAt: ts(3)}
	require.NoError(t, db.AddTrial(ctx, tr))
	require.ErrorIs(t, db.AddTrial(ctx, tr), ErrTrialExists, "a second driver cannot add the same trial")
	require.NoError(t, db.LinkTrial(ctx, "t1", 0, "r1"))
	require.Error(t, db.EndTrial(ctx, "t1", 0, TrialRunning, 0), "running is not an end")
	require.NoError(t, db.EndTrial(ctx, "t1", 0, TrialPruned, 0.81))
	require.NoError(t, db.AddTrial(ctx, Trial{StudyID: "t1", Number: 1, Params: `{}`, Objective: math.NaN()}))

	ts, err := db.Trials(ctx, "t1")
	require.NoError(t, err)
	require.Len(t, ts, 2)
	require.Equal(t, "r1", ts[0].RunID)
	require.Equal(t, TrialPruned, ts[0].State)
	require.Equal(t, 0.81, ts[0].Objective)
	require.False(t, ts[0].FinishedAt.IsZero())
	require.Equal(t, TrialSubmitting, ts[1].State)
	require.True(t, math.IsNaN(ts[1].Objective))
	require.Equal(t, "", ts[1].RunID)
	got, err := db.TrialOfRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, 0, got.Number)
	_, err = db.TrialOfRun(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestPruneRunStoresEvidenceAndCancels(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, testRun("r1", ts(2)), nil))
	p := Prune{RunID: "r1", Reason: "below_median", Metric: "val_acc", Step: 10, Value: 0.81, Reference: 0.9, Trials: 4,
		Compared: []Compared{{"a", 0.9}, {"b", 0.95}}, Evidence: "val_acc 0.81 at step 10, median of 4 trials 0.9", DecidedAt: ts(5)}
	require.NoError(t, db.PruneRun(ctx, p))
	r, err := db.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.True(t, r.CancelRequested, "pruning asks for the run to stop")
	got, err := db.RunPrune(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, p, got)

	later := p
	later.Evidence = "another"
	require.NoError(t, db.PruneRun(ctx, later))
	got, err = db.RunPrune(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, p.Evidence, got.Evidence, "the first decision stays")

	require.ErrorIs(t, db.PruneRun(ctx, Prune{RunID: "nope", Evidence: "x"}), ErrNotFound)
	_, err = db.RunPrune(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
}

// An archive from before runs could end as pruned has its pruned runs as
// cancelled; opening it turns exactly those into pruned, with the
// evidence as the reason, and leaves a run a user cancelled as it was.
func TestOlderArchivesPrunedRunsBecomePruned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "niuma.db")
	db, err := Open(path)
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range []string{"pruned", "cancelled"} {
		require.NoError(t, db.CreateRun(ctx, testRun(id, ts(2)), nil))
	}
	require.NoError(t, db.PruneRun(ctx, Prune{RunID: "pruned", Evidence: "val_acc 0.81 at step 10, median of 4 trials 0.9"}))
	// As the engine of before wrote them, at the schema before 0090.
	_, err = db.SQL().ExecContext(ctx, `UPDATE runs SET state = 'cancelled', error = 'cancelled by request', cancel_requested = 1`)
	require.NoError(t, err)
	_, err = db.SQL().ExecContext(ctx, `DELETE FROM schema_migrations WHERE version >= 90`)
	require.NoError(t, err)
	_, err = db.SQL().ExecContext(ctx, `ALTER TABLE stages DROP COLUMN points_lost`) // 0095's
	require.NoError(t, err)
	_, err = db.SQL().ExecContext(ctx, `DROP TRIGGER runs_delete_host_run_samples; DROP TABLE host_run_samples`) // 0100's
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db, err = Open(path)
	require.NoError(t, err)
	defer db.Close()
	r, err := db.GetRun(ctx, "pruned")
	require.NoError(t, err)
	require.Equal(t, RunPruned, r.State)
	require.Equal(t, "stopped early by its study's pruner: val_acc 0.81 at step 10, median of 4 trials 0.9", r.Error)
	r, err = db.GetRun(ctx, "cancelled")
	require.NoError(t, err)
	require.Equal(t, RunCancelled, r.State)
	require.Equal(t, "cancelled by request", r.Error)
}
