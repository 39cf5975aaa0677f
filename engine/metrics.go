package engine

import (
	"path/filepath"

	"niuma/metrics"
)

// metricsStatusPath is where the owner's metrics writer says, while the
// database fails, how many points wait (read by every other process).
func metricsStatusPath(home string) string { return filepath.Join(home, "metrics-status.json") }

// MetricsWaiting says how many of a run's metric points are read but not
// yet stored because the database fails (disk full, I/O error, its lock
// held by another process), e.g. "1,204 metric points not yet stored: disk
// full (since 14:02:11); ...", or "" when none wait. It works in any
// process: the owner asks its writer, the others read its status file.
func (e *Engine) MetricsWaiting(runID string) string {
	if e.Owner() && e.writer != nil {
		return e.writer.Backlog().Describe(runID)
	}
	if b, ok := metrics.ReadBacklog(metricsStatusPath(e.opts.Home)); ok {
		return b.Describe(runID)
	}
	return ""
}

// metricsFaulted reports whether the owner's metrics writer is failing to
// store: the attempts' readers are held back then, so no metric arriving is
// no sign of a hang.
func (e *Engine) metricsFaulted() bool {
	return e.writer != nil && e.writer.Backlog().Reason != ""
}
