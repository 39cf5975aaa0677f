package engine

import (
	"context"
	"time"

	"niuma/shepherd/predict"
)

// RunETA is a run's ETA as one estimate, for the window's board: how much
// longer its unfinished stages take (see ETA), with the predictor's bounds
// summed over them and N the earlier runs it learnt from (0 when the
// user's estimates alone say it). A finished run, or one whose template
// has no history and no estimate, has none (Known false).
func (e *Engine) RunETA(ctx context.Context, runID string) (predict.Estimate, error) {
	info, err := e.Run(ctx, runID)
	if err != nil {
		return predict.Estimate{}, err
	}
	eta, err := e.ETA(ctx, info)
	if err != nil || !eta.Known {
		return predict.Estimate{}, err
	}
	out := predict.Estimate{Median: eta.Left, N: eta.Runs}
	now := time.Now()
	for _, s := range info.Stages {
		est, ok := eta.Stages[s.Name]
		if !ok {
			continue
		}
		ran := time.Duration(0)
		if s.State == Running && !s.StartedAt.IsZero() {
			ran = now.Sub(s.StartedAt)
		}
		out.Low += max(est.Low-ran, 0)
		out.High += max(est.High-ran, 0)
	}
	// A run past its median still has some time to go in words: the board
	// says "under a minute" rather than nothing.
	out.Median = max(out.Median, time.Second)
	out.High = max(out.High, out.Median)
	return out, nil
}
