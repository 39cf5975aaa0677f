package sentinel_test

import (
	"math"
	"slices"
	"testing"

	"niuma/sentinel"
)

// TestFitDivergence is how the divergence detector's CUSUM parameters were
// chosen: a grid search over the drift K, the threshold H, the clip, the
// rolling-median window and the warm-up, on a fitting corpus generated from seeds the
// evaluation never uses (10000 and up). The rule: no false alarm on the
// fitting corpus (healthy, spike, NaN, gradient, plateau and hang cases all
// count as negatives for divergence), then the highest recall, then the
// shortest median delay. Run it with: go test ./sentinel -run FitDivergence -fit -v
func TestFitDivergence(t *testing.T) {
	if !*fitFlag {
		t.Skip("the parameter fit runs with -fit")
	}
	cases := generatedMetricCases(10000, 20)
	type result struct {
		k, h, clip float64
		win, warm  int
		fp         int
		recall     float64
		delay      float64
	}
	var res []result
	for _, warm := range []int{3, 5} {
		for _, win := range []int{15, 25} {
			for _, clip := range []float64{2, 3, 5} {
				for _, k := range []float64{1, 1.25, 1.5, 2} {
					for _, h := range []float64{4, 6, 8, 12} {
						cfg := sentinel.DefaultConfig()
						cfg.DivK, cfg.DivH, cfg.DivClip, cfg.DivLevelWindow, cfg.DivWarmup = k, h, clip, win, warm
						sc := evaluate(cfg, cases)[sentinel.Divergence]
						res = append(res, result{k, h, clip, win, warm, sc.fp, sc.recall(), sc.medianDelay()})
					}
				}
			}
		}
	}
	slices.SortFunc(res, func(a, b result) int {
		switch {
		case a.fp != b.fp:
			return a.fp - b.fp
		case a.recall != b.recall:
			return int(math.Copysign(1, b.recall-a.recall))
		case a.delay != b.delay:
			return int(math.Copysign(1, a.delay-b.delay))
		}
		return 0
	})
	for i, r := range res[:min(15, len(res))] {
		t.Logf("#%d K=%.2f H=%.0f clip=%.0f window=%d warm-up=%d: false alarms %d, recall %.3f, median delay %.1f steps",
			i+1, r.k, r.h, r.clip, r.win, r.warm, r.fp, r.recall, r.delay)
	}
}

// TestFitProgress is how the progress detector's warm-up, its z and its
// smallest drop were chosen: a grid search on the tuning half of the run
// corpus (testdata/runs; the test half is never looked at here) and on
// generated metric cases from the fitting seeds (10000 and up: every one
// of them, healthy or not, is a negative for no_progress), and on the
// first 200 points of Keras-style running means (seeds 1001-1100; the unit
// tests use 1-20), healthy too. The rule: no no_progress flag on a
// generated case, a running mean or a healthy run of the tuning half, then the highest recall of the tuning half's no_progress runs,
// then the shortest median delay. Run it with:
// go test ./sentinel -run FitProgress -fit -v
func TestFitProgress(t *testing.T) {
	if !*fitFlag {
		t.Skip("the parameter fit runs with -fit")
	}
	cases := generatedMetricCases(10000, 20)
	rs := half(loadRuns(t), "tune")
	lines := loadRunLines(t, rs)
	type result struct {
		warm, acc     int
		z, drop       float64
		fp            int
		recall, delay float64
	}
	var res []result
	for _, warm := range []int{8, 10, 15} {
		for _, acc := range []int{6, 8, 10} {
			for _, z := range []float64{2, 3, 4} {
				for _, drop := range []float64{0.02, 0.05} {
					cfg := sentinel.DefaultConfig()
					cfg.ProgressWarmup, cfg.AccWarmup, cfg.ProgressZ, cfg.ProgressMinDrop = warm, acc, z, drop
					fp := evaluate(cfg, cases)[sentinel.NoProgress].fp
					for seed := uint64(1001); seed <= 1100; seed++ {
						for _, a := range sentinel.New(cfg).ObserveAll(sentinel.KerasRunningMean(seed, 1, 200, 0.5, 0.8)) {
							if a.Kind == sentinel.NoProgress {
								fp++
							}
						}
					}
					sc := scoreRuns(t, cfg, rs, lines)
					fp += sc.fp[sentinel.NoProgress]
					k := string(sentinel.NoProgress)
					res = append(res, result{warm, acc, z, drop, fp, ratio(sc.found[k], sc.cases[k]), medianOf(sc.delays[k])})
				}
			}
		}
	}
	slices.SortFunc(res, func(a, b result) int {
		switch {
		case a.fp != b.fp:
			return a.fp - b.fp
		case a.recall != b.recall:
			return int(math.Copysign(1, b.recall-a.recall))
		case a.delay != b.delay:
			return int(math.Copysign(1, a.delay-b.delay))
		}
		return 0
	})
	for i, r := range res[:min(15, len(res))] {
		t.Logf("#%d warm-up=%d accuracy warm-up=%d z=%.0f drop=%.2f: false alarms %d, recall %.3f, median delay %.1f points",
			i+1, r.warm, r.acc, r.z, r.drop, r.fp, r.recall, r.delay)
	}
}
