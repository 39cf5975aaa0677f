// Package study runs a study: a search over a template's parameters whose
// trials are ordinary runs of the engine.
//
// Create stores the study (its space, objective, budget, parallelism,
// pruner and seed); a Driver then, pass after pass, follows its trials'
// runs, stops losing ones through Engine.Prune with the pruner's evidence,
// and launches the tuner's next suggestions while fewer than the study's
// parallelism are running and the budget is not spent. Everything it
// decides is written to storage before it acts on it: a trial is stored
// (numbered, with its values) before its run is submitted and linked to
// the run after, so a driver killed at any point and started again finds
// where the study stood and never runs a trial twice. The suggestions are
// seeded by the study's seed and the trials so far, so a restarted study
// suggests what the first driver would have. The tuner also learns from
// the archive: earlier succeeded runs of the same template text whose
// other parameters have the study's values count as finished trials that
// spend none of the budget.
//
// The package holds the study's I/O (engine and storage); the decisions
// themselves are the tuner's (tuner.Suggest, tuner.Pruner). It never
// changes a run's state itself: it asks the engine.
package study
