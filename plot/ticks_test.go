package plot

import (
	"math"
	"slices"
	"testing"

	gplot "gonum.org/v1/plot"
)

func labels(ts []gplot.Tick) (out []string) {
	for _, t := range ts {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

func TestLinearTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		target int
		want   []string
	}{
		// 200000/6 = 33333 → next nice step up is 50000
		{0, 200_000, 6, []string{"0", "50k", "100k", "150k", "200k"}},
		// 1/5 = 0.2 → step 0.2, one decimal
		{0, 1, 5, []string{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		// 2.3/5 = 0.46 → step 0.5 → ticks k·0.5 for k = ceil(0.3/0.5)=1 … floor(2.6/0.5)=5
		{0.3, 2.6, 5, []string{"0.5", "1.0", "1.5", "2.0", "2.5"}},
		// 3M/6 = 500k → step 500k, shown in M with one decimal
		{0, 3e6, 6, []string{"0", "0.5M", "1.0M", "1.5M", "2.0M", "2.5M", "3.0M"}},
		// 4.4/4 = 1.1 → step 2 (3 ticks); finer step 1 gives 5: both 1 off
		// target 4, the coarser wins
		{-2.2, 2.2, 4, []string{"-2", "0", "2"}},
		// 2.7/5 = 0.54 → step 1 gives 3 ticks, the finer 0.5 gives 6: closer to 5
		{0.25, 3.0, 5, []string{"0.5", "1.0", "1.5", "2.0", "2.5", "3.0"}},
		// tiny magnitudes switch to %g; 4e-6/4 = 1e-6 → step 1e-6
		{0, 4e-6, 4, []string{"0", "1e-06", "2e-06", "3e-06", "4e-06"}},
	}
	for _, tc := range tests {
		got := labels(linearTicks{target: tc.target}.Ticks(tc.lo, tc.hi))
		if !slices.Equal(got, tc.want) {
			t.Errorf("linearTicks(%g, %g, target %d) = %q, want %q", tc.lo, tc.hi, tc.target, got, tc.want)
		}
	}
	if got := (linearTicks{target: 5}).Ticks(1, 1); got != nil {
		t.Errorf("empty range gave %v", got)
	}
}

func TestLogTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []string
	}{
		{0.01, 10, []string{"0.01", "0.1", "1", "10"}},
		{0.5, 3000, []string{"1", "10", "100", "1000"}},
		{1, 1e6, []string{"1", "100", "10k", "1M"}}, // 6 decades / target 5 → every 2nd
		// less than a decade: 1-2-5 values
		{0.15, 2.5, []string{"0.2", "0.5", "1", "2"}},
		// too narrow for 1-2-5 (only 0.5 inside): linear fallback; 0.58/5 = 0.116
		// rounds up to 0.2 (3 ticks), the finer 0.1 gives 5 = target and wins
		{0.31, 0.89, []string{"0.4", "0.5", "0.6", "0.7", "0.8"}},
	}
	for _, tc := range tests {
		got := labels(logTicks{target: 5}.Ticks(tc.lo, tc.hi))
		if !slices.Equal(got, tc.want) {
			t.Errorf("logTicks(%g, %g) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{1: 1, 1.1: 2, 2: 2, 2.1: 5, 5: 5, 5.1: 10, 0.2: 0.2, 0.03: 0.05, 4200: 5000, 33_333: 50_000} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%g) = %g, want %g", raw, got, want)
		}
	}
}

func TestPrevNiceStep(t *testing.T) {
	for step, want := range map[float64]float64{1: 0.5, 2: 1, 5: 2, 10: 5, 0.2: 0.1, 50_000: 20_000, 1e-6: 5e-7} {
		if got := prevNiceStep(step); math.Abs(got-want) > want*1e-12 {
			t.Errorf("prevNiceStep(%g) = %g, want %g", step, got, want)
		}
	}
}
