package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"niuma/engine"
	"niuma/storage"
)

// doctorReport is what `niuma doctor` finds (its --json shape).
type doctorReport struct {
	Home    string `json:"home"`
	Archive string `json:"archive"`
	Size    int64  `json:"size_bytes"`
	// Status: "ok", "damaged" (SQLite finds it malformed or cut short),
	// "refused" (empty, missing or not Niuma's while run folders exist),
	// "old" (a schema this build upgrades on its next write), or "new"
	// (no archive and no run folders yet).
	Status        string         `json:"status"`
	Problems      []string       `json:"problems,omitempty"`
	SchemaVersion int            `json:"schema_version"`
	KnownVersion  int            `json:"known_schema_version"`
	Runs          int            `json:"runs"`
	RunFolders    int            `json:"run_folders"`
	Unregistered  []string       `json:"folders_without_run"`
	Missing       []string       `json:"runs_without_folder"`
	Backups       []doctorBackup `json:"backups"`
	Advice        string         `json:"advice"`
	// Marked: when an engine marked the archive damaged ("" if none).
	Marked string `json:"marked_damaged,omitempty"`
	// Processes says how a local attempt's processes are found, limited
	// and ended: by a cgroup per attempt (which layout, what it
	// enforces) or by the token scan, and why.
	Processes string `json:"processes"`
	// Cgroups: a cgroup per attempt is in force.
	Cgroups bool `json:"cgroups"`
	// Machine says who places this Niuma's runs: it alone (a single
	// user), or the machine service every user of the machine shares,
	// and whether it answers.
	Machine string `json:"machine"`
}

type doctorBackup struct {
	Path string    `json:"path"`
	Time time.Time `json:"time"`
	Size int64     `json:"size_bytes"`
	// Checked: integrity_check was run on it (the newest only, unless
	// repairing); Good: it passed.
	Checked bool `json:"checked"`
	Good    bool `json:"good"`
}

func (c *cli) doctor(ctx context.Context, args []string) error {
	fs := c.flags("doctor")
	repair := fs.Bool("repair", false, "restore the newest good backup over a damaged archive and register the run folders it lacks")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	home, err := Home()
	if err != nil {
		return err
	}
	if *repair {
		return c.doctorRepair(ctx, home)
	}
	rep, err := diagnose(ctx, home, false)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(c.out, rep); err != nil {
			return err
		}
	} else {
		printDoctor(c, rep)
	}
	if rep.Status == "damaged" || rep.Status == "refused" || rep.Marked != "" {
		return exitError{code: 1}
	}
	return nil
}

// diagnose looks at a data directory without writing to it: the
// archive's full integrity_check, the run folders against the rows, the
// backups (the newest checked, or all when checkAll).
func diagnose(ctx context.Context, home string, checkAll bool) (doctorReport, error) {
	rep := doctorReport{Home: home, Archive: dbPath(home), KnownVersion: storage.LatestSchemaVersion()}
	lx := localExecutor()
	rep.Processes, rep.Cgroups = lx.Mode(), lx.Cgroups != nil
	rep.Machine = machineMode(ctx)
	if st, err := os.Stat(rep.Archive); err == nil {
		rep.Size = st.Size()
	}
	folders, err := engine.RunFolders(home)
	if err != nil {
		return rep, err
	}
	rep.RunFolders = len(folders)

	db, err := storage.OpenReadOnly(rep.Archive)
	switch {
	case err == nil:
		defer db.Close()
		rep.Status = "ok"
		rep.SchemaVersion = rep.KnownVersion
		problems, err := db.IntegrityCheck(ctx)
		if err != nil {
			return rep, err
		}
		if len(problems) > 0 {
			rep.Status, rep.Problems = "damaged", problems
			break
		}
		f, err := engine.CheckFolders(ctx, db, home)
		if err != nil {
			if storage.IsDamaged(err) {
				rep.Status, rep.Problems = "damaged", []string{err.Error()}
				break
			}
			return rep, err
		}
		rep.Unregistered, rep.Missing = f.Unregistered, f.Missing
		dirs, err := db.RunDirs(ctx)
		if err != nil {
			return rep, err
		}
		rep.Runs = len(dirs)
	case errors.Is(err, storage.ErrArchiveMissing) && len(folders) == 0:
		rep.Status = "new"
	case errors.Is(err, storage.ErrSchemaOld):
		rep.Status = "old"
		if problems, cerr := storage.CheckFile(ctx, rep.Archive); cerr == nil && len(problems) > 0 {
			rep.Status, rep.Problems = "damaged", problems
		}
	case storage.IsDamaged(err):
		rep.Status, rep.Problems = "damaged", []string{err.Error()}
	case errors.Is(err, storage.ErrArchiveMissing), errors.Is(err, storage.ErrArchiveEmpty):
		if len(folders) == 0 {
			rep.Status = "new"
			break
		}
		rep.Status, rep.Problems = "refused", []string{err.Error()}
	default:
		return rep, err
	}

	backups, err := storage.ListBackups(engine.BackupDir(home))
	if err != nil {
		return rep, err
	}
	for i, b := range backups {
		bf := doctorBackup{Path: b.Path, Time: b.Time, Size: b.Size}
		if i == 0 || checkAll {
			problems, err := storage.CheckFile(ctx, b.Path)
			if err != nil {
				return rep, err
			}
			bf.Checked, bf.Good = true, len(problems) == 0
		}
		rep.Backups = append(rep.Backups, bf)
	}
	if mark, err := os.ReadFile(engine.DamagedMark(home)); err == nil {
		rep.Marked = firstLine(string(mark))
		if rep.Status == "ok" {
			rep.Problems = append(rep.Problems, "an engine found it damaged ("+rep.Marked+", see "+engine.DamagedMark(home)+"), but integrity_check passes now")
		}
	}
	rep.Advice = doctorAdvice(rep)
	return rep, nil
}

func doctorAdvice(rep doctorReport) string {
	if rep.Status == "ok" && rep.Marked != "" {
		return "run `niuma doctor --repair`: the archive passes integrity_check, so it is kept and only the mark is removed"
	}
	switch rep.Status {
	case "damaged", "refused":
		if len(rep.Backups) == 0 {
			return "there is no backup to restore: the archive is left as it is; copy it away and see https://sqlite.org/recovery.html to salvage its rows"
		}
		return "run `niuma doctor --repair`: it keeps this archive aside, restores the newest good backup and registers the run folders written since"
	case "old":
		return "run a command that writes (e.g. `niuma engine --until-idle`) once to upgrade the archive"
	}
	var todo []string
	if len(rep.Unregistered) > 0 {
		todo = append(todo, fmt.Sprintf("%d run folder(s) have no run: the next `niuma engine` (or `niuma doctor --repair`) adopts or registers them, or moves them to %s with a note",
			len(rep.Unregistered), engine.OrphansDir(rep.Home)))
	}
	if len(rep.Missing) > 0 {
		todo = append(todo, fmt.Sprintf("%d run(s) have lost their folder (logs and outputs): `niuma show` still has their record", len(rep.Missing)))
	}
	if len(todo) == 0 {
		return "nothing to do"
	}
	return strings.Join(todo, "; ")
}

func printDoctor(c *cli, rep doctorReport) {
	fmt.Fprintf(c.out, "archive:   %s (%s, %d bytes)\n", rep.Archive, rep.Status, rep.Size)
	for i, p := range rep.Problems {
		if i == 10 {
			fmt.Fprintf(c.out, "           … and %d more problems\n", len(rep.Problems)-10)
			break
		}
		fmt.Fprintf(c.out, "  problem: %s\n", p)
	}
	if rep.Status == "ok" {
		fmt.Fprintf(c.out, "integrity: ok (PRAGMA integrity_check), schema version %d\n", rep.SchemaVersion)
		fmt.Fprintf(c.out, "runs:      %d in the archive, %d run folders\n", rep.Runs, rep.RunFolders)
		fmt.Fprintf(c.out, "orphans:   %d folder(s) without a run, %d run(s) without a folder\n", len(rep.Unregistered), len(rep.Missing))
		for _, id := range rep.Unregistered {
			fmt.Fprintf(c.out, "  folder without a run: %s\n", filepath.Join(rep.Home, "runs", id))
		}
		for _, id := range rep.Missing {
			fmt.Fprintf(c.out, "  run without a folder: %s\n", id)
		}
	} else {
		fmt.Fprintf(c.out, "runs:      %d run folders\n", rep.RunFolders)
	}
	fmt.Fprintf(c.out, "backups:   %d in %s\n", len(rep.Backups), engine.BackupDir(rep.Home))
	for _, b := range rep.Backups {
		verdict := "not checked"
		if b.Checked && b.Good {
			verdict = "good"
		} else if b.Checked {
			verdict = "DAMAGED"
		}
		fmt.Fprintf(c.out, "  %s  %s  %d bytes  %s\n", b.Time.Local().Format("2006-01-02 15:04:05"), filepath.Base(b.Path), b.Size, verdict)
	}
	fmt.Fprintf(c.out, "processes: %s\n", rep.Processes)
	fmt.Fprintf(c.out, "machine:   %s\n", rep.Machine)
	fmt.Fprintf(c.out, "advice:    %s\n", rep.Advice)
}

// doctorRepair restores the newest good backup over an archive that is
// damaged or refused (keeping that file aside) and registers the run
// folders the archive lacks. A sound archive is kept; only its folders
// are reconciled. No engine may own the data directory meanwhile.
func (c *cli) doctorRepair(ctx context.Context, home string) error {
	release, err := engine.HoldOwner(home)
	if errors.Is(err, engine.ErrOwned) {
		return fmt.Errorf("a niuma process owns %s (its pid is in %s): stop it (close the window, or end `niuma engine`) and run `niuma doctor --repair` again",
			home, filepath.Join(home, "engine.lock"))
	}
	if err != nil {
		return err
	}
	defer release()
	rep, err := diagnose(ctx, home, true)
	if err != nil {
		return err
	}
	why := "the archive had no row for it"
	if rep.Status == "damaged" || rep.Status == "refused" {
		var good *doctorBackup
		for i := range rep.Backups {
			if rep.Backups[i].Good {
				good = &rep.Backups[i]
				break
			}
		}
		if good == nil {
			return fmt.Errorf("the archive %s is %s and %s has no good backup to restore (%d checked): nothing was changed; copy the archive away and see https://sqlite.org/recovery.html to salvage its rows",
				rep.Archive, rep.Status, engine.BackupDir(home), len(rep.Backups))
		}
		aside, err := keepAside(home, time.Now().UTC().Format("20060102T150405Z"))
		if err != nil {
			return err
		}
		if fileExists(aside) {
			fmt.Fprintf(c.out, "kept the %s archive aside: %s\n", rep.Status, aside)
		}
		if err := restoreFile(good.Path, home); err != nil {
			return fmt.Errorf("restore %s as %s (the damaged archive is at %s): %w", good.Path, rep.Archive, aside, err)
		}
		fmt.Fprintf(c.out, "restored the backup of %s: %s\n", good.Time.Local().Format("2006-01-02 15:04:05"), good.Path)
		fmt.Fprintln(c.out, "  what changed after it in runs it holds (states, metrics) is not in it; runs submitted after it are registered from their folders")
		why = fmt.Sprintf("the archive was restored from the backup of %s", good.Time.Local().Format("2006-01-02 15:04"))
	}
	// The archive is now one that passed integrity_check (the sound one,
	// or the backup restored): an engine's mark no longer applies. (A
	// damaged archive's mark went aside with it.)
	if err := os.Remove(engine.DamagedMark(home)); err == nil {
		fmt.Fprintf(c.out, "removed the mark %s: the archive passes integrity_check\n", engine.DamagedMark(home))
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	db, err := openArchive(home)
	if err != nil {
		return err
	}
	defer db.Close()
	outs, err := engine.ReconcileFolders(ctx, db, home, why)
	for _, o := range outs {
		switch o.Action {
		case engine.FolderAdopted:
			fmt.Fprintf(c.out, "adopted run %s: %s; it runs as submitted\n", o.ID, o.Why)
		case engine.FolderRegistered:
			fmt.Fprintf(c.out, "registered run %s as failed: %s\n", o.ID, o.Why)
			switch {
			case o.PointsErr != nil:
				fmt.Fprintf(c.out, "  read %d metric point(s) of it again from its folder, then: %v\n", o.Points, oneLine(o.PointsErr))
			case o.Points > 0:
				fmt.Fprintf(c.out, "  read its %d metric point(s) again from its folder\n", o.Points)
			}
		case engine.FolderMoved:
			fmt.Fprintf(c.out, "moved folder %s to %s: %s (see its NOTE.txt)\n", o.ID, o.MovedTo, o.Why)
		}
	}
	if err != nil {
		return err
	}
	problems, err := db.IntegrityCheck(ctx)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("the repaired archive %s still fails integrity_check: %s", rep.Archive, problems[0])
	}

	dirs, err := db.RunDirs(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "archive ok: %d runs, integrity_check ok\n", len(dirs))
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
