package engine

import (
	"context"
	"errors"
	"fmt"

	"niuma/storage"
)

// Prune stops a run early because a study's pruner judged it losing. The
// decision (its reason code, the numbers compared and the sentence saying
// so) is stored with the run in the same transaction as the cancel
// request, then the run stops the way a cancelled run does: queued stages
// never start, a running stage gets SIGTERM and, after the grace period,
// SIGKILL. The request goes through storage, so it works from any
// process; the stored decision is what tells a pruned run from one a user
// cancelled.
func (e *Engine) Prune(ctx context.Context, p storage.Prune) error {
	info, err := e.Run(ctx, p.RunID)
	if err != nil {
		return err
	}
	if info.State.Done() {
		return &EndedError{ID: info.ID, State: info.State}
	}
	p.RunID = info.ID
	if err := e.store.PruneRun(ctx, p); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("run %s is gone", p.RunID)
		}
		return err
	}
	e.nudge()
	return nil
}
