// Package tuner searches a template's parameters for the best objective:
// search spaces (float, log-float, int, choice and bool parameters, some of
// them active only when others take given values), grids (every
// combination of listed values: a sweep), random search, Bayesian
// optimisation, early-stopping decisions and explanations of them.
//
// The room is pure: functions of data in, decisions with their evidence
// out. It imports no I/O package and knows nothing of templates, runs or
// storage; engine/template turns a template's parameter schema into a
// Space, and engine/study stores studies and runs their trials as
// ordinary runs through the engine.
//
// Bayesian optimisation (Fit, Model, Suggest) models the objective with a
// Gaussian process over the mixed space: each numeric parameter scaled to
// [0, 1] (in log space when the schema says log), each choice compared by
// equality, one length scale per parameter in a Matérn-5/2 kernel, fitted
// by maximising the marginal likelihood. Observed objectives are warped
// to normal scores first, so that a few failed trials with terrible values
// do not flatten the region that matters. After an opening Latin
// hypercube, trials alternate between the model's best expected
// improvement and a Parzen-estimator draw from where the best trials are
// dense (as TPE draws), which keeps sampling a plateau of near-ties that
// expected improvement alone would circle; docs/BENCHMARKS.md has the
// comparison that chose this. Trials still running are believed to land
// on the model's prediction (the kriging believer) and count as losers
// for the Parzen draws, so parallel suggestions spread out instead of
// piling onto one point. A suggestion comes with
// its prediction (mean ± one standard deviation) and the earlier trials
// that weigh most in it; Model.Importance ranks the parameters by the
// share of the objective's variance each one explains on its own (a
// functional-ANOVA main effect of the model).
//
// Randomness is seeded: the same seed and the same trials give the same
// suggestions, so a study that is stopped and restarted goes on exactly.
//
// Pruners (MedianRule, SuccessiveHalving) decide whether a running trial
// should stop early by comparing its curve with the other trials' at the
// same step; a Decision carries a reason code and the numbers behind it.
package tuner
