package engine

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// ownerLock is held by the one process that runs the reconciler for a data
// directory. The kernel drops it when that process dies, however it dies.
type ownerLock struct{ f *os.File }

var errLocked = errors.New("another niuma process owns this data directory")

func tryLock(path string) (*ownerLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &ownerLock{f: f}, nil
}

func (l *ownerLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// OwnerAlive reports whether some process holds the engine lock of a data
// directory, i.e. whether queued runs will be picked up without starting one.
func OwnerAlive(home string) bool {
	l, err := tryLock(lockPath(home))
	if err != nil {
		return errors.Is(err, errLocked)
	}
	l.release()
	return false
}
