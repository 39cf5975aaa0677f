package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// archiveWithRuns writes an archive holding n runs and closes it (its
// write-ahead log checkpointed into the file).
func archiveWithRuns(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "niuma.db")
	db, err := Open(path)
	require.NoError(t, err)
	for i := range n {
		createTestRun(t, db, fmt.Sprintf("r%03d", i), ts(int64(i)))
	}
	require.NoError(t, db.Close())
	return path
}

// fileSum is a file's bytes' hash, to show a refused file was not touched.
func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func pageSize(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	ps := int(b[16])<<8 | int(b[17])
	if ps == 1 {
		ps = 65536
	}
	return ps
}

func TestOpenRefusesFilesItMustNotTouch(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T) string
		expect bool // OpenOptions.ExpectData
		want   error
	}{
		{"zero bytes, run folders exist", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "niuma.db")
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			return p
		}, true, ErrArchiveEmpty},
		{"missing, run folders exist", func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "niuma.db")
		}, true, ErrArchiveMissing},
		{"a text file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "niuma.db")
			require.NoError(t, os.WriteFile(p, []byte("these are my notes, not a database\n"), 0o644))
			return p
		}, false, ErrNotArchive},
		{"another program's SQLite database", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "niuma.db")
			raw, err := sql.Open("sqlite3", "file:"+p)
			require.NoError(t, err)
			_, err = raw.Exec(`CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('ada')`)
			require.NoError(t, err)
			require.NoError(t, raw.Close())
			return p
		}, false, ErrNotArchive},
		{"truncated to half", func(t *testing.T) string {
			p := archiveWithRuns(t, 300)
			st, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, st.Size()/2))
			return p
		}, false, ErrDamaged},
		{"truncated inside the header", func(t *testing.T) string {
			p := archiveWithRuns(t, 1)
			require.NoError(t, os.Truncate(p, 60))
			return p
		}, false, ErrDamaged},
		{"bit flipped in the schema page", func(t *testing.T) string {
			p := archiveWithRuns(t, 1)
			flipBit(t, p, 100, 0x01) // the b-tree page type of sqlite_schema
			return p
		}, false, ErrDamaged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.make(t)
			_, statErr := os.Stat(p)
			var before [32]byte
			if statErr == nil {
				before = fileSum(t, p)
			}
			db, err := OpenWith(p, OpenOptions{ExpectData: tt.expect})
			if err == nil {
				db.Close()
			}
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), p, "the message names the file")
			if statErr == nil {
				assert.Equal(t, before, fileSum(t, p), "a refused file is left exactly as it was")
			} else {
				assert.NoFileExists(t, p, "a missing archive is not created when data is expected")
			}
			if st, err := os.Stat(p + "-wal"); err == nil {
				assert.Zero(t, st.Size(), "nothing was written to a log")
			}

			_, err = OpenReadOnly(p)
			require.Error(t, err, "reading refuses it too")
		})
	}
}

func flipBit(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= mask
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

func TestZeroByteFileWithoutDataStartsAfresh(t *testing.T) {
	p := filepath.Join(t.TempDir(), "niuma.db")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	db, err := Open(p)
	require.NoError(t, err, "a new data directory may hold an empty file")
	defer db.Close()
	createTestRun(t, db, "r1", ts(0))
}

func TestQuickCheckFindsADamagedTable(t *testing.T) {
	ctx := context.Background()
	p := archiveWithRuns(t, 300)
	ps := pageSize(t, p)
	st, err := os.Stat(p)
	require.NoError(t, err)
	db, err := Open(p)
	require.NoError(t, err)
	problems, err := db.QuickCheck(ctx)
	require.NoError(t, err)
	require.Empty(t, problems, "a sound archive")
	require.NoError(t, db.Close())

	// Damage every b-tree page's header past the schema page: the file
	// still opens (its schema is intact) but its tables are malformed.
	pages := st.Size() / int64(ps)
	for pg := int64(1); pg < pages; pg++ {
		flipBit(t, p, pg*int64(ps)+5, 0xff) // the first byte of the cell content offset
	}
	db, err = Open(p)
	require.NoError(t, err, "the schema is intact, so the file opens")
	defer db.Close()
	problems, err = db.QuickCheck(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, problems, "quick_check sees the damage")
	problems, err = db.IntegrityCheck(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, problems, "integrity_check sees the damage")
}

func TestOpenWritesNothingWhenTheSchemaIsCurrent(t *testing.T) {
	p := archiveWithRuns(t, 3)
	// Another process holds the write lock for longer than the busy
	// timeout would wait.
	holder, err := sql.Open("sqlite3", "file:"+p+"?_txlock=immediate")
	require.NoError(t, err)
	defer holder.Close()
	tx, err := holder.Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.Exec(`UPDATE runs SET priority = 9`)
	require.NoError(t, err)

	start := time.Now()
	db, err := OpenReadOnly(p)
	require.NoError(t, err)
	defer db.Close()
	runs, err := db.ListRuns(context.Background(), RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 3)
	assert.Equal(t, 5, runs[0].Priority, "a reader sees the last committed state")
	assert.Less(t, time.Since(start), 4*time.Second, "it never waited for the lock")
	require.Error(t, db.DeleteRun(context.Background(), "r000"), "a read-only archive refuses writes")

	w, err := Open(p)
	require.NoError(t, err, "a writing open of a current schema needs no lock either")
	require.NoError(t, w.Close())
}

func TestOpenReadOnlyRefusesAnOlderSchema(t *testing.T) {
	p := archiveWithRuns(t, 1)
	raw, err := sql.Open("sqlite3", "file:"+p)
	require.NoError(t, err)
	_, err = raw.Exec(`DELETE FROM schema_migrations WHERE version = ?`, LatestSchemaVersion())
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	_, err = OpenReadOnly(p)
	require.ErrorIs(t, err, ErrSchemaOld)
	assert.Contains(t, err.Error(), "run a command that writes")
}

func TestBackups(t *testing.T) {
	ctx := context.Background()
	p := archiveWithRuns(t, 5)
	dir := filepath.Join(t.TempDir(), "backups")
	db, err := Open(p)
	require.NoError(t, err)
	defer db.Close()

	b, err := db.Backup(ctx, dir)
	require.NoError(t, err)
	problems, err := CheckFile(ctx, b.Path)
	require.NoError(t, err)
	require.Empty(t, problems)
	bdb, err := OpenReadOnly(b.Path)
	require.NoError(t, err)
	runs, err := bdb.ListRuns(ctx, RunFilter{})
	require.NoError(t, err)
	assert.Len(t, runs, 5, "the backup holds the runs")
	require.NoError(t, bdb.Close())
	left, err := filepath.Glob(filepath.Join(dir, ".*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left")

	t.Run("daily", func(t *testing.T) {
		_, made, err := db.BackupDaily(ctx, dir, b.Time.Add(time.Hour))
		require.NoError(t, err)
		assert.False(t, made, "an hour after the last one")
		nb, made, err := db.BackupDaily(ctx, dir, b.Time.Add(25*time.Hour))
		require.NoError(t, err)
		assert.True(t, made, "a day after the last one")
		assert.NotEqual(t, b.Path, nb.Path)
	})
	t.Run("keeps the last seven", func(t *testing.T) {
		for i := range 10 {
			_, made, err := db.BackupDaily(ctx, dir, b.Time.Add(time.Duration(50+24*i)*time.Hour))
			require.NoError(t, err)
			require.True(t, made)
		}
		have, err := ListBackups(dir)
		require.NoError(t, err)
		require.Len(t, have, BackupsKept)
		assert.Equal(t, b.Time.Add(time.Duration(50+24*9)*time.Hour).UTC(), have[0].Time, "newest first")
	})
}

// olderArchive writes an archive at the schema before the newest
// migration, holding one run.
func olderArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "niuma.db")
	raw, err := sql.Open("sqlite3", "file:"+p+"?_foreign_keys=on")
	require.NoError(t, err)
	_, err = raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
	require.NoError(t, err)
	ms, err := loadMigrations()
	require.NoError(t, err)
	for _, m := range ms[:len(ms)-1] {
		_, err := raw.Exec(m.sql)
		require.NoError(t, err, m.name)
		_, err = raw.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, m.version)
		require.NoError(t, err)
	}
	_, err = raw.Exec(`INSERT INTO runs (id, state, created_ns) VALUES ('r', 'succeeded', 0)`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	return p
}

func TestBackupBeforeMigration(t *testing.T) {
	p := olderArchive(t)
	dir := filepath.Join(t.TempDir(), "backups")
	db, err := OpenWith(p, OpenOptions{BackupDir: dir})
	require.NoError(t, err)
	defer db.Close()
	have, err := ListBackups(dir)
	require.NoError(t, err)
	require.Len(t, have, 1, "one backup before the migration")
	b, err := OpenReadOnly(have[0].Path)
	require.ErrorIs(t, err, ErrSchemaOld, "the backup is the archive as it was before migrating")
	if b != nil {
		b.Close()
	}
	db2, err := OpenWith(p, OpenOptions{BackupDir: dir})
	require.NoError(t, err)
	require.NoError(t, db2.Close())
	have, err = ListBackups(dir)
	require.NoError(t, err)
	assert.Len(t, have, 1, "no backup when there is nothing to migrate")
}

// Whatever bytes niuma.db holds, looking at it never panics and never
// writes to it; what it accepts starts like an SQLite database.
func FuzzProbe(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("SQLite format 3\x00"))
	f.Add([]byte("not a database"))
	// The first pages of a real archive: the fuzzer is slow on inputs of
	// a whole archive's size, and the header and schema are what probe reads.
	if b, err := os.ReadFile(archiveWithRunsF(f)); err == nil && len(b) >= 8192 {
		f.Add(b[:8192])
		f.Add(b[:4096])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "niuma.db")
		require.NoError(t, os.WriteFile(p, data, 0o644))
		pr, err := probe(p)
		after, rerr := os.ReadFile(p)
		require.NoError(t, rerr)
		require.Equal(t, data, after, "probing writes nothing")
		if err == nil && len(data) > 0 {
			require.True(t, pr.exists)
			require.GreaterOrEqual(t, len(data), 100)
			require.Equal(t, "SQLite format 3\x00", string(data[:16]))
		}
	})
}

func archiveWithRunsF(f *testing.F) string {
	path := filepath.Join(f.TempDir(), "niuma.db")
	db, err := Open(path)
	if err != nil {
		return path
	}
	_ = db.CreateRun(context.Background(), testRun("r1", ts(0)), testStages("r1"))
	_ = db.Close()
	return path
}
