package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"niuma/engine/template"
	"niuma/metrics"
	"niuma/storage"
)

// A run folder is written before its row (Submit), so a process killed in
// between leaves a folder the archive does not know; an archive restored
// from a backup does not know the folders written since. This file finds
// such folders and either registers them or moves them aside with a note.
// Nothing is deleted.

// runRecordFile holds, in a run folder, the run and stage rows Submit is
// about to store: with it a folder whose row never got stored is adopted
// exactly as it was submitted.
const runRecordFile = "run.json"

// runRecord is the content of run.json.
type runRecord struct {
	Run    storage.Run     `json:"run"`
	Stages []storage.Stage `json:"stages"`
}

// runIDPattern is what newRunID makes; only folders named so are runs.
var runIDPattern = regexp.MustCompile(`^\d{8}-\d{6}-[0-9a-f]{6}$`)

// OrphansDir is where run folders that cannot be registered are moved,
// each with a NOTE.txt saying why.
func OrphansDir(home string) string { return filepath.Join(home, "orphans") }

// BackupDir is where the archive's backups are kept.
func BackupDir(home string) string { return filepath.Join(home, "backups") }

func submitLockPath(home string) string { return filepath.Join(home, "submit.lock") }

// holdSubmitLock is held (shared) by Submit from the moment it creates a
// run folder until its row is stored; the search for orphan folders holds
// it exclusively, so it never mistakes a folder being written for one left
// behind.
func holdSubmitLock(home string) (release func(), err error) {
	return flockFile(submitLockPath(home), syscall.LOCK_SH)
}

// excludeSubmits waits, until ctx ends, for the submissions in flight to
// finish and keeps new ones out until release.
func excludeSubmits(ctx context.Context, home string) (release func(), err error) {
	for {
		release, err := flockFile(submitLockPath(home), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return release, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func flockFile(path string, how int) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, err
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// writeRunRecord writes run.json atomically (a synced temporary file
// renamed into place), before the run's row is stored.
func writeRunRecord(dir string, run storage.Run, stages []storage.Stage) error {
	b, err := json.MarshalIndent(runRecord{Run: run, Stages: stages}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", runRecordFile, err)
	}
	tmp := filepath.Join(dir, "."+runRecordFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", runRecordFile, err)
	}
	_, werr := f.Write(append(b, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", runRecordFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, runRecordFile)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", runRecordFile, err)
	}
	return nil
}

func readRunRecord(dir string) (runRecord, error) {
	var rec runRecord
	b, err := os.ReadFile(filepath.Join(dir, runRecordFile))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("read %s: %w", runRecordFile, err)
	}
	if rec.Run.ID != filepath.Base(dir) {
		return rec, fmt.Errorf("%s names run %q, not the folder's %q", runRecordFile, rec.Run.ID, filepath.Base(dir))
	}
	return rec, nil
}

// Folders is how the run folders and the archive's rows match.
type Folders struct {
	// Unregistered are run folders under runs/ with no row (IDs, sorted).
	Unregistered []string
	// Missing are runs whose folder is gone (IDs, sorted).
	Missing []string
	// Total is the number of run folders under runs/.
	Total int
}

// CheckFolders compares the run folders under home/runs with the runs in
// the archive.
func CheckFolders(ctx context.Context, store *storage.DB, home string) (Folders, error) {
	dirs, err := store.RunDirs(ctx)
	if err != nil {
		return Folders{}, err
	}
	ids, err := RunFolders(home)
	if err != nil {
		return Folders{}, err
	}
	var f Folders
	f.Total = len(ids)
	for _, id := range ids {
		if _, ok := dirs[id]; !ok {
			f.Unregistered = append(f.Unregistered, id)
		}
	}
	for id, dir := range dirs {
		if dir == "" {
			continue // imported runs have no folder
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			f.Missing = append(f.Missing, id)
		}
	}
	slices.Sort(f.Missing)
	return f, nil
}

// RunFolders lists the IDs of the run folders under home/runs, sorted.
func RunFolders(home string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(home, "runs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list run folders: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && runIDPattern.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// FolderOutcome is what became of one unregistered run folder.
type FolderOutcome struct {
	ID string
	// Action: "adopted" (registered as submitted, it will run),
	// "registered" (registered as ended: it had started, and its stages'
	// record was lost), or "moved" (set aside to MovedTo with a note).
	Action  string
	MovedTo string
	Why     string
	// Points is how many metric points of a registered run were read
	// again from its logs and files; PointsErr why reading stopped, when
	// it did (the run stays registered either way).
	Points    int
	PointsErr error
}

// Folder outcome actions.
const (
	FolderAdopted    = "adopted"
	FolderRegistered = "registered"
	FolderMoved      = "moved"
)

// ReconcileFolders registers or sets aside every run folder the archive
// does not know, waiting for submissions in flight to finish first:
//
//   - a folder with run.json whose stages never started (Submit was
//     killed before storing the row) is adopted: stored as submitted, it
//     runs as if the submit had finished;
//   - a folder whose stages had started (the archive lost its row: it was
//     restored from a backup) is registered as failed, from run.json or
//     else from params.json and template.yaml, saying that its stages'
//     record was lost and its logs and outputs are in its folder; it is
//     never run again on its own;
//   - any other folder is moved to OrphansDir with a NOTE.txt.
//
// why says, in the registered runs' error, what lost the record.
func ReconcileFolders(ctx context.Context, store *storage.DB, home, why string) ([]FolderOutcome, error) {
	release, err := excludeSubmits(ctx, home)
	if err != nil {
		return nil, fmt.Errorf("wait for submissions in flight: %w", err)
	}
	defer release()
	f, err := CheckFolders(ctx, store, home)
	if err != nil {
		return nil, err
	}
	var out []FolderOutcome
	for _, id := range f.Unregistered {
		o, err := reconcileFolder(ctx, store, home, id, why)
		if err != nil {
			return out, fmt.Errorf("run folder %s: %w", filepath.Join(home, "runs", id), err)
		}
		out = append(out, o)
	}
	return out, nil
}

func reconcileFolder(ctx context.Context, store *storage.DB, home, id, why string) (FolderOutcome, error) {
	dir := filepath.Join(home, "runs", id)
	started := folderStarted(dir)
	rec, recErr := readRunRecord(dir)
	if recErr == nil {
		rec.Run.Dir = dir
	}
	switch {
	case recErr == nil && !started:
		rec.Run.State = storage.RunQueued
		if err := store.CreateRun(ctx, rec.Run, rec.Stages); err != nil {
			return FolderOutcome{}, fmt.Errorf("adopt: %w", err)
		}
		return FolderOutcome{ID: id, Action: FolderAdopted, Why: "its submission was interrupted before the run was stored"}, nil
	case started:
		if recErr != nil {
			r, stages, err := rebuildRecord(dir, id)
			if err != nil {
				return moveAside(home, id, fmt.Sprintf("it had started, but neither %s (%v) nor its params.json and template.yaml (%v) say what it was", runRecordFile, recErr, err))
			}
			rec = runRecord{Run: r, Stages: stages}
		}
		registerEnded(&rec, dir, why)
		if err := store.CreateRun(ctx, rec.Run, rec.Stages); err != nil {
			return FolderOutcome{}, fmt.Errorf("register: %w", err)
		}
		o := FolderOutcome{ID: id, Action: FolderRegistered, Why: rec.Run.Error}
		o.Points, o.PointsErr = rereadMetrics(ctx, store, rec, dir)
		return o, nil
	default:
		return moveAside(home, id, fmt.Sprintf("its submission was interrupted before it was recorded completely (%s: %v); nothing of it ran", runRecordFile, recErr))
	}
}

// folderStarted reports whether any stage of the run in dir has written an
// attempt's log.
func folderStarted(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*", "attempt-*"))
	return len(m) > 0
}

// registerEnded turns a record into a failed run whose stages say what
// their folder holds.
func registerEnded(rec *runRecord, dir, why string) {
	now := time.Now()
	rec.Run.State = storage.RunFailed
	rec.Run.Error = fmt.Sprintf("its record was lost (%s); it was registered again from its folder, where its logs and outputs are", why)
	rec.Run.FinishedAt = now
	for i := range rec.Stages {
		s := &rec.Stages[i]
		logs, _ := filepath.Glob(filepath.Join(dir, s.Name, "attempt-*.stdout.log"))
		s.Attempts = len(logs)
		if len(logs) > 0 {
			s.State = storage.StageFailed
			s.Reason = "its record was lost; see its logs (niuma logs)"
		} else {
			s.State = storage.StageCancelled
			s.Reason = "its record was lost before it ran"
		}
		s.FinishedAt = now
	}
}

// rereadMetrics reads a registered run's metric points again from what
// its folder holds, as the engine read them while it ran: every attempt's
// stdout and stderr, with the stage's text rules, and for the latest
// attempt of each stage its metrics.jsonl and the TensorBoard and CSV
// files in the stage's folder, those written after its previous attempt
// ended. Files in the run's folder (and the template's own locations)
// are not read: with the attempts' start times lost, nothing tells which
// stage or attempt wrote them. It returns how many points it stored.
func rereadMetrics(ctx context.Context, store *storage.DB, rec runRecord, dir string) (int, error) {
	t, err := template.Parse(rec.Run.TemplateSource, []byte(rec.Run.TemplateYAML))
	if err != nil {
		return 0, fmt.Errorf("its template: %w", err)
	}
	w := metrics.NewWriter(store, metrics.WriterOptions{})
	var stored atomic.Int64
	var errs []error
	for _, st := range t.Stages {
		stageDir := filepath.Join(dir, st.Name)
		logs, _ := filepath.Glob(filepath.Join(stageDir, "attempt-*.stdout.log"))
		var numbers []int
		for _, l := range logs {
			var n int
			if _, err := fmt.Sscanf(filepath.Base(l), "attempt-%d.stdout.log", &n); err == nil && n > 0 {
				numbers = append(numbers, n)
			}
		}
		slices.Sort(numbers)
		for i, n := range numbers {
			stdout, stderr := stageLogPaths(dir, st.Name, n)
			c := &metrics.Collector{Store: store, Writer: w, RunID: rec.Run.ID, Stage: st.Name, Attempt: n,
				RunDir: dir, StageDir: stageDir, StageFolder: stageFolder(dir), Sources: metrics.Sources{Rules: st.Metrics}, Files: metrics.NoFiles,
				Stdout: stdout, Stderr: stderr,
				OnPoints: func(pts []storage.MetricPoint) { stored.Add(int64(len(pts))) }}
			if i == len(numbers)-1 {
				c.Files = metrics.StageFiles
				if i > 0 { // files older than the previous attempt's end are its
					prev, _ := stageLogPaths(dir, st.Name, numbers[i-1])
					if fi, err := os.Stat(prev); err == nil {
						c.Since = fi.ModTime()
					}
				}
			}
			if err := c.Start(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stage %s attempt %d: %w", st.Name, n, err))
				continue
			}
			c.Stop()
			if err := c.Stored(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stage %s attempt %d: %w", st.Name, n, err))
			}
		}
	}
	if err := w.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	return int(stored.Load()), errors.Join(errs...)
}

// rebuildRecord makes a run's rows from what its folder holds without
// run.json: the template snapshot and the parameters.
func rebuildRecord(dir, id string) (storage.Run, []storage.Stage, error) {
	yaml, err := os.ReadFile(filepath.Join(dir, "template.yaml"))
	if err != nil {
		return storage.Run{}, nil, err
	}
	t, err := template.Parse(filepath.Join(dir, "template.yaml"), yaml)
	if err != nil {
		return storage.Run{}, nil, err
	}
	params, err := os.ReadFile(filepath.Join(dir, "params.json"))
	if err != nil {
		return storage.Run{}, nil, err
	}
	values, err := template.ValuesFromJSON(t, params)
	if err != nil {
		return storage.Run{}, nil, err
	}
	created, err := time.ParseInLocation("20060102-150405", id[:15], time.UTC)
	if err != nil {
		return storage.Run{}, nil, err
	}
	run := storage.Run{
		ID: id, Template: t.Name, TemplateVersion: t.Version, TemplateSource: "snapshot in its folder",
		TemplateYAML: string(yaml), Params: strings.TrimSpace(string(params)), Executor: t.Runtime.Kind,
		Dir: dir, CreatedAt: created,
	}
	var stages []storage.Stage
	for i, name := range t.Order() {
		st, _ := t.Stage(name)
		gpus, mem, _ := t.NeedsOf(st, values)
		stages = append(stages, storage.Stage{RunID: id, Name: name, Position: i, Needs: st.Needs, GPUs: gpus,
			GPUMemoryMiB: mem, Retries: st.Retries, TimeoutSec: int64(st.Timeout / time.Second)})
	}
	return run, stages, nil
}

// moveAside moves a run folder to OrphansDir with a NOTE.txt saying why.
func moveAside(home, id, why string) (FolderOutcome, error) {
	dst := filepath.Join(OrphansDir(home), id)
	if err := os.MkdirAll(OrphansDir(home), 0o755); err != nil {
		return FolderOutcome{}, err
	}
	if _, err := os.Stat(dst); err == nil {
		dst += "-" + time.Now().UTC().Format("20060102T150405")
	}
	if err := os.Rename(filepath.Join(home, "runs", id), dst); err != nil {
		return FolderOutcome{}, fmt.Errorf("move aside: %w", err)
	}
	note := fmt.Sprintf("Niuma moved this run folder here from %s on %s because %s.\n"+
		"It is not in the archive. Nothing was deleted: look through it, then remove it, or move it back\n"+
		"to runs/ with a run.json to have it registered.\n",
		filepath.Join(home, "runs", id), time.Now().Format(time.RFC3339), why)
	if err := os.WriteFile(filepath.Join(dst, "NOTE.txt"), []byte(note), 0o644); err != nil {
		return FolderOutcome{}, fmt.Errorf("write the note of %s: %w", dst, err)
	}
	return FolderOutcome{ID: id, Action: FolderMoved, MovedTo: dst, Why: why}, nil
}
