package sim

import (
	"flag"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The trace evaluations behind docs/BENCHMARKS.md need the full traces and
// minutes of CPU, so they run only when asked:
//
//	go test ./shepherd/sim -run Eval -traces ../shared/data/traces -v -timeout 1h
var (
	traces   = flag.String("traces", "", "folder with philly.csv and pai2023_pods.csv; enables the TestEval* evaluations")
	evLoads  = flag.String("loads", "0.8,1.0", "loads for TestEvalPhilly")
	evSetups = flag.String("setups", "herd/none,herd/predicted,herd/noisy:0.5,bestfit,las", "policy/estimates for TestEvalPhilly")
)

func openTrace(t testing.TB, name string) *os.File {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestEvalPhilly: the setups on every virtual cluster's 14-day windows with
// at least 200 jobs, at the loads asked for.
func TestEvalPhilly(t *testing.T) {
	if *traces == "" {
		t.Skip("set -traces to run trace evaluations")
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	var loads []float64
	for _, l := range strings.Split(*evLoads, ",") {
		var v float64
		if _, err := fmtSscan(l, &v); err != nil {
			t.Fatal(err)
		}
		loads = append(loads, v)
	}
	setups, err := ParseSetups(*evSetups)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sl := Slices(jobs, 14, 200)
	cells, err := Evaluate(sl, loads, setups, DefaultConfig(), runtime.GOMAXPROCS(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d slices evaluated in %v\n%s", len(sl), time.Since(start), Summary(cells))
}

var (
	evEst      = flag.String("est", "none", "estimates for TestAblations where a variant names none")
	evVariants = flag.String("variants", "herd/predicted", "TestAblations: ablation/estimates, comma-separated")
)

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
