package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"niuma/engine"
)

// launchRecords is what the engine offers so that the window shows what a
// run was launched with next to what it ran with, wherever a sentinel
// retry changed its parameters: the values it was submitted with (before
// any change), and per attempt of a stage the values that attempt ran
// with. Without it the window still marks a run the sentinel retried (its
// "action_retry" record) but shows only the values it ran with.
type launchRecords interface {
	LaunchedParams(ctx context.Context, runID string) (map[string]any, error)
	AttemptParams(ctx context.Context, runID, stage string) (map[int]map[string]any, error)
}

// sentinelChange is what the sentinel did to one run.
type sentinelChange struct {
	retried  bool           // it started a new attempt with changed (or the same) values
	launched map[string]any // the values the run was launched with; nil when the engine does not say
}

// changedParams are the parameters whose launched value differs from the
// value the run ran with, sorted.
func (c sentinelChange) changedParams(now map[string]any) []string {
	var out []string
	for _, k := range sortedParamKeys(c.launched) {
		if x, ok := now[k]; ok && formatParam(x) != formatParam(c.launched[k]) {
			out = append(out, k)
		}
	}
	return out
}

// retriedBySentinel reports whether the sentinel started an attempt of the
// run, by the code of its record.
func retriedBySentinel(anomalies []engine.AnomalyInfo) bool {
	for _, a := range anomalies {
		if a.Kind == "action_retry" {
			return true
		}
	}
	return false
}

// maybeRetried reports whether any stage of r ran more than once: only
// such a run can have been retried by the sentinel, so only such runs are
// asked about (the lists read often).
func maybeRetried(r engine.RunInfo) bool {
	for _, s := range r.Stages {
		if s.Attempts > 1 || len(s.History) > 1 {
			return true
		}
	}
	return false
}

// sentinelCache remembers what the sentinel did to each run, read again
// only when the run's attempts change.
type sentinelCache struct {
	mu   sync.Mutex
	seen map[string]sentinelSeen
}

type sentinelSeen struct {
	version string
	change  sentinelChange
}

// attemptsVersion changes whenever a stage of r gains an attempt or r
// changes state.
func attemptsVersion(r engine.RunInfo) string {
	var b strings.Builder
	b.WriteString(string(r.State))
	for _, s := range r.Stages {
		fmt.Fprintf(&b, "|%s:%d:%d", s.Name, s.Attempts, len(s.History))
	}
	return b.String()
}

// get is what the sentinel did to r, read from b when r's attempts changed
// since the last read.
func (c *sentinelCache) get(ctx context.Context, b Backend, r engine.RunInfo) sentinelChange {
	if !maybeRetried(r) {
		return sentinelChange{}
	}
	v := attemptsVersion(r)
	c.mu.Lock()
	if s, ok := c.seen[r.ID]; ok && s.version == v {
		c.mu.Unlock()
		return s.change
	}
	c.mu.Unlock()
	var ch sentinelChange
	anomalies, err := b.Anomalies(ctx, r.ID)
	if err != nil {
		return ch // asked again next time
	}
	ch.retried = retriedBySentinel(anomalies)
	if lr, ok := b.(launchRecords); ok && ch.retried {
		if p, err := lr.LaunchedParams(ctx, r.ID); err == nil {
			ch.launched = p
		}
	}
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[string]sentinelSeen{}
	}
	c.seen[r.ID] = sentinelSeen{version: v, change: ch}
	c.mu.Unlock()
	return ch
}

// all is what the sentinel did to each of runs that it changed.
func (c *sentinelCache) all(ctx context.Context, b Backend, runs []engine.RunInfo) map[string]sentinelChange {
	out := map[string]sentinelChange{}
	for _, r := range runs {
		if ch := c.get(ctx, b, r); ch.retried {
			out[r.ID] = ch
		}
	}
	return out
}

// changedPairs writes params as paramPairs does, a parameter the sentinel
// changed as "lr 1 → 0.1".
func changedPairs(params map[string]any, keep []string, ch sentinelChange) []string {
	pairs := paramPairs(params, keep)
	if ch.launched == nil {
		return pairs
	}
	changed := map[string]bool{}
	for _, k := range ch.changedParams(params) {
		changed[k] = true
	}
	keys := keep
	if keys == nil {
		keys = sortedParamKeys(params)
	}
	out := pairs[:0:0]
	for _, k := range keys {
		x, ok := params[k]
		if !ok {
			continue
		}
		if changed[k] {
			out = append(out, fmt.Sprintf("%s %s → %s", k, formatParam(ch.launched[k]), formatParam(x)))
		} else {
			out = append(out, k+"="+formatParam(x))
		}
	}
	// A changed parameter is shown even where the sweep's differ list
	// leaves it out: it is what sets this run apart now.
	if keep != nil {
		for _, k := range sortedParamKeys(ch.launched) {
			if changed[k] && !contains(keep, k) {
				out = append(out, fmt.Sprintf("%s %s → %s", k, formatParam(ch.launched[k]), formatParam(params[k])))
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sentinelMark is the short mark of a changed run in lists and tables.
const sentinelMark = "⚑ sentinel"
