package sentinel_test

import (
	"path/filepath"
	"strings"
	"testing"

	"niuma/sentinel"
)

// replayFile feeds one real recording and returns its anomalies.
func replayFile(t *testing.T, s *sentinel.Sentinel, name string) []sentinel.Anomaly {
	t.Helper()
	var out []sentinel.Anomaly
	for _, line := range readLines(t, filepath.Join("testdata", "real", name)) {
		step, kv, ok := parseLine(line)
		if !ok {
			continue
		}
		for _, k := range []string{"loss", "val_loss", "val_acc", "grad_norm", "lr"} {
			if v, has := kv[k]; has {
				out = append(out, s.Observe(sentinel.Point{Run: "r1", Stage: "train", Attempt: 1, Key: k, Step: step, Value: v})...)
			}
		}
	}
	return out
}

// The acceptance case, on the sentinel's side: the demo with lr=1.0 and
// SGD really diverges; the sentinel says so with the learning-rate fix well
// before the loss turns NaN, and a template action of retry with
// lr: "*0.1" yields lr 0.1 for the next attempt, whose recording (the demo
// at lr=0.1) raises nothing.
func TestDemoDivergenceAndRetry(t *testing.T) {
	s := sentinel.New(sentinel.Config{})
	got := replayFile(t, s, "demo-diverge-sgd-lr1-s1.jsonl")
	var div, nan *sentinel.Anomaly
	for i := range got {
		switch got[i].Kind {
		case sentinel.Divergence:
			div = &got[i]
		case sentinel.NaN:
			if nan == nil {
				nan = &got[i]
			}
		}
	}
	if div == nil || nan == nil {
		t.Fatalf("want a divergence and a NaN anomaly, got %+v", got)
	}
	if div.Step >= nan.Step || div.Key() != "loss" {
		t.Errorf("divergence on %s at step %d, NaN at step %d: want divergence of loss first", div.Key(), div.Step, nan.Step)
	}
	if !strings.Contains(div.Fix, "learning rate") {
		t.Errorf("fix %q does not mention the learning rate", div.Fix)
	}
	pol, err := sentinel.ParsePolicy(map[string]sentinel.Action{"divergence": {Do: sentinel.Retry, Set: map[string]string{"lr": "*0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	d := pol.Decide(*div, 1, map[string]any{"lr": 1.0, "optimizer": "sgd"})
	if d.Do != sentinel.Retry || d.Params["lr"] != 0.1 || len(d.Changes) != 1 {
		t.Fatalf("decision %+v, want a retry with lr 0.1", d)
	}
	if again := replayFile(t, sentinel.New(sentinel.Config{}), "demo-retry-sgd-lr0.1-s1.jsonl"); len(again) != 0 {
		t.Errorf("the retried attempt (lr=0.1) raised %+v", again)
	}
}
