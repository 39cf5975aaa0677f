package ui

import (
	"context"

	"niuma/engine"
)

// etaBackend is what the engine offers for the board's ETA: how much
// longer a run has to go (its stages still to run, less what the running
// one has done), learnt from the template's earlier runs and the running
// stage's own pace. Without it the board shows progress and elapsed time
// only.
type etaBackend interface {
	RunETA(ctx context.Context, runID string) (engine.ETA, error)
}

// readETAs asks for the ETA of each active run on the board.
func readETAs(ctx context.Context, b Backend, m *boardModel) map[string]engine.ETA {
	eb, ok := b.(etaBackend)
	if !ok {
		return nil
	}
	out := map[string]engine.ETA{}
	for _, it := range m.queue {
		if e, err := eb.RunETA(ctx, it.id); err == nil && e.Known {
			out[it.id] = e
		}
	}
	return out
}

// addETAs puts each run's ETA on its line: "ETA 14 min, from 9 earlier
// runs" for a running run, how long it will run once placed for a waiting
// one (a running run with no stage running, its next waiting for a GPU,
// too: it is not nearly done, whatever the ETA of its stages says).
func addETAs(m *boardModel, etas map[string]engine.ETA) {
	for i := range m.queue {
		e, ok := etas[m.queue[i].id]
		if !ok {
			continue
		}
		it := &m.queue[i]
		if it.state == engine.Running && !it.idle {
			it.detail += " · ETA " + e.Words()
		} else {
			it.detail += " · then runs about " + e.Words()
		}
	}
}
