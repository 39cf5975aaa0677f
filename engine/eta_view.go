package engine

import (
	"context"
	"time"
)

// RunETA is a run's ETA for the window's board (see ETA), with a floor: a
// run past its median still has some time to go in words, so the board
// says "1 s" rather than nothing. A finished run, or one whose template
// has no history and no estimate, has none (Known false).
func (e *Engine) RunETA(ctx context.Context, runID string) (ETA, error) {
	info, err := e.Run(ctx, runID)
	if err != nil {
		return ETA{}, err
	}
	eta, err := e.ETA(ctx, info)
	if err != nil || !eta.Known {
		return ETA{}, err
	}
	eta.Left = max(eta.Left, time.Second)
	eta.High = max(eta.High, eta.Left)
	return eta, nil
}
