package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/storage"
)

const orphanYAML = `
name: orphan
params:
  n: {type: int, default: 3}
stages:
  - name: a
    command: ["true"]
  - name: b
    needs: [a]
    command: ["true"]
`

func TestReconcileFolders(t *testing.T) {
	tests := []struct {
		name       string
		started    bool // stage a wrote an attempt's log
		dropRecord bool // no run.json
		want       string
	}{
		{"submitted, never started: adopted as submitted", false, false, FolderAdopted},
		{"started, with its record: registered as failed", true, false, FolderRegistered},
		{"started, without its record: registered from params and template", true, true, FolderRegistered},
		{"never started, without its record: moved aside", false, true, FolderMoved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			e := h.engine()
			info, err := e.Submit(ctx, RunSpec{Template: parse(t, orphanYAML), Values: map[string]any{"n": int64(7)}})
			require.NoError(t, err)
			stored, err := h.store.GetRun(ctx, info.ID)
			require.NoError(t, err)
			require.NoError(t, h.store.DeleteRun(ctx, info.ID)) // the row a killed submit never stored
			if tt.started {
				require.NoError(t, os.MkdirAll(filepath.Join(info.Dir, "a"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(info.Dir, "a", "attempt-1.stdout.log"), []byte("hi\n"), 0o644))
			}
			if tt.dropRecord {
				require.NoError(t, os.Remove(filepath.Join(info.Dir, runRecordFile)))
			}
			notRun := filepath.Join(h.home, "runs", "my-notes")
			require.NoError(t, os.MkdirAll(notRun, 0o755))

			outs, err := ReconcileFolders(ctx, h.store, h.home, "a test lost it")
			require.NoError(t, err)
			require.Len(t, outs, 1)
			assert.Equal(t, tt.want, outs[0].Action)
			assert.DirExists(t, notRun, "a folder not named like a run is not ours")

			switch tt.want {
			case FolderAdopted:
				got, err := h.store.GetRun(ctx, info.ID)
				require.NoError(t, err)
				assert.Equal(t, stored, got, "the run is stored exactly as it was submitted")
				stages, err := h.store.Stages(ctx, info.ID)
				require.NoError(t, err)
				assert.Len(t, stages, 2)
			case FolderRegistered:
				got, err := h.store.GetRun(ctx, info.ID)
				require.NoError(t, err)
				assert.Equal(t, storage.RunFailed, got.State)
				assert.Contains(t, got.Error, "a test lost it")
				assert.Equal(t, "orphan", got.Template)
				assert.JSONEq(t, stored.Params, got.Params)
				stages, err := h.store.Stages(ctx, info.ID)
				require.NoError(t, err)
				require.Len(t, stages, 2)
				assert.Equal(t, storage.StageFailed, stages[0].State)
				assert.Equal(t, 1, stages[0].Attempts)
				assert.Equal(t, storage.StageCancelled, stages[1].State)
			case FolderMoved:
				_, err := h.store.GetRun(ctx, info.ID)
				require.ErrorIs(t, err, storage.ErrNotFound)
				assert.NoDirExists(t, info.Dir)
				note, err := os.ReadFile(filepath.Join(OrphansDir(h.home), info.ID, "NOTE.txt"))
				require.NoError(t, err)
				assert.Contains(t, string(note), info.Dir)
				assert.FileExists(t, filepath.Join(OrphansDir(h.home), info.ID, "params.json"))
			}

			outs, err = ReconcileFolders(ctx, h.store, h.home, "again")
			require.NoError(t, err)
			assert.Empty(t, outs, "nothing is left to reconcile")
		})
	}
}

// A folder whose submit is in flight is not touched: the search waits for
// the submit to finish.
func TestReconcileFoldersWaitsForSubmitsInFlight(t *testing.T) {
	h := newHarness(t)
	dir := filepath.Join(h.home, "runs", "20260101-000000-abcdef")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	release, err := holdSubmitLock(h.home)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = ReconcileFolders(ctx, h.store, h.home, "")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.DirExists(t, dir, "a folder being written is left alone")
	release()
	outs, err := ReconcileFolders(context.Background(), h.store, h.home, "")
	require.NoError(t, err)
	require.Len(t, outs, 1)
	assert.Equal(t, FolderMoved, outs[0].Action, "once the submit is over, a folder without a record is moved aside")
}

// The owner backs the archive up when it starts, at most once a day.
func TestOwnerChecksTheArchiveAtStart(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	stop := h.drive(e)
	stop()
	backups, err := storage.ListBackups(BackupDir(h.home))
	require.NoError(t, err)
	require.Len(t, backups, 1, "a backup at the first start")
	e = h.engine()
	stop = h.drive(e)
	stop()
	backups, err = storage.ListBackups(BackupDir(h.home))
	require.NoError(t, err)
	assert.Len(t, backups, 1, "at most one a day")
}

// A registered run's metric points come back from its folder: each
// attempt's stdout and stderr as the engine read them while it ran (JSON
// lines and the stage's text rules), each point once, in its attempt.
func TestReconcileReadsTheMetricsAgain(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	e := h.engine()
	tm := parse(t, `
name: logged
stages:
  - name: a
    metrics: key-value
    command: ["true"]
  - name: b
    needs: [a]
    command: ["true"]
`)
	info, err := e.Submit(ctx, RunSpec{Template: tm})
	require.NoError(t, err)
	require.NoError(t, h.store.DeleteRun(ctx, info.ID)) // lost with the archive
	a := filepath.Join(info.Dir, "a")
	require.NoError(t, os.MkdirAll(a, 0o755))
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(a, name), []byte(text), 0o644))
	}
	write("attempt-1.stdout.log", `{"step": 1, "loss": 9}`+"\n"+`{"step": 2, "loss": 8}`+"\n")
	write("attempt-2.stdout.log", "step=1 loss=0.5\nstep=2 loss=0.4\nstep=3 loss=0.3\n")
	write("attempt-2.stderr.log", `{"step": 3, "lr": 0.1}`+"\n")
	// The first attempt ended an hour ago; the CSV log in the stage's
	// folder is the second's.
	hourAgo := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(a, "attempt-1.stdout.log"), hourAgo, hourAgo))
	csv := "step,acc\n1,0.5\n2,0.6\n"
	require.NoError(t, os.MkdirAll(filepath.Join(a, "lightning_logs", "version_0"), 0o755))
	write(filepath.Join("lightning_logs", "version_0", "metrics.csv"), csv)
	// Stage b ran once; a CSV log in the run's folder could be either
	// stage's: it is not read.
	require.NoError(t, os.MkdirAll(filepath.Join(info.Dir, "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(info.Dir, "b", "attempt-1.stdout.log"), []byte(`{"step": 1, "f1": 0.7}`+"\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(info.Dir, "lightning_logs", "version_0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(info.Dir, "lightning_logs", "version_0", "metrics.csv"), []byte(csv), 0o644))

	outs, err := ReconcileFolders(ctx, h.store, h.home, "a test lost it")
	require.NoError(t, err)
	require.Len(t, outs, 1)
	require.Equal(t, FolderRegistered, outs[0].Action)
	require.NoError(t, outs[0].PointsErr)
	require.Equal(t, 9, outs[0].Points, "2 + 3 + 1 from the logs, 2 from the stage's CSV, 1 of stage b")
	series := func(attempt int, key string) []float64 {
		pts, err := h.store.MetricSeriesAllAttempts(ctx, info.ID, "a", key)
		require.NoError(t, err)
		var vals []float64
		for _, p := range pts {
			if p.Attempt == attempt {
				vals = append(vals, p.Value)
			}
		}
		return vals
	}
	require.Equal(t, []float64{9, 8}, series(1, "loss"))
	require.Equal(t, []float64{0.5, 0.4, 0.3}, series(2, "loss"))
	require.Equal(t, []float64{0.1}, series(2, "lr"))
	require.Equal(t, []float64{0.5, 0.6}, series(2, "acc"), "the stage's CSV, once, in its latest attempt")
	require.Empty(t, series(1, "acc"))
	pts, err := h.store.MetricSeriesAllAttempts(ctx, info.ID, "b", "acc")
	require.NoError(t, err)
	require.Empty(t, pts, "the run folder's CSV is nobody's")
}
