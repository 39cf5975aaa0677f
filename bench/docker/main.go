// Command docker measures the per-stage overhead of Niuma's docker
// executor against `docker run --rm` of the same image and command, side by
// side in one run: start-to-exit wall time of a stage that does nothing
// (`/workload exit 0` in a one-file image), alternating the two so that
// both see the same machine load.
//
//	go run ./bench/docker [-n 25]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/moby/moby/client"

	"niuma/engine/executor"
	"niuma/engine/executor/docker"
	"niuma/engine/executor/docker/dockertest"
)

func main() {
	n := flag.Int("n", 25, "runs of each")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "bench/docker:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := dockertest.Build(c); err != nil {
		return err
	}
	api, err := docker.NewMoby()
	if err != nil {
		return err
	}
	defer api.Close()
	home, err := os.MkdirTemp("", "niuma-bench-docker")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	x := docker.New(api, home)

	niuma := func(i int) (time.Duration, error) {
		dir := filepath.Join(home, "runs", "r", fmt.Sprint(i))
		job := executor.Job{
			RunID: "bench", Stage: "s", Attempt: i, Argv: []string{dockertest.Workload, "exit", "0"},
			RunDir: dir, StageDir: dir, Image: dockertest.Image,
			StdoutPath: filepath.Join(dir, "out.log"), StderrPath: filepath.Join(dir, "err.log"),
		}
		t0 := time.Now()
		h, err := x.Start(context.Background(), job)
		if err != nil {
			return 0, err
		}
		ex, err := h.Wait(context.Background())
		if err != nil || !ex.Success() {
			return 0, fmt.Errorf("niuma run %d: %v %s", i, err, ex.Describe())
		}
		return time.Since(t0), nil
	}
	cli := func(extra ...string) func(int) (time.Duration, error) {
		return func(i int) (time.Duration, error) {
			args := append(append([]string{"run", "--rm"}, extra...), dockertest.Image, dockertest.Workload, "exit", "0")
			t0 := time.Now()
			if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
				return 0, fmt.Errorf("docker run: %v: %s", err, out)
			}
			return time.Since(t0), nil
		}
	}
	kinds := []struct {
		name string
		f    func(int) (time.Duration, error)
	}{
		{"niuma docker executor", niuma},
		{"docker run --rm", cli()},
		{"docker run --rm --init", cli("--init")},
	}
	times := make([][]time.Duration, len(kinds))
	// One warm-up of each, not counted.
	for _, k := range kinds {
		if _, err := k.f(0); err != nil {
			return err
		}
	}
	for i := 1; i <= n; i++ {
		for j, k := range kinds {
			d, err := k.f(i)
			if err != nil {
				return err
			}
			times[j] = append(times[j], d)
		}
	}
	fmt.Printf("%d runs each, interleaved; start-to-exit wall time of `/workload exit 0`\n\n", n)
	fmt.Printf("| %-24s | %8s | %8s |\n|---|---:|---:|\n", "", "median", "p95")
	med := make([]time.Duration, len(kinds))
	for j, k := range kinds {
		med[j] = pct(times[j], 50)
		fmt.Printf("| %-24s | %8s | %8s |\n", k.name, ms(med[j]), ms(pct(times[j], 95)))
	}
	fmt.Printf("\nmedian ratio niuma / docker run --rm:        %.2f\n", float64(med[0])/float64(med[1]))
	fmt.Printf("median ratio niuma / docker run --rm --init: %.2f\n", float64(med[0])/float64(med[2]))
	return nil
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
