package sim

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"niuma/shepherd"
)

// The trace evaluations behind docs/BENCHMARKS.md need the full traces and
// minutes of CPU, so they run only when asked:
//
//	go test ./shepherd/sim -run Eval -traces ../shared/data/traces -v -timeout 1h
var traces = flag.String("traces", "", "folder with philly.csv and pai2023_pods.csv; enables the TestEval* evaluations")

func openTrace(t testing.TB, name string) *os.File {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestEvalPhilly: herd, bestfit and fifo on four 14-day Philly windows at
// loads 0.5, 0.8, 1.0 and 1.3 on 8×80 GiB.
func TestEvalPhilly(t *testing.T) {
	if *traces == "" {
		t.Skip("set -traces to run trace evaluations")
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cells, err := Evaluate(jobs, []float64{14, 56, 70, 84}, 14, []float64{0.5, 0.8, 1.0, 1.3}, shepherd.Policies, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("evaluated in %v\n%s", time.Since(start), Markdown(cells))
}

// TestEvalFullReplay times the whole 82k-job Philly trace at load 0.8.
func TestEvalFullReplay(t *testing.T) {
	if *traces == "" {
		t.Skip("set -traces to run trace evaluations")
	}
	jobs, err := LoadPhilly(openTrace(t, *traces+"/philly.csv"), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	jobs = Rescale(jobs, 0.8, 8)
	for _, name := range shepherd.Policies {
		cfg := DefaultConfig()
		cfg.Policy, _ = shepherd.ByName(name)
		t0 := time.Now()
		r := Replay(jobs, cfg)
		t.Logf("%s: %v\n%s", name, time.Since(t0), r)
	}
}

// TestEvalPAIPacking: pods of PAI 2023 packed onto 8×80 GiB and 64×80 GiB.
func TestEvalPAIPacking(t *testing.T) {
	if *traces == "" {
		t.Skip("set -traces to run trace evaluations")
	}
	pods, err := LoadPAI(openTrace(t, *traces+"/pai2023_pods.csv"), 8)
	if err != nil {
		t.Fatal(err)
	}
	out := "| machine | policy | pods placed before the first refusal | GPUs asked | memory held (GiB) | free at refusal (GiB) | stranded (GiB) |\n|---|---|---|---|---|---|---|\n"
	for _, m := range []struct{ n, group int }{{8, 8}, {64, 8}} {
		for _, name := range shepherd.Policies {
			cfg := DefaultConfig()
			cfg.GPUs, cfg.GroupSize = m.n, m.group
			cfg.Policy, _ = shepherd.ByName(name)
			r := Pack(pods, cfg)
			out += fmt.Sprintf("| %d×80 GiB | %s | %d | %d | %.0f | %.0f | %.0f |\n", m.n, name, r.Placed, r.GPUs, r.UsedGiB, r.FreeGiB, r.StrandedGiB)
			t.Logf("%s %d: refused %s", name, m.n, r.Refused)
		}
	}
	t.Log("\n" + out)
}
