package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ---- studies ----

// StudyState is where a study stands.
type StudyState string

// The study states.
const (
	StudyRunning  StudyState = "running"  // trials are still to be launched or followed
	StudyFinished StudyState = "finished" // every trial of the budget has ended
	StudyStopped  StudyState = "stopped"  // the user stopped it before its budget was spent
)

// TrialState is where a trial of a study stands.
type TrialState string

// The trial states.
const (
	// TrialSubmitting: the trial is stored, its run may or may not be
	// yet; a restarted study looks for the run before submitting again.
	TrialSubmitting TrialState = "submitting"
	TrialRunning    TrialState = "running" // its run is queued or running
	TrialDone       TrialState = "done"    // its run succeeded; Objective is its result
	TrialPruned     TrialState = "pruned"  // stopped early by the pruner; Objective is its best so far
	TrialFailed     TrialState = "failed"  // its run failed
	TrialCancelled  TrialState = "cancelled"
)

// Done reports whether the trial has ended.
func (s TrialState) Done() bool {
	return s == TrialDone || s == TrialPruned || s == TrialFailed || s == TrialCancelled
}

// Study is a stored search over a template's parameters.
type Study struct {
	ID           string
	Template     string // as the user named it, to load it again
	TemplateName string
	TemplateYAML string
	Objective    string
	Goal         string // "min" or "max"
	Space        string // JSON of the searched parameters
	Fixed        string // JSON of the other parameters' values
	Budget       int
	Parallel     int
	ParallelRule string // "auto" or the number given
	Pruner       string
	Warmup       int64
	Seed         int64
	Executor     string
	State        StudyState
	Reason       string
	CreatedAt    time.Time
	FinishedAt   time.Time
}

// Trial is one trial of a study.
type Trial struct {
	StudyID    string
	Number     int
	Params     string // JSON of every parameter's value
	Method     string
	Prediction string // JSON, "" when the tuner made none
	RunID      string // "" until its run is submitted
	State      TrialState
	Objective  float64 // NaN when it has none
	CreatedAt  time.Time
	FinishedAt time.Time
}

// Prune is a pruner's decision to stop a run early, with its numbers.
type Prune struct {
	RunID     string
	Reason    string // a code: below_median, below_rung
	Metric    string
	Step      int64
	Value     float64
	Reference float64
	Trials    int
	Rung      int
	RungStep  int64
	Compared  []Compared // the other trials' values it was compared with
	Evidence  string     // the decision in a sentence
	DecidedAt time.Time
}

// Compared is one other trial's value in a pruning decision.
type Compared struct {
	RunID string  `json:"run"`
	Value float64 `json:"value"`
}

const studyColumns = `id, template, template_name, template_yaml, objective, goal, space, fixed,
	budget, parallel, parallel_rule, pruner, warmup, seed, executor, state, reason, created_ns, finished_ns`

// CreateStudy stores a new study. A zero CreatedAt is set to now, an
// empty State to running.
func (db *DB) CreateStudy(ctx context.Context, s Study) error {
	if s.CreatedAt.IsZero() {
		s.CreatedAt = time.Now()
	}
	if s.State == "" {
		s.State = StudyRunning
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO studies (`+studyColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Template, s.TemplateName, s.TemplateYAML, s.Objective, s.Goal, s.Space, s.Fixed,
		s.Budget, s.Parallel, s.ParallelRule, s.Pruner, s.Warmup, s.Seed, s.Executor, string(s.State), s.Reason,
		s.CreatedAt.UnixNano(), timeArg(s.FinishedAt))
	if err != nil {
		return fmt.Errorf("create study %s: %w", s.ID, err)
	}
	return nil
}

func scanStudy(row interface{ Scan(...any) error }) (Study, error) {
	var s Study
	var state string
	var created int64
	var finished sql.NullInt64
	err := row.Scan(&s.ID, &s.Template, &s.TemplateName, &s.TemplateYAML, &s.Objective, &s.Goal, &s.Space, &s.Fixed,
		&s.Budget, &s.Parallel, &s.ParallelRule, &s.Pruner, &s.Warmup, &s.Seed, &s.Executor, &state, &s.Reason,
		&created, &finished)
	if err != nil {
		return Study{}, err
	}
	s.State, s.CreatedAt, s.FinishedAt = StudyState(state), time.Unix(0, created), timeOf(finished)
	return s, nil
}

// GetStudy returns one study by its full ID or a unique prefix of it.
func (db *DB) GetStudy(ctx context.Context, idOrPrefix string) (Study, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+studyColumns+` FROM studies
		WHERE id = ? OR substr(id, 1, length(?)) = ? ORDER BY id = ? DESC LIMIT 3`, idOrPrefix, idOrPrefix, idOrPrefix, idOrPrefix)
	if err != nil {
		return Study{}, fmt.Errorf("get study %s: %w", idOrPrefix, err)
	}
	defer rows.Close()
	var found []Study
	for rows.Next() {
		s, err := scanStudy(rows)
		if err != nil {
			return Study{}, fmt.Errorf("get study %s: %w", idOrPrefix, err)
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		return Study{}, fmt.Errorf("get study %s: %w", idOrPrefix, err)
	}
	switch {
	case len(found) == 0:
		return Study{}, fmt.Errorf("study %s: %w", idOrPrefix, ErrNotFound)
	case found[0].ID == idOrPrefix || len(found) == 1:
		return found[0], nil
	}
	return Study{}, fmt.Errorf("study %s: the prefix matches several studies (%s, %s, …); give more of the ID", idOrPrefix, found[0].ID, found[1].ID)
}

// ListStudies returns every study, newest first.
func (db *DB) ListStudies(ctx context.Context) ([]Study, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+studyColumns+` FROM studies ORDER BY created_ns DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list studies: %w", err)
	}
	defer rows.Close()
	var out []Study
	for rows.Next() {
		s, err := scanStudy(rows)
		if err != nil {
			return nil, fmt.Errorf("list studies: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SetStudyState changes a study's state (and its reason); an ended state
// records when.
func (db *DB) SetStudyState(ctx context.Context, id string, state StudyState, reason string) error {
	var finished any
	if state != StudyRunning {
		finished = time.Now().UnixNano()
	}
	res, err := db.w.ExecContext(ctx, `UPDATE studies SET state = ?, reason = ?, finished_ns = ? WHERE id = ?`,
		string(state), reason, finished, id)
	if err != nil {
		return fmt.Errorf("set state of study %s: %w", id, err)
	}
	return mustAffect(res, "set state of study %s", id)
}

// ErrTrialExists is returned by AddTrial when the study already has a
// trial of that number: another process is driving the study.
var ErrTrialExists = errors.New("the study already has a trial of that number")

const trialColumns = `study_id, number, params, method, prediction, run_id, state, objective, created_ns, finished_ns`

// AddTrial stores a new trial (state submitting unless given). Trial
// numbers are unique within a study, so two processes driving one study
// cannot both add trial n: the second gets ErrTrialExists.
func (db *DB) AddTrial(ctx context.Context, t Trial) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	if t.State == "" {
		t.State = TrialSubmitting
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO study_trials (`+trialColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.StudyID, t.Number, t.Params, t.Method, t.Prediction, nullString(t.RunID), string(t.State), floatArg(t.Objective),
		t.CreatedAt.UnixNano(), timeArg(t.FinishedAt))
	if err != nil {
		var n int
		if db.w.QueryRowContext(ctx, `SELECT count(*) FROM study_trials WHERE study_id = ? AND number = ?`, t.StudyID, t.Number).Scan(&n) == nil && n > 0 {
			return fmt.Errorf("add trial %d of study %s: %w", t.Number, t.StudyID, ErrTrialExists)
		}
		return fmt.Errorf("add trial %d of study %s: %w", t.Number, t.StudyID, err)
	}
	return nil
}

// LinkTrial records the run a submitting trial became; it is running from
// then on.
func (db *DB) LinkTrial(ctx context.Context, studyID string, number int, runID string) error {
	res, err := db.w.ExecContext(ctx, `UPDATE study_trials SET run_id = ?, state = ? WHERE study_id = ? AND number = ?`,
		runID, string(TrialRunning), studyID, number)
	if err != nil {
		return fmt.Errorf("link trial %d of study %s to run %s: %w", number, studyID, runID, err)
	}
	return mustAffect(res, "link trial %d of study %s", number, studyID)
}

// EndTrial records how a trial ended and its objective (NaN: none).
func (db *DB) EndTrial(ctx context.Context, studyID string, number int, state TrialState, objective float64) error {
	if !state.Done() {
		return fmt.Errorf("end trial %d of study %s: %q is not an end state", number, studyID, state)
	}
	res, err := db.w.ExecContext(ctx, `UPDATE study_trials SET state = ?, objective = ?, finished_ns = ? WHERE study_id = ? AND number = ?`,
		string(state), floatArg(objective), time.Now().UnixNano(), studyID, number)
	if err != nil {
		return fmt.Errorf("end trial %d of study %s: %w", number, studyID, err)
	}
	return mustAffect(res, "end trial %d of study %s", number, studyID)
}

// Trials returns a study's trials by number.
func (db *DB) Trials(ctx context.Context, studyID string) ([]Trial, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+trialColumns+` FROM study_trials WHERE study_id = ? ORDER BY number`, studyID)
	if err != nil {
		return nil, fmt.Errorf("trials of study %s: %w", studyID, err)
	}
	defer rows.Close()
	var out []Trial
	for rows.Next() {
		var t Trial
		var run sql.NullString
		var state string
		var obj sql.NullFloat64
		var created int64
		var finished sql.NullInt64
		if err := rows.Scan(&t.StudyID, &t.Number, &t.Params, &t.Method, &t.Prediction, &run, &state, &obj, &created, &finished); err != nil {
			return nil, fmt.Errorf("trials of study %s: %w", studyID, err)
		}
		t.RunID, t.State, t.Objective = run.String, TrialState(state), floatOf(obj)
		t.CreatedAt, t.FinishedAt = time.Unix(0, created), timeOf(finished)
		out = append(out, t)
	}
	return out, rows.Err()
}

// TrialOfRun returns the trial a run is; ErrNotFound when it is none.
func (db *DB) TrialOfRun(ctx context.Context, runID string) (Trial, error) {
	var studyID string
	var number int
	err := db.r.QueryRowContext(ctx, `SELECT study_id, number FROM study_trials WHERE run_id = ?`, runID).Scan(&studyID, &number)
	if errors.Is(err, sql.ErrNoRows) {
		return Trial{}, fmt.Errorf("trial of run %s: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Trial{}, fmt.Errorf("trial of run %s: %w", runID, err)
	}
	ts, err := db.Trials(ctx, studyID)
	if err != nil {
		return Trial{}, err
	}
	for _, t := range ts {
		if t.Number == number {
			return t, nil
		}
	}
	return Trial{}, fmt.Errorf("trial of run %s: %w", runID, ErrNotFound)
}

// PruneRun stores why a run is stopped early and asks for it to be
// cancelled, in one transaction: a run is never pruned without its
// evidence, nor its evidence stored for a run left running. Pruning a run
// twice keeps the first decision.
func (db *DB) PruneRun(ctx context.Context, p Prune) error {
	if p.DecidedAt.IsZero() {
		p.DecidedAt = time.Now()
	}
	compared, err := json.Marshal(p.Compared)
	if err != nil {
		return fmt.Errorf("prune run %s: %w", p.RunID, err)
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("prune run %s: %w", p.RunID, err)
	}
	defer rollback(tx)
	res, err := tx.ExecContext(ctx, `UPDATE runs SET cancel_requested = 1 WHERE id = ?`, p.RunID)
	if err != nil {
		return fmt.Errorf("prune run %s: %w", p.RunID, err)
	}
	if err := mustAffect(res, "prune run %s", p.RunID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_prunes (run_id, reason, metric, step, value, reference, trials,
		rung, rung_step, compared, evidence, decided_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id) DO NOTHING`,
		p.RunID, p.Reason, p.Metric, p.Step, floatArg(p.Value), floatArg(p.Reference), p.Trials, p.Rung, p.RungStep,
		string(compared), p.Evidence, p.DecidedAt.UnixNano()); err != nil {
		return fmt.Errorf("prune run %s: %w", p.RunID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("prune run %s: %w", p.RunID, err)
	}
	return nil
}

// RunPrune returns why a run was stopped early; ErrNotFound when it was
// not pruned.
func (db *DB) RunPrune(ctx context.Context, runID string) (Prune, error) {
	var p Prune
	var value, ref sql.NullFloat64
	var compared string
	var decided int64
	err := db.r.QueryRowContext(ctx, `SELECT run_id, reason, metric, step, value, reference, trials, rung, rung_step,
		compared, evidence, decided_ns FROM run_prunes WHERE run_id = ?`, runID).Scan(
		&p.RunID, &p.Reason, &p.Metric, &p.Step, &value, &ref, &p.Trials, &p.Rung, &p.RungStep, &compared, &p.Evidence, &decided)
	if errors.Is(err, sql.ErrNoRows) {
		return Prune{}, fmt.Errorf("prune of run %s: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Prune{}, fmt.Errorf("prune of run %s: %w", runID, err)
	}
	p.Value, p.Reference, p.DecidedAt = floatOf(value), floatOf(ref), time.Unix(0, decided)
	if err := json.Unmarshal([]byte(compared), &p.Compared); err != nil {
		return Prune{}, fmt.Errorf("prune of run %s: its compared values: %w", runID, err)
	}
	return p, nil
}

// SweepRuns returns the IDs of the runs launched with a sweep (or study)
// id, oldest first, with their parameters (JSON).
func (db *DB) SweepRuns(ctx context.Context, sweep string) (ids, params []string, err error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, params FROM runs WHERE sweep = ? ORDER BY created_ns, id`, sweep)
	if err != nil {
		return nil, nil, fmt.Errorf("runs of %s: %w", sweep, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, p string
		if err := rows.Scan(&id, &p); err != nil {
			return nil, nil, fmt.Errorf("runs of %s: %w", sweep, err)
		}
		ids, params = append(ids, id), append(params, p)
	}
	return ids, params, rows.Err()
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
