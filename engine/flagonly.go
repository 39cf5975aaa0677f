package engine

import (
	"context"
	"fmt"

	"niuma/sentinel"
)

// decide is the template's answer to an anomaly of a run's stage, for act,
// actQueued and a failed attempt's cuda_oom: the sentinel's decision, except that a run launched
// flag-only (RunSpec.FlagOnly) is never retried or stopped by it: such an
// answer is recorded as what it would have done, and the anomaly stays a
// flag.
func (e *Engine) decide(ctx context.Context, lr *liveRun, ls *liveStage, a sentinel.Anomaly) sentinel.Decision {
	d := lr.tmpl.Sentinel.Decide(a, ls.st.Attempts, map[string]any(lr.values))
	if !lr.run.FlagOnly || (d.Do != sentinel.Retry && d.Do != sentinel.Stop) {
		return d
	}
	e.recordNote(ctx, lr, ls, "flag_only", fmt.Sprintf("only flagged %s: the template would %s the run, but it was launched flag-only", a.Kind, d.Do))
	return sentinel.Decision{Do: sentinel.Flag}
}
