package logcap

import (
	"syscall"
	"time"
)

// RoomNeeded is the free space below which a disk counts as full: the
// capper's writes may fail there (it holds up to 64 KiB per stream), and
// so may the archive's. The local executor pauses an attempt whose disk
// has less, and lets it go on once it has twice as much.
const RoomNeeded = 1 << 20

// Free is the space an unprivileged writer has left on the filesystem
// holding path, in bytes; ok false when it cannot be told.
func Free(path string) (free int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// Full reports whether the filesystem holding path has less than
// RoomNeeded free, and how much it has.
func Full(path string) (free int64, full bool) {
	free, ok := Free(path)
	return free, ok && free < RoomNeeded
}

// fullPoll is how often Wait looks whether a full disk has room again.
const fullPoll = 250 * time.Millisecond
