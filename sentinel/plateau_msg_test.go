package sentinel_test

import (
	"strings"
	"testing"

	"niuma/sentinel"
)

// plateauOf feeds an accuracy that creeps up and returns the plateau the
// sentinel raises about it.
func plateauOf(t *testing.T, vals []float64) sentinel.Anomaly {
	t.Helper()
	s := sentinel.New(sentinel.Config{})
	s.SetObjective("r1", "val_acc", true)
	for i, v := range vals {
		for _, a := range s.Observe(pt("val_acc", int64(i+1), v)) {
			if a.Kind == sentinel.Plateau {
				return a
			}
		}
	}
	t.Fatal("no plateau was raised")
	return sentinel.Anomaly{}
}

// A plateau message never reads "best 0.9667, now 0.9741": when the
// objective did get better, only too little, it says so.
func TestPlateauMessageSaysWhatHappened(t *testing.T) {
	creeping := make([]float64, 400)
	for i := range creeping {
		// +0.7 % over the whole run: a gain, but under the 1 % that counts.
		creeping[i] = 0.9667 + 0.0074*float64(i)/float64(len(creeping))
	}
	a := plateauOf(t, creeping)
	if strings.Contains(a.Message, "not improved") || strings.Contains(a.Message, "best ") {
		t.Errorf("the accuracy rose: the message must not say it did not improve: %q", a.Message)
	}
	if !strings.Contains(a.Message, "only") || !strings.Contains(a.Message, "%") {
		t.Errorf("the message says how little it gained: %q", a.Message)
	}

	flat := make([]float64, 400)
	for i := range flat {
		flat[i] = 0.95 - 0.0001*float64(i%7)
	}
	b := plateauOf(t, flat)
	if !strings.Contains(b.Message, "has not improved") {
		t.Errorf("a flat objective has not improved: %q", b.Message)
	}
}
