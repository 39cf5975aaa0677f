//go:build unix

package tuner

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time this process has used, all
// threads together: steadier than wall time on a machine shared with
// other work.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
