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
//     of the previous 30 values (or, when smaller, the spread of its steps:
//     a loss still falling fast widens its window by its trend), z ≥ 8 and
//     at least 1.5× the median.
//   - divergence: the statistical detector, a one-sided clipped CUSUM (see
//     below); and, before the spike detector has a window (its first 8
//     values), a loss that reaches 10× where it started (the lowest of its
//     first 5 values), at once.
//   - no_progress: a run that does not learn (see below): once per attempt.
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
// # No progress
//
// A training loss is judged from its 8th point to its 100th: where it
// started is the median of its first quarter (at least 5 values, a blow-up
// left out), where it is the median of its last quarter, on log scale; the
// standard error of their difference comes from the two quarters' spreads.
// Once the drop is surely below 2% (drop + 4 se < 2%) the loss makes no
// progress; once it is surely above, it does, and is judged no more. A
// per-epoch running mean (Keras' batch loss) is not judged while it may be
// one: its first points average a batch or two and rise or fall as it finds
// its level. The mean of k batches, m_k, implies the k-th batch's loss,
// k·m_k − (k−1)·m_{k−1}, which is positive; any other series that moves
// implies one at or below zero within a few points. A quiet loss (a robust
// spread under 1%) is judged all the same: a mean of a batch or two swings
// by the batches' noise. A validation accuracy (val/test/eval keys with
// "acc") is judged at its 8th point: within 0.05 (or three times its steps'
// noise) of where it started and no better than a coin (0.5), or not moved
// at all (short of perfect), it sits at chance. The evidence is where it
// started, its worst point and its level now; a loss that blew up on the way
// gets the fix for a learning rate too high, one that never moved the fix
// for a model that does not learn. "Converging", the running-mean rule that
// keeps the divergence detector quiet while a young stream takes ever
// smaller steps, needs a stream that never blew up: a loss falling back from
// a blow-up also takes smaller and smaller steps.
//
// The warm-up, z and the smallest drop were fitted (TestFitProgress, run
// with -fit: warm-up 8, 10 or 15, the accuracy's 6, 8 or 10, z 2, 3 or 4,
// drop 2% or 5%: 54 settings) on the tuning half of the run corpus below
// and on negatives only: the generated metric cases of the fitting seeds
// and 100 Keras-style running means. The rule: no false alarm, then the
// highest recall, then the shortest median delay. The winner (recall 0.71
// on the tuning half, median delay 3 points) is DefaultConfig's.
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
//
// go test ./sentinel -run 'Runs$' -v replays the run corpus in
// testdata/runs: 76 real PyTorch runs recorded on a CPU by
// testdata/gen/record_runs.py (MLPs, a small CNN and logistic regression
// on scikit-learn's digits, iris, wine, breast cancer, moons and a
// regression; SGD, Adam and AdamW; learning rates from 1e-7 to 50; with
// and without warm-up, clipping, warm restarts, label noise, a stalling
// loader), healthy or with a fault made on purpose: a learning rate far
// too high or growing, one far too low, dead units, random labels, a
// NaN or Inf in a batch, corrupt batches. Each is labelled from how it was
// made (manifest.json), and the corpus was split once into a tuning and a
// test half; TestRuns prints both halves' precision, recall, first kind
// right and median delay per detector and holds the test half to its
// recorded figures. app's TestSentinelRunCorpusThroughTheEngine runs the
// same recordings through `niuma run`.
package sentinel
