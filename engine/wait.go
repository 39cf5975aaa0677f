package engine

import (
	"context"

	"niuma/engine/executor"
)

// notReady says why a run's ready stage cannot start now, or nil: its
// executor is away, or the image its template names is not on this
// machine yet (the executor may be fetching it). Answers are asked once
// per reconciler pass (memo), per executor and per image.
func (e *Engine) notReady(ctx context.Context, lr *liveRun, memo map[string]error) error {
	if err := e.unavailable(ctx, lr.run.Executor, memo); err != nil {
		return err
	}
	image := lr.tmpl.Runtime.Image
	ip, ok := e.execs[lr.run.Executor].(executor.ImagePreparer)
	if !ok || image == "" {
		return nil
	}
	key := lr.run.Executor + "\x00image\x00" + image
	if err, ok := memo[key]; ok {
		return err
	}
	err := ip.PrepareImage(ctx, image)
	memo[key] = err
	return err
}
