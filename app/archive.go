package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/executor/local"
	"niuma/storage"
)

// dbPath is the archive of a data directory.
func dbPath(home string) string { return filepath.Join(home, "niuma.db") }

// openArchive opens a data directory's archive for writing. When the
// directory has run folders the archive must hold data: a missing or
// empty file is refused rather than started afresh (which would leave the
// folders' runs out). Migrations are preceded by a backup.
func openArchive(home string) (*storage.DB, error) {
	folders, err := engine.RunFolders(home)
	if err != nil {
		return nil, err
	}
	if mark, err := os.ReadFile(engine.DamagedMark(home)); err == nil {
		return nil, fmt.Errorf("%w: %s: an engine found it damaged and marked it so in %s (%s); no command writes to it until it is repaired: %s",
			storage.ErrDamaged, dbPath(home), engine.DamagedMark(home), firstLine(string(mark)), storage.RepairHint)
	}
	db, err := storage.OpenWith(dbPath(home), storage.OpenOptions{
		ExpectData: len(folders) > 0,
		BackupDir:  engine.BackupDir(home),
	})
	if err != nil {
		return nil, explainArchive(err, home, len(folders))
	}
	return db, nil
}

// explainArchive turns a refused or damaged archive into what the user
// reads: the file, the run folders it leaves out, and what to do.
func explainArchive(err error, home string, folders int) error {
	if !storage.IsDamaged(err) && !errors.Is(err, storage.ErrArchiveEmpty) && !errors.Is(err, storage.ErrArchiveMissing) {
		return err
	}
	runs := filepath.Join(home, "runs")
	return fmt.Errorf("the archive %s cannot be used (%w); %s holds %d run folder(s) it would leave out: %s",
		dbPath(home), err, runs, folders, storage.RepairHint)
}

// openReader opens a data directory for commands that only read (ls,
// show, logs): the archive read-only, an engine over it with no backend
// but the host's. Reading needs neither free space nor the write lock. A
// data directory without an archive yet, or whose schema is older than
// this build's, is opened for writing instead (creating or upgrading it);
// when that fails too the error says why and what to do.
func openReader(logOut io.Writer) (*stack, error) {
	home, err := Home()
	if err != nil {
		return nil, err
	}
	folders, err := engine.RunFolders(home)
	if err != nil {
		return nil, err
	}
	db, err := storage.OpenReadOnly(dbPath(home))
	switch {
	case err == nil:
	case errors.Is(err, storage.ErrArchiveMissing) && len(folders) == 0:
		return open(logOut) // a new data directory
	case errors.Is(err, storage.ErrSchemaOld):
		s, werr := open(logOut)
		if werr != nil {
			return nil, fmt.Errorf("%w (upgrading it failed: %v)", err, werr)
		}
		return s, nil
	default:
		return nil, explainArchive(err, home, len(folders))
	}
	if mark, err := os.ReadFile(engine.DamagedMark(home)); err == nil {
		fmt.Fprintf(logOut, "niuma: warning: an engine found this archive damaged (%s); what it shows may be incomplete: run `niuma doctor`\n", firstLine(string(mark)))
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng, err := engine.New(engine.Options{Home: home, Store: db, Executors: []executor.Executor{local.New()}, Logger: logger})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &stack{home: home, store: db, engine: eng, logger: logger}, nil
}

// keepAside moves the archive's files (with its write-ahead log, shared
// memory and an engine's mark of it as damaged) into a folder of their own under home/damaged, and
// returns where the database went. Nothing is deleted.
func keepAside(home, stamp string) (string, error) {
	dir := filepath.Join(home, "damaged", stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("keep the damaged archive aside: %w", err)
	}
	for _, suffix := range []string{"", "-wal", "-shm", ".damaged"} {
		src := dbPath(home) + suffix
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.Rename(src, filepath.Join(dir, "niuma.db"+suffix)); err != nil {
			return "", fmt.Errorf("keep the damaged archive aside in %s: %w", dir, err)
		}
	}
	return filepath.Join(dir, "niuma.db"), nil
}

// restoreFile copies a backup into place as the archive: into a temporary
// file in the data directory, synced, then renamed.
func restoreFile(backup, home string) error {
	tmp := filepath.Join(home, ".niuma.db.restore")
	in, err := os.Open(backup)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, cerr := io.Copy(out, in)
	serr := out.Sync()
	xerr := out.Close()
	if err := errors.Join(cerr, serr, xerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dbPath(home)); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(home)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// whileDriving is ctx, also cancelled when the engine driving from this
// process gives up (a damaged archive it refused to own): a wait for runs
// then ends with driveErr's reason instead of waiting for nobody.
func (s *stack) whileDriving(ctx context.Context, engineDone <-chan struct{}) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-engineDone:
			if s.driveErr() != nil {
				cancel()
			}
		case <-wctx.Done():
		}
	}()
	return wctx, cancel
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
