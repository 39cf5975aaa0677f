// Command slurm measures the per-stage overhead of Niuma's slurm executor
// against plain `sbatch --wait` of the same batch script, side by side in
// one run: submit-to-known-end wall time of one stage, alternating the two
// so that both see the same cluster and machine load. Niuma's side is the
// product's path with its default settings (Start, then Wait until the
// tracker knows the exit); the baseline submits the batch script Niuma
// wrote for that stage with the same output, working directory and
// no-requeue options, plus --wait.
//
//	go run ./bench/slurm [-n 10] [-conf /etc/slurm/slurm.conf] [-work 'sleep 3']
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"niuma/engine/executor"
	"niuma/engine/executor/slurm"
)

func main() {
	n := flag.Int("n", 10, "runs of each")
	conf := flag.String("conf", "/etc/slurm/slurm.conf", "SLURM_CONF of the cluster")
	work := flag.String("work", "true", "the stage's shell command")
	flag.Parse()
	if err := run(*n, *conf, *work); err != nil {
		fmt.Fprintln(os.Stderr, "bench/slurm:", err)
		os.Exit(1)
	}
}

func run(n int, conf, work string) error {
	home, err := os.MkdirTemp("", "niuma-bench-slurm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	x := slurm.New(slurm.CLI{Conf: conf}, slurm.Config{})
	job := func(i int) executor.Job {
		dir := filepath.Join(home, "runs", fmt.Sprint(i))
		return executor.Job{
			RunID: "bench", Stage: "s", Attempt: i, Token: fmt.Sprintf("bench-%d-%d", os.Getpid(), i),
			Argv: []string{"/bin/sh", "-c", work}, RunDir: dir, StageDir: filepath.Join(dir, "s"),
			StdoutPath: filepath.Join(dir, "s", "out.log"), StderrPath: filepath.Join(dir, "s", "err.log"),
		}
	}
	niuma := func(i int) (time.Duration, error) {
		j := job(i)
		if err := os.MkdirAll(j.RunDir, 0o755); err != nil {
			return 0, err
		}
		t0 := time.Now()
		h, err := x.Start(context.Background(), j)
		if err != nil {
			return 0, err
		}
		ex, err := h.Wait(context.Background())
		if err != nil || !ex.Success() {
			return 0, fmt.Errorf("niuma run %d: %v %s", i, err, ex.Describe())
		}
		return time.Since(t0), nil
	}
	sbatchWait := func(i int) (time.Duration, error) {
		j := job(i)
		script := filepath.Join(j.StageDir, fmt.Sprintf("attempt-%d.sbatch", i))
		t0 := time.Now()
		cmd := exec.Command("sbatch", "--wait", "--parsable", "--output="+j.StdoutPath, "--error="+j.StderrPath,
			"--open-mode=append", "--chdir="+j.RunDir, "--no-requeue", "--nodes=1", "--ntasks=1", script)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("sbatch --wait: %v: %s", err, out)
		}
		return time.Since(t0), nil
	}
	// One warm-up of each, not counted; the baseline reruns the script
	// Niuma wrote for the same attempt number.
	if _, err := niuma(0); err != nil {
		return err
	}
	if _, err := sbatchWait(0); err != nil {
		return err
	}
	var tn, ts []time.Duration
	for i := 1; i <= n; i++ {
		d, err := niuma(i)
		if err != nil {
			return err
		}
		tn = append(tn, d)
		if d, err = sbatchWait(i); err != nil {
			return err
		}
		ts = append(ts, d)
	}
	fmt.Printf("%s, stage `%s`, %d runs each, interleaved; submit-to-known-end wall time\n\n", conf, work, n)
	fmt.Printf("| | median | p95 | all |\n|---|---:|---:|---|\n")
	fmt.Printf("| niuma slurm executor | %s | %s | %s |\n", ms(pct(tn, 50)), ms(pct(tn, 95)), list(tn))
	fmt.Printf("| sbatch --wait | %s | %s | %s |\n", ms(pct(ts, 50)), ms(pct(ts, 95)), list(ts))
	fmt.Printf("\nmedian ratio niuma / sbatch --wait: %.2f\n", float64(pct(tn, 50))/float64(pct(ts, 50)))
	return nil
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func list(ds []time.Duration) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%.1f", d.Seconds())
	}
	return b.String()
}
