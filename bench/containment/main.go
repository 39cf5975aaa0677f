// Command containment measures what a stage can do to the engine, on the
// product's path: the real engine (engine.New, Drive, Submit) over a SQLite
// file with the local executor, as `niuma run` drives it.
//
//	go run ./bench/containment -scenario keys    [-runs 3]   60,000 distinct keys × 20 lines
//	go run ./bench/containment -scenario garbage [-runs 3]   3 GiB of garbage output
//	go run ./bench/containment -scenario chain -n 10000      a chain of /bin/true
//	go run ./bench/containment -scenario wide  -n 10000      10,000 independent /bin/true
//
// Each run is a fresh process (the bench starts itself again), so that its
// peak resident set (VmHWM: the engine, its metrics writer and SQLite; not
// the stages, which are processes of their own) is that run's alone. The
// median of the runs is printed. The workloads are this binary too
// (-emit), so the bench needs nothing but itself.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/executor/local"
	"niuma/engine/template"
	"niuma/storage"
)

func main() {
	scenario := flag.String("scenario", "keys", "keys, garbage, chain or wide")
	n := flag.Int("n", 10000, "stages (chain, wide)")
	runs := flag.Int("runs", 1, "runs, each in a fresh process; the median is printed")
	child := flag.Bool("child", false, "run once and print the result as JSON (used by the bench itself)")
	emit := flag.String("emit", "", "be a workload: keys or garbage")
	cpuProfile := flag.String("cpuprofile", "", "write the engine's CPU profile of one run to this file (with -child)")
	flag.DurationVar(&giveUp, "for", 0, "stop after this long and report the stages done by then (0: wait for the run's end)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/containment:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	var err error
	switch {
	case *emit != "":
		err = emitWorkload(*emit)
	case *child:
		var r result
		if r, err = once(*scenario, *n); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(r)
		}
	default:
		err = parent(*scenario, *n, *runs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/containment:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// giveUp ends a run that takes longer (-for): its figures are then the
// stages that finished by then.
var giveUp time.Duration

// result is one run's figures.
type result struct {
	Stages     int     `json:"stages"`
	WallS      float64 `json:"wall_s"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	Points     int     `json:"points"`
	LogMiB     float64 `json:"log_mib"`        // the stages' log files on disk
	MaxRunning int     `json:"max_running"`    // the most stages running at once
	Notes      string  `json:"notes,omitzero"` // the run's record of limits hit
}

func parent(scenario string, n, runs int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var rs []result
	for i := range runs {
		out, err := exec.Command(self, "-child", "-scenario", scenario, "-n", strconv.Itoa(n), "-for", giveUp.String()).Output()
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("run %d: %w: %s", i+1, err, out)
		}
		fmt.Printf("run %d: %d stages in %.2f s (%.1f stages/s), peak RSS %.0f MiB, %d points, logs %.0f MiB, at most %d running%s\n",
			i+1, r.Stages, r.WallS, float64(r.Stages)/r.WallS, r.PeakRSSMiB, r.Points, r.LogMiB, r.MaxRunning, noteSuffix(r.Notes))
		rs = append(rs, r)
	}
	med := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	fmt.Printf("median of %d: wall %.2f s, %.1f stages/s, peak RSS %.0f MiB\n", len(rs),
		med(func(r result) float64 { return r.WallS }), med(func(r result) float64 { return float64(r.Stages) / r.WallS }),
		med(func(r result) float64 { return r.PeakRSSMiB }))
	return nil
}

func noteSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "; noted: " + s
}

// templateFor is the scenario's template.
func templateFor(scenario string, n int) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("name: containment\nruntime: {kind: local}\nstages:\n")
	switch scenario {
	case "keys", "garbage":
		fmt.Fprintf(&b, "  - name: s\n    command: [%q, -emit, %s]\n", self, scenario)
		return b.String(), nil
	case "chain", "wide":
		for i := range n {
			fmt.Fprintf(&b, "  - name: s%d\n    command: [\"true\"]\n", i)
			if scenario == "chain" && i > 0 {
				fmt.Fprintf(&b, "    needs: [s%d]\n", i-1)
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unknown scenario %q: keys, garbage, chain or wide", scenario)
}

func once(scenario string, n int) (result, error) {
	src, err := templateFor(scenario, n)
	if err != nil {
		return result{}, err
	}
	tm, err := template.Parse("containment.yaml", []byte(src))
	if err != nil {
		return result{}, err
	}
	home, err := os.MkdirTemp("", "niuma-bench-containment")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(home)
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	if err != nil {
		return result{}, err
	}
	defer db.Close()
	e, err := engine.New(engine.Options{Home: home, Store: db, Executors: []executor.Executor{local.New()},
		PollInterval: time.Second, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	driven := make(chan struct{})
	go func() { defer close(driven); _ = e.Drive(ctx) }()
	defer func() { cancel(); <-driven }()
	select {
	case <-e.Ready():
	case <-time.After(time.Minute):
		return result{}, fmt.Errorf("the engine did not become ready")
	}

	// The end of the run is learnt from the engine's events (as the
	// window does), with a slow poll in case the subscription lags: a
	// poll of the whole run every few milliseconds would be a load of its
	// own on the engine.
	sub := e.Subscribe(1024)
	defer sub.Close()
	t0 := time.Now()
	info, err := e.Submit(ctx, engine.RunSpec{Template: tm})
	if err != nil {
		return result{}, err
	}
	poll := time.NewTicker(5 * time.Second)
	defer poll.Stop()
	var deadline <-chan time.Time
	if giveUp > 0 {
		deadline = time.After(giveUp)
	}
	partial := false
wait:
	for {
		select {
		case ev := <-sub.C:
			if ev.Kind == engine.RunChanged && ev.RunID == info.ID && ev.State.Done() {
				break wait
			}
		case <-poll.C:
			if r, err := e.Run(ctx, info.ID); err == nil && r.State.Done() {
				break wait
			}
		case <-deadline:
			partial = true
			break wait
		}
	}
	wall := time.Since(t0)
	r, err := e.Run(ctx, info.ID)
	if err != nil {
		return result{}, err
	}
	done := 0
	for _, st := range r.Stages {
		if st.State == engine.Succeeded {
			done++
		}
	}
	if partial {
		_ = e.Cancel(ctx, info.ID)
	} else if r.State != engine.Succeeded {
		return result{}, fmt.Errorf("the run ended %s: %s", r.State, r.Error)
	}
	pts, err := e.MetricCount(ctx, info.ID)
	if err != nil {
		return result{}, err
	}
	res := result{Stages: done, WallS: wall.Seconds(), PeakRSSMiB: peakRSS(), Points: pts,
		LogMiB: float64(dirBytes(r.Dir)) / (1 << 20), MaxRunning: maxRunning(r.Stages)}
	if evs, err := db.Events(ctx, info.ID); err == nil {
		for _, ev := range evs {
			if ev.Kind == "metrics_keys_limit" {
				res.Notes = ev.Kind
			}
		}
	}
	return res, nil
}

// maxRunning is the most stages whose attempts overlapped in time.
func maxRunning(stages []engine.StageInfo) int {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	for _, s := range stages {
		if !s.StartedAt.IsZero() && !s.FinishedAt.IsZero() {
			es = append(es, edge{s.StartedAt, 1}, edge{s.FinishedAt, -1})
		}
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].at.Equal(es[j].at) {
			return es[i].d < es[j].d
		}
		return es[i].at.Before(es[j].at)
	})
	cur, most := 0, 0
	for _, e := range es {
		cur += e.d
		most = max(most, cur)
	}
	return most
}

// peakRSS is this process's peak resident set (VmHWM), in MiB.
func peakRSS() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// emitWorkload is a stage's program. keys: 20 JSON lines of 60,000
// distinct keys each (15 MB); garbage: 3 GiB of pseudo-random printable
// bytes, newlines now and then, as fast as a pipe takes them.
func emitWorkload(kind string) error {
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	switch kind {
	case "keys":
		for step := range 20 {
			fmt.Fprintf(w, `{"step": %d`, step)
			for k := range 60000 {
				fmt.Fprintf(w, `, "k%d": %d`, k, step)
			}
			w.WriteString("}\n")
		}
	case "garbage":
		buf := make([]byte, 1<<20)
		x := uint64(88172645463325252)
		for i := range buf {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			buf[i] = byte(32 + x%95)
			if x%200 == 0 {
				buf[i] = '\n'
			}
		}
		for range 3 << 10 { // 3 GiB in 1 MiB blocks
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown workload %q", kind)
	}
	return nil
}
