package sim

import (
	"flag"
	"fmt"
	"math"
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

func fgd3(p *shepherd.Policy) {
	robust(p)
	p.Filters[4] = shepherd.Share{Max: 3}
	p.Scorers = []shepherd.Scorer{shepherd.Fragmentation{}, shepherd.FewestTenants{Weight: 1}}
}

var variants2 = map[string]func() shepherd.Policy{
	"B":             herdWith(fgd3),
	"B-nopre":       herdWith(func(p *shepherd.Policy) { fgd3(p); p.Preempt = false }),
	"B-nosvc":       herdWith(func(p *shepherd.Policy) { fgd3(p); p.PreemptForService = false }),
	"B-notop":       herdWith(func(p *shepherd.Policy) { fgd3(p); p.AgeToTop = false; p.AgingStep = 0 }),
	"B-nores":       herdWith(func(p *shepherd.Policy) { fgd3(p); p.Reserve = false }),
	"C":             herdWith(func(p *shepherd.Policy) { fgd3(p); p.PreemptLonger = true }),
	"C-nores":       herdWith(func(p *shepherd.Policy) { fgd3(p); p.PreemptLonger = true; p.Reserve = false }),
	"C-nores-nopre": herdWith(func(p *shepherd.Policy) { fgd3(p); p.Preempt = false; p.Reserve = false }),
}

func init() {
	for k, v := range variants2 {
		variant[k] = v
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
	"herd": herdWith(func(p *shepherd.Policy) {}),
	"A-fgd-s9": herdWith(func(p *shepherd.Policy) {
		robust(p)
		p.Filters[4] = shepherd.Share{Max: 9}
		p.Scorers = []shepherd.Scorer{shepherd.Fragmentation{}, shepherd.FewestTenants{Weight: 1}}
	}),
	"A-bf-s9": herdWith(func(p *shepherd.Policy) {
		robust(p)
		p.Filters[4] = shepherd.Share{Max: 9}
		p.Scorers = []shepherd.Scorer{shepherd.LeastFree{}}
	}),
	"A-fgd-s3": herdWith(func(p *shepherd.Policy) {
		robust(p)
		p.Filters[4] = shepherd.Share{Max: 3}
		p.Scorers = []shepherd.Scorer{shepherd.Fragmentation{}, shepherd.FewestTenants{Weight: 1}}
	}),
	"A-fgd": herdWith(func(p *shepherd.Policy) {
		robust(p)
		p.Scorers = []shepherd.Scorer{shepherd.Fragmentation{}, shepherd.FewestTenants{Weight: 1}}
	}),
	"A-fgdt": herdWith(func(p *shepherd.Policy) {
		robust(p)
		p.Scorers = []shepherd.Scorer{shepherd.Fragmentation{}, shepherd.FewestTenants{Weight: 8192}}
	}),
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

func TestPackVariants(t *testing.T) {
	if *traces == "" {
		t.Skip()
	}
	pods, err := LoadPAI(openTrace(t, *traces+"/pai2023_pods.csv"), 8)
	if err != nil {
		t.Fatal(err)
	}
	cs := []Cluster{Workstation(8, 80<<10, 0), Workstation(64, 80<<10, 8)}
	if *evNodes {
		nodes, err := LoadPAINodes(openTrace(t, *traces+"/pai2023_gpu_nodes.csv"), 80<<10)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, nodes)
	}
	for _, c := range cs {
		for _, v := range append([]string{"bestfit", "herd"}, splitList(*evVariants)...) {
			p, err := shepherd.ByName(v)
			if f, ok := variant[v]; ok {
				p, err = f(), nil
			}
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			r := Pack(pods, c, p)
			fmt.Printf("%d GPUs %-10s placed %5d stranded %7.0f GiB (%v) %s\n", len(c.GPUs), v, r.Placed, r.StrandedGiB, time.Since(t0).Round(time.Millisecond), r.Refused)
		}
	}
}

func TestPredQuality(t *testing.T) {
	if *traces == "" {
		t.Skip()
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	var load float64
	fmtSscan(*evLoads, &load)
	var male, n float64
	var first, last []float64
	for _, s := range Slices(jobs, 14, 200) {
		cfg := DefaultConfig()
		cfg.Policy = variant["A"]()
		cfg.Estimates = Predicted
		est := map[string]float64{}
		estFirst := map[string]float64{}
		replay(Rescale(s.Jobs, load, 8), cfg, hooks{request: func(_ float64, j *Job, r shepherd.Request) {
			if r.Estimate > 0 && r.Attained == 0 {
				est[j.ID] = r.Estimate.Seconds()
				if _, ok := estFirst[j.ID]; !ok {
					estFirst[j.ID] = r.Estimate.Seconds()
				}
			}
		}})
		for _, j := range s.Jobs {
			if e, ok := est[j.ID]; ok && j.GPUs == 1 {
				male += abs(log(e / j.Duration))
				n++
				last = append(last, log(e/j.Duration))
				first = append(first, log(estFirst[j.ID]/j.Duration))
			}
		}
	}
	var mf float64
	for _, x := range first {
		mf += abs(x)
	}
	fmt.Printf("1-GPU jobs %.0f: mean abs log error last %.2f first %.2f\n", n, male/n, mf/float64(len(first)))
}

func abs(x float64) float64 { return max(x, -x) }
func log(x float64) float64 { return math.Log(x) }

var evSlice = flag.String("slice", "11cb48@70", "TestOneSlice")

func TestOneSlice(t *testing.T) {
	if *traces == "" {
		t.Skip()
	}
	jobs, _ := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	var load float64
	fmtSscan(*evLoads, &load)
	for _, s := range Slices(jobs, 14, 200) {
		if s.Name() != *evSlice {
			continue
		}
		for _, v := range append([]string{"bestfit"}, splitList(*evVariants)...) {
			cfg := DefaultConfig()
			cfg.Policy, _ = shepherd.ByName(v)
			if f, ok := variant[v]; ok {
				cfg.Policy = f()
			}
			cfg.Estimates, _ = ParseEstimates(*evEst)
			heads := map[string]int{}
			debugPreempt = func(j *sjob, n int) { heads[fmt.Sprintf("g%d/p%d", j.GPUs, j.Priority)] += n }
			rep, done := replay(Rescale(s.Jobs, load, 8), cfg, hooks{})
			fmt.Println("preempting heads:", heads)
			type agg struct{ n, jct, wait, dur float64 }
			by := map[string]*agg{}
			for _, j := range done {
				for _, k := range []string{fmt.Sprintf("g%d", j.GPUs), fmt.Sprintf("p%d", j.Priority), fmt.Sprintf("m%v", j.MemMilli == 1000)} {
					a := by[k]
					if a == nil {
						a = &agg{}
						by[k] = a
					}
					a.n++
					a.jct += j.end - j.Submit
					a.wait += j.first - j.Submit
					a.dur += j.Duration
				}
			}
			fmt.Printf("%s avgJCT %.2fh util %.2f preempt %d\n", v, rep.AvgJCT/3600, rep.GPUUtil, rep.Preemptions)
			for _, k := range []string{"g1", "g2", "g4", "g8", "p0", "p1", "p2", "mtrue", "mfalse"} {
				if a := by[k]; a != nil {
					fmt.Printf("   %-6s n=%5.0f jct %7.2fh wait %7.2fh dur %6.2fh\n", k, a.n, a.jct/a.n/3600, a.wait/a.n/3600, a.dur/a.n/3600)
				}
			}
		}
	}
}

func TestSliceTimeline(t *testing.T) {
	if *traces == "" {
		t.Skip()
	}
	jobs, _ := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	var load float64
	fmtSscan(*evLoads, &load)
	for _, s := range Slices(jobs, 14, 200) {
		if s.Name() != *evSlice {
			continue
		}
		res := map[string][]*sjob{}
		for _, v := range append([]string{"bestfit"}, splitList(*evVariants)...) {
			cfg := DefaultConfig()
			cfg.Policy, _ = shepherd.ByName(v)
			if f, ok := variant[v]; ok {
				cfg.Policy = f()
			}
			cfg.Estimates, _ = ParseEstimates(*evEst)
			_, done := replay(Rescale(s.Jobs, load, 8), cfg, hooks{})
			sort.Slice(done, func(i, j int) bool { return done[i].Submit < done[j].Submit })
			res[v] = done
		}
		// wait by submit-time decile
		for _, v := range append([]string{"bestfit"}, splitList(*evVariants)...) {
			d := res[v]
			line := v + ":"
			for k := 0; k < 10; k++ {
				var w float64
				lo, hi := k*len(d)/10, (k+1)*len(d)/10
				for _, j := range d[lo:hi] {
					w += j.first - j.Submit
				}
				line += fmt.Sprintf(" %6.1f", w/float64(hi-lo)/3600)
			}
			fmt.Println(line)
		}
	}
}

func init() {
	more := map[string]func(p *shepherd.Policy){
		"D":    func(p *shepherd.Policy) { fgd3(p); p.PreemptLonger = true; p.AgingLevels = 1 },
		"D8":   func(p *shepherd.Policy) { fgd3(p); p.PreemptLonger = true; p.AgingFactor = 8 },
		"D1-8": func(p *shepherd.Policy) { fgd3(p); p.PreemptLonger = true; p.AgingLevels = 1; p.AgingFactor = 8 },
	}
	for k, f := range more {
		variant[k] = herdWith(f)
	}
}

func init() {
	variant["E"] = herdWith(func(p *shepherd.Policy) { fgd3(p); p.PreemptLonger = true; p.AgeToTop = false; p.AgeBelowTop = true })
	variant["E-nores"] = herdWith(func(p *shepherd.Policy) {
		fgd3(p)
		p.PreemptLonger = true
		p.AgeToTop = false
		p.AgeBelowTop = true
		p.Reserve = false
	})
}
