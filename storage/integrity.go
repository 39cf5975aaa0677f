package storage

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Why an archive file is refused. Each is wrapped with the path and what
// was seen; errors.Is tells them apart. Nothing is written to a file that
// is refused.
var (
	// ErrArchiveMissing: there is no database file although the caller
	// expected one (OpenOptions.ExpectData).
	ErrArchiveMissing = errors.New("the archive is missing")
	// ErrArchiveEmpty: the file is zero bytes, or an SQLite database with
	// no tables, although the caller expected data.
	ErrArchiveEmpty = errors.New("the archive is empty")
	// ErrNotArchive: the file is not an SQLite database, or is one that
	// Niuma did not write (it has tables but no schema_migrations).
	ErrNotArchive = errors.New("the file is not a Niuma archive")
	// ErrDamaged: the file is an SQLite database that is cut short or
	// whose pages SQLite finds malformed.
	ErrDamaged = errors.New("the archive is damaged")
	// ErrSchemaOld: a read-only open found a schema older than this build
	// knows; a writing open upgrades it.
	ErrSchemaOld = errors.New("the archive's schema is older than this build of Niuma")
)

// RepairHint is what a user does about a refused or damaged archive.
const RepairHint = "nothing was changed; run `niuma doctor` to see what is wrong and `niuma doctor --repair` " +
	"to restore the newest good backup (the damaged file is kept aside, never deleted)"

// sqliteMagic starts every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// inspectFile looks at a database file before SQLite does, so that a file
// Niuma must not touch is refused before any connection could write to it
// (switching it to WAL, creating tables). It returns exists=false for a
// missing file and nil for a file that looks like an SQLite database of
// the size its header claims. A zero-byte file is not refused here: a new
// archive starts as one (OpenOptions.ExpectData refuses it).
func inspectFile(path string) (exists bool, size int64, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return true, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if st.Size() == 0 {
		return true, 0, nil
	}
	hdr := make([]byte, 100)
	n, err := io.ReadFull(f, hdr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return true, st.Size(), fmt.Errorf("read %s: %w", path, err)
	}
	if n < len(sqliteMagic) || !bytes.Equal(hdr[:len(sqliteMagic)], sqliteMagic) {
		return true, st.Size(), fmt.Errorf("%w: %s does not start like an SQLite database (%d bytes)", ErrNotArchive, path, st.Size())
	}
	if n < 100 {
		return true, st.Size(), fmt.Errorf("%w: %s is cut short: %d bytes, less than an SQLite header", ErrDamaged, path, st.Size())
	}
	// The header's page count is valid when its "version valid for"
	// number equals the change counter (SQLite's file format, §1.3.7).
	pageSize := int64(binary.BigEndian.Uint16(hdr[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := int64(binary.BigEndian.Uint32(hdr[28:32]))
	valid := binary.BigEndian.Uint32(hdr[24:28]) == binary.BigEndian.Uint32(hdr[92:96])
	if valid && pages > 0 && st.Size() < pages*pageSize && !hasFrames(path+"-wal") {
		// A write-ahead log with frames may hold the missing pages (a
		// checkpoint cut short); without one the file was cut.
		return true, st.Size(), fmt.Errorf("%w: %s is cut short: %d bytes, its header says %d pages of %d bytes (%d bytes)",
			ErrDamaged, path, st.Size(), pages, pageSize, pages*pageSize)
	}
	return true, st.Size(), nil
}

// hasFrames reports whether a write-ahead log file holds more than its
// 32-byte header.
func hasFrames(wal string) bool {
	st, err := os.Stat(wal)
	return err == nil && st.Size() > 32
}

// IsDamaged reports whether err says that SQLite found the database file
// malformed or not a database, wherever in Niuma it surfaced.
func IsDamaged(err error) bool {
	if errors.Is(err, ErrDamaged) || errors.Is(err, ErrNotArchive) {
		return true
	}
	code, _, ok := sqliteErr(err)
	return ok && (code == sqliteCorrupt || code == sqliteNotADB)
}

// classify wraps an SQLite error that means a damaged file with
// ErrDamaged, so that callers need not know SQLite's codes.
func classify(path string, err error) error {
	if err == nil || errors.Is(err, ErrDamaged) || errors.Is(err, ErrNotArchive) {
		return err
	}
	if code, _, ok := sqliteErr(err); ok {
		switch code {
		case sqliteCorrupt:
			return fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
		case sqliteNotADB:
			return fmt.Errorf("%w: %s: %v", ErrNotArchive, path, err)
		}
	}
	return err
}

// QuickCheck runs SQLite's `PRAGMA quick_check`: every b-tree's structure,
// without checking that indexes match their tables. Its time grows with
// the file's size; on Niuma's archive, whose bulk is one WITHOUT ROWID
// table, it costs about as much as integrity_check (BenchmarkArchiveChecks).
// It returns the problems found, none when the file is sound.
func (db *DB) QuickCheck(ctx context.Context) ([]string, error) {
	return db.check(ctx, "quick_check")
}

// IntegrityCheck runs SQLite's full `PRAGMA integrity_check` (indexes
// against their tables too) and returns the problems found.
func (db *DB) IntegrityCheck(ctx context.Context) ([]string, error) {
	return db.check(ctx, "integrity_check")
}

func (db *DB) check(ctx context.Context, pragma string) ([]string, error) {
	problems, err := checkHandle(ctx, db.r, pragma)
	if err != nil && IsDamaged(err) {
		// SQLite gave up before listing problems: that is the problem.
		return []string{err.Error()}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w", pragma, db.path, err)
	}
	return problems, nil
}

// checkHandle runs an integrity pragma; "ok" as the only row means sound.
func checkHandle(ctx context.Context, h *sql.DB, pragma string) ([]string, error) {
	rows, err := h.QueryContext(ctx, "PRAGMA "+pragma)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		if s == "ok" {
			continue
		}
		// One row may carry many problems, a line each, under a
		// "*** in database main ***" heading.
		for _, line := range strings.Split(s, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "*** in database") {
				out = append(out, line)
			}
		}
	}
	return out, rows.Err()
}
