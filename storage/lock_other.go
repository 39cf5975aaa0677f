//go:build !unix

package storage

// lockFile is a no-op where flock is not available; concurrent first opens
// of one file may then fail once with "database is locked".
func lockFile(string) (func(), error) { return func() {}, nil }
