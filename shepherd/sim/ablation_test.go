package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"niuma/shepherd"
)

// Ablations are herd with one feature changed: how docs/BENCHMARKS.md
// knows what each feature is worth.
//
//	go test ./shepherd/sim -run Ablations -traces ../shared/data/traces -v -timeout 2h \
//	    -loads 0.8,1.0 -variants herd/predicted,reserve/predicted,share2/none
var ablations = map[string]func(p *shepherd.Policy){
	"herd": func(*shepherd.Policy) {},
	// Hold GPUs for the head (bounded by the 2 h hold limit).
	"reserve": func(p *shepherd.Policy) { *p = shepherd.Herd(shepherd.HerdOptions{Reserve: true}) },
	// Preempt for priority and service regardless of the work displaced.
	"anypreempt": func(p *shepherd.Policy) { p.PreemptLonger = false },
	// Spare a spot run for 2 h after it starts.
	"preempt2h": func(p *shepherd.Policy) { p.PreemptAfter = 2 * time.Hour },
	// Pack as best fit does (least free memory first).
	"tight": func(p *shepherd.Policy) { p.Scorers = []shepherd.Scorer{shepherd.LeastFree{}} },
	// No sharing limit, packed as best fit does.
	"tightall": func(p *shepherd.Policy) {
		p.Filters[4] = shepherd.Share{}
		p.Scorers = []shepherd.Scorer{shepherd.LeastFree{}}
	},
	// No preemption at all.
	"nopreempt": func(p *shepherd.Policy) { p.Preempt = false },
	// Age without a cap: old runs overtake the most urgent.
	"agefree": func(p *shepherd.Policy) { p.AgeBelowTop = false },
	// No least-attained-service levels.
	"nolas": func(p *shepherd.Policy) { p.ServiceLevels = nil; p.PreemptForService = false },
	// Other service levels (least attained service) than one GPU-hour.
	"las15m": func(p *shepherd.Policy) { p.ServiceLevels = []time.Duration{15 * time.Minute} },
	"las4h":  func(p *shepherd.Policy) { p.ServiceLevels = []time.Duration{4 * time.Hour} },
	// Victims by most attained service first, not the most recent start.
	"victimlas": func(p *shepherd.Policy) { p.PreemptMostServed = true },
	// A spot run of lower priority stopped only past the service level.
	"lowerserved": func(p *shepherd.Policy) { p.PreemptLowerServed = true },
	// No preference for spot runs among ties.
	"nospotfirst": func(p *shepherd.Policy) { p.PreemptibleFirst = false },
	// More service levels.
	"levels2": func(p *shepherd.Policy) { p.ServiceLevels = []time.Duration{time.Hour, 8 * time.Hour} },
	// Spot runs spared 10 min after they start, not 30 min.
	"grace10": func(p *shepherd.Policy) { p.PreemptAfter = 10 * time.Minute },
	// One priority level per 2 h waited, not 30 min.
	"age2h": func(p *shepherd.Policy) { p.AgingStep = 2 * time.Hour },
	// Long runs age slower: one level per 4× their estimate, not 2×.
	"agef4": func(p *shepherd.Policy) { p.AgingFactor = 4 },
	// One priority level per hour waited, not 30 min.
	"age1h": func(p *shepherd.Policy) { p.AgingStep = time.Hour },
	// At most two runs per GPU, herd's scoring.
	"share2h": func(p *shepherd.Policy) { p.Filters[4] = shepherd.Share{Max: 2} },
	// More sharing.
	"share4": func(p *shepherd.Policy) { p.Filters[4] = shepherd.Share{Max: 4} },
	// Two runs per GPU, spread to empty GPUs first (the earlier herd).
	"share2": func(p *shepherd.Policy) {
		p.Filters[4] = shepherd.Share{Max: 2}
		p.Scorers = []shepherd.Scorer{shepherd.FewestTenants{Weight: 1 << 24}, shepherd.LeastFragment{}}
	},
}

func ablationSetups(t *testing.T) []Setup {
	setups := []Setup{{Policy: "bestfit"}, {Policy: "las"}}
	for _, v := range splitList(*evVariants) {
		name, e, ok := strings.Cut(v, "/")
		if !ok {
			e = *evEst
		}
		est, err := ParseEstimates(e)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := ablations[name]
		if !ok {
			t.Fatalf("no ablation %q", name)
		}
		setups = append(setups, Setup{Policy: name, Estimates: est, Make: func() shepherd.Policy {
			p := shepherd.Herd(shepherd.HerdOptions{})
			f(&p)
			return p
		}})
	}
	return setups
}

func TestAblations(t *testing.T) {
	if *traces == "" {
		t.Skip("set -traces to run trace evaluations")
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	var loads []float64
	for _, l := range splitList(*evLoads) {
		var v float64
		if _, err := fmtSscan(l, &v); err != nil {
			t.Fatal(err)
		}
		loads = append(loads, v)
	}
	cells, err := Evaluate(Slices(jobs, 14, 200), loads, ablationSetups(t), DefaultConfig(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(Summary(cells))
}

// TestPerWindow prints each window's average JCT against bestfit's, for
// the ablations asked for at the first load.
func TestPerWindow(t *testing.T) {
	if *traces == "" {
		t.Skip("set -traces to run trace evaluations")
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	var load float64
	fmtSscan(splitList(*evLoads)[0], &load)
	sl := Slices(jobs, 14, 200)
	cells, err := Evaluate(sl, []float64{load}, ablationSetups(t), DefaultConfig(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sl {
		line := fmt.Sprintf("%-12s %5d jobs  bestfit %7.1f h", s.Name(), len(s.Jobs), cells[0].Reports[i].AvgJCT/3600)
		for _, c := range cells[1:] {
			line += fmt.Sprintf("  %s %.2f×", c.Setup.Name(), c.Reports[i].AvgJCT/cells[0].Reports[i].AvgJCT)
		}
		fmt.Println(line)
	}
}
