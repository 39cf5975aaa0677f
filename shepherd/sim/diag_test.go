package sim

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"niuma/shepherd"
)

func TestDiag(t *testing.T) {
	if *traces == "" {
		t.Skip()
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	sl := Slices(jobs, 14, 200)
	type agg struct{ n, jct, wait float64 }
	for _, pol := range []string{"bestfit", "herd"} {
		by := map[int]*agg{}
		tot := &agg{}
		for _, s := range sl {
			cfg := DefaultConfig()
			cfg.Policy, _ = shepherd.ByName(pol)
			cfg.Estimates = NoEstimates
			_, done := replay(Rescale(s.Jobs, 0.8, 8), cfg, hooks{})
			var sum float64
			for _, j := range done {
				sum += j.end - j.Submit
			}
			for _, j := range done {
				a := by[j.GPUs]
				if a == nil {
					a = &agg{}
					by[j.GPUs] = a
				}
				w := 1 / sum // weight: share of this slice's total JCT
				a.n++
				a.jct += (j.end - j.Submit) * w
				a.wait += (j.first - j.Submit) * w
				tot.jct += (j.end - j.Submit) * w
			}
		}
		var ks []int
		for k := range by {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		for _, k := range ks {
			a := by[k]
			fmt.Printf("%s gpus=%d n=%.0f share of JCT %.3f share of wait %.3f\n", pol, k, a.n, a.jct/float64(len(sl)), a.wait/float64(len(sl)))
		}
	}
}

func robust(p *shepherd.Policy) {
	p.AgeToTop = true
	p.FewerGPUsFirst = true
	p.ServiceLevels = []time.Duration{time.Hour}
	p.PreemptForService = true
}

func herdWith(f func(p *shepherd.Policy)) func() shepherd.Policy {
	return func() shepherd.Policy { p := shepherd.Herd(shepherd.HerdOptions{}); f(&p); return p }
}

var variant = map[string]func() shepherd.Policy{
	"herd":            herdWith(func(p *shepherd.Policy) {}),
	"A":               herdWith(robust),
	"A-nores":         herdWith(func(p *shepherd.Policy) { robust(p); p.Reserve = false }),
	"A-hold8":         herdWith(func(p *shepherd.Policy) { robust(p); p.HoldLimit = 8 * time.Hour }),
	"A-age2":          herdWith(func(p *shepherd.Policy) { robust(p); p.AgingStep = 2 * time.Hour }),
	"A-f8":            herdWith(func(p *shepherd.Policy) { robust(p); p.AgingFactor = 8 }),
	"top":             herdWith(func(p *shepherd.Policy) { p.AgeToTop = true }),
	"top-fewer":       herdWith(func(p *shepherd.Policy) { p.AgeToTop = true; p.FewerGPUsFirst = true }),
	"top-fewer-nores": herdWith(func(p *shepherd.Policy) { p.AgeToTop = true; p.FewerGPUsFirst = true; p.Reserve = false }),
	"top-fewer-lasp": herdWith(func(p *shepherd.Policy) {
		p.AgeToTop = true
		p.FewerGPUsFirst = true
		p.ServiceLevels = []time.Duration{time.Hour}
		p.PreemptForService = true
	}),
	"fewer":          herdWith(func(p *shepherd.Policy) { p.FewerGPUsFirst = true }),
	"fewer-na":       herdWith(func(p *shepherd.Policy) { p.FewerGPUsFirst = true; p.AgingStep = 0 }),
	"age4h":          herdWith(func(p *shepherd.Policy) { p.AgingStep = 4 * 3600e9 }),
	"fewer-age4h":    herdWith(func(p *shepherd.Policy) { p.FewerGPUsFirst = true; p.AgingStep = 4 * 3600e9 }),
	"las1h":          herdWith(func(p *shepherd.Policy) { p.ServiceLevels = []time.Duration{time.Hour} }),
	"lasp":           herdWith(func(p *shepherd.Policy) { p.ServiceLevels = []time.Duration{time.Hour}; p.PreemptForService = true }),
	"fewer-na-nores": herdWith(func(p *shepherd.Policy) { p.FewerGPUsFirst = true; p.AgingStep = 0; p.Reserve = false }),
	"na-nores":       herdWith(func(p *shepherd.Policy) { p.AgingStep = 0; p.Reserve = false }),
	"noreserve":      func() shepherd.Policy { p := shepherd.Herd(shepherd.HerdOptions{}); p.Reserve = false; return p },
	"nopreempt":      func() shepherd.Policy { p := shepherd.Herd(shepherd.HerdOptions{}); p.Preempt = false; return p },
	"noaging":        func() shepherd.Policy { p := shepherd.Herd(shepherd.HerdOptions{}); p.AgingStep = 0; return p },
	"share3":         func() shepherd.Policy { return shepherd.Herd(shepherd.HerdOptions{MaxPerGPU: 3}) },
	"share9":         func() shepherd.Policy { return shepherd.Herd(shepherd.HerdOptions{MaxPerGPU: 9}) },
	"bfscore": func() shepherd.Policy {
		p := shepherd.Herd(shepherd.HerdOptions{})
		p.Scorers = []shepherd.Scorer{shepherd.LeastFree{}}
		return p
	},
	"hold0": func() shepherd.Policy { return shepherd.Herd(shepherd.HerdOptions{HoldLimit: 1}) },
	"hold8": func() shepherd.Policy { return shepherd.Herd(shepherd.HerdOptions{HoldLimit: 8 * 3600e9}) },
}

func TestVariants(t *testing.T) {
	if *traces == "" {
		t.Skip()
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
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
		setups = append(setups, Setup{Policy: name, Estimates: est, Make: variant[name]})
	}
	var loads []float64
	for _, l := range splitList(*evLoads) {
		var v float64
		fmtSscan(l, &v)
		loads = append(loads, v)
	}
	cells, err := Evaluate(Slices(jobs, 14, 200), loads, setups, DefaultConfig(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(Summary(cells))
}

func TestPerSlice(t *testing.T) {
	if *traces == "" {
		t.Skip()
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	est, _ := ParseEstimates(*evEst)
	setups := []Setup{{Policy: "bestfit"}}
	for _, v := range splitList(*evVariants) {
		setups = append(setups, Setup{Policy: v, Estimates: est, Make: variant[v]})
	}
	var load float64
	fmtSscan(*evLoads, &load)
	sl := Slices(jobs, 14, 200)
	cells, _ := Evaluate(sl, []float64{load}, setups, DefaultConfig(), 2, nil)
	for i, s := range sl {
		line := fmt.Sprintf("%-12s n=%5d bf=%7.1fh", s.Name(), len(s.Jobs), cells[0].Reports[i].AvgJCT/3600)
		for _, c := range cells[1:] {
			line += fmt.Sprintf(" %s=%.2f(p%d)", c.Setup.Policy, c.Reports[i].AvgJCT/cells[0].Reports[i].AvgJCT, c.Reports[i].Preemptions)
		}
		fmt.Println(line)
	}
}
