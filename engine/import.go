package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"niuma/metrics"
	"niuma/storage"
)

// ImportedRun is one run folder of a TensorBoard logdir brought into the
// archive.
type ImportedRun struct {
	Folder  string         `json:"folder"`
	RunID   string         `json:"run_id"`
	Points  int            `json:"points"`
	Params  map[string]any `json:"params,omitempty"`
	Skipped string         `json:"skipped,omitempty"` // why it was not imported ("" when it was)
}

// importStage is the one stage an imported run has.
const importStage = "tensorboard"

// ImportTensorBoard brings a TensorBoard logdir into the archive: every
// folder directly in logdir that holds event files (at any depth) becomes a
// finished run, and so does logdir itself when it holds event files
// directly. A run's scalars are its metrics, keyed by tag with the
// subfolder as a prefix (train/epoch_loss, validation/epoch_loss), each
// point kept (also points that share a step), with the events' own wall
// times; its hyperparameters (the hparams plugin's data, when present) are
// its parameters. A folder imported before (same files, same sizes) is
// skipped and says which run has it. progress, when set, is told each
// folder as it starts.
func (e *Engine) ImportTensorBoard(ctx context.Context, logdir string, progress func(folder string)) ([]ImportedRun, error) {
	abs, err := filepath.Abs(logdir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", logdir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("import %s: not a folder; give the logdir TensorBoard was started with", logdir)
	}
	runs, err := tbRunFolders(abs)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("import %s: no TensorBoard event files (events.out.tfevents.*) in it", logdir)
	}
	var out []ImportedRun
	for _, rf := range runs {
		if progress != nil {
			progress(rf.name)
		}
		ir, err := e.importRun(ctx, abs, rf)
		if err != nil {
			return out, err
		}
		out = append(out, ir)
	}
	return out, nil
}

type tbRunFolder struct {
	name  string   // relative to the logdir ("." for the logdir itself)
	files []string // event files, absolute
}

// tbRunFolders groups a logdir's event files by run folder: the first path
// component below the logdir, or the logdir itself for files directly in it.
func tbRunFolders(logdir string) ([]tbRunFolder, error) {
	byRun := map[string][]string{}
	err := filepath.WalkDir(logdir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.Contains(d.Name(), "tfevents") {
			return nil
		}
		rel, _ := filepath.Rel(logdir, p)
		name := "."
		if i := strings.IndexByte(filepath.ToSlash(rel), '/'); i >= 0 {
			name = filepath.ToSlash(rel)[:i]
		}
		byRun[name] = append(byRun[name], p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the logdir: %w", err)
	}
	var out []tbRunFolder
	for name, files := range byRun {
		sort.Strings(files)
		out = append(out, tbRunFolder{name, files})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func (e *Engine) importRun(ctx context.Context, logdir string, rf tbRunFolder) (ImportedRun, error) {
	root := filepath.Join(logdir, rf.name)
	ir := ImportedRun{Folder: rf.name}
	// The fingerprint of an import: the folder and its files' names and
	// sizes, so importing the same logdir twice adds nothing.
	h := sha256.New()
	fmt.Fprintln(h, "tensorboard-import", root)
	for _, f := range rf.files {
		fi, err := os.Stat(f)
		if err != nil {
			return ir, err
		}
		fmt.Fprintln(h, f, fi.Size())
	}
	fp := "tensorboard:" + hex.EncodeToString(h.Sum(nil))
	if prev, ok, err := e.FindDuplicate(ctx, fp); err != nil {
		return ir, err
	} else if ok {
		ir.RunID, ir.Skipped = prev.ID, "already imported as run "+prev.ID
		return ir, nil
	}

	var (
		pts         []storage.MetricPoint
		first, last time.Time
		params      = map[string]any{}
	)
	for _, f := range rf.files {
		b, err := os.ReadFile(f)
		if err != nil {
			return ir, fmt.Errorf("import %s: %w", f, err)
		}
		for k, v := range metrics.HParams(b) {
			params[k] = v
		}
		scalars, rerr := metrics.ReadEventFile(b)
		if rerr != nil && !errors.Is(rerr, metrics.ErrCorruptData) && len(scalars) == 0 {
			e.log.Warn("a TensorBoard event file is damaged; its readable scalars are imported", "file", f, "err", rerr)
		}
		prefix := ""
		if rel, err := filepath.Rel(root, filepath.Dir(f)); err == nil && rel != "." {
			prefix = filepath.ToSlash(rel) + "/"
		}
		for _, s := range scalars {
			pts = append(pts, storage.MetricPoint{Stage: importStage, Attempt: 1, Key: prefix + s.Tag, Step: s.Step,
				Value: s.Value, Wall: s.Wall, StepSource: "tensorboard"})
			if !s.Wall.IsZero() {
				if first.IsZero() || s.Wall.Before(first) {
					first = s.Wall
				}
				if s.Wall.After(last) {
					last = s.Wall
				}
			}
		}
	}
	if len(pts) == 0 {
		// A logdir's root often holds only the hparams experiment's
		// description; a folder with no scalar is no run.
		ir.Skipped = "no scalars in its event files"
		return ir, nil
	}
	now := time.Now()
	if first.IsZero() {
		first, last = now, now
	}
	id := newRunID(first)
	js, err := json.Marshal(params)
	if err != nil {
		return ir, err
	}
	name := filepath.Base(root)
	yaml := fmt.Sprintf("name: tensorboard-import\ndescription: %q\nstages:\n  - {name: %s, command: [\"true\"]}\n",
		"imported from "+root, importStage)
	run := storage.Run{ID: id, Template: "tensorboard-import", TemplateVersion: name, TemplateSource: "imported from " + root,
		TemplateYAML: yaml, Params: string(js), State: storage.RunSucceeded, Executor: "import", Fingerprint: fp,
		Dir: root, CreatedAt: first, StartedAt: first, FinishedAt: last}
	stage := storage.Stage{RunID: id, Name: importStage, State: storage.StageSucceeded, Attempts: 1, StartedAt: first, FinishedAt: last}
	if err := e.store.CreateRun(ctx, run, []storage.Stage{stage}); err != nil {
		return ir, fmt.Errorf("import %s: %w", rf.name, err)
	}
	zero := 0
	if err := e.store.CreateAttempt(ctx, storage.Attempt{RunID: id, Stage: importStage, Number: 1, State: "succeeded",
		Executor: "import", ExitCode: &zero, StartedAt: first, FinishedAt: last}); err != nil {
		return ir, err
	}
	for i := range pts {
		pts[i].RunID = id
	}
	for len(pts) > 0 {
		n := min(len(pts), 8192)
		if err := e.store.InsertMetricPoints(ctx, pts[:n]); err != nil {
			_ = e.store.DeleteRun(context.WithoutCancel(ctx), id) // all or nothing
			return ir, fmt.Errorf("import %s: %w", rf.name, err)
		}
		ir.Points += n
		pts = pts[n:]
	}
	ir.RunID, ir.Params = id, params
	e.events.Publish(Event{Kind: RunChanged, RunID: id, State: Succeeded})
	return ir, nil
}
