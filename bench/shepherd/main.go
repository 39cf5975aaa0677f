// Command shepherd regenerates the shepherd's benchmarks in
// docs/BENCHMARKS.md: every Philly virtual cluster's 14-day windows with
// enough jobs, replayed at loads 0.5, 0.8, 1.0 and 1.3 on 8×80 GiB under
// each estimate regime, herd against bestfit and las; PAI 2023 packing onto
// a workstation and onto PAI's own nodes; and the speed of one pass and of a
// full Philly replay. It writes the tables between the markers
// "<!-- shepherd-bench:begin -->" and "<!-- shepherd-bench:end -->" of the
// file given with -doc (or prints them).
//
//	go run ./bench/shepherd -traces ../shared/data/traces -doc docs/BENCHMARKS.md
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"niuma/shepherd"
	"niuma/shepherd/sim"
)

func main() {
	traces := flag.String("traces", "", "folder with philly.csv, pai2023_pods.csv and pai2023_gpu_nodes.csv (required)")
	doc := flag.String("doc", "", "markdown file whose marked section is replaced (default: print)")
	loads := flag.String("loads", "0.5,0.8,1.0,1.3", "offered loads")
	seeds := flag.String("seeds", "1", "seeds for what the traces lack (memory, priorities, estimate noise), comma-separated")
	minJobs := flag.Int("min-jobs", 200, "a window needs at least this many jobs")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "replays at a time")
	skipSpeed := flag.Bool("skip-speed", false, "leave the speed section out")
	onlySpeed := flag.Bool("only-speed", false, "measure the speed section only (with -doc, replace only its ### Speed part)")
	flag.Parse()
	if *traces == "" {
		fmt.Fprintln(os.Stderr, "bench/shepherd: -traces is required, e.g. -traces ../shared/data/traces")
		os.Exit(2)
	}
	if *onlySpeed {
		t0 := time.Now()
		out, err := speedSection(*traces)
		if err == nil {
			out += fmt.Sprintf("\n(The speed section alone, `-only-speed`, took %v.)\n", time.Since(t0).Round(time.Second))
			if *doc == "" {
				fmt.Print(out)
				return
			}
			err = spliceSpeed(*doc, out)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/shepherd:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "bench/shepherd: wrote the speed section of", *doc)
		return
	}
	out, err := run(*traces, *loads, *seeds, *minJobs, *workers, !*skipSpeed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/shepherd:", err)
		os.Exit(1)
	}
	if *doc == "" {
		fmt.Print(out)
		return
	}
	if err := splice(*doc, out); err != nil {
		fmt.Fprintln(os.Stderr, "bench/shepherd:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "bench/shepherd: wrote", *doc)
}

const (
	begin = "<!-- shepherd-bench:begin -->"
	end   = "<!-- shepherd-bench:end -->"
)

// splice replaces the marked section of doc with text.
func splice(doc, text string) error {
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section to replace", doc, begin, end)
	}
	var nb bytes.Buffer
	nb.Write(b[:i+len(begin)])
	nb.WriteString("\n")
	nb.WriteString(text)
	nb.Write(b[j:])
	return os.WriteFile(doc, nb.Bytes(), 0o644)
}

// spliceSpeed replaces the ### Speed part of doc's marked section (from
// its heading to the section's end) with text, leaving the tables above
// it as the last full run wrote them.
func spliceSpeed(doc, text string) error {
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section to replace", doc, begin, end)
	}
	k := bytes.Index(b[i:j], []byte("\n### Speed\n"))
	if k < 0 {
		return fmt.Errorf("%s's marked section has no ### Speed part", doc)
	}
	var nb bytes.Buffer
	nb.Write(b[:i+k])
	nb.WriteString(text)
	// The full run's own timing line stays: the tables above are its.
	if l := bytes.Index(b[i+k:j], []byte("(The whole command took")); l >= 0 {
		line, _, _ := bytes.Cut(b[i+k+l:j], []byte("\n"))
		nb.Write(line)
		nb.WriteString("\n")
	}
	nb.Write(b[j:])
	return os.WriteFile(doc, nb.Bytes(), 0o644)
}

// setups are what the Philly table compares: herd under each estimate
// regime, and the two references (which use no estimates).
var setups = []sim.Setup{
	{Policy: "herd", Estimates: sim.NoEstimates},
	{Policy: "herd", Estimates: sim.Predicted},
	{Policy: "herd", Estimates: sim.Noisy(0.5)},
	{Policy: "herd", Estimates: sim.Noisy(1.0)},
	{Policy: "bestfit"},
	{Policy: "las"},
}

func run(traces, loadList, seedList string, minJobs, workers int, speed bool) (string, error) {
	var loads []float64
	for _, f := range strings.Split(loadList, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return "", fmt.Errorf("-loads %q: write loads like 0.5,0.8", loadList)
		}
		loads = append(loads, v)
	}
	var seeds []uint64
	for _, f := range strings.Split(seedList, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return "", fmt.Errorf("-seeds %q: write seeds like 1,2", seedList)
		}
		seeds = append(seeds, v)
	}
	var b strings.Builder
	started := time.Now()
	seedFlag := ""
	if seedList != "1" {
		seedFlag = " -seeds " + seedList
	}
	fmt.Fprintf(&b, "Generated by `go run ./bench/shepherd -traces ../shared/data/traces%s -doc docs/BENCHMARKS.md` on %s: %s.\n\n",
		seedFlag, time.Now().UTC().Format("2006-01-02"), machine())

	var slices []sim.Slice
	for _, seed := range seeds {
		jobs, err := loadPhilly(filepath.Join(traces, "philly.csv"), seed)
		if err != nil {
			return "", err
		}
		for _, s := range sim.Slices(jobs, 14, minJobs) {
			if len(seeds) > 1 {
				s.Cluster += "#" + strconv.FormatUint(seed, 10)
			}
			slices = append(slices, s)
		}
	}
	fmt.Fprintf(os.Stderr, "bench/shepherd: %d windows × %d loads × %d setups\n", len(slices), len(loads), len(setups))
	cells, err := sim.Evaluate(slices, loads, setups, sim.DefaultConfig(), workers, func(done, total int) {
		if done%25 == 0 || done == total {
			fmt.Fprintf(os.Stderr, "\rbench/shepherd: %d/%d replays (%v)", done, total, time.Since(started).Round(time.Second))
		}
	})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return "", err
	}
	b.WriteString(sim.PhillyMarkdown(slices, cells, seeds))

	pack, err := packing(traces)
	if err != nil {
		return "", err
	}
	b.WriteString(pack)
	if speed {
		s, err := speedSection(traces)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	fmt.Fprintf(&b, "\n(The whole command took %v.)\n", time.Since(started).Round(time.Second))
	return b.String(), nil
}

func loadPhilly(path string, seed uint64) ([]sim.Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return sim.LoadPhilly(f, 8, seed)
}

// packing is the PAI 2023 table: pods in creation order onto 8 and 64
// GPUs of 80 GiB, and onto PAI's own 1,213 nodes.
func packing(traces string) (string, error) {
	f, err := os.Open(filepath.Join(traces, "pai2023_pods.csv"))
	if err != nil {
		return "", err
	}
	pods, err := sim.LoadPAI(f, 8)
	f.Close()
	if err != nil {
		return "", err
	}
	nf, err := os.Open(filepath.Join(traces, "pai2023_gpu_nodes.csv"))
	if err != nil {
		return "", err
	}
	nodes, err := sim.LoadPAINodes(nf, 80<<10)
	nf.Close()
	if err != nil {
		return "", err
	}
	targets := []struct {
		name string
		c    sim.Cluster
	}{
		{"8×80 GiB workstation", sim.Workstation(8, 80<<10, 0)},
		{"64×80 GiB (8 groups of 8)", sim.Workstation(64, 80<<10, 8)},
		{fmt.Sprintf("PAI's %d nodes, %d GPUs", len(nodes.Hosts), len(nodes.GPUs)), nodes},
	}
	var reps [][]sim.PackReport
	for _, t := range targets {
		var row []sim.PackReport
		for _, name := range shepherd.Policies {
			p, _ := shepherd.ByName(name)
			t0 := time.Now()
			row = append(row, sim.Pack(pods, t.c, p))
			fmt.Fprintf(os.Stderr, "bench/shepherd: packed %s with %s in %v\n", t.name, name, time.Since(t0).Round(time.Millisecond))
		}
		reps = append(reps, row)
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	return sim.PackMarkdown(names, reps, len(pods)), nil
}

// speedSection measures one pass over 1,000 queued runs on 64 GPUs and a
// full Philly replay.
func speedSection(traces string) (string, error) {
	var b strings.Builder
	b.WriteString("\n### Speed\n\nTimed by the CPU the process used (user + system): a pass and a replay run on one goroutine, so on a machine shared with other work the wall clock also counts waiting for a core. One pass: the median of 5 runs of `testing.Benchmark`, CPU per pass. The full replay: the median of 3, the wall clock beside it.\n\n| benchmark | median | target |\n|---|---|---|\n")
	st := sim.QueueState(1000, 64)
	for _, name := range shepherd.Policies {
		p, _ := shepherd.ByName(name)
		full := median(5, func() time.Duration { return cpuPerOp(func() { shepherd.Schedule(p, st) }) })
		terse := st
		terse.Terse = true
		sc := shepherd.NewScheduler(p)
		fast := median(5, func() time.Duration { return cpuPerOp(func() { sc.Schedule(terse) }) })
		target := ""
		if name == "herd" {
			target = verdict(full <= 5*time.Millisecond, "≤ 5 ms (CPU)")
		}
		fmt.Fprintf(&b, "| one pass, 1,000 queued runs on 64 GPUs, wait reasons in words — %s | %s | %s |\n", name, ms(full), target)
		fmt.Fprintf(&b, "| the same without reasons (the simulator's pass) — %s | %s | |\n", name, ms(fast))
	}
	for _, name := range []string{"herd", "bestfit"} {
		cfg := sim.DefaultConfig()
		cfg.Policy, _ = shepherd.ByName(name)
		var jobsN int
		var failed error
		var walls []time.Duration
		d := median(3, func() time.Duration {
			t0, c0 := time.Now(), cpuTime()
			jobs, err := loadPhilly(filepath.Join(traces, "philly.csv"), 1)
			if err != nil {
				failed = err
				return 0
			}
			jobsN = len(jobs)
			sim.Replay(sim.Rescale(jobs, 0.8, 8), cfg)
			walls = append(walls, time.Since(t0))
			return cpuTime() - c0
		})
		if failed != nil {
			return "", failed
		}
		slices.Sort(walls)
		target := ""
		if name == "herd" {
			target = verdict(d <= 10*time.Second, "≤ 10 s (CPU)")
		}
		fmt.Fprintf(&b, "| full Philly replay, %d jobs at load 0.8, predicted estimates, loading the CSV included — %s | %.1f s of CPU (wall clock %.1f s) | %s |\n",
			jobsN, name, d.Seconds(), walls[len(walls)/2].Seconds(), target)
	}
	return b.String(), nil
}

// cpuTime is the CPU time (user and system) this process has used: a
// replay runs on one goroutine, so on a machine other work keeps busy its
// CPU time is what it costs, where its wall clock also counts the waits
// for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerOp is the CPU time of one call of f, as testing.Benchmark
// measures it (b.N calls, as many as take about a second) but timed by
// cpuTime.
func cpuPerOp(f func()) time.Duration {
	var per time.Duration
	testing.Benchmark(func(b *testing.B) {
		c0 := cpuTime()
		for b.Loop() {
			f()
		}
		per = (cpuTime() - c0) / time.Duration(b.N)
	})
	return per
}

func median(n int, f func() time.Duration) time.Duration {
	var xs []time.Duration
	for range n {
		xs = append(xs, f())
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func verdict(ok bool, target string) string {
	if ok {
		return target + " ✔"
	}
	return target + " ✘"
}

// machine says what ran the benchmarks.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = fmt.Sprintf(", load average %s/%s/%s when it started", f[0], f[1], f[2])
		}
	}
	return fmt.Sprintf("%d CPUs (%s) of a machine shared with other work, %s%s", runtime.NumCPU(), model, runtime.Version(), load)
}
