package engine

import "context"

// RunETA is a run's ETA for the window's board (see ETA), by its ID. A
// finished run, or one whose template has no history and no estimate, has
// none (Known false).
func (e *Engine) RunETA(ctx context.Context, runID string) (ETA, error) {
	info, err := e.Run(ctx, runID)
	if err != nil {
		return ETA{}, err
	}
	eta, err := e.ETA(ctx, info)
	if err != nil || !eta.Known {
		return ETA{}, err
	}
	return eta, nil
}
