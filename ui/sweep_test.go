package ui

import (
	"sort"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"

	"niuma/engine/template"
)

// sweepYAML and sweepRuns are the same in app's TestRunSweepMatchesTheWizard:
// the wizard and `niuma run --sweep` launch exactly these runs for the
// same inputs (lr 1e-3, 1e-2; hidden 16..48:16; adam and sgd; momentum
// 0.5, 0.9), because both go through the template's one expansion.
// momentum applies only to sgd, so adam is not swept over it: 2 × 3 ×
// (1 + 2) = 18 runs, not 24.
const sweepYAML = `name: sweepdemo
params:
  lr:        {type: float, default: 0.01, min: 0.00001, max: 1.0, log: true}
  hidden:    {type: int, default: 64, min: 8, max: 1024}
  optimizer: {type: choice, default: adam, choices: [adam, sgd]}
  momentum:  {type: float, default: 0.9, min: 0, max: 0.99, when: {optimizer: sgd}}
stages:
  - name: train
    command: [/bin/true]
`

var sweepRuns = []string{
	"lr=0.001 hidden=16 optimizer=adam momentum=0.5",
	"lr=0.001 hidden=16 optimizer=sgd momentum=0.5",
	"lr=0.001 hidden=16 optimizer=sgd momentum=0.9",
	"lr=0.001 hidden=32 optimizer=adam momentum=0.5",
	"lr=0.001 hidden=32 optimizer=sgd momentum=0.5",
	"lr=0.001 hidden=32 optimizer=sgd momentum=0.9",
	"lr=0.001 hidden=48 optimizer=adam momentum=0.5",
	"lr=0.001 hidden=48 optimizer=sgd momentum=0.5",
	"lr=0.001 hidden=48 optimizer=sgd momentum=0.9",
	"lr=0.01 hidden=16 optimizer=adam momentum=0.5",
	"lr=0.01 hidden=16 optimizer=sgd momentum=0.5",
	"lr=0.01 hidden=16 optimizer=sgd momentum=0.9",
	"lr=0.01 hidden=32 optimizer=adam momentum=0.5",
	"lr=0.01 hidden=32 optimizer=sgd momentum=0.5",
	"lr=0.01 hidden=32 optimizer=sgd momentum=0.9",
	"lr=0.01 hidden=48 optimizer=adam momentum=0.5",
	"lr=0.01 hidden=48 optimizer=sgd momentum=0.5",
	"lr=0.01 hidden=48 optimizer=sgd momentum=0.9",
}

func TestWizardSweepIsTheTemplatesExpansion(t *testing.T) {
	newTestApp(t)
	tm, err := template.Parse("sweepdemo.yaml", []byte(sweepYAML))
	require.NoError(t, err)
	r := &wizardRig{b: &fakeBackend{}, launched: make(chan []string, 1)}
	r.w = NewWizard(r.b, []TemplateEntry{{Name: "sweepdemo", Source: "bundled", Load: func() (*template.Template, error) { return tm, nil }}},
		nil, func(ids []string, err error) {
			require.NoError(t, err)
			r.launched <- ids
		}, nil)
	r.win = test.NewWindow(r.w.Content())
	r.win.Resize(fyne.NewSize(900, 640))
	t.Cleanup(r.win.Close)
	r.w.list.Select(0)
	tap(r.w.next)

	sweep := func(name, text string) {
		f := r.field(name)
		tap(f.sweep)
		f.sweepEntry.SetText(text)
	}
	sweep("lr", "1e-3, 1e-2")
	sweep("hidden", "16..48:16")
	opt := r.field("optimizer")
	tap(opt.sweep)
	opt.sweepChoice.SetSelected([]string{"adam", "sgd"})
	sweep("momentum", "0.5, 0.9")
	require.Equal(t, "18 runs", r.w.runCount.Text)
	tap(r.w.next)
	tap(r.w.next)

	var got []string
	for _, s := range r.launch(t) {
		got = append(got, "lr="+template.FormatValue(s.Values["lr"])+" hidden="+template.FormatValue(s.Values["hidden"])+
			" optimizer="+template.FormatValue(s.Values["optimizer"])+" momentum="+template.FormatValue(s.Values["momentum"]))
	}
	sort.Strings(got)
	require.Equal(t, sweepRuns, got)
}
