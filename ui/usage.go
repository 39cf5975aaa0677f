package ui

import (
	"fmt"
	"time"

	"niuma/engine"
)

// hostUsage is how the board learns what the running stages use of the
// host (the engine has it, from their cgroups). A Backend without it
// shows none.
type hostUsage interface {
	Usage() []engine.StageUsage
}

// processMode is how the board learns how a stage's processes are found,
// limited and ended (a cgroup per attempt, or the token scan); app's
// backend has it.
type processMode interface {
	ProcessMode() string
}

// usageText says what a running stage uses of the host, from its cgroup
// ("1.2 GiB memory (peak 1.5 GiB, limit 4 GiB) · 12 s CPU"), and how many
// of its metric points were lost; "" when there is nothing to say.
func usageText(s engine.StageInfo) string {
	out := ""
	if u := s.Usage; u != nil {
		out = mibText(u.MemoryBytes>>20) + " memory"
		switch {
		case u.LimitBytes > 0:
			out += fmt.Sprintf(" (peak %s, limit %s)", mibText(u.PeakBytes>>20), mibText(u.LimitBytes>>20))
		case u.PeakBytes > 0:
			out += fmt.Sprintf(" (peak %s)", mibText(u.PeakBytes>>20))
		}
		out += " · " + shortDuration(time.Duration(u.CPUSeconds*float64(time.Second))) + " CPU"
	}
	if s.PointsLost > 0 {
		if out != "" {
			out += " · "
		}
		out += fmt.Sprintf("%d metric points lost", s.PointsLost)
	}
	return out
}
