package storage

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// dsnParams are go-sqlite3's connection parameters, applied to every pooled
// connection: foreign keys on, wait up to 5 s for a lock instead of failing
// with SQLITE_BUSY, write-ahead log with synchronous=NORMAL, and BEGIN
// IMMEDIATE for transactions, so that a transaction takes the write lock up
// front (and waits for it) instead of failing when it upgrades from reading
// to writing.
const dsnParams = "_foreign_keys=on&_busy_timeout=5000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate"

// DB is Niuma's archive. It is safe for concurrent use.
//
// Writes go through one connection (w), so writers in one process queue in
// Go rather than polling SQLite's lock; reads use a pool of read-only
// connections (r), which WAL lets run alongside the writer. Several DB
// values (or processes) on one file are fine: they wait for each other
// through the busy timeout.
type DB struct {
	path     string
	w        *sql.DB
	r        *sql.DB
	readOnly bool // opened with OpenReadOnly: w and r are one read-only pool

	// metric insert fast path (see metrics.go)
	metricMu sync.Mutex
	mw       metricWriter
}

// OpenOptions say what the caller knows about the archive it opens.
type OpenOptions struct {
	// ExpectData: the archive must already hold Niuma's data (the data
	// directory has run folders). A missing file, a zero-byte file or an
	// SQLite file without tables is then refused (ErrArchiveMissing,
	// ErrArchiveEmpty) instead of being started afresh.
	ExpectData bool
	// BackupDir, when set, receives a backup (see Backup) before any
	// migration is applied to an archive that already has a schema. A
	// migration is not applied when that backup fails.
	BackupDir string
}

// Open opens (creating if needed) the database at path, creating parent
// directories, and applies any pending migrations. It refuses a database
// whose schema is newer than this binary knows (ErrSchemaTooNew).
func Open(path string) (*DB, error) { return OpenWith(path, OpenOptions{}) }

// OpenWith is Open with options. Before any connection could write to the
// file it checks what the file is: a file that is not SQLite, an SQLite
// database Niuma did not write, or one cut short is refused (ErrNotArchive,
// ErrDamaged) and left as it is. When the schema is current, opening
// writes nothing, so it works while another process holds the write lock.
func OpenWith(path string, opts OpenOptions) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("open database %s: create directory: %w", abs, err)
	}

	// Processes opening the same fresh file at once race to switch it to
	// WAL and to create the schema, and SQLite answers "database is locked"
	// to the loser without waiting. Opening is serialised with a lock file.
	unlock, err := lockFile(abs + ".open-lock")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	defer unlock()

	pr, err := probe(abs)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	if opts.ExpectData {
		switch {
		case !pr.exists:
			return nil, fmt.Errorf("open database %s: %w: there is no such file", abs, ErrArchiveMissing)
		case pr.size == 0:
			return nil, fmt.Errorf("open database %s: %w: the file is 0 bytes", abs, ErrArchiveEmpty)
		case pr.tables == 0:
			return nil, fmt.Errorf("open database %s: %w: the file holds no tables", abs, ErrArchiveEmpty)
		}
	}

	w, err := sql.Open("sqlite3", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	db := &DB{path: abs, w: w}
	if err := db.migrate(context.Background(), pr, opts.BackupDir); err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, classify(abs, err))
	}

	r, err := sql.Open("sqlite3", dsn(abs, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxIdleTime(5 * time.Minute)
	db.r = r
	if err := r.PingContext(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, classify(abs, err))
	}
	return db, nil
}

// OpenReadOnly opens an existing archive for reading only (SQLite's
// mode=ro and query_only): it never migrates, never takes the write lock
// and writes nothing, so it works on a full disk and while another process
// holds a long write transaction. It refuses what OpenWith with
// ExpectData refuses, and a schema older than this build knows
// (ErrSchemaOld: a writing open upgrades it). Methods that write fail.
func OpenReadOnly(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	pr, err := probe(abs)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	known := LatestSchemaVersion()
	switch {
	case !pr.exists:
		return nil, fmt.Errorf("open database %s: %w: there is no such file", abs, ErrArchiveMissing)
	case pr.size == 0:
		return nil, fmt.Errorf("open database %s: %w: the file is 0 bytes", abs, ErrArchiveEmpty)
	case pr.tables == 0:
		return nil, fmt.Errorf("open database %s: %w: the file holds no tables", abs, ErrArchiveEmpty)
	case pr.version > known:
		return nil, fmt.Errorf("open database %s: %w: the database is at schema version %d but this build knows only up to %d; use a newer Niuma",
			abs, ErrSchemaTooNew, pr.version, known)
	case pr.version < known:
		return nil, fmt.Errorf("open database %s: %w: it is at version %d, this build needs %d; run a command that writes (e.g. `niuma engine --until-idle`) once to upgrade it",
			abs, ErrSchemaOld, pr.version, known)
	}
	r, err := openRO(abs)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, classify(abs, err))
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxIdleTime(5 * time.Minute)
	return &DB{path: abs, w: r, r: r, readOnly: true}, nil
}

// ReadOnly reports whether the database was opened with OpenReadOnly.
func (db *DB) ReadOnly() bool { return db.readOnly }

// probed is what probe found in a database file.
type probed struct {
	exists  bool
	size    int64
	tables  int // tables in sqlite_schema
	hasMig  bool
	version int // highest applied migration, 0 without schema_migrations
}

// probe looks into a database file without writing to it: first its bytes
// (inspectFile), then, through a read-only connection that sets no journal
// mode, its tables and schema version. A file with tables but no
// schema_migrations is not Niuma's (ErrNotArchive).
func probe(abs string) (probed, error) {
	exists, size, err := inspectFile(abs)
	if err != nil || !exists || size == 0 {
		return probed{exists: exists, size: size}, err
	}
	pr := probed{exists: true, size: size}
	h, err := openRO(abs)
	if err != nil {
		return pr, fmt.Errorf("read the schema: %w", classify(abs, err))
	}
	defer h.Close()
	ctx := context.Background()
	var mig int
	err = h.QueryRowContext(ctx, `SELECT count(*), count(CASE WHEN name = 'schema_migrations' THEN 1 END)
		FROM sqlite_master WHERE type = 'table'`).Scan(&pr.tables, &mig)
	if err != nil {
		return pr, fmt.Errorf("read the schema: %w", classify(abs, err))
	}
	pr.hasMig = mig > 0
	if pr.tables > 0 && !pr.hasMig {
		return pr, fmt.Errorf("%w: %s is an SQLite database with %d tables but none of Niuma's (no schema_migrations)", ErrNotArchive, abs, pr.tables)
	}
	if pr.hasMig {
		var v sql.NullInt64
		if err := h.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
			return pr, fmt.Errorf("read schema version: %w", classify(abs, err))
		}
		pr.version = int(v.Int64)
	}
	return pr, nil
}

// dsn builds a go-sqlite3 URI for the absolute path abs.
func dsn(abs string, readOnly bool) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // Windows: file:/C:/dir/niuma.db
	}
	u := url.URL{Path: p} // percent-encodes '?', '#', '%', spaces, ...
	s := "file:" + u.EscapedPath() + "?" + dsnParams
	if readOnly {
		s += "&_query_only=on"
	}
	return s
}

// roDSN is a URI for reading only: SQLite opens the file read-only and
// sets no journal mode (setting one writes the header), and a busy
// timeout covers a writer's checkpoint.
func roDSN(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	u := url.URL{Path: p}
	return "file:" + u.EscapedPath() + "?mode=ro&_query_only=on&_foreign_keys=on&_busy_timeout=5000"
}

// openRO opens a read-only pool on abs and reads from it once. Reading a
// WAL-mode file needs its shared-memory index (niuma.db-shm), which SQLite
// creates when no process has the file open; on a full disk (or in a
// folder that cannot be written) that fails. When the write-ahead log then
// holds no frames, the file alone is the whole archive and is read as
// immutable (no index, no locks). With frames in the log there is no safe
// way to read without the index, and the error says to free space.
func openRO(abs string) (*sql.DB, error) {
	h, err := sql.Open("sqlite3", roDSN(abs))
	if err != nil {
		return nil, err
	}
	err = readOnce(h)
	if err == nil {
		return h, nil
	}
	h.Close()
	if !cannotWriteIndex(err) {
		return nil, err
	}
	if hasFrames(abs + "-wal") {
		return nil, fmt.Errorf("%w: reading the archive needs its write-ahead log index (%s-shm), which could not be written: free some space on the disk", err, abs)
	}
	h, err = sql.Open("sqlite3", roDSN(abs)+"&immutable=1")
	if err != nil {
		return nil, err
	}
	if err := readOnce(h); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func readOnce(h *sql.DB) error {
	var n int
	return h.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&n)
}

// cannotWriteIndex reports whether err is SQLite failing to create or grow
// a file beside the database: a full disk, or a folder it may not write.
func cannotWriteIndex(err error) bool {
	code, sys, ok := sqliteErr(err)
	if !ok {
		return false
	}
	return code == sqliteFull || code == sqliteCantOpen || code == sqliteReadonly ||
		sys == syscall.ENOSPC || sys == syscall.EROFS || sys == syscall.EACCES
}

// Close closes the database. Pending writes have been committed by the
// calls that made them; Close checkpoints the write-ahead log when it is
// the last connection to the file.
func (db *DB) Close() error {
	var errs []error
	db.metricMu.Lock()
	errs = append(errs, db.mw.close())
	db.metricMu.Unlock()
	if db.r != nil && db.r != db.w {
		errs = append(errs, db.r.Close())
	}
	errs = append(errs, db.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close database %s: %w", db.path, err)
	}
	return nil
}

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// SQL returns the underlying write handle (one connection, so its writes are
// serialised with storage's own). It is meant for benchmarks and one-off
// tools: do not hold a transaction or an open *sql.Rows on it while calling
// other DB methods that write, or they wait for it forever.
func (db *DB) SQL() *sql.DB { return db.w }

// ---- migrations ----

type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d+)_[A-Za-z0-9_\-]+\.sql$`)

// loadMigrations returns the embedded migrations ordered by version.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("embedded migration %q: name must look like 0001_what.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("embedded migration %q: bad version", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("embedded migrations %q and %q share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	return ms, nil
}

// LatestSchemaVersion is the highest schema version this binary knows.
func LatestSchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// SchemaVersion returns the highest migration version applied to the
// database.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := db.w.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// migrate applies the pending embedded migrations, each in its own
// (immediate) transaction, so that concurrent openers of a fresh file apply
// each migration exactly once. pr is what probe found: when the schema is
// current nothing is written. An archive that has a schema is backed up to
// backupDir (when set) before its first pending migration.
func (db *DB) migrate(ctx context.Context, pr probed, backupDir string) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].version
	}
	if pr.version > known {
		return fmt.Errorf("%w: the database is at schema version %d but this build knows only up to %d; use a newer Niuma (or another data directory)",
			ErrSchemaTooNew, pr.version, known)
	}
	if pr.hasMig && pr.version == known {
		return nil
	}
	if pr.version > 0 && backupDir != "" {
		if _, err := backupTo(ctx, db.w, backupDir, time.Now()); err != nil {
			return fmt.Errorf("back up before upgrading the schema from version %d to %d (nothing was migrated): %w", pr.version, known, err)
		}
	}
	if _, err := db.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	have, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if have > known {
		return fmt.Errorf("%w: the database is at schema version %d but this build knows only up to %d; use a newer Niuma (or another data directory)",
			ErrSchemaTooNew, have, known)
	}
	for _, m := range ms {
		if err := db.applyMigration(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) applyMigration(ctx context.Context, m migration) (err error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.name, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var one int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM schema_migrations WHERE version = ?`, m.version).Scan(&one); {
	case err == nil:
		return tx.Rollback() // already applied
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.version, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("migration %s: record version: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.name, err)
	}
	return nil
}

// ---- value helpers ----

// timeArg turns a time into its column value: unix nanoseconds, or NULL for
// the zero time.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// timeOf turns a nullable unix-nanosecond column back into a time (in the
// local zone); NULL becomes the zero time.
func timeOf(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(0, v.Int64)
}

// floatArg stores NaN as NULL (SQLite turns NaN into NULL anyway); ±Inf are
// stored as REAL infinities.
func floatArg(f float64) any {
	if math.IsNaN(f) {
		return nil
	}
	return f
}

// floatOf reads a nullable REAL column back; NULL is NaN.
func floatOf(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}

func intPtrArg(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

func intPtrOf(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	i := int(v.Int64)
	return &i
}

func boolArg(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// rollback is deferred by transactional methods; it is a no-op after Commit.
func rollback(tx *sql.Tx) { _ = tx.Rollback() }
