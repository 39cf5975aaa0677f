package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver

	"niuma/shepherd"
)

// Store is the service's own SQLite file: leases, queue entries, usage
// and admins' cancel orders. Nothing of a run but its ID, name and stage.
// A lease is stored before the answer that gives it is sent, so a service
// killed at any moment restarts knowing every GPU it gave.
type Store struct {
	db *sql.DB
}

const schema = `
CREATE TABLE IF NOT EXISTS leases (
	token     TEXT PRIMARY KEY,
	uid       INTEGER NOT NULL,
	user      TEXT NOT NULL,
	home      TEXT NOT NULL,
	team      TEXT NOT NULL,
	run       TEXT NOT NULL,
	run_name  TEXT NOT NULL,
	stage     TEXT NOT NULL,
	placement TEXT NOT NULL, -- shepherd.Running as JSON
	since_ns  INTEGER NOT NULL,
	seen_ns   INTEGER NOT NULL,
	reclaim   TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS queue (
	token    TEXT PRIMARY KEY,
	uid      INTEGER NOT NULL,
	user     TEXT NOT NULL,
	home     TEXT NOT NULL,
	team     TEXT NOT NULL,
	run      TEXT NOT NULL,
	run_name TEXT NOT NULL,
	stage    TEXT NOT NULL,
	request  TEXT NOT NULL, -- shepherd.Request as JSON
	since_ns INTEGER NOT NULL,
	seen_ns  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
	team        TEXT PRIMARY KEY,
	gpu_seconds REAL NOT NULL,
	at_ns       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS cancels (
	run    TEXT PRIMARY KEY,
	uid    INTEGER NOT NULL,
	by     TEXT NOT NULL,
	at_ns  INTEGER NOT NULL
);
`

// OpenStore opens (creating) the service's database at path.
func OpenStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("create the machine service's directory: %w", err)
	}
	u := url.URL{Path: abs}
	db, err := sql.Open("sqlite3", "file:"+u.EscapedPath()+"?_busy_timeout=5000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open the machine service's database %s: %w", abs, err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// stored is everything the service keeps, as loaded at start.
type stored struct {
	leases  []*lease
	queue   []*entry
	usage   map[string]float64
	usageAt time.Time
	cancels map[string]cancelOrder
}

func (s *Store) load(ctx context.Context) (stored, error) {
	out := stored{usage: map[string]float64{}, cancels: map[string]cancelOrder{}}
	rows, err := s.db.QueryContext(ctx, `SELECT token, uid, user, home, team, run, run_name, stage, placement, since_ns, seen_ns, reclaim FROM leases`)
	if err != nil {
		return out, err
	}
	for rows.Next() {
		l := &lease{}
		var placement string
		var since, seen int64
		if err := rows.Scan(&l.Token, &l.UID, &l.User, &l.Home, &l.Team, &l.Run, &l.RunName, &l.Stage, &placement, &since, &seen, &l.Reclaim); err != nil {
			rows.Close()
			return out, err
		}
		if err := json.Unmarshal([]byte(placement), &l.Placement); err != nil {
			rows.Close()
			return out, fmt.Errorf("lease %s: %w", l.Token, err)
		}
		l.Since, l.Seen = time.Unix(0, since), time.Unix(0, seen)
		out.leases = append(out.leases, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	rows, err = s.db.QueryContext(ctx, `SELECT token, uid, user, home, team, run, run_name, stage, request, since_ns, seen_ns FROM queue`)
	if err != nil {
		return out, err
	}
	for rows.Next() {
		e := &entry{}
		var req string
		var since, seen int64
		if err := rows.Scan(&e.Token, &e.UID, &e.User, &e.Home, &e.Team, &e.Run, &e.RunName, &e.Stage, &req, &since, &seen); err != nil {
			rows.Close()
			return out, err
		}
		if err := json.Unmarshal([]byte(req), &e.Request); err != nil {
			rows.Close()
			return out, fmt.Errorf("queue entry %s: %w", e.Token, err)
		}
		e.Since, e.Seen = time.Unix(0, since), time.Unix(0, seen)
		out.queue = append(out.queue, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	rows, err = s.db.QueryContext(ctx, `SELECT team, gpu_seconds, at_ns FROM usage`)
	if err != nil {
		return out, err
	}
	for rows.Next() {
		var team string
		var v float64
		var at int64
		if err := rows.Scan(&team, &v, &at); err != nil {
			rows.Close()
			return out, err
		}
		out.usage[team] = v
		if t := time.Unix(0, at); t.After(out.usageAt) {
			out.usageAt = t
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	rows, err = s.db.QueryContext(ctx, `SELECT run, uid, by, at_ns FROM cancels`)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var c cancelOrder
		var run string
		var at int64
		if err := rows.Scan(&run, &c.UID, &c.By, &at); err != nil {
			return out, err
		}
		c.At = time.Unix(0, at)
		out.cancels[run] = c
	}
	return out, rows.Err()
}

// change is one call's writes, applied in one transaction.
type change struct {
	putLeases  []*lease
	dropLeases []string
	// queues replaces the stored queue of each holder named.
	queues map[holder][]*entry
	// dropQueue removes single entries (a holder gone quiet).
	dropQueue []string
	usage     map[string]float64
	usageAt   time.Time
	putCancel map[string]cancelOrder
	dropCanc  []string
}

func (c *change) empty() bool {
	return len(c.putLeases) == 0 && len(c.dropLeases) == 0 && len(c.queues) == 0 && len(c.dropQueue) == 0 &&
		c.usage == nil && len(c.putCancel) == 0 && len(c.dropCanc) == 0
}

// apply writes a change in one transaction.
func (s *Store) apply(ctx context.Context, c *change) error {
	if c.empty() {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, l := range c.putLeases {
		p, err := json.Marshal(l.Placement)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO leases (token, uid, user, home, team, run, run_name, stage, placement, since_ns, seen_ns, reclaim)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, l.Token, l.UID, l.User, l.Home, l.Team, l.Run, l.RunName, l.Stage, string(p),
			l.Since.UnixNano(), l.Seen.UnixNano(), l.Reclaim); err != nil {
			return err
		}
	}
	for _, t := range c.dropLeases {
		if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE token = ?`, t); err != nil {
			return err
		}
	}
	for h, es := range c.queues {
		if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE uid = ? AND home = ?`, h.uid, h.home); err != nil {
			return err
		}
		for _, e := range es {
			r, err := json.Marshal(e.Request)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO queue (token, uid, user, home, team, run, run_name, stage, request, since_ns, seen_ns)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, e.Token, e.UID, e.User, e.Home, e.Team, e.Run, e.RunName, e.Stage, string(r),
				e.Since.UnixNano(), e.Seen.UnixNano()); err != nil {
				return err
			}
		}
	}
	for _, t := range c.dropQueue {
		if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE token = ?`, t); err != nil {
			return err
		}
	}
	if c.usage != nil {
		for team, v := range c.usage {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO usage (team, gpu_seconds, at_ns) VALUES (?, ?, ?)`,
				team, v, c.usageAt.UnixNano()); err != nil {
				return err
			}
		}
	}
	for run, o := range c.putCancel {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO cancels (run, uid, by, at_ns) VALUES (?, ?, ?, ?)`,
			run, o.UID, o.By, o.At.UnixNano()); err != nil {
			return err
		}
	}
	for _, run := range c.dropCanc {
		if _, err := tx.ExecContext(ctx, `DELETE FROM cancels WHERE run = ?`, run); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// errNoStore is returned by an Arbiter made without a store.
var errNoStore = errors.New("the machine service has no database")

// placementOf is a lease's placement as the shepherd's Running, with its
// team.
func placementOf(l *lease) shepherd.Running {
	r := l.Placement
	r.Team = l.Team
	return r
}
