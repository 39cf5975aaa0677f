package ui

import (
	"strings"

	"niuma/engine"
	"niuma/sentinel"
)

// lrNames are the parameter names the run view takes for a learning rate,
// the parameter most run-scope fixes change.
var lrNames = []string{"lr", "learning_rate", "learning-rate", "lr0", "base_lr"}

// lrFactor is how each run-scope kind's fix changes the learning rate, in
// sentinel.Action.Set's words; the factors follow sentinel's fix texts
// (×0.1 where they say so, a halving where they say "lower" or "decay").
// A Hang is retried unchanged: its fix is to try again.
var lrFactor = map[sentinel.Kind]string{
	sentinel.NaN:           "*0.1",
	sentinel.Divergence:    "*0.1",
	sentinel.LossSpike:     "*0.5",
	sentinel.GradExplosion: "*0.5",
	sentinel.Plateau:       "*0.5",
	sentinel.Hang:          "",
}

// retryFix is the run to launch again for a run-scope anomaly: r with the
// fix applied to its parameters, and the changes as "name: old → new". ok
// is false for another scope, or when the fix needs a learning rate the
// run does not have.
func retryFix(r engine.RunInfo, kind string) (fixed engine.RunInfo, changes []string, ok bool) {
	k := sentinel.Kind(kind)
	if k.Scope() != sentinel.ScopeRun {
		return engine.RunInfo{}, nil, false
	}
	factor, known := lrFactor[k]
	if !known {
		return engine.RunInfo{}, nil, false
	}
	fixed = r
	if factor == "" {
		return fixed, nil, true
	}
	for _, name := range lrNames {
		if _, has := r.Params[name]; !has {
			continue
		}
		params, ch, err := sentinel.ApplyChanges(r.Params, map[string]string{name: factor})
		if err != nil {
			return engine.RunInfo{}, nil, false // a learning rate that is not a number
		}
		fixed.Params = params
		return fixed, ch, true
	}
	return engine.RunInfo{}, nil, false
}

// retryNote says what a retry with the fix changed, for the status line.
func retryNote(changes []string) string {
	if len(changes) == 0 {
		return "Retry with the same parameters: check them and launch."
	}
	return "Retry with the fix (" + strings.Join(changes, ", ") + "): check the parameters and launch."
}
