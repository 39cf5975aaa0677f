package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// BackupsKept is how many backups a backup directory keeps: making one
// more removes the oldest beyond this.
const BackupsKept = 7

// BackupInterval is the least time between two daily backups (BackupDaily).
const BackupInterval = 24 * time.Hour

// Backup file names: niuma-<UTC time>.db, so that names sort by time.
const (
	backupPrefix = "niuma-"
	backupSuffix = ".db"
	backupTime   = "20060102T150405.000000000Z"
)

// BackupFile is one backup of the archive.
type BackupFile struct {
	Path string
	Time time.Time // when it was taken (from its name)
	Size int64
}

// ListBackups returns the backups in dir, newest first. A missing dir has
// none.
func ListBackups(dir string) ([]BackupFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list backups in %s: %w", dir, err)
	}
	var out []BackupFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, backupPrefix) || !strings.HasSuffix(name, backupSuffix) {
			continue
		}
		t, err := time.Parse(backupTime, strings.TrimSuffix(strings.TrimPrefix(name, backupPrefix), backupSuffix))
		if err != nil {
			continue // not one of ours
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, BackupFile{Path: filepath.Join(dir, name), Time: t, Size: info.Size()})
	}
	slices.SortFunc(out, func(a, b BackupFile) int { return b.Time.Compare(a.Time) })
	return out, nil
}

// Backup writes a consistent copy of the archive into dir with SQLite's
// online backup API (writers go on meanwhile), atomically: into a
// temporary file that is synced and then renamed. It keeps the newest
// BackupsKept backups and removes older ones.
func (db *DB) Backup(ctx context.Context, dir string) (BackupFile, error) {
	return backupTo(ctx, db.r, dir, time.Now())
}

// BackupDaily is Backup unless the newest backup in dir is less than
// BackupInterval old (made reports which).
func (db *DB) BackupDaily(ctx context.Context, dir string, now time.Time) (b BackupFile, made bool, err error) {
	have, err := ListBackups(dir)
	if err != nil {
		return BackupFile{}, false, err
	}
	if len(have) > 0 && now.Sub(have[0].Time) < BackupInterval && !have[0].Time.After(now) {
		return have[0], false, nil
	}
	b, err = backupTo(ctx, db.r, dir, now)
	return b, err == nil, err
}

// backupTo copies the database behind src into a new backup in dir.
func backupTo(ctx context.Context, src *sql.DB, dir string, now time.Time) (BackupFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return BackupFile{}, fmt.Errorf("create backup directory: %w", err)
	}
	name := backupPrefix + now.UTC().Format(backupTime) + backupSuffix
	final := filepath.Join(dir, name)
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := copyDatabase(ctx, src, tmp); err != nil {
		_ = os.Remove(tmp)
		_ = os.Remove(tmp + "-journal")
		return BackupFile{}, fmt.Errorf("back up the archive to %s: %w", final, err)
	}
	if err := syncFile(tmp); err != nil {
		_ = os.Remove(tmp)
		return BackupFile{}, fmt.Errorf("back up the archive to %s: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return BackupFile{}, fmt.Errorf("back up the archive to %s: %w", final, err)
	}
	if err := syncDir(dir); err != nil {
		return BackupFile{}, fmt.Errorf("back up the archive to %s: %w", final, err)
	}
	info, err := os.Stat(final)
	if err != nil {
		return BackupFile{}, fmt.Errorf("back up the archive to %s: %w", final, err)
	}
	if err := pruneBackups(dir); err != nil {
		return BackupFile{}, err
	}
	return BackupFile{Path: final, Time: now.UTC(), Size: info.Size()}, nil
}

// copyDatabase runs sqlite3_backup from src's main database into a new
// file at dst.
func copyDatabase(ctx context.Context, src *sql.DB, dst string) error {
	sc, err := src.Conn(ctx)
	if err != nil {
		return err
	}
	defer sc.Close()
	ddb, err := sql.Open("sqlite3", "file:"+filepath.ToSlash(dst)+"?_journal_mode=DELETE")
	if err != nil {
		return err
	}
	defer ddb.Close()
	dc, err := ddb.Conn(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	return dc.Raw(func(d any) error {
		return sc.Raw(func(s any) error { return backupRaw(d, s) })
	})
}

// pruneBackups removes the backups beyond the newest BackupsKept.
func pruneBackups(dir string) error {
	have, err := ListBackups(dir)
	if err != nil {
		return err
	}
	for i := BackupsKept; i < len(have); i++ {
		if err := os.Remove(have[i].Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old backup %s: %w", have[i].Path, err)
		}
	}
	return nil
}

// CheckFile runs the full integrity_check on a database file (a backup,
// or an archive that was set aside) through a read-only connection, and
// returns the problems found: none when it is sound and is Niuma's.
func CheckFile(ctx context.Context, path string) ([]string, error) {
	pr, err := probe(path)
	switch {
	case err != nil:
		return []string{err.Error()}, nil
	case !pr.exists:
		return nil, fmt.Errorf("check %s: no such file", path)
	case pr.tables == 0:
		return []string{"it holds no tables"}, nil
	}
	h, err := sql.Open("sqlite3", roDSN(path))
	if err != nil {
		return nil, err
	}
	defer h.Close()
	problems, err := checkHandle(ctx, h, "integrity_check")
	if err != nil {
		return []string{classify(path, err).Error()}, nil
	}
	return problems, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
