//go:build cgo

package storage

import (
	"errors"
	"syscall"

	"github.com/mattn/go-sqlite3"
)

// sqliteErr is SQLite's primary result code and the system errno behind
// err, when err is go-sqlite3's.
func sqliteErr(err error) (code int, sys syscall.Errno, ok bool) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return int(se.Code), se.SystemErrno, true
}

// backupRaw copies database src into dst with SQLite's online backup API;
// d and s are the drivers' connections (sql.Conn.Raw).
func backupRaw(d, s any) error {
	dconn, ok1 := d.(*sqlite3.SQLiteConn)
	sconn, ok2 := s.(*sqlite3.SQLiteConn)
	if !ok1 || !ok2 {
		return errors.New("not go-sqlite3 connections")
	}
	bk, err := dconn.Backup("main", sconn, "main")
	if err != nil {
		return err
	}
	// -1: every page in one step, a consistent snapshot.
	if _, err := bk.Step(-1); err != nil {
		_ = bk.Finish()
		return err
	}
	return bk.Finish()
}
