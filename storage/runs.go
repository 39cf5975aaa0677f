package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ---- runs ----

const runColumns = `id, template, template_version, template_source, template_yaml, params,
	seed, priority, executor, state, error, cancel_requested, fingerprint, dir, code_dir,
	created_ns, started_ns, finished_ns, sweep, spot, share, flag_only`

// CreateRun writes a run and all its stages in one transaction: either all
// of them are stored or none is. A zero CreatedAt is set to now, an empty
// run or stage State to queued.
func (db *DB) CreateRun(ctx context.Context, r Run, stages []Stage) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	if r.State == "" {
		r.State = RunQueued
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	defer rollback(tx)

	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Template, r.TemplateVersion, r.TemplateSource, r.TemplateYAML, r.Params,
		r.Seed, r.Priority, r.Executor, string(r.State), r.Error, boolArg(r.CancelRequested),
		r.Fingerprint, r.Dir, r.CodeDir, r.CreatedAt.UnixNano(), timeArg(r.StartedAt), timeArg(r.FinishedAt), r.Sweep,
		boolArg(r.Spot), boolArg(r.Share), boolArg(r.FlagOnly),
	); err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}

	if len(stages) > 0 {
		st, err := tx.PrepareContext(ctx, `INSERT INTO stages (
			run_id, name, position, needs, gpus, gpu_memory_mib, retries, timeout_sec,
			state, attempts, exit_code, reason, next_attempt_ns, started_ns, finished_ns,
			cpu_milli, mem_mib, estimate_ns, reason_code)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("create run %s: %w", r.ID, err)
		}
		defer st.Close()
		for _, s := range stages {
			if s.RunID != "" && s.RunID != r.ID {
				return fmt.Errorf("create run %s: stage %s belongs to run %s", r.ID, s.Name, s.RunID)
			}
			if s.State == "" {
				s.State = StageQueued
			}
			needs, err := jsonList(s.Needs)
			if err != nil {
				return fmt.Errorf("create run %s: stage %s: needs: %w", r.ID, s.Name, err)
			}
			if _, err := st.ExecContext(ctx,
				r.ID, s.Name, s.Position, needs, s.GPUs, s.GPUMemoryMiB, s.Retries, s.TimeoutSec,
				string(s.State), s.Attempts, intPtrArg(s.ExitCode), s.Reason,
				timeArg(s.NextAttemptAt), timeArg(s.StartedAt), timeArg(s.FinishedAt),
				max(s.CPUMilli, 0), max(s.MemMiB, 0), max(int64(s.Estimate), 0), s.ReasonCode,
			); err != nil {
				return fmt.Errorf("create run %s: stage %s: %w", r.ID, s.Name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create run %s: commit: %w", r.ID, err)
	}
	return nil
}

type rowScanner interface {
	Scan(dest ...any) error
}

func scanRun(sc rowScanner) (Run, error) {
	var (
		r                          Run
		state                      string
		cancel, spot, share, flag  int64
		created, started, finished sql.NullInt64
	)
	err := sc.Scan(&r.ID, &r.Template, &r.TemplateVersion, &r.TemplateSource, &r.TemplateYAML, &r.Params,
		&r.Seed, &r.Priority, &r.Executor, &state, &r.Error, &cancel, &r.Fingerprint, &r.Dir, &r.CodeDir,
		&created, &started, &finished, &r.Sweep, &spot, &share, &flag)
	if err != nil {
		return Run{}, err
	}
	r.State = RunState(state)
	r.CancelRequested = cancel != 0
	r.Spot, r.Share, r.FlagOnly = spot != 0, share != 0, flag != 0
	r.CreatedAt, r.StartedAt, r.FinishedAt = timeOf(created), timeOf(started), timeOf(finished)
	return r, nil
}

// GetRun returns the run with exactly this id.
func (db *DB) GetRun(ctx context.Context, id string) (Run, error) {
	r, err := scanRun(db.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("get run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// ResolveRunID returns the id of the run whose id is exactly prefix, or else
// the only run whose id starts with prefix. It fails with ErrNotFound when
// none matches and with ErrAmbiguous (listing up to 5 candidates) when
// several do.
func (db *DB) ResolveRunID(ctx context.Context, prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("resolve run id: empty id: %w", ErrNotFound)
	}
	var id string
	err := db.r.QueryRowContext(ctx, `SELECT id FROM runs WHERE id = ?`, prefix).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("resolve run id %q: %w", prefix, err)
	}

	// Prefix match as a range on the primary key: prefix <= id < upper.
	where, args := `id >= ?`, []any{prefix}
	if upper, ok := prefixUpperBound(prefix); ok {
		where += ` AND id < ?`
		args = append(args, upper)
	}
	ids, err := db.matchIDs(ctx, where, args)
	if err != nil {
		return "", fmt.Errorf("resolve run id %q: %w", prefix, err)
	}
	if len(ids) == 0 {
		// Not a prefix: an ID's end (its random part, as the window shows
		// it) names a run as well, and is what people copy.
		esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(prefix)
		where, args = `id LIKE ? ESCAPE '\'`, []any{"%" + esc}
		if ids, err = db.matchIDs(ctx, where, args); err != nil {
			return "", fmt.Errorf("resolve run id %q: %w", prefix, err)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no run with id %q: %w", prefix, ErrNotFound)
	case 1:
		return ids[0], nil
	}
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE `+where, args...).Scan(&n); err != nil {
		return "", fmt.Errorf("resolve run id %q: %w", prefix, err)
	}
	shown := ids[:min(5, len(ids))]
	more := ""
	if n > len(shown) {
		more = fmt.Sprintf(" and %d more", n-len(shown))
	}
	return "", fmt.Errorf("run id %q is %w: it matches %d runs (%s%s); give more characters",
		prefix, ErrAmbiguous, n, strings.Join(shown, ", "), more)
}

// prefixUpperBound returns the smallest string greater than every string
// that starts with p (byte-wise), or false if there is none.
// matchIDs returns up to 6 run IDs matching a WHERE clause, in order.
func (db *DB) matchIDs(ctx context.Context, where string, args []any) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id FROM runs WHERE `+where+` ORDER BY id LIMIT 6`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func prefixUpperBound(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// ListRuns returns runs newest first (created_at DESC, id DESC), optionally
// only those in the given states and at most Limit of them.
func (db *DB) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs`
	var (
		args  []any
		conds []string
	)
	if len(f.States) > 0 {
		conds = append(conds, `state IN (?`+strings.Repeat(`, ?`, len(f.States)-1)+`)`)
		for _, s := range f.States {
			args = append(args, string(s))
		}
	}
	if f.Fingerprint != "" {
		conds = append(conds, `fingerprint = ?`)
		args = append(args, f.Fingerprint)
	}
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	q += ` ORDER BY created_ns DESC, id DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// UpdateRun writes the mutable fields of a run: State, Error,
// CancelRequested, Fingerprint, StartedAt and FinishedAt. CancelRequested
// is sticky: UpdateRun can set it but never clears it, so that a cancel
// requested (RequestCancel) after the caller read the run is not lost.
func (db *DB) UpdateRun(ctx context.Context, r Run) error {
	return updateRun(ctx, db.w, r)
}

// execer is a connection or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func updateRun(ctx context.Context, x execer, r Run) error {
	res, err := x.ExecContext(ctx, `UPDATE runs SET state = ?, error = ?, cancel_requested = (cancel_requested OR ?),
		fingerprint = ?, started_ns = ?, finished_ns = ? WHERE id = ?`,
		string(r.State), r.Error, boolArg(r.CancelRequested), r.Fingerprint,
		timeArg(r.StartedAt), timeArg(r.FinishedAt), r.ID)
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return mustAffect(res, "update run %s", r.ID)
}

// SetRunParams replaces a run's parameter values (JSON), when the engine
// retries an attempt with changed parameters.
func (db *DB) SetRunParams(ctx context.Context, id, params string) error {
	return setRunParams(ctx, db.w, id, params)
}

func setRunParams(ctx context.Context, x execer, id, params string) error {
	res, err := x.ExecContext(ctx, `UPDATE runs SET params = ? WHERE id = ?`, params, id)
	if err != nil {
		return fmt.Errorf("set params of run %s: %w", id, err)
	}
	return mustAffect(res, "set params of run %s", id)
}

// RequestCancel marks a run as asked to cancel; the engine acts on it.
func (db *DB) RequestCancel(ctx context.Context, id string) error {
	res, err := db.w.ExecContext(ctx, `UPDATE runs SET cancel_requested = 1 WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("request cancel of run %s: %w", id, err)
	}
	return mustAffect(res, "request cancel of run %s", id)
}

// DeleteRun removes a run with its stages, attempts, metric points and
// events.
func (db *DB) DeleteRun(ctx context.Context, id string) error {
	res, err := db.w.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	db.forgetSeries()
	return mustAffect(res, "delete run %s", id)
}

// mustAffect turns "no row changed" into ErrNotFound.
func mustAffect(res sql.Result, format string, args ...any) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf(format+": %w", append(args, err)...)
	}
	if n == 0 {
		return fmt.Errorf(format+": %w", append(args, ErrNotFound)...)
	}
	return nil
}

// ---- stages ----

const stageColumns = `run_id, name, position, needs, gpus, gpu_memory_mib, retries, timeout_sec,
	state, attempts, exit_code, reason, next_attempt_ns, started_ns, finished_ns,
	cpu_milli, mem_mib, estimate_ns, reason_code, free_attempts, sentinel_attempts, pending_action, pending_note, pending_params, points_lost`

// Stages returns the stages of a run ordered by Position (then name).
func (db *DB) Stages(ctx context.Context, runID string) ([]Stage, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+stageColumns+` FROM stages WHERE run_id = ? ORDER BY position, name`, runID)
	if err != nil {
		return nil, fmt.Errorf("stages of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Stage
	for rows.Next() {
		var (
			s                       Stage
			needs, state            string
			exit                    sql.NullInt64
			next, started, finished sql.NullInt64
			estimate                int64
		)
		if err := rows.Scan(&s.RunID, &s.Name, &s.Position, &needs, &s.GPUs, &s.GPUMemoryMiB, &s.Retries,
			&s.TimeoutSec, &state, &s.Attempts, &exit, &s.Reason, &next, &started, &finished,
			&s.CPUMilli, &s.MemMiB, &estimate, &s.ReasonCode, &s.FreeAttempts, &s.SentinelAttempts, &s.Pending.Action, &s.Pending.Note, &s.Pending.Params, &s.PointsLost); err != nil {
			return nil, fmt.Errorf("stages of run %s: %w", runID, err)
		}
		if s.Needs, err = parseList(needs); err != nil {
			return nil, fmt.Errorf("stages of run %s: stage %s: needs: %w", runID, s.Name, err)
		}
		s.State = StageState(state)
		s.Estimate = time.Duration(estimate)
		s.ExitCode = intPtrOf(exit)
		s.NextAttemptAt, s.StartedAt, s.FinishedAt = timeOf(next), timeOf(started), timeOf(finished)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stages of run %s: %w", runID, err)
	}
	return out, nil
}

// UpdateStage writes the mutable fields of a stage: State, Attempts,
// ExitCode, Reason, ReasonCode, NextAttemptAt, StartedAt, FinishedAt,
// FreeAttempts, SentinelAttempts, Pending and PointsLost.
func (db *DB) UpdateStage(ctx context.Context, s Stage) error {
	return updateStage(ctx, db.w, s)
}

func updateStage(ctx context.Context, x execer, s Stage) error {
	res, err := x.ExecContext(ctx, `UPDATE stages SET state = ?, attempts = ?, exit_code = ?, reason = ?, reason_code = ?,
		next_attempt_ns = ?, started_ns = ?, finished_ns = ?, free_attempts = ?, sentinel_attempts = ?,
		pending_action = ?, pending_note = ?, pending_params = ?, points_lost = ? WHERE run_id = ? AND name = ?`,
		string(s.State), s.Attempts, intPtrArg(s.ExitCode), s.Reason, s.ReasonCode,
		timeArg(s.NextAttemptAt), timeArg(s.StartedAt), timeArg(s.FinishedAt), s.FreeAttempts, s.SentinelAttempts,
		s.Pending.Action, s.Pending.Note, s.Pending.Params, s.PointsLost, s.RunID, s.Name)
	if err != nil {
		return fmt.Errorf("update stage %s of run %s: %w", s.Name, s.RunID, err)
	}
	return mustAffect(res, "update stage %s of run %s", s.Name, s.RunID)
}

// ---- attempts ----

// CreateAttempt stores a new attempt of a stage; the stage must exist.
func (db *DB) CreateAttempt(ctx context.Context, a Attempt) error {
	return createAttempt(ctx, db.w, a)
}

func createAttempt(ctx context.Context, x execer, a Attempt) error {
	gpus, err := jsonList(a.GPUs)
	if err != nil {
		return fmt.Errorf("create attempt %d of stage %s of run %s: gpus: %w", a.Number, a.Stage, a.RunID, err)
	}
	if _, err := x.ExecContext(ctx, `INSERT INTO attempts (run_id, stage, number, state, executor, handle,
		gpus, exit_code, reason, started_ns, finished_ns, token, params) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.RunID, a.Stage, a.Number, a.State, a.Executor, a.Handle, gpus, intPtrArg(a.ExitCode), a.Reason,
		timeArg(a.StartedAt), timeArg(a.FinishedAt), a.Token, a.Params); err != nil {
		return fmt.Errorf("create attempt %d of stage %s of run %s: %w", a.Number, a.Stage, a.RunID, err)
	}
	return nil
}

// UpdateAttempt writes the mutable fields of an attempt: State, Handle,
// GPUs, ExitCode, Reason and FinishedAt.
func (db *DB) UpdateAttempt(ctx context.Context, a Attempt) error {
	return updateAttempt(ctx, db.w, a)
}

func updateAttempt(ctx context.Context, x execer, a Attempt) error {
	gpus, err := jsonList(a.GPUs)
	if err != nil {
		return fmt.Errorf("update attempt %d of stage %s of run %s: gpus: %w", a.Number, a.Stage, a.RunID, err)
	}
	res, err := x.ExecContext(ctx, `UPDATE attempts SET state = ?, handle = ?, gpus = ?, exit_code = ?,
		reason = ?, finished_ns = ? WHERE run_id = ? AND stage = ? AND number = ?`,
		a.State, a.Handle, gpus, intPtrArg(a.ExitCode), a.Reason, timeArg(a.FinishedAt),
		a.RunID, a.Stage, a.Number)
	if err != nil {
		return fmt.Errorf("update attempt %d of stage %s of run %s: %w", a.Number, a.Stage, a.RunID, err)
	}
	return mustAffect(res, "update attempt %d of stage %s of run %s", a.Number, a.Stage, a.RunID)
}

// Transition is every row one decision of the engine changes: a run, its
// parameters, some of its stages, a new attempt and an ended one. Apply
// writes it in one transaction, so that a reader (or the next owner after
// a crash) sees all of it or none of it. Nil and empty fields are left
// alone.
type Transition struct {
	Run        *Run     // UpdateRun's fields
	Params     *string  // the run's new parameters (JSON)
	Stages     []Stage  // UpdateStage's fields
	NewAttempt *Attempt // inserted
	Attempt    *Attempt // UpdateAttempt's fields
}

// Apply writes a transition in one transaction: all of it or nothing.
func (db *DB) Apply(ctx context.Context, t Transition) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("apply transition: %w", err)
	}
	defer rollback(tx)
	if t.Attempt != nil {
		if err := updateAttempt(ctx, tx, *t.Attempt); err != nil {
			return err
		}
	}
	for _, s := range t.Stages {
		if err := updateStage(ctx, tx, s); err != nil {
			return err
		}
	}
	if t.NewAttempt != nil {
		if err := createAttempt(ctx, tx, *t.NewAttempt); err != nil {
			return err
		}
	}
	if t.Params != nil {
		if t.Run == nil {
			return errors.New("apply transition: new parameters without their run")
		}
		if err := setRunParams(ctx, tx, t.Run.ID, *t.Params); err != nil {
			return err
		}
	}
	if t.Run != nil {
		if err := updateRun(ctx, tx, *t.Run); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("apply transition: commit: %w", err)
	}
	return nil
}

// Attempts returns all attempts of a run ordered by stage position, then
// attempt number.
func (db *DB) Attempts(ctx context.Context, runID string) ([]Attempt, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT a.run_id, a.stage, a.number, a.state, a.executor, a.handle,
		a.gpus, a.exit_code, a.reason, a.started_ns, a.finished_ns, a.token, a.params
		FROM attempts a JOIN stages s ON s.run_id = a.run_id AND s.name = a.stage
		WHERE a.run_id = ? ORDER BY s.position, s.name, a.number`, runID)
	if err != nil {
		return nil, fmt.Errorf("attempts of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var (
			a                 Attempt
			gpus              string
			exit              sql.NullInt64
			started, finished sql.NullInt64
		)
		if err := rows.Scan(&a.RunID, &a.Stage, &a.Number, &a.State, &a.Executor, &a.Handle, &gpus,
			&exit, &a.Reason, &started, &finished, &a.Token, &a.Params); err != nil {
			return nil, fmt.Errorf("attempts of run %s: %w", runID, err)
		}
		if a.GPUs, err = parseList(gpus); err != nil {
			return nil, fmt.Errorf("attempts of run %s: attempt %d of %s: gpus: %w", runID, a.Number, a.Stage, err)
		}
		a.ExitCode = intPtrOf(exit)
		a.StartedAt, a.FinishedAt = timeOf(started), timeOf(finished)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts of run %s: %w", runID, err)
	}
	return out, nil
}

// AttemptTokens lists the token of every attempt of the given executor the
// archive holds, finished or not: what a backend's sweep must never touch.
func (db *DB) AttemptTokens(ctx context.Context, executor string) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT token FROM attempts WHERE executor = ? AND token <> ''`, executor)
	if err != nil {
		return nil, fmt.Errorf("tokens of %s attempts: %w", executor, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("tokens of %s attempts: %w", executor, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tokens of %s attempts: %w", executor, err)
	}
	return out, nil
}

// ---- JSON lists ----

// jsonList encodes a string list; nil and empty both become "[]".
func jsonList(l []string) (string, error) {
	if len(l) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(l)
	return string(b), err
}

// parseList decodes a JSON string list; an empty list becomes nil.
func parseList(s string) ([]string, error) {
	if s == "" || s == "[]" {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, nil
	}
	return l, nil
}
