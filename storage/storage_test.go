package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ---- helpers ----

func openTestDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "niuma.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// ts returns a time as the database gives it back (local zone, no monotonic
// reading), so that require.Equal can compare whole structs.
func ts(sec int64) time.Time { return time.Unix(1_790_000_000+sec, 123_456_789) }

func intp(i int) *int { return &i }

func testRun(id string, created time.Time) Run {
	return Run{
		ID:              id,
		Template:        "mnist-cnn",
		TemplateVersion: "1.2.0",
		TemplateSource:  "bundled:mnist-cnn",
		TemplateYAML:    "name: mnist-cnn\nstages: []\n",
		Params:          `{"lr":0.001,"epochs":3}`,
		Seed:            42,
		Priority:        5,
		Executor:        "docker",
		State:           RunQueued,
		Dir:             "/data/runs/" + id,
		CreatedAt:       created,
	}
}

func testStages(runID string) []Stage {
	return []Stage{
		{RunID: runID, Name: "train", Position: 1, Needs: []string{"preprocess"}, GPUs: 2, GPUMemoryMiB: 20000, Retries: 2, TimeoutSec: 3600, State: StageQueued},
		{RunID: runID, Name: "preprocess", Position: 0, State: StageQueued},
		{RunID: runID, Name: "validate", Position: 2, Needs: []string{"train"}, GPUs: 1, State: StageQueued},
	}
}

func createTestRun(t *testing.T, db *DB, id string, created time.Time) Run {
	t.Helper()
	r := testRun(id, created)
	require.NoError(t, db.CreateRun(context.Background(), r, testStages(id)))
	return r
}

// ---- opening, pragmas, migrations ----

func TestOpenIsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nested", "dir", "niuma.db")

	db, err := Open(path)
	require.NoError(t, err, "Open must create parent directories")
	createTestRun(t, db, "r1", ts(0))
	require.NoError(t, db.Close())

	db, err = Open(path)
	require.NoError(t, err, "opening an up-to-date database again")
	defer db.Close()

	v, err := db.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, LatestSchemaVersion(), v)
	require.Positive(t, v)

	var n int
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n))
	ms, err := loadMigrations()
	require.NoError(t, err)
	require.Equal(t, len(ms), n, "each migration is recorded exactly once")

	_, err = db.GetRun(ctx, "r1")
	require.NoError(t, err, "data survives reopening")
	require.Equal(t, path, db.Path())
}

func TestOpenHandlesOddPaths(t *testing.T) {
	for _, name := range []string{"with space.db", "q?mark#hash%25.db", "ünïcode.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			db, err := Open(path)
			require.NoError(t, err)
			createTestRun(t, db, "r1", ts(0))
			require.NoError(t, db.Close())
			_, err = os.Stat(path)
			require.NoError(t, err, "the database file is where it was asked to be")
		})
	}
}

func TestPragmasAreSet(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	pools := []struct {
		name string
		h    *sql.DB
	}{{"writer", db.w}, {"reader", db.r}}
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
		{"synchronous", "1"}, // NORMAL
	}
	for _, pool := range pools {
		for _, tt := range tests {
			t.Run(pool.name+"/"+tt.pragma, func(t *testing.T) {
				var got string
				require.NoError(t, pool.h.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got))
				require.Equal(t, tt.want, got)
			})
		}
	}
	t.Run("reader/query_only", func(t *testing.T) {
		_, err := db.r.ExecContext(ctx, `DELETE FROM runs`)
		require.Error(t, err, "the read pool must not write")
	})
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "niuma.db")
	db, err := Open(path)
	require.NoError(t, err)
	newer := LatestSchemaVersion() + 1
	_, err = db.SQL().Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, newer)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	_, err = Open(path)
	require.Error(t, err)
	require.ErrorIs(t, err, ErrSchemaTooNew)
	require.Contains(t, err.Error(), fmt.Sprintf("schema version %d", newer))
	require.Contains(t, err.Error(), path)
}

func TestConcurrentOpenOfFreshFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "niuma.db")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := Open(path)
			if err == nil {
				err = db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// ---- runs and stages ----

func TestRunRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		run    Run
		stages []Stage
	}{
		{
			name: "all fields set",
			run: Run{
				ID: "20261129-175700-3f2a", Template: "llm-finetune", TemplateVersion: "0.3",
				TemplateSource: "/home/me/t.yaml", TemplateYAML: "name: x\n", Params: `{"lr":1e-4}`,
				Seed: -7, Priority: 3, Executor: "local", State: RunFailed, Error: "train ran out of GPU memory.",
				CancelRequested: true, Fingerprint: "sha256:abc", Dir: "/runs/x", CodeDir: "/templates/llm",
				CreatedAt: ts(0), StartedAt: ts(1), FinishedAt: ts(2),
			},
			stages: []Stage{{
				RunID: "20261129-175700-3f2a", Name: "train", Position: 0, Needs: []string{"a", "b"},
				GPUs: 4, GPUMemoryMiB: 80_000, Retries: 3, TimeoutSec: 7200, State: StageFailed,
				Attempts: 2, ExitCode: intp(137), Reason: "killed: out of memory",
				NextAttemptAt: ts(3), StartedAt: ts(4), FinishedAt: ts(5),
			}},
		},
		{
			name: "zero times and nil exit code stay unset",
			run:  Run{ID: "r-zero", State: RunQueued, CreatedAt: ts(0)},
			stages: []Stage{{
				RunID: "r-zero", Name: "only", State: StageQueued,
			}},
		},
		{
			name: "exit code zero is not nil",
			run:  Run{ID: "r-exit0", State: RunSucceeded, CreatedAt: ts(0)},
			stages: []Stage{{
				RunID: "r-exit0", Name: "only", State: StageSucceeded, ExitCode: intp(0),
			}},
		},
		{
			name: "run without stages",
			run:  Run{ID: "r-empty", State: RunQueued, CreatedAt: ts(0)},
		},
	}
	db := openTestDB(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, db.CreateRun(ctx, tt.run, tt.stages))
			got, err := db.GetRun(ctx, tt.run.ID)
			require.NoError(t, err)
			require.Equal(t, tt.run, got)

			stages, err := db.Stages(ctx, tt.run.ID)
			require.NoError(t, err)
			require.Equal(t, tt.stages, stages)
			for i, s := range stages {
				if tt.stages[i].ExitCode == nil {
					require.Nil(t, s.ExitCode)
				} else {
					require.NotNil(t, s.ExitCode)
					require.Equal(t, *tt.stages[i].ExitCode, *s.ExitCode)
				}
			}
		})
	}
}

func TestCreateRunDefaults(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	before := time.Now()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r"}, []Stage{{Name: "s"}}))
	r, err := db.GetRun(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, RunQueued, r.State)
	require.False(t, r.CreatedAt.Before(before.Truncate(time.Microsecond)), "CreatedAt defaults to now")
	require.True(t, r.StartedAt.IsZero())
	st, err := db.Stages(ctx, "r")
	require.NoError(t, err)
	require.Len(t, st, 1)
	require.Equal(t, StageQueued, st[0].State)
	require.Equal(t, "r", st[0].RunID)
	require.Nil(t, st[0].Needs)
}

func TestStagesOrderedByPosition(t *testing.T) {
	db := openTestDB(t)
	createTestRun(t, db, "r", ts(0))
	st, err := db.Stages(context.Background(), "r")
	require.NoError(t, err)
	var names []string
	for _, s := range st {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"preprocess", "train", "validate"}, names)
}

func TestCreateRunIsAtomic(t *testing.T) {
	tests := []struct {
		name   string
		stages []Stage
	}{
		{"duplicate stage name", []Stage{{Name: "a"}, {Name: "a"}}},
		{"empty stage name", []Stage{{Name: "a"}, {Name: ""}}},
		{"negative GPU count", []Stage{{Name: "a"}, {Name: "b", GPUs: -1}}},
		{"stage of another run", []Stage{{Name: "a"}, {RunID: "other", Name: "b"}}},
	}
	db := openTestDB(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.CreateRun(ctx, Run{ID: "atomic", CreatedAt: ts(0)}, tt.stages)
			require.Error(t, err)
			require.Contains(t, err.Error(), "create run atomic")
			_, err = db.GetRun(ctx, "atomic")
			require.ErrorIs(t, err, ErrNotFound, "a failed CreateRun leaves no run behind")
			st, err := db.Stages(ctx, "atomic")
			require.NoError(t, err)
			require.Empty(t, st)
		})
	}
	t.Run("duplicate run id", func(t *testing.T) {
		require.NoError(t, db.CreateRun(ctx, Run{ID: "dup", CreatedAt: ts(0)}, nil))
		require.Error(t, db.CreateRun(ctx, Run{ID: "dup", CreatedAt: ts(1)}, nil))
	})
}

func TestForeignKeys(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))

	tests := []struct {
		name string
		do   func() error
	}{
		{"stage for a missing run", func() error {
			_, err := db.SQL().ExecContext(ctx, `INSERT INTO stages (run_id, name, position, state) VALUES ('missing', 's', 0, 'queued')`)
			return err
		}},
		{"attempt for a missing stage", func() error {
			return db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "nope", Number: 1, State: AttemptRunning})
		}},
		{"attempt for a missing run", func() error {
			return db.CreateAttempt(ctx, Attempt{RunID: "missing", Stage: "train", Number: 1, State: AttemptRunning})
		}},
		{"metric point for a missing run", func() error {
			return db.InsertMetricPoints(ctx, []MetricPoint{{RunID: "missing", Stage: "train", Attempt: 1, Key: "loss", Step: 1}})
		}},
		{"event for a missing run", func() error {
			_, err := db.AddEvent(ctx, Event{RunID: "missing", Kind: "nan", Severity: SeverityWarning})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			require.Error(t, err)
			require.Contains(t, err.Error(), "FOREIGN KEY")
		})
	}
}

func TestResolveRunID(t *testing.T) {
	db := openTestDB(t)
	for i, id := range []string{
		"20261129-175700-3f2a", "20261129-175700-3f2b", "20261129-180000-aaaa",
		"20261130-090000-0001", "20261130-090000-0002", "20261130-090000-0003",
		"20261130-090000-0004", "20261130-090000-0005", "20261130-090000-0006",
		"abc", "abcd",
	} {
		require.NoError(t, db.CreateRun(context.Background(), Run{ID: id, CreatedAt: ts(int64(i))}, nil))
	}
	tests := []struct {
		name    string
		prefix  string
		want    string
		wantErr error
		msg     []string
	}{
		{name: "exact id", prefix: "20261129-175700-3f2a", want: "20261129-175700-3f2a"},
		{name: "exact id that is also a prefix of another", prefix: "abc", want: "abc"},
		{name: "unique prefix", prefix: "20261129-18", want: "20261129-180000-aaaa"},
		{name: "unique prefix of the longer id", prefix: "abcd", want: "abcd"},
		{name: "ambiguous prefix", prefix: "20261129-1757", wantErr: ErrAmbiguous,
			msg: []string{"20261129-175700-3f2a", "20261129-175700-3f2b", "matches 2 runs"}},
		{name: "ambiguous prefix lists five and counts the rest", prefix: "20261130", wantErr: ErrAmbiguous,
			msg: []string{"matches 6 runs", "20261130-090000-0005", "and 1 more"}},
		{name: "unique end of an id", prefix: "aaaa", want: "20261129-180000-aaaa"},
		{name: "end with its time, as the window shows it", prefix: "175700-3f2b", want: "20261129-175700-3f2b"},
		{name: "ambiguous end", prefix: "3f2", wantErr: ErrNotFound},
		{name: "an end that matches several", prefix: "0-0001", want: "20261130-090000-0001"},
		{name: "LIKE wildcards are literal", prefix: "%", wantErr: ErrNotFound},
		{name: "no match", prefix: "2027", wantErr: ErrNotFound},
		{name: "empty", prefix: "", wantErr: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.ResolveRunID(context.Background(), tt.prefix)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				for _, m := range tt.msg {
					require.Contains(t, err.Error(), m)
				}
				require.NotContains(t, err.Error(), "20261130-090000-0006", "at most five candidates")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPrefixUpperBound(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abd", true},
		{"a\xff", "b", true},
		{"\xff\xff", "", false},
	}
	for _, tt := range tests {
		got, ok := prefixUpperBound(tt.in)
		require.Equal(t, tt.ok, ok, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestListRuns(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	runs := []Run{
		{ID: "a", State: RunSucceeded, CreatedAt: ts(1)},
		{ID: "b", State: RunRunning, CreatedAt: ts(2)},
		{ID: "c", State: RunQueued, CreatedAt: ts(3)},
		{ID: "d", State: RunQueued, CreatedAt: ts(3)}, // same time: id DESC breaks the tie
		{ID: "e", State: RunFailed, CreatedAt: ts(0)},
	}
	for _, r := range runs {
		require.NoError(t, db.CreateRun(ctx, r, nil))
	}
	tests := []struct {
		name   string
		filter RunFilter
		want   []string
	}{
		{"all, newest first", RunFilter{}, []string{"d", "c", "b", "a", "e"}},
		{"limit", RunFilter{Limit: 2}, []string{"d", "c"}},
		{"one state", RunFilter{States: []RunState{RunQueued}}, []string{"d", "c"}},
		{"several states", RunFilter{States: []RunState{RunFailed, RunSucceeded, RunRunning}}, []string{"b", "a", "e"}},
		{"states and limit", RunFilter{States: []RunState{RunFailed, RunSucceeded}, Limit: 1}, []string{"a"}},
		{"state nobody is in", RunFilter{States: []RunState{RunCancelled}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.ListRuns(ctx, tt.filter)
			require.NoError(t, err)
			var ids []string
			for _, r := range got {
				ids = append(ids, r.ID)
			}
			require.Equal(t, tt.want, ids)
		})
	}
}

func TestUpdateRunAndCancel(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	r := createTestRun(t, db, "r", ts(0))

	r.State, r.Error, r.Fingerprint, r.StartedAt, r.FinishedAt = RunFailed, "it broke.", "fp", ts(1), ts(2)
	r.Template = "ignored" // not a mutable field
	require.NoError(t, db.UpdateRun(ctx, r))
	got, err := db.GetRun(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, RunFailed, got.State)
	require.Equal(t, "it broke.", got.Error)
	require.Equal(t, "fp", got.Fingerprint)
	require.Equal(t, ts(1), got.StartedAt)
	require.Equal(t, ts(2), got.FinishedAt)
	require.Equal(t, "mnist-cnn", got.Template)
	require.False(t, got.CancelRequested)

	require.NoError(t, db.RequestCancel(ctx, "r"))
	got, err = db.GetRun(ctx, "r")
	require.NoError(t, err)
	require.True(t, got.CancelRequested)

	r.StartedAt, r.FinishedAt = time.Time{}, time.Time{} // r was read before the cancel request
	require.NoError(t, db.UpdateRun(ctx, r))
	got, err = db.GetRun(ctx, "r")
	require.NoError(t, err)
	require.True(t, got.StartedAt.IsZero(), "a zero time clears the column")
	require.True(t, got.CancelRequested, "a stale UpdateRun does not undo a cancel request")

	tests := []struct {
		name string
		err  error
	}{
		{"get missing run", func() error { _, err := db.GetRun(ctx, "nope"); return err }()},
		{"update missing run", db.UpdateRun(ctx, Run{ID: "nope", State: RunFailed})},
		{"cancel missing run", db.RequestCancel(ctx, "nope")},
		{"update missing stage", db.UpdateStage(ctx, Stage{RunID: "r", Name: "nope", State: StageFailed})},
		{"update missing attempt", db.UpdateAttempt(ctx, Attempt{RunID: "r", Stage: "train", Number: 9, State: AttemptFailed})},
		{"delete missing run", db.DeleteRun(ctx, "nope")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.err, ErrNotFound)
		})
	}
	_, err = db.GetRun(ctx, "nope")
	require.EqualError(t, err, "get run nope: not found")
}

func TestUpdateStage(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	s := Stage{
		RunID: "r", Name: "train", State: StageRunning, Attempts: 1, ExitCode: intp(0), Reason: "waiting for 2 GPUs",
		NextAttemptAt: ts(10), StartedAt: ts(11), FinishedAt: ts(12), PointsLost: 1557,
		Position: 99, GPUs: 7, // not mutable: ignored
	}
	require.NoError(t, db.UpdateStage(ctx, s))
	st, err := db.Stages(ctx, "r")
	require.NoError(t, err)
	got := st[1]
	require.Equal(t, "train", got.Name)
	require.Equal(t, StageRunning, got.State)
	require.Equal(t, 1, got.Attempts)
	require.Equal(t, intp(0), got.ExitCode)
	require.Equal(t, "waiting for 2 GPUs", got.Reason)
	require.Equal(t, ts(10), got.NextAttemptAt)
	require.Equal(t, ts(11), got.StartedAt)
	require.Equal(t, ts(12), got.FinishedAt)
	require.Equal(t, int64(1557), got.PointsLost)
	require.Equal(t, 1, got.Position)
	require.Equal(t, 2, got.GPUs)
	require.Equal(t, []string{"preprocess"}, got.Needs)

	s.ExitCode, s.NextAttemptAt = nil, time.Time{}
	require.NoError(t, db.UpdateStage(ctx, s))
	st, err = db.Stages(ctx, "r")
	require.NoError(t, err)
	require.Nil(t, st[1].ExitCode)
	require.True(t, st[1].NextAttemptAt.IsZero())
}

func TestAttempts(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	in := []Attempt{
		{RunID: "r", Stage: "train", Number: 2, State: AttemptRunning, Executor: "docker", Handle: `{"container":"abc"}`, GPUs: []string{"GPU-1", "GPU-2"}, StartedAt: ts(5)},
		{RunID: "r", Stage: "train", Number: 1, State: AttemptFailed, Executor: "docker", ExitCode: intp(1), Reason: "exit 1", StartedAt: ts(1), FinishedAt: ts(2)},
		{RunID: "r", Stage: "preprocess", Number: 1, State: AttemptSucceeded, Executor: "local", ExitCode: intp(0), StartedAt: ts(0), FinishedAt: ts(1)},
	}
	for _, a := range in {
		require.NoError(t, db.CreateAttempt(ctx, a))
	}
	require.Error(t, db.CreateAttempt(ctx, in[0]), "duplicate attempt number")
	require.Error(t, db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "train", Number: 0, State: AttemptRunning}), "numbers are 1-based")

	got, err := db.Attempts(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []Attempt{in[2], in[1], in[0]}, got, "ordered by stage position, then number")
	require.Nil(t, got[0].GPUs)
	require.Equal(t, intp(0), got[0].ExitCode)
	require.Nil(t, got[2].ExitCode)

	upd := in[0]
	upd.State, upd.Handle, upd.GPUs, upd.ExitCode, upd.Reason, upd.FinishedAt = AttemptLost, `{"container":"def"}`, nil, intp(-1), "container vanished", ts(9)
	upd.Executor, upd.StartedAt = "ignored", ts(100) // not mutable
	require.NoError(t, db.UpdateAttempt(ctx, upd))
	got, err = db.Attempts(ctx, "r")
	require.NoError(t, err)
	want := upd
	want.Executor, want.StartedAt = "docker", ts(5)
	require.Equal(t, want, got[2])
}

func TestDeleteRunCascades(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	require.NoError(t, db.CreateAttempt(ctx, Attempt{RunID: "r", Stage: "train", Number: 1, State: AttemptRunning}))
	require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{{RunID: "r", Stage: "train", Attempt: 1, Key: "loss", Step: 1, Value: 1}}))
	_, err := db.AddEvent(ctx, Event{RunID: "r", Kind: "nan", Severity: SeverityWarning})
	require.NoError(t, err)

	require.NoError(t, db.DeleteRun(ctx, "r"))
	for _, table := range []string{"runs", "stages", "attempts", "metric_points", "events"} {
		var n int
		require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		require.Zero(t, n, table)
	}
}

// ---- metrics ----

func TestMetricSpecialValuesRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		value float64
	}{
		{"NaN", math.NaN()},
		{"+Inf", math.Inf(1)},
		{"-Inf", math.Inf(-1)},
		{"zero", 0},
		{"negative zero", math.Copysign(0, -1)},
		{"tiny", math.SmallestNonzeroFloat64},
		{"huge", math.MaxFloat64},
		{"ordinary", 0.4123},
	}
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{{RunID: "r", Stage: "train", Attempt: 1, Key: key, Step: 7, Value: tt.value, Wall: ts(3)}}))
			got, err := db.MetricSeries(ctx, "r", "train", key)
			require.NoError(t, err)
			require.Len(t, got, 1)
			if math.IsNaN(tt.value) {
				require.True(t, math.IsNaN(got[0].Value), "got %v", got[0].Value)
			} else {
				require.Equal(t, tt.value, got[0].Value)
			}
			require.Equal(t, ts(3), got[0].Wall)
		})
	}
	last, err := db.LastMetrics(ctx, "r")
	require.NoError(t, err)
	require.Len(t, last, len(tests))
	require.True(t, math.IsNaN(last[0].Value), "NaN through LastMetrics")
	require.Equal(t, math.Inf(1), last[1].Value)
	require.Equal(t, math.Inf(-1), last[2].Value)
}

func pt(stage string, attempt int, key string, step int64, v float64) MetricPoint {
	return MetricPoint{RunID: "r", Stage: stage, Attempt: attempt, Key: key, Step: step, Value: v, Wall: ts(step)}
}

// noSeq clears what the insert assigns, for comparing with points as given.
func noSeq(pts []MetricPoint) []MetricPoint {
	if pts == nil {
		return nil
	}
	out := make([]MetricPoint, len(pts))
	for i, p := range pts {
		p.Seq = 0
		out[i] = p
	}
	return out
}

func seqs(pts []MetricPoint) []int64 {
	out := make([]int64, len(pts))
	for i, p := range pts {
		out[i] = p.Seq
	}
	return out
}

func TestLastMetricsAndSeries(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	createTestRun(t, db, "other", ts(0))
	pts := []MetricPoint{
		pt("train", 1, "loss", 1, 1.0), pt("train", 1, "loss", 2, 0.9), pt("train", 1, "loss", 30, 0.5),
		pt("train", 1, "acc", 1, 0.1), pt("train", 1, "acc", 50, 0.7),
		pt("train", 2, "loss", 1, 0.95), pt("train", 2, "loss", 5, 0.8), // attempt 2 restarted; fewer steps
		pt("validate", 1, "acc", 1, 0.6),
		pt("preprocess", 1, "rows", 100, 60000),
		pt("adhoc", 1, "x", 1, 1), // a stage the run does not declare: sorted last
	}
	require.NoError(t, db.InsertMetricPoints(ctx, pts))
	require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{{RunID: "other", Stage: "train", Attempt: 9, Key: "loss", Step: 999, Value: 9}}))

	last, err := db.LastMetrics(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 2, 1, 1}, seqs(last), "each last point's place in its series")
	require.Equal(t, []MetricPoint{
		pt("preprocess", 1, "rows", 100, 60000),
		pt("train", 1, "acc", 50, 0.7), // attempt 2 never logged acc
		pt("train", 2, "loss", 5, 0.8), // highest attempt beats highest step
		pt("validate", 1, "acc", 1, 0.6),
		pt("adhoc", 1, "x", 1, 1),
	}, noSeq(last))

	tests := []struct {
		name, stage, key string
		want             []MetricPoint
	}{
		{"latest attempt only", "train", "loss", []MetricPoint{pt("train", 2, "loss", 1, 0.95), pt("train", 2, "loss", 5, 0.8)}},
		{"latest attempt that has the key", "train", "acc", []MetricPoint{pt("train", 1, "acc", 1, 0.1), pt("train", 1, "acc", 50, 0.7)}},
		{"unknown key", "train", "nope", nil},
		{"unknown stage", "nope", "loss", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.MetricSeries(ctx, "r", tt.stage, tt.key)
			require.NoError(t, err)
			require.Equal(t, tt.want, noSeq(got))
		})
	}

	n, err := db.CountMetricPoints(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, len(pts), n)

	empty, err := db.LastMetrics(ctx, "nope")
	require.NoError(t, err)
	require.Empty(t, empty)
}

func TestMaxSteps(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{
		pt("train", 1, "loss", 1, 1), pt("train", 1, "loss", 40, 1), pt("train", 1, "acc", 7, 1),
		pt("train", 2, "loss", 3, 1), pt("train", 2, "lr", 12, 1),
		pt("validate", 1, "loss", 1000, 1),
	}))
	tests := []struct {
		name    string
		stage   string
		attempt int
		want    map[string]int64
	}{
		{"first attempt", "train", 1, map[string]int64{"loss": 40, "acc": 7}},
		{"second attempt", "train", 2, map[string]int64{"loss": 3, "lr": 12}},
		{"attempt with no points", "train", 3, map[string]int64{}},
		{"other stage", "validate", 1, map[string]int64{"loss": 1000}},
		{"unknown stage", "nope", 1, map[string]int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.MaxSteps(ctx, "r", tt.stage, tt.attempt)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestInsertMetricPointsBatchSizes(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	total := 0
	for _, n := range []int{1, 2, 3, 99, 127, 128, 129, 255, 1000, 4099} {
		t.Run(fmt.Sprintf("%d points", n), func(t *testing.T) {
			key := fmt.Sprintf("k%d", n)
			pts := make([]MetricPoint, n)
			for i := range pts {
				pts[i] = MetricPoint{RunID: "r", Stage: "train", Attempt: 1, Key: key, Step: int64(i), Value: float64(i) / 2}
			}
			require.NoError(t, db.InsertMetricPoints(ctx, pts))
			total += n
			got, err := db.MetricSeries(ctx, "r", "train", key)
			require.NoError(t, err)
			require.Len(t, got, n)
			for i, p := range got {
				require.Equal(t, int64(i), p.Step)
				require.Equal(t, float64(i)/2, p.Value)
				require.True(t, p.Wall.IsZero(), "a zero wall time stays zero")
			}
		})
	}
	n, err := db.CountMetricPoints(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, total, n)
	require.NoError(t, db.InsertMetricPoints(ctx, nil), "nothing to insert is fine")
}

// Points that share a step are all kept, in arrival order, and the
// series' summary counts them.
func TestInsertMetricPointsKeepsPointsThatShareAStep(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{pt("train", 1, "loss", 1, 1), pt("train", 1, "loss", 1, 2)}))
	require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{pt("train", 1, "loss", 1, 3), pt("train", 1, "loss", 0, 4)}))
	got, err := db.MetricSeries(ctx, "r", "train", "loss")
	require.NoError(t, err)
	want := []MetricPoint{pt("train", 1, "loss", 0, 4), pt("train", 1, "loss", 1, 1), pt("train", 1, "loss", 1, 2), pt("train", 1, "loss", 1, 3)}
	for i, seq := range []int64{4, 1, 2, 3} {
		want[i].Seq = seq
	}
	require.Equal(t, want, got, "by step, then by arrival")
	sums, err := db.MetricSummaries(ctx, "r")
	require.NoError(t, err)
	require.Len(t, sums, 1)
	s := sums[0]
	assert.Equal(t, int64(4), s.Points)
	assert.Equal(t, int64(3), s.Repeats, "three points arrived at a step not above an earlier one")
	assert.Equal(t, 1.0, s.Min)
	assert.Equal(t, 4.0, s.Max)
	assert.Equal(t, int64(1), s.Last.Step)
	assert.Equal(t, int64(3), s.Last.Seq, "the last of the points at the highest step")
	assert.Equal(t, 3.0, s.Last.Value)
}

// Many scalars at one step (a real DQN log had 17,246 at step 0) are all
// stored.
func TestInsertMetricPointsManyAtOneStep(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	pts := make([]MetricPoint, 17246)
	for i := range pts {
		pts[i] = MetricPoint{RunID: "r", Stage: "train", Attempt: 1, Key: "reward", Step: 0, Value: float64(i)}
	}
	require.NoError(t, db.InsertMetricPoints(ctx, pts[:5000]))
	require.NoError(t, db.InsertMetricPoints(ctx, pts[5000:]))
	got, err := db.MetricSeries(ctx, "r", "train", "reward")
	require.NoError(t, err)
	require.Len(t, got, len(pts))
	for i, p := range got {
		require.Equal(t, int64(i+1), p.Seq)
		require.Equal(t, float64(i), p.Value)
	}
	n, err := db.CountMetricPoints(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, len(pts), n)
}

func TestInsertMetricsStoresCursorsWithThePoints(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	cur := func(src string, off int64, state string) MetricCursor {
		return MetricCursor{RunID: "r", Stage: "train", Attempt: 1, Source: src, Offset: off, State: state}
	}
	require.NoError(t, db.InsertMetrics(ctx, []MetricPoint{pt("train", 1, "loss", 1, 1)}, []MetricCursor{cur("stdout", 40, `{"line":2}`)}))
	require.NoError(t, db.InsertMetrics(ctx, nil, []MetricCursor{cur("stdout", 90, ""), cur("tb:events.1", 7, "")}))
	got, err := db.MetricCursors(ctx, "r", "train", 1)
	require.NoError(t, err)
	require.Equal(t, map[string]MetricCursor{"stdout": cur("stdout", 90, ""), "tb:events.1": cur("tb:events.1", 7, "")}, got)

	// A failing batch stores neither its points nor its cursor.
	bad := []MetricPoint{pt("train", 1, "loss", 2, 2), {RunID: "missing", Stage: "train", Attempt: 1, Key: "loss", Step: 3}}
	require.Error(t, db.InsertMetrics(ctx, bad, []MetricCursor{cur("stdout", 200, "")}))
	got, err = db.MetricCursors(ctx, "r", "train", 1)
	require.NoError(t, err)
	require.Equal(t, int64(90), got["stdout"].Offset)
	n, err := db.CountMetricPoints(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestTransientWriteErrors(t *testing.T) {
	for msg, want := range map[string]string{
		"commit: database or disk is full":                 "disk full",
		"disk I/O error":                                   "disk I/O error",
		"database is locked":                               "database busy (another process holds its lock)",
		"write /x: no space left on device":                "disk full",
		"attempt to write a readonly database":             "database read-only",
		"FOREIGN KEY constraint failed":                    "",
		"insert 3 metric points: UNIQUE constraint failed": "",
	} {
		got, ok := Transient(errors.New(msg))
		assert.Equal(t, want, got, msg)
		assert.Equal(t, want != "", ok, msg)
	}
}

func TestInsertMetricPointsIsAtomic(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	pts := make([]MetricPoint, 300)
	for i := range pts {
		pts[i] = pt("train", 1, "loss", int64(i), 1)
	}
	pts[250].RunID = "missing" // violates the foreign key in the second statement
	require.Error(t, db.InsertMetricPoints(ctx, pts))
	n, err := db.CountMetricPoints(ctx, "r")
	require.NoError(t, err)
	require.Zero(t, n)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	pts[250].RunID = "r"
	require.ErrorIs(t, db.InsertMetricPoints(cctx, pts), context.Canceled)
	n, err = db.CountMetricPoints(ctx, "r")
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestInsertMetricPointsManySeriesInterleaved(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	// 3 stages x 2 attempts x 7 keys = 42 series (more than the linear
	// lookup handles), interleaved point by point, in two calls.
	var pts []MetricPoint
	for step := int64(0); step < 50; step++ {
		for _, stage := range []string{"train", "validate", "preprocess"} {
			for attempt := 1; attempt <= 2; attempt++ {
				for k := range 7 {
					v := float64(step)*1000 + float64(attempt)*100 + float64(k)
					pts = append(pts, MetricPoint{RunID: "r", Stage: stage, Attempt: attempt, Key: fmt.Sprintf("k%d", k), Step: step, Value: v})
				}
			}
		}
	}
	require.NoError(t, db.InsertMetricPoints(ctx, pts[:777]))
	require.NoError(t, db.InsertMetricPoints(ctx, pts[777:]))

	n, err := db.CountMetricPoints(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, len(pts), n)
	for _, stage := range []string{"train", "validate", "preprocess"} {
		for k := range 7 {
			got, err := db.MetricSeries(ctx, "r", stage, fmt.Sprintf("k%d", k))
			require.NoError(t, err)
			require.Len(t, got, 50)
			for step, p := range got {
				require.Equal(t, 2, p.Attempt)
				require.Equal(t, int64(step), p.Step)
				require.Equal(t, float64(step)*1000+200+float64(k), p.Value)
			}
		}
		steps, err := db.MaxSteps(ctx, "r", stage, 1)
		require.NoError(t, err)
		require.Len(t, steps, 7)
		require.Equal(t, int64(49), steps["k3"])
	}
}

// A series id cached by one handle goes stale when another handle deletes
// the run; the insert must notice (foreign key) and look the series up again.
func TestInsertMetricPointsAfterRunDeletedElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "niuma.db")
	a, err := Open(path)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(path)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()

	createTestRun(t, a, "r", ts(0))
	require.NoError(t, a.InsertMetricPoints(ctx, []MetricPoint{pt("train", 1, "loss", 1, 1)}))

	// Deleted and created again (same id) by the other handle: a's cached
	// series id is stale.
	require.NoError(t, b.DeleteRun(ctx, "r"))
	createTestRun(t, b, "r", ts(1))
	require.NoError(t, a.InsertMetricPoints(ctx, []MetricPoint{pt("train", 1, "loss", 2, 2)}))
	got, err := b.MetricSeries(ctx, "r", "train", "loss")
	require.NoError(t, err)
	require.Equal(t, []MetricPoint{pt("train", 1, "loss", 2, 2)}, noSeq(got), "no point of the deleted run survives or leaks in")

	// Deleted for good: the insert fails, naming the cause.
	require.NoError(t, b.DeleteRun(ctx, "r"))
	err = a.InsertMetricPoints(ctx, []MetricPoint{pt("train", 1, "loss", 3, 3)})
	require.Error(t, err, "the run is gone")
	require.Contains(t, err.Error(), "FOREIGN KEY")
}

// ---- events and GPU samples ----

func TestEvents(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	in := []Event{
		{RunID: "r", Stage: "train", GPU: "GPU-1", Kind: "nan", Severity: SeverityCritical, Message: "loss became NaN at step 120.", Fix: "Lower the learning rate.", Evidence: `{"step":120}`, At: ts(5)},
		{RunID: "r", Stage: "train", Kind: "stage_failed", Severity: SeverityWarning, Message: "train failed.", At: ts(2)},
		{RunID: "r", Kind: "same_time", Severity: SeverityInfo, At: ts(5)},
		{GPU: "GPU-2", Kind: "xid", Severity: SeverityCritical, Message: "XID 79: GPU fell off the bus.", At: ts(3)},
	}
	for i := range in {
		id, err := db.AddEvent(ctx, in[i])
		require.NoError(t, err)
		require.Positive(t, id)
		in[i].ID = id
	}
	require.Greater(t, in[1].ID, in[0].ID)

	tests := []struct {
		name  string
		runID string
		want  []Event
	}{
		{"run events by time then id", "r", []Event{in[1], in[0], in[2]}},
		{"machine-wide events", "", []Event{in[3]}},
		{"run without events", "nope", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.Events(ctx, tt.runID)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	got, err := db.EventsBetween(ctx, ts(3), ts(5))
	require.NoError(t, err)
	require.Equal(t, []Event{in[3]}, got)

	before := time.Now()
	id, err := db.AddEvent(ctx, Event{Kind: "k", Severity: SeverityInfo})
	require.NoError(t, err)
	got, err = db.Events(ctx, "")
	require.NoError(t, err)
	require.Equal(t, id, got[len(got)-1].ID)
	require.False(t, got[len(got)-1].At.Before(before.Truncate(time.Microsecond)), "a zero At becomes now")
}

func TestGPUSamples(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	m0 := time.Unix(1_790_000_040, 0) // on a minute boundary
	sample := func(gpu string, minute time.Time, util float64) GPUSample {
		return GPUSample{GPU: gpu, Minute: minute, UtilMin: util - 1, UtilMean: util, UtilMax: util + 1,
			MemUsedMin: 100, MemUsedMean: 200, MemUsedMax: 300, TempMax: 70, PowerMean: 250.5}
	}
	require.NoError(t, db.AddGPUSamples(ctx, []GPUSample{
		sample("GPU-a", m0.Add(30*time.Second), 10), // truncated to m0
		sample("GPU-a", m0.Add(time.Minute), 20),
		sample("GPU-a", m0.Add(2*time.Minute), 30),
		sample("GPU-b", m0, 40),
	}))
	// Upsert: the same minute again replaces the row.
	nan := sample("GPU-a", m0.Add(time.Minute+59*time.Second), 25)
	nan.PowerMean = math.NaN()
	require.NoError(t, db.AddGPUSamples(ctx, []GPUSample{nan}))

	got, err := db.GPUSamples(ctx, "GPU-a", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, sample("GPU-a", m0, 10), got[0])
	require.Equal(t, m0.Add(time.Minute), got[1].Minute)
	require.Equal(t, 25.0, got[1].UtilMean)
	require.True(t, math.IsNaN(got[1].PowerMean), "NaN round-trips")
	require.Equal(t, 30.0, got[2].UtilMean)

	tests := []struct {
		name     string
		gpu      string
		from, to time.Time
		want     int
	}{
		{"half-open range", "GPU-a", m0, m0.Add(2 * time.Minute), 2},
		{"open start", "GPU-a", time.Time{}, m0.Add(time.Minute), 1},
		{"open end", "GPU-a", m0.Add(time.Minute), time.Time{}, 2},
		{"other GPU", "GPU-b", time.Time{}, time.Time{}, 1},
		{"all GPUs", "", m0, m0.Add(time.Minute), 2},
		{"unknown GPU", "GPU-z", time.Time{}, time.Time{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.GPUSamples(ctx, tt.gpu, tt.from, tt.to)
			require.NoError(t, err)
			require.Len(t, got, tt.want)
		})
	}
}

// ---- concurrency ----

// Two DB handles on one file (as two processes would have) writing from two
// goroutines must wait for each other, never fail with SQLITE_BUSY.
func TestConcurrentWritersTwoHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "niuma.db")
	dbs := make([]*DB, 2)
	for i := range dbs {
		db, err := Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	ctx := context.Background()
	const runs = 40
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range runs {
				id := fmt.Sprintf("w%d-%03d", w, i)
				r := testRun(id, ts(int64(i)))
				if err := db.CreateRun(ctx, r, testStages(id)); err != nil {
					errs <- err
					return
				}
				pts := make([]MetricPoint, 500)
				for j := range pts {
					pts[j] = MetricPoint{RunID: id, Stage: "train", Attempt: 1, Key: "loss", Step: int64(j), Value: 1}
				}
				if err := db.InsertMetricPoints(ctx, pts); err != nil {
					errs <- err
					return
				}
				r.State = RunRunning
				if err := db.UpdateRun(ctx, r); err != nil {
					errs <- err
					return
				}
				if _, err := db.AddEvent(ctx, Event{RunID: id, Kind: "k", Severity: SeverityInfo}); err != nil {
					errs <- err
					return
				}
				if _, err := db.ListRuns(ctx, RunFilter{Limit: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	all, err := dbs[0].ListRuns(ctx, RunFilter{States: []RunState{RunRunning}})
	require.NoError(t, err)
	require.Len(t, all, 2*runs)
	for _, r := range all {
		n, err := dbs[1].CountMetricPoints(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, 500, n)
	}
}

func TestStateDone(t *testing.T) {
	tests := []struct {
		run   RunState
		stage StageState
		done  bool
	}{
		{RunQueued, StageQueued, false},
		{RunRunning, StageRunning, false},
		{RunSucceeded, StageSucceeded, true},
		{RunFailed, StageFailed, true},
		{RunCancelled, StageCancelled, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.run), func(t *testing.T) {
			require.Equal(t, tt.done, tt.run.Done())
			require.Equal(t, tt.done, tt.stage.Done())
		})
	}
}

func TestSetRunParams(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r1", Params: `{"lr":1}`, State: RunRunning}, nil))
	require.NoError(t, db.SetRunParams(ctx, "r1", `{"lr":0.1}`))
	r, err := db.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, `{"lr":0.1}`, r.Params)
	require.ErrorIs(t, db.SetRunParams(ctx, "nope", `{}`), ErrNotFound)
}

func TestDeleteGPUSamplesBefore(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, db.AddGPUSamples(ctx, []GPUSample{
		{GPU: "g", Minute: t0}, {GPU: "g", Minute: t0.Add(time.Minute)}, {GPU: "g", Minute: t0.Add(2 * time.Minute)}}))
	n, err := db.DeleteGPUSamplesBefore(ctx, t0.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	left, err := db.GPUSamples(ctx, "g", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Len(t, left, 1)
}

func TestDismissEvent(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	require.NoError(t, db.CreateRun(ctx, Run{ID: "r1", State: RunRunning}, nil))
	id, err := db.AddEvent(ctx, Event{RunID: "r1", Kind: "nan", Severity: SeverityCritical, Message: "NaN"})
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	require.NoError(t, db.DismissEvent(ctx, id, at))
	evs, err := db.Events(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.True(t, evs[0].DismissedAt.Equal(at))
	require.ErrorIs(t, db.DismissEvent(ctx, id+100, at), ErrNotFound)
}

func TestListRunsByFingerprint(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	for _, r := range []Run{
		{ID: "a", Fingerprint: "fp1", State: RunSucceeded},
		{ID: "b", Fingerprint: "fp1", State: RunFailed},
		{ID: "c", Fingerprint: "fp2", State: RunSucceeded},
	} {
		require.NoError(t, db.CreateRun(ctx, r, nil))
	}
	got, err := db.ListRuns(ctx, RunFilter{Fingerprint: "fp1", States: []RunState{RunSucceeded}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "a", got[0].ID)
	all, err := db.ListRuns(ctx, RunFilter{Fingerprint: "fp1"})
	require.NoError(t, err)
	require.Len(t, all, 2)
}

// An archive written before points had a sequence keeps every point, and
// its series get their summaries.
func TestMigrationToSequencedPointsKeepsPoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "niuma.db")
	raw, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	require.NoError(t, err)
	_, err = raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
	require.NoError(t, err)
	ms, err := loadMigrations()
	require.NoError(t, err)
	for _, m := range ms {
		if m.version >= 40 {
			break
		}
		_, err := raw.Exec(m.sql)
		require.NoError(t, err, m.name)
		_, err = raw.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, m.version)
		require.NoError(t, err)
	}
	_, err = raw.Exec(`INSERT INTO runs (id, state, created_ns) VALUES ('r', 'succeeded', 0);
		INSERT INTO metric_series (run_id, stage, key, attempt) VALUES ('r', 'train', 'loss', 1);
		INSERT INTO metric_points (series_id, step, value, wall_ns) VALUES (1, 1, 0.9, 10), (1, 2, NULL, 20), (1, 3, 0.5, 30), (1, 4, 9e999, 40);`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	db, err := Open(path)
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	got, err := db.MetricSeries(ctx, "r", "train", "loss")
	require.NoError(t, err)
	require.Len(t, got, 4)
	for i, p := range got {
		require.Equal(t, int64(i+1), p.Step)
		require.Equal(t, int64(i+1), p.Seq)
	}
	sums, err := db.MetricSummaries(ctx, "r")
	require.NoError(t, err)
	require.Len(t, sums, 1)
	assert.Equal(t, int64(4), sums[0].Points)
	assert.Equal(t, int64(2), sums[0].NonFinite)
	assert.Equal(t, 0.5, sums[0].Min)
	assert.Equal(t, 0.9, sums[0].Max)
	assert.Equal(t, int64(4), sums[0].Last.Step)
	assert.Equal(t, math.Inf(1), sums[0].Last.Value)
	assert.Equal(t, "step", sums[0].StepSource)
	// New points continue the sequence.
	require.NoError(t, db.InsertMetricPoints(ctx, []MetricPoint{{RunID: "r", Stage: "train", Attempt: 1, Key: "loss", Step: 4, Value: 0.4}}))
	got, err = db.MetricSeries(ctx, "r", "train", "loss")
	require.NoError(t, err)
	require.Len(t, got, 5)
	assert.Equal(t, int64(5), got[4].Seq)
}

func TestMetricSeriesEnvelopeKeepsExtremesAndNaNs(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	pts := make([]MetricPoint, 10000)
	for i := range pts {
		v := 1.0 / float64(i+1)
		switch i {
		case 5000:
			v = 50 // a spike
		case 7777:
			v = math.NaN()
		}
		pts[i] = MetricPoint{RunID: "r", Stage: "train", Attempt: 1, Key: "loss", Step: int64(i / 2), Value: v}
	}
	require.NoError(t, db.InsertMetricPoints(ctx, pts))
	got, err := db.MetricSeriesEnvelope(ctx, "r", "train", "loss", 100)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(got), 300)
	assert.GreaterOrEqual(t, len(got), 100)
	var spike, nan bool
	for i, p := range got {
		if i > 0 {
			prev := got[i-1]
			require.True(t, prev.Step < p.Step || (prev.Step == p.Step && prev.Seq < p.Seq), "ordered by step, then arrival")
		}
		spike = spike || p.Value == 50
		nan = nan || math.IsNaN(p.Value)
	}
	assert.True(t, spike, "the spike is kept")
	assert.True(t, nan, "the NaN is kept")
	whole, err := db.MetricSeriesEnvelope(ctx, "r", "train", "loss", 10000)
	require.NoError(t, err)
	assert.Len(t, whole, 10000, "a short series comes back whole")
}

func TestMetricSeriesEnvelopeOfPointsAtOneStep(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	createTestRun(t, db, "r", ts(0))
	pts := make([]MetricPoint, 5000)
	for i := range pts {
		pts[i] = MetricPoint{RunID: "r", Stage: "train", Attempt: 1, Key: "reward", Step: 0, Value: float64(i % 97)}
	}
	pts[4321].Value = 1000
	require.NoError(t, db.InsertMetricPoints(ctx, pts))
	got, err := db.MetricSeriesEnvelope(ctx, "r", "train", "reward", 50)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(got), 50)
	assert.LessOrEqual(t, len(got), 53)
	var top float64
	for i, p := range got {
		if i > 0 {
			require.Less(t, got[i-1].Seq, p.Seq, "in arrival order within the step")
		}
		top = max(top, p.Value)
	}
	assert.Equal(t, 1000.0, top)
}
