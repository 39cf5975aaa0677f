package ui

import (
	"context"
	"errors"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/template"
)

const demoYAML = `name: demo
description: A small demo.
version: "1.0"
runtime: {kind: local}
params:
  lr:        {type: float, default: 0.01, min: 0.00001, max: 1.0, log: true, help: Learning rate}
  hidden:    {type: int, default: 64, min: 8, max: 1024}
  optimizer: {type: choice, default: adam, choices: [adam, sgd]}
  augment:   {type: bool, default: false}
stages:
  - name: train
    command: [/bin/true]
`

func demoEntries(t *testing.T) []TemplateEntry {
	t.Helper()
	tm, err := template.Parse("demo.yaml", []byte(demoYAML))
	require.NoError(t, err)
	return []TemplateEntry{
		{Name: "broken", Source: "/home/u/templates/broken/template.yaml", Err: errors.New("template.yaml:3: params.lr: min must be below max")},
		{Name: "demo", Version: "1.0", Description: tm.Description, Source: "bundled", Load: func() (*template.Template, error) { return tm, nil }},
	}
}

type wizardRig struct {
	w        *Wizard
	win      fyne.Window
	b        *fakeBackend
	launched chan []string
}

func newWizardRig(t *testing.T) *wizardRig {
	t.Helper()
	newTestApp(t)
	r := &wizardRig{b: &fakeBackend{}, launched: make(chan []string, 1)}
	r.w = NewWizard(r.b, demoEntries(t), nil, func(ids []string, err error) {
		require.NoError(t, err)
		r.launched <- ids
	}, nil)
	r.win = test.NewWindow(r.w.Content())
	r.win.Resize(fyne.NewSize(900, 640))
	t.Cleanup(r.win.Close)
	return r
}

func (r *wizardRig) field(name string) *paramField {
	for _, f := range r.w.fields {
		if f.p.Name == name {
			return f
		}
	}
	panic("no field " + name)
}

func (r *wizardRig) launch(t *testing.T) []engine.RunSpec {
	t.Helper()
	tap(r.w.launch)
	select {
	case <-r.launched:
	case <-time.After(10 * time.Second):
		t.Fatal("the launch never finished")
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return append([]engine.RunSpec(nil), r.b.submitted...)
}

func TestWizardLaunchesOneRunWithTypedValues(t *testing.T) {
	r := newWizardRig(t)
	require.True(t, r.w.next.Disabled(), "no template picked yet")
	r.w.list.Select(1)
	require.False(t, r.w.next.Disabled())
	tap(r.w.next)
	require.Equal(t, stepParams, r.w.step)

	lr := r.field("lr")
	lr.entry.SetText("")
	test.Type(lr.entry, "0.003")
	require.InDelta(t, -2.52, lr.slider.Value, 0.01, "the log slider follows the exact entry")
	r.field("optimizer").sel.SetSelected("sgd")
	tap(r.field("augment").check)
	require.Equal(t, "1 run", r.w.runCount.Text)
	tap(r.w.next)

	require.Equal(t, stepResources, r.w.step)
	r.w.priority.SetText("")
	test.Type(r.w.priority, "5")
	r.w.seed.SetText("")
	test.Type(r.w.seed, "42")
	r.w.executor.SetSelected("local")
	tap(r.w.next)

	require.Equal(t, stepReview, r.w.step)
	require.Len(t, r.w.specs, 1)
	specs := r.launch(t)
	require.Len(t, specs, 1)
	require.Equal(t, template.Values{"lr": 0.003, "hidden": int64(64), "optimizer": "sgd", "augment": true}, specs[0].Values)
	require.Equal(t, 5, specs[0].Priority)
	require.Equal(t, int64(42), specs[0].Seed)
	require.Equal(t, "local", specs[0].Executor)
	require.Equal(t, "demo", specs[0].Template.Name)
}

func TestWizardSweepOfTwoByThreeMakesSixRuns(t *testing.T) {
	r := newWizardRig(t)
	r.w.list.Select(1)
	tap(r.w.next)

	opt := r.field("optimizer")
	tap(opt.sweep)
	opt.sweepChoice.SetSelected([]string{"adam", "sgd"})
	hidden := r.field("hidden")
	tap(hidden.sweep)
	hidden.sweepEntry.SetText("")
	test.Type(hidden.sweepEntry, "32, 64, 128")
	require.Equal(t, "6 runs", r.w.runCount.Text)
	tap(r.w.next)
	tap(r.w.next) // resources: the defaults
	require.Equal(t, stepReview, r.w.step)

	specs := r.launch(t)
	require.Len(t, specs, 6)
	var got []template.Values
	for _, s := range specs {
		require.Equal(t, "", s.Executor, "automatic executor")
		require.Equal(t, int64(0), s.Seed, "0: the engine picks a seed per run")
		got = append(got, s.Values)
	}
	want := []template.Values{}
	for _, h := range []int64{32, 64, 128} {
		for _, o := range []string{"adam", "sgd"} {
			want = append(want, template.Values{"lr": 0.01, "hidden": h, "optimizer": o, "augment": false})
		}
	}
	require.ElementsMatch(t, want, got)
}

func TestWizardInvalidInputBlocksNext(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(r *wizardRig)
		shows string
	}{
		{"not a number", func(r *wizardRig) {
			e := r.field("lr").entry
			e.SetText("")
			test.Type(e, "fast")
		}, "not a number"},
		{"above the max", func(r *wizardRig) {
			e := r.field("hidden").entry
			e.SetText("")
			test.Type(e, "4096")
		}, "hidden"},
		{"empty sweep", func(r *wizardRig) {
			f := r.field("hidden")
			tap(f.sweep)
			f.sweepEntry.SetText("")
		}, "give the values to sweep"},
		{"bad range", func(r *wizardRig) {
			f := r.field("hidden")
			tap(f.sweep)
			f.sweepEntry.SetText("")
			test.Type(f.sweepEntry, "64..8")
		}, "not a range"},
		{"no choice ticked", func(r *wizardRig) {
			f := r.field("optimizer")
			tap(f.sweep)
			f.sweepChoice.SetSelected(nil)
		}, "tick at least one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWizardRig(t)
			r.w.list.Select(1)
			tap(r.w.next)
			tt.edit(r)
			require.True(t, r.w.next.Disabled())
			require.Contains(t, r.w.status.Text, tt.shows)
			tap(r.w.next)
			require.Equal(t, stepParams, r.w.step, "tapping a disabled Next stays put")
		})
	}
}

func TestWizardBadTemplateShowsItsError(t *testing.T) {
	r := newWizardRig(t)
	r.w.list.Select(0)
	require.True(t, r.w.next.Disabled())
	require.Contains(t, r.w.about.Text, "min must be below max")
}

func TestWizardBadSeedBlocksNext(t *testing.T) {
	r := newWizardRig(t)
	r.w.list.Select(1)
	tap(r.w.next)
	tap(r.w.next)
	r.w.seed.SetText("")
	test.Type(r.w.seed, "-3")
	require.True(t, r.w.next.Disabled())
	require.Contains(t, r.w.resErr.Text, "seed")
}

func TestWizardRemembersLastValues(t *testing.T) {
	newTestApp(t)
	b := &fakeBackend{}
	remember := map[string]map[string]string{}
	done := make(chan struct{}, 1)
	w := NewWizard(b, demoEntries(t), remember, func([]string, error) { done <- struct{}{} }, nil)
	w.list.Select(1)
	tap(w.next)
	w.fields[1].entry.SetText("256")
	tap(w.next)
	tap(w.next)
	tap(w.launch)
	<-done
	again := NewWizard(b, demoEntries(t), remember, nil, nil)
	again.list.Select(1)
	require.Equal(t, "256", again.fields[1].entry.Text)
}

func TestParseSweep(t *testing.T) {
	p := template.Param{Name: "n", Type: template.KindInt}
	tests := []struct {
		in   string
		want []string
	}{
		{"1, 2 ,3", []string{"1", "2", "3"}},
		{"1..4", []string{"1", "2", "3", "4"}},
		{"16..64:16", []string{"16", "32", "48", "64"}},
	}
	for _, tt := range tests {
		got, err := parseSweep(p, tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
	_, err := parseSweep(p, "1..100000")
	require.ErrorContains(t, err, "more than")
}

// A run that already succeeded with the same fingerprint is not launched
// again without asking: the wizard offers the earlier run, a new seed, or a
// plain rerun.
func TestWizardAsksBeforeRepeatingADoneRun(t *testing.T) {
	r := newWizardRig(t)
	r.w.Win = r.win
	opened := make(chan string, 1)
	r.w.OnOpenRun = func(id string) { opened <- id }
	r.w.list.Select(1)
	tap(r.w.next)
	tap(r.w.next)
	r.w.seed.SetText("")
	test.Type(r.w.seed, "7")
	tap(r.w.next)
	require.Equal(t, stepReview, r.w.step)

	p, err := r.b.Provenance(context.Background(), r.w.specs[0])
	require.NoError(t, err)
	r.b.done = map[string]engine.RunInfo{p.Fingerprint: {ID: "earlier-run", State: engine.Succeeded}}

	tap(r.w.launch)
	require.Eventually(t, func() bool { return r.win.Canvas().Overlays().Top() != nil }, 5*time.Second, 10*time.Millisecond,
		"a dialog asks what to do")
	require.Contains(t, r.w.status.Text, "earlier-run")
	r.b.mu.Lock()
	require.Empty(t, r.b.submitted, "nothing launched before the user answers")
	r.b.mu.Unlock()

	// "Run anyway with a new seed".
	var newSeed *keyButton
	for _, o := range test.LaidOutObjects(r.win.Canvas().Overlays().Top()) {
		if b, ok := o.(*keyButton); ok && b.Text == "Run anyway with a new seed" {
			newSeed = b
		}
	}
	require.NotNil(t, newSeed)
	tap(newSeed)
	select {
	case <-r.launched:
	case <-time.After(10 * time.Second):
		t.Fatal("the launch never finished")
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	require.Len(t, r.b.submitted, 1)
	require.NotEqual(t, int64(7), r.b.submitted[0].Seed, "the duplicate got a new seed")
}

// A docker template whose image is missing would wait: the review says so
// and offers the host as an explicit choice, saying what it loses.
func TestWizardOffersTheHostWhenTheImageIsMissing(t *testing.T) {
	newTestApp(t)
	tm, err := template.Parse("d.yaml", []byte("name: d\nruntime: {kind: docker, image: niuma/x:1}\nstages: [{name: a, command: [/bin/true]}]\n"))
	require.NoError(t, err)
	b := &fakeBackend{placement: engine.Provenance{Executor: "docker",
		ExecutorNote: "image niuma/x:1 is not on this machine: build or load it here (for the bundled demo: `make demo-image`) or `docker pull niuma/x:1`; the run waits for it (or runs on the host with --executor local)"}}
	launched := make(chan []string, 1)
	w := NewWizard(b, []TemplateEntry{{Name: "d", Load: func() (*template.Template, error) { return tm, nil }}}, nil,
		func(ids []string, err error) { require.NoError(t, err); launched <- ids }, nil)
	win := test.NewWindow(w.Content())
	t.Cleanup(win.Close)
	w.list.Select(0)
	tap(w.next)
	tap(w.next)
	tap(w.next)
	require.Equal(t, stepReview, w.step)
	require.Eventually(t, func() bool {
		var shown bool
		fyne.DoAndWait(func() { shown = w.hostRun.Visible() })
		return shown
	}, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, w.where.Text, "is not on this machine")
	require.Contains(t, w.hostRun.Text, "without the container")
	require.Equal(t, "", w.specs[0].Executor, "unticked, the run waits for its image")

	tap(w.hostRun)
	require.Equal(t, "local", w.specs[0].Executor, "ticked, the host, as chosen")
	tap(w.launch)
	select {
	case <-launched:
	case <-time.After(10 * time.Second):
		t.Fatal("the launch never finished")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Equal(t, "local", b.submitted[0].Executor)
}
