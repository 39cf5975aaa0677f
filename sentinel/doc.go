// Package sentinel watches metric streams, GPU telemetry and the queue for
// trouble and turns what it sees into anomalies: a kind, a severity, the
// run, stage, attempt or GPU, when, the evidence (step range and values, or
// the samples, and the statistics computed), a message in plain words and a
// suggested fix.
//
// It is pure: streams in, anomalies out. It imports no I/O packages (no os,
// no database, no network); the engine feeds it (Observe for metric points,
// ObserveGPU for telemetry, ObserveQueue for queued stages, Tick for the
// clock, EndAttempt when an attempt ends) and stores what comes back. Its
// input types (Point, GPUSample, QueueObservation) are its own, so the
// engine and gpumon adapt to it, not the other way round. Policy.Decide is
// the action model, also pure: flag, notify, stop, or retry with changed
// parameters (ApplyChanges: "lr": "*0.1"); Allowed says which a kind may
// have (a waiting stage has no attempt to retry).
//
// # Detectors
//
// Each detector reports a stream at most once (one metric of one attempt,
// one run on one GPU); Config holds every knob.
//
//   - nan: a NaN or ±Inf in any metric, at once.
//   - loss_spike: robust z-score of log(loss) against the median and MAD
//     of the previous 30 values, z ≥ 8 and at least 1.5× the median.
//   - divergence: the statistical detector, a one-sided clipped CUSUM (see
//     below).
//   - grad_explosion: a grad_norm-like metric at 10× the median of its
//     previous 30 values, or above Config.GradMax.
//   - plateau: the rolling median of the objective (15 values) has not
//     improved by 1% for 100 points and sits within 10% of its best;
//     thrown back by more than half its best, the count starts over.
//   - hang: no metric line for max(2 min, 20 × the median gap between lines)
//     while the attempt runs (Tick).
//   - overheating: within 5 °C of the GPU's slowdown threshold for 3 samples
//     in a row, or a thermal slowdown reason set.
//   - memory_leak: over the last 80 samples of a run's GPU memory, the
//     least-squares slope's lower bound (slope − 4 standard errors) is above
//     zero, the fitted growth is at least 64 MiB, and each quarter's median
//     sits above the previous one (a steady climb, not a single jump).
//   - data_stall: of the last 64 utilisation samples of a GPU a training run
//     holds, 15%–90% are below 10%, and that low/high pattern repeats: the
//     autocorrelation has a local peak ≥ 0.3 at some lag ≥ 2, rising 0.3
//     above a dip at a shorter lag (an idle run has no such peak).
//   - idle_gpu: a run holds a GPU at ≤ 2% for 10 minutes.
//   - queue_stuck: a stage has waited 30 minutes without moving up in the
//     queue (2 minutes when the shepherd says it can never fit here); the
//     message carries the shepherd's reason, the fix follows its wait code,
//     the evidence the memory needed and the largest free.
//   - gpu_health: an XID event or a new uncorrectable ECC error, at once.
//
// # The statistical detector: divergence
//
// Divergence is judged on log(loss) of training losses (keys with "loss"
// not starting with val/test/eval: a slowly rising validation loss is
// overfitting). The reference is the best level reached so far, the lowest
// rolling median of the last DivLevelWindow values. Each step adds
// u = clip((log L − ref)/σ, ±Clip) − K to a CUSUM S = max(0, S + u), where σ
// is the noise scale, 1.4826 × MAD of the last 50 step-to-step increments
// / √2 (robust to the trend, floored at 5%), estimated after 5 increments.
// An alarm is raised when S ≥ H. Clipping keeps a single outlier (a spike)
// from tripping it alone; the drift K absorbs the selection bias of "the
// lowest median so far" on a flat, noisy curve.
//
// K, H, Clip, DivLevelWindow and DivWarmup were fitted by grid search
// (TestFitDivergence, run with -fit; K in 1–2, H in 4–12, Clip in 2–5,
// window 15 or 25, warm-up 3 or 5: 192 settings) on a fitting corpus generated from seeds 10000 and up,
// disjoint from the evaluation's: 20 cases of each metric fault and 40
// healthy curves, every non-divergence case counting as a negative. The rule
// was: zero false alarms on the fitting corpus, then the highest recall,
// then the shortest median delay. The winner, K = 1.25, H = 8, Clip = 3,
// window = 25, warm-up = 5 (recall 1.0, median delay 5 steps on the fitting
// corpus; warm-up 3 tied, the first listed was kept), is DefaultConfig's.
//
// # Evaluation
//
// go test ./sentinel -run 'Eval$' -v prints precision, recall, false alarms
// per 1,000 healthy steps and median detection delay per detector, on
// generated cases with known onsets (seeded; corpus_test.go) and on real
// recordings in testdata/real: the digits-mlp demo's train stage healthy,
// diverging with lr=1.0 and SGD, and with NIUMA_DEMO_INJECT_NAN; and a
// fault-injection trainer (testdata/gen/faults.py) with a sleeping data
// loader and a leaking tensor list, whose utilisation and memory telemetry
// is its own process's (the recording machine has no GPU: the CPU stands in
// for it). testdata/gen/record_*.sh re-records them. The test fails when a
// detector's precision or recall drops below 0.9 or a NaN is missed.
package sentinel
