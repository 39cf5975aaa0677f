package docker

import (
	"context"
	"fmt"
	"time"
)

// watchPids reads the container's process count every PidsPoll while it
// runs. A container seen at its limit is noted, so that its end can say
// so; one that stays there for PidsStuck (a fork bomb, or a workload that
// can start no more threads and waits forever for one) is stopped, and
// ends as a failure naming the limit.
func (h *handle) watchPids() {
	poll, stuck := h.x.PidsPoll, h.x.PidsStuck
	if poll <= 0 || stuck <= 0 {
		return
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var since time.Time // first seen at the limit, in the current stretch
	for {
		select {
		case <-h.done:
			return
		case <-h.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
		cur, limit, err := h.x.api.Pids(ctx, h.id)
		cancel()
		if err != nil || limit <= 0 {
			continue
		}
		// At the limit when it gets there; still there while it stays
		// within a few of it (a bomb's children come and go).
		slack := max(2, limit/20)
		switch {
		case cur >= limit:
			h.pidsLimit.Store(limit)
			if since.IsZero() {
				since = time.Now()
			}
		case since.IsZero() || cur < limit-slack:
			since = time.Time{}
			continue
		}
		if time.Since(since) >= stuck && h.pidsStopped.CompareAndSwap(false, true) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = h.Stop(ctx, 2*time.Second)
			}()
			return
		}
	}
}

// pidsReason is what the end of an attempt says about the process limit:
// "" when the container never reached it.
func (h *handle) pidsReason(code int) string {
	limit := h.pidsLimit.Load()
	switch {
	case limit == 0:
		return ""
	case h.pidsStopped.Load():
		return fmt.Sprintf("stopped: it stayed at its limit of %d processes and threads for %s, unable to start more "+
			"(a fork bomb, or more workers and threads than the limit: start fewer, or set runtime: pids_limit up to this machine's limit)",
			limit, h.x.PidsStuck)
	}
	return fmt.Sprintf("exited with code %d after reaching its limit of %d processes and threads "+
		"(start fewer workers and threads, or set runtime: pids_limit up to this machine's limit)", code, limit)
}
