// Package predict learns how long a stage runs from finished attempts of
// the same template and stage, and says how long the next one will take,
// with an uncertainty.
//
// Per key (template and stage, e.g. "digits-mlp/train") it keeps the most
// recent finished runs and their numeric parameters. A prediction is the
// median of those runs, or — when enough runs vary a parameter that drives
// the work (epochs, steps, batch size, dataset size…) — a power law fitted
// against it: log duration = a + Σ bᵢ·log paramᵢ, chosen by leave-one-out
// error so that a parameter is used only when it predicts better than the
// median does. The uncertainty is the spread of the leave-one-out errors:
// Low and High bound the middle 80% of what earlier predictions missed by.
// No history gives an unknown estimate; a user's own estimate overrides a
// prediction (shepherd.Build decides that).
//
// It is pure: no I/O, no clocks. The engine feeds it from the archive; the
// simulator feeds it the trace's earlier completions.
package predict
