package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"niuma/engine/template"
	"niuma/storage"
)

// ArchiveEntry is one row of the window's runs archive: the run and the
// best value of its template's objective.
type ArchiveEntry struct {
	RunInfo
	// Objective is the metric the run's template judges it by ("" when
	// the template declares none), Goal "min" or "max".
	Objective, Goal string
	// Best is the best value the objective reached, valid when HasBest.
	Best    float64
	HasBest bool
}

// Archive lists every run, newest first, with the best value of the
// objective its template snapshot (template.yaml in the run folder)
// declares. A run whose snapshot is missing or unreadable is listed
// without an objective rather than failing the whole list.
func (e *Engine) Archive(ctx context.Context) ([]ArchiveEntry, error) {
	runs, err := e.Runs(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("list runs for the archive: %w", err)
	}
	out := make([]ArchiveEntry, len(runs))
	for i, r := range runs {
		if out[i], err = e.Entry(ctx, r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Entry is one run as the archive lists it: with the objective its
// template declares and the best value its stages reported of it.
func (e *Engine) Entry(ctx context.Context, r RunInfo) (ArchiveEntry, error) {
	out := ArchiveEntry{RunInfo: r}
	obj, ok := snapshotObjective(r.Dir)
	if !ok {
		return out, nil
	}
	var err error
	out.Objective, out.Goal = obj.Metric, obj.Goal
	if out.Best, out.HasBest, err = e.bestObjective(ctx, r.ID, obj); err != nil {
		return out, fmt.Errorf("best %s of run %s: %w", obj.Metric, r.ID, err)
	}
	return out, nil
}

// snapshotObjective reads the objective from a run's template snapshot.
func snapshotObjective(dir string) (template.Objective, bool) {
	if dir == "" {
		return template.Objective{}, false
	}
	snap := filepath.Join(dir, "template.yaml")
	data, err := os.ReadFile(snap)
	if err != nil {
		return template.Objective{}, false
	}
	t, err := template.Parse(snap, data)
	if err != nil || t.Objective.Metric == "" {
		return template.Objective{}, false
	}
	return t.Objective, true
}

// bestObjective is the best value of obj over the stages that report it.
func (e *Engine) bestObjective(ctx context.Context, runID string, obj template.Objective) (float64, bool, error) {
	last, err := e.store.LastMetrics(ctx, runID)
	if err != nil {
		return 0, false, err
	}
	best, has := 0.0, false
	for _, l := range last {
		if l.Key != obj.Metric {
			continue
		}
		pts, err := e.store.MetricSeries(ctx, runID, l.Stage, l.Key)
		if err != nil {
			return 0, false, err
		}
		for _, p := range pts {
			if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
				continue
			}
			if !has || (obj.Goal == "max" && p.Value > best) || (obj.Goal != "max" && p.Value < best) {
				best, has = p.Value, true
			}
		}
	}
	return best, has, nil
}

// DeleteRun removes a finished run from the archive, with its stages,
// attempts, metrics and events, and its run folder (logs, outputs, the
// template snapshot). It refuses a run that has not finished: cancel it
// first.
func (e *Engine) DeleteRun(ctx context.Context, id string) error {
	r, err := e.Run(ctx, id)
	if err != nil {
		return err
	}
	if !r.State.Done() {
		return fmt.Errorf("run %s is %s: cancel it and wait for it to stop before deleting it", r.ID, r.State)
	}
	if err := e.store.DeleteRun(ctx, r.ID); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("run %s is already gone", r.ID)
		}
		return fmt.Errorf("delete run %s: %w", r.ID, err)
	}
	// Only a folder under the data directory's runs/ is ours to remove.
	if rel, err := filepath.Rel(filepath.Join(e.opts.Home, "runs"), r.Dir); r.Dir != "" && err == nil && rel != "." && !filepath.IsAbs(rel) && rel != ".." && !startsWithDotDot(rel) {
		if err := os.RemoveAll(r.Dir); err != nil {
			return fmt.Errorf("run %s left the archive but its folder %s remains (%w): remove it by hand", r.ID, r.Dir, err)
		}
	}
	return nil
}

func startsWithDotDot(rel string) bool {
	return len(rel) >= 3 && rel[:3] == ".."+string(filepath.Separator)
}

// takeArchive is what the owner does with the archive before it drives
// anything: SQLite's quick_check (a damaged archive is refused, so that no
// run's state is written over it), a backup when the newest is a day old,
// and the run folders the archive does not know registered or set aside
// (ReconcileFolders), each logged.
func (e *Engine) takeArchive(ctx context.Context) error {
	problems, err := e.store.QuickCheck(ctx)
	if err != nil {
		return fmt.Errorf("check the archive: %w", err)
	}
	if len(problems) > 0 {
		err := fmt.Errorf("%w: %s: SQLite's quick_check found %d problem(s), the first: %s; Niuma will not write to it: %s",
			storage.ErrDamaged, e.store.Path(), len(problems), problems[0], storage.RepairHint)
		// Other processes open it too, without checking every page:
		// the mark tells them (see DamagedMark).
		note := fmt.Sprintf("%s\n%s\n", time.Now().Format(time.RFC3339), err)
		if werr := os.WriteFile(DamagedMark(e.opts.Home), []byte(note), 0o644); werr != nil {
			e.log.Warn("could not mark the archive damaged", "err", werr)
		}
		return err
	}
	switch b, made, err := e.store.BackupDaily(ctx, BackupDir(e.opts.Home), time.Now()); {
	case err != nil:
		e.log.Warn("could not back up the archive; runs go on, and the next start tries again", "err", err)
	case made:
		e.log.Info("backed up the archive", "backup", b.Path)
	}
	outs, err := ReconcileFolders(ctx, e.store, e.opts.Home, "the archive had no row for it")
	for _, o := range outs {
		switch o.Action {
		case FolderAdopted:
			e.log.Warn("adopted a run folder the archive did not know; it runs as submitted", "run", o.ID, "why", o.Why)
		case FolderRegistered:
			e.log.Warn("registered a run folder the archive did not know, as failed", "run", o.ID, "why", o.Why,
				"points_read_again", o.Points, "points_err", o.PointsErr)
		case FolderMoved:
			e.log.Warn("moved aside a run folder the archive did not know", "run", o.ID, "to", o.MovedTo, "why", o.Why)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.log.Error("could not reconcile the run folders with the archive; `niuma doctor` lists them", "err", err)
	}
	return nil
}

// DamagedMark is the file an engine writes when it finds the archive
// damaged (what it found, and when); while it is there no command writes
// to the archive. `niuma doctor --repair` removes it once the archive it
// leaves passes integrity_check.
func DamagedMark(home string) string { return filepath.Join(home, "niuma.db.damaged") }

// ErrOwned is returned by HoldOwner when another process owns the data
// directory.
var ErrOwned = errLocked

// HoldOwner makes the calling process the owner of a data directory
// without driving runs (repairing its archive: no engine may write to it
// meanwhile). It fails at once with ErrOwned while another process owns
// it; release gives it up.
func HoldOwner(home string) (release func(), err error) {
	l, err := tryLock(lockPath(home))
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
