// Command teams measures the shepherd's sharing among teams on real
// traces and writes the tables docs/BENCHMARKS.md quotes: Philly's
// 7-day windows with every virtual cluster as a team, at loads 0.8 and
// 1.0 on 32×80 GiB, shares even and proportional; each window replayed
// shared (herd with Teams), free-for-all (herd and bestfit, no teams), and
// each team alone on a static partition of its share. PAI 2023 with QoS
// classes as teams. The windows the sharing rules were tuned on are
// reported apart from the test windows, which were not looked at while
// tuning.
//
//	go run ./bench/teams -traces ../shared/data/traces -doc docs/BENCHMARKS.md
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"niuma/shepherd"
	"niuma/shepherd/sim"
)

// Windows: start days of 7-day windows. The sharing rules were tuned on
// tuning; test windows overlap none of them.
var (
	tuning = []float64{30, 50, 70}
	test   = []float64{14, 21, 37, 43, 57, 63, 77, 84, 91}
)

// Row is one replayed window at one load and share mode.
type Row struct {
	Set, Trace  string
	Day, Load   float64
	Shares      string
	Jobs, Teams int
	Shared      sim.TeamReport
	Herd, Best  sim.Report
	WorstTeam   string
	WorstRatio  float64
	UtilRatio   float64 // shared / bestfit, GPU-time over the makespan
	BusyRatio   float64 // shared / bestfit, GPUs busy while jobs wait
	JCTVsBest   float64 // shared / bestfit average JCT
	SharingOK   bool    // no team worse than its partition by more than 5%
	AcceptOK    bool
	Preemptions int
}

func main() {
	traces := flag.String("traces", "", "folder with philly.csv and pai2023_pods.csv (required)")
	doc := flag.String("doc", "", "markdown file whose marked section is replaced (default: print)")
	gpus := flag.Int("gpus", 32, "GPUs of the shared machine (80 GiB each)")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "windows replayed at a time")
	flag.Parse()
	if *traces == "" {
		fmt.Fprintln(os.Stderr, "bench/teams: -traces is required, e.g. -traces ../shared/data/traces")
		os.Exit(2)
	}
	rows, err := philly(filepath.Join(*traces, "philly.csv"), *gpus, *workers)
	if err == nil {
		var pai []Row
		pai, err = paiRows(filepath.Join(*traces, "pai2023_pods.csv"), *gpus)
		rows = append(rows, pai...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/teams:", err)
		os.Exit(1)
	}
	out := markdown(rows, *gpus)
	if *doc == "" {
		fmt.Print(out)
		return
	}
	if err := splice(*doc, out); err != nil {
		fmt.Fprintln(os.Stderr, "bench/teams:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "bench/teams: wrote the teams section of", *doc)
}

// load reads a trace with the named column as each job's team.
func load(path, format, column string, maxGPUs int) ([]sim.Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	col, err := sim.ReadColumn(f, column)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return nil, err
	}
	var jobs []sim.Job
	if format == "pai" {
		jobs, err = sim.LoadPAI(f, maxGPUs)
	} else {
		jobs, err = sim.LoadPhilly(f, maxGPUs, 1)
	}
	if err != nil {
		return nil, err
	}
	sim.SetTeams(jobs, col)
	return jobs, nil
}

func philly(path string, gpus, workers int) ([]Row, error) {
	jobs, err := load(path, "philly", "cluster", gpus)
	if err != nil {
		return nil, err
	}
	type cell struct {
		set    string
		day    float64
		load   float64
		shares string
	}
	var cells []cell
	for _, set := range []struct {
		name string
		days []float64
	}{{"tuning", tuning}, {"test", test}} {
		for _, d := range set.days {
			for _, l := range []float64{0.8, 1.0} {
				for _, sh := range sim.ShareModes {
					cells = append(cells, cell{set.name, d, l, sh})
				}
			}
		}
	}
	rows := make([]Row, len(cells))
	errs := make([]error, len(cells))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, workers))
	for k, c := range cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			w := sim.Rescale(sim.Window(jobs, c.day, 7), c.load, gpus)
			rows[k], errs[k] = replay(w, gpus, c.shares)
			rows[k].Set, rows[k].Trace, rows[k].Day, rows[k].Load = c.set, "philly", c.day, c.load
			fmt.Fprintf(os.Stderr, "bench/teams: philly day %g load %g %s: %d jobs, worst team %.3f×\n", c.day, c.load, c.shares,
				rows[k].Jobs, rows[k].WorstRatio)
		}()
	}
	wg.Wait()
	return rows, errors.Join(errs...)
}

// paiRows replays PAI 2023's GPU pods with their QoS class as the team,
// at load 1.0 (durations are censored: a pod still running at the end
// counts its time so far).
func paiRows(path string, gpus int) ([]Row, error) {
	jobs, err := load(path, "pai", "qos", 8)
	if err != nil {
		return nil, err
	}
	jobs = slices.DeleteFunc(jobs, func(j sim.Job) bool { return j.GPUs < 1 })
	jobs = sim.Rescale(jobs, 1.0, gpus)
	var rows []Row
	for _, sh := range sim.ShareModes {
		r, err := replay(jobs, gpus, sh)
		if err != nil {
			return nil, err
		}
		r.Set, r.Trace, r.Load = "test", "pai", 1.0
		rows = append(rows, r)
	}
	return rows, nil
}

func replay(jobs []sim.Job, gpus int, shares string) (Row, error) {
	teams, err := sim.SharesOf(jobs, gpus, shares)
	if err != nil {
		return Row{}, err
	}
	cfg := sim.DefaultConfig()
	cfg.GPUs = gpus
	r := Row{Shares: shares, Jobs: len(jobs), Teams: len(teams)}
	r.Shared = sim.ReplayTeams(jobs, cfg, teams, shares, 1)
	r.Herd = sim.Replay(jobs, cfg)
	best := cfg
	best.Policy = shepherd.BestFit()
	r.Best = sim.Replay(jobs, best)
	r.WorstTeam, r.WorstRatio = r.Shared.WorstTeam()
	r.UtilRatio = ratio(r.Shared.GPUUtil, r.Best.GPUUtil)
	r.BusyRatio = ratio(r.Shared.BusyWhileWaiting, r.Best.BusyWhileWaiting)
	r.JCTVsBest = ratio(r.Shared.AvgJCT, r.Best.AvgJCT)
	r.SharingOK = r.WorstRatio <= 1.05
	r.AcceptOK = r.SharingOK && r.JCTVsBest <= 1 && r.UtilRatio >= 0.95
	r.Preemptions = r.Shared.Preemptions
	return r, nil
}

// ratio is a / b, 1 when both are 0 (nothing waited in either replay).
func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return a / b
}

func markdown(rows []Row, gpus int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %d×80 GiB in one linked group; herd with predicted estimates. Teams: Philly's virtual clusters "+
		"(`cluster`), PAI's QoS classes. Shares: whole GPUs, at least one a team, by largest remainder (`sim.SharesOf`). "+
		"A team's JCT is compared with its static partition's over the jobs both replays ran (a job wider than its "+
		"team's partition never runs there). Utilisation: GPU-time with a run over the makespan, as `gpu_util`; "+
		"busy-while-waiting: GPUs with a run while some job waits.\n\n", gpus)
	for _, set := range []string{"test", "tuning"} {
		fmt.Fprintf(&b, "#### %s windows\n\n", map[string]string{"test": "Test", "tuning": "Tuning"}[set])
		b.WriteString("| trace | window (day) | load | shares | jobs | teams | worst team (shared / static JCT) | avg JCT shared / herd / bestfit (h) | utilisation shared / bestfit | busy while waiting shared / bestfit | preemptions | all three hold |\n")
		b.WriteString("|---|---:|---:|---|---:|---:|---|---|---|---|---:|---|\n")
		pass, n := 0, 0
		for _, r := range rows {
			if r.Set != set {
				continue
			}
			n++
			ok := "no"
			if r.AcceptOK {
				ok, pass = "yes", pass+1
			}
			day := fmt.Sprintf("%g–%g", r.Day, r.Day+7)
			if r.Trace == "pai" {
				day = "all"
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f | %s | %d | %d | %s %.3f× | %.2f / %.2f / %.2f | %.3f / %.3f (%.2f×) | %.3f / %.3f (%.2f×) | %d | %s |\n",
				r.Trace, day, r.Load, r.Shares, r.Jobs, r.Teams, r.WorstTeam, r.WorstRatio,
				r.Shared.AvgJCT/3600, r.Herd.AvgJCT/3600, r.Best.AvgJCT/3600,
				r.Shared.GPUUtil, r.Best.GPUUtil, r.UtilRatio, r.Shared.BusyWhileWaiting, r.Best.BusyWhileWaiting, r.BusyRatio,
				r.Preemptions, ok)
		}
		fmt.Fprintf(&b, "\n%d of %d replays meet all three (no team > 1.05× its partition, avg JCT ≤ bestfit's, utilisation ≥ 0.95× bestfit's).\n\n", pass, n)
	}
	return b.String()
}

const begin, end = "<!-- teams-bench:begin -->", "<!-- teams-bench:end -->"

func splice(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s markers", path, begin, end)
	}
	var b bytes.Buffer
	b.Write(old[:i+len(begin)])
	b.WriteString("\n" + section)
	b.Write(old[j:])
	return os.WriteFile(path, b.Bytes(), 0o644)
}
