// Command predict measures the run-time predictor on real runs: it runs the
// bundled digits-mlp template n times through the niuma binary (local
// executor, a fresh archive), with epochs, hidden units and batch size
// varied, reads every train stage's run time back from the archive, and
// predicts each one from all the others (leave-one-out) with
// shepherd/predict — the predictor the engine feeds from its archive. It
// prints the median absolute percentage error, against the median of the
// others alone, and how often the true time fell within the predicted
// 10–90% bounds.
//
//	go build -o bin/niuma . && go run ./bench/predict -niuma bin/niuma [-n 40]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"niuma/shepherd/predict"
	"niuma/storage"
)

func main() {
	bin := flag.String("niuma", "", "the niuma binary (required): go build -o bin/niuma .")
	n := flag.Int("n", 40, "runs")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "bench/predict: -niuma is required, e.g. -niuma bin/niuma (go build -o bin/niuma . first)")
		os.Exit(2)
	}
	if err := run(*bin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench/predict:", err)
		os.Exit(1)
	}
}

func run(bin string, n int) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	home, err := os.MkdirTemp("", "niuma-bench-predict")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	rng := rand.New(rand.NewPCG(14, 40))
	// Long enough that training, not the interpreter's start, is most of
	// the stage's time.
	epochs := []int{10, 20, 40, 80, 160, 320}
	hidden := []int{16, 32, 64, 128, 256}
	batch := []int{16, 32, 64, 128}
	for i := range n {
		args := []string{"run", "digits-mlp", "--executor", "local", "--wait", "--allow-duplicate",
			"--set", fmt.Sprintf("epochs=%d", epochs[rng.IntN(len(epochs))]),
			"--set", fmt.Sprintf("hidden=%d", hidden[rng.IntN(len(hidden))]),
			"--set", fmt.Sprintf("batch_size=%d", batch[rng.IntN(len(batch))])}
		t0 := time.Now()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "NIUMA_HOME="+home)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("run %d (%s): %w\n%s", i+1, strings.Join(args[6:], " "), err, out)
		}
		fmt.Fprintf(os.Stderr, "\rbench/predict: %d/%d runs (last %v)", i+1, n, time.Since(t0).Round(100*time.Millisecond))
	}
	fmt.Fprintln(os.Stderr)

	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	runs, err := db.ListRuns(ctx, storage.RunFilter{})
	if err != nil {
		return err
	}
	var obs []predict.Run
	for _, r := range runs {
		var values map[string]any
		if err := json.Unmarshal([]byte(r.Params), &values); err != nil {
			return fmt.Errorf("run %s: params: %w", r.ID, err)
		}
		params := map[string]float64{}
		for k, v := range values {
			if f, ok := v.(float64); ok {
				params[k] = f
			}
		}
		atts, err := db.Attempts(ctx, r.ID)
		if err != nil {
			return err
		}
		for _, a := range atts {
			if a.Stage == "train" && a.State == storage.AttemptSucceeded {
				obs = append(obs, predict.Run{Key: r.Template + "/train", Params: params, Duration: a.FinishedAt.Sub(a.StartedAt)})
			}
		}
	}
	if len(obs) < 3 {
		return fmt.Errorf("only %d finished train stages in the archive", len(obs))
	}
	var apeFit, apeMedian []float64
	inside := 0
	used := map[string]int{}
	for i, o := range obs {
		p := predict.New(predict.Options{})
		others := slices.Delete(slices.Clone(obs), i, i+1)
		var ds []float64
		for _, x := range others {
			p.Observe(x)
			ds = append(ds, x.Duration.Seconds())
		}
		e := p.Predict(predict.Query{Key: o.Key, Params: o.Params})
		truth := o.Duration.Seconds()
		apeFit = append(apeFit, math.Abs(e.Median.Seconds()-truth)/truth)
		slices.Sort(ds)
		apeMedian = append(apeMedian, math.Abs(ds[len(ds)/2]-truth)/truth)
		if o.Duration >= e.Low && o.Duration <= e.High {
			inside++
		}
		used[strings.Join(e.Params, "+")]++
		fmt.Fprintf(os.Stderr, "bench/predict: %v: %.1f s, predicted %.1f s (%.1f–%.1f) from %v\n", o.Params, truth,
			e.Median.Seconds(), e.Low.Seconds(), e.High.Seconds(), e.Params)
	}
	var lo, hi time.Duration = obs[0].Duration, obs[0].Duration
	for _, o := range obs {
		lo, hi = min(lo, o.Duration), max(hi, o.Duration)
	}
	fmt.Printf("| finished train stages | run times | MdAPE, predictor (leave-one-out) | MdAPE, median of the others | true time within the 10–90%% bounds | parameters the fit used |\n")
	fmt.Printf("|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %.1f–%.1f s | %.0f%% | %.0f%% | %d of %d | %s |\n", len(obs), lo.Seconds(), hi.Seconds(),
		100*med(apeFit), 100*med(apeMedian), inside, len(obs), usedText(used))
	return nil
}

func med(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

func usedText(m map[string]int) string {
	var parts []string
	for k, v := range m {
		if k == "" {
			k = "none (median)"
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
