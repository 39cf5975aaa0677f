//go:build !cgo

package storage

import (
	"errors"
	"syscall"
)

// Without cgo there is no SQLite driver (go-sqlite3 is cgo): storage then
// only compiles, so that packages above it (ui, tested with
// CGO_ENABLED=0 against fakes) build; opening an archive fails.

func sqliteErr(error) (code int, sys syscall.Errno, ok bool) { return 0, 0, false }

func backupRaw(d, s any) error { return errors.New("backups need Niuma built with cgo") }
