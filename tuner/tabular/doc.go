// Package tabular replays tabular hyperparameter-optimisation benchmarks
// through the tuner: tables in which every configuration of a real search
// space was trained once per seed, so that a search is scored in
// milliseconds per trial and compared with another tuner on the same work
// (niuma tune --table). It follows the protocol of the reference script
// that runs Optuna on the same tables: the space comes from the columns,
// proposals are snapped to the table's grid, a trial's result is the mean
// over seeds (one seed drawn at random when noisy), and the score after t
// trials is the simple regret of the incumbent, reported as the median
// over repetitions.
//
// Curves (LoadCurves, ReplayPruning) do the same for learning curves
// recorded from real runs, to measure early stopping: every trial's curve
// is revealed step by step and a pruner decides after each step.
//
// This package reads files; the tuner itself stays pure.
package tabular
