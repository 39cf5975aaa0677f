package sentinel_test

import (
	"reflect"
	"strings"
	"testing"

	"niuma/sentinel"
)

func TestApplyChanges(t *testing.T) {
	params := map[string]any{"lr": 1.0, "batch_size": int64(64), "optimizer": "sgd"}
	tests := []struct {
		name    string
		set     map[string]string
		want    map[string]any
		changes []string
		err     string
	}{
		{"multiply the learning rate", map[string]string{"lr": "*0.1"},
			map[string]any{"lr": 0.1, "batch_size": int64(64), "optimizer": "sgd"}, []string{"lr: 1 → 0.1"}, ""},
		{"halve an int stays an int", map[string]string{"batch_size": "/2"},
			map[string]any{"lr": 1.0, "batch_size": int64(32), "optimizer": "sgd"}, []string{"batch_size: 64 → 32"}, ""},
		{"a plain value sets a new parameter", map[string]string{"grad_clip": "1.0", "optimizer": "adam"},
			map[string]any{"lr": 1.0, "batch_size": int64(64), "optimizer": "adam", "grad_clip": 1.0},
			[]string{"grad_clip: (unset) → 1", "optimizer: sgd → adam"}, ""},
		{"arithmetic on a string fails", map[string]string{"optimizer": "*2"}, nil, nil, "not a number"},
		{"arithmetic on a missing parameter fails", map[string]string{"momentum": "*0.5"}, nil, nil, "no value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changes, err := sentinel.ApplyChanges(params, tt.set)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) || !reflect.DeepEqual(changes, tt.changes) {
				t.Errorf("got %v %q, want %v %q", got, changes, tt.want, tt.changes)
			}
		})
	}
	if params["lr"] != 1.0 {
		t.Errorf("ApplyChanges changed its input: lr = %v", params["lr"])
	}
}

func TestPolicyDecide(t *testing.T) {
	pol, err := sentinel.ParsePolicy(map[string]sentinel.Action{
		"divergence": {Do: sentinel.Retry, Set: map[string]string{"lr": "*0.1"}},
		"nan":        {Do: sentinel.Retry, Set: map[string]string{"lr": "*0.1"}, MaxRetries: 1},
		"hang":       {Do: sentinel.Stop},
	})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]any{"lr": 1.0}
	run := func(k sentinel.Kind) sentinel.Anomaly { return sentinel.Anomaly{Kind: k, Run: "r1", Stage: "train"} }
	tests := []struct {
		name    string
		a       sentinel.Anomaly
		attempt int
		want    sentinel.Do
		lr      any
	}{
		{"divergence on attempt 1 retries with lr ×0.1", run(sentinel.Divergence), 1, sentinel.Retry, 0.1},
		{"divergence on attempt 3 has used its 2 retries: stop", run(sentinel.Divergence), 3, sentinel.Stop, nil},
		{"nan with max_retries 1 on attempt 2: stop", run(sentinel.NaN), 2, sentinel.Stop, nil},
		{"hang stops", run(sentinel.Hang), 1, sentinel.Stop, nil},
		{"a kind without an entry is flagged", run(sentinel.Plateau), 1, sentinel.Flag, nil},
		{"a machine-wide anomaly is only flagged", sentinel.Anomaly{Kind: sentinel.Divergence}, 1, sentinel.Flag, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := pol.Decide(tt.a, tt.attempt, params)
			if d.Do != tt.want {
				t.Fatalf("Do = %s (%s), want %s", d.Do, d.Why, tt.want)
			}
			if tt.lr != nil && d.Params["lr"] != tt.lr {
				t.Errorf("lr = %v, want %v", d.Params["lr"], tt.lr)
			}
		})
	}
}

func TestParsePolicyRejects(t *testing.T) {
	tests := []struct {
		name string
		spec map[string]sentinel.Action
		err  string
	}{
		{"an unknown kind", map[string]sentinel.Action{"loss_nan": {Do: sentinel.Stop}}, "unknown anomaly kind"},
		{"an unknown action", map[string]sentinel.Action{"nan": {Do: "restart"}}, `unknown action "restart": use flag, notify, stop or retry`},
		{"an unknown action on the queue", map[string]sentinel.Action{"queue_stuck": {Do: "restart"}}, "use flag, notify or stop"},
		{"retry of a waiting stage", map[string]sentinel.Action{"queue_stuck": {Do: sentinel.Retry}},
			"queue_stuck: retry needs an attempt, and a stage waiting in the queue has none: use flag, notify or stop"},
		{"max_retries without retry", map[string]sentinel.Action{"hang": {Do: sentinel.Stop, MaxRetries: 3}}, "`max_retries` only applies to retry"},
		{"a negative max_retries", map[string]sentinel.Action{"nan": {Do: sentinel.Retry, MaxRetries: -1}}, "give 1 or more"},
		{"set without retry", map[string]sentinel.Action{"nan": {Do: sentinel.Stop, Set: map[string]string{"lr": "*0.1"}}}, "only applies to retry"},
		{"a bad operator value", map[string]sentinel.Action{"nan": {Do: sentinel.Retry, Set: map[string]string{"lr": "/0"}}}, "divides by zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := sentinel.ParsePolicy(tt.spec); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("err = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func TestChangedValuesReadAsWritten(t *testing.T) {
	got, changes, err := sentinel.ApplyChanges(map[string]any{"lr": 0.1}, map[string]string{"lr": "*0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if got["lr"] != 0.01 {
		t.Errorf("lr = %v, want 0.01 (not 0.010000000000000002)", got["lr"])
	}
	if !reflect.DeepEqual(changes, []string{"lr: 0.1 → 0.01"}) {
		t.Errorf("changes = %q", changes)
	}
}

// Every action Allowed names is accepted for its kind, and Decide gives it
// back for an anomaly of a run: nothing a template may write is ignored.
func TestEveryAllowedActionIsDecided(t *testing.T) {
	for _, k := range sentinel.Kinds {
		for _, do := range sentinel.Allowed(k) {
			pol, err := sentinel.ParsePolicy(map[string]sentinel.Action{string(k): {Do: do}})
			if err != nil {
				t.Errorf("%s: %s refused: %v", k, do, err)
				continue
			}
			d := pol.Decide(sentinel.Anomaly{Kind: k, Run: "r1", Stage: "train"}, 1, map[string]any{"lr": 0.1})
			if d.Do != do {
				t.Errorf("%s: %s decided as %s (%s)", k, do, d.Do, d.Why)
			}
		}
	}
	if got := sentinel.Allowed(sentinel.QueueStuck); len(got) != 3 {
		t.Errorf("queue_stuck allows %v", got)
	}
	if got := sentinel.Allowed(sentinel.Overheating); got[len(got)-1] != sentinel.Retry {
		t.Errorf("a GPU's anomaly can retry the attempts on it: %v", got)
	}
}
