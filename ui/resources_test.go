package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/template"
)

const gpuTemplateYAML = `name: g
runtime: {kind: local}
params:
  lr: {type: float, default: 0.01}
  gpus: {type: int, default: 0, min: 0, max: 8}
  gpu_memory: {type: string, default: 2GiB}
stages:
  - {name: prep, command: [/bin/true]}
  - {name: train, needs: [prep], command: [/bin/true], gpus: "${params.gpus}", gpu_memory: "${params.gpu_memory}"}
`

const fixedGPUYAML = `name: f
runtime: {kind: local}
params:
  lr: {type: float, default: 0.01}
stages:
  - {name: train, command: [/bin/true], gpus: 1, gpu_memory: 30GiB}
`

func gpuEntries(t *testing.T, yaml string) []TemplateEntry {
	tm, err := template.Parse("t.yaml", []byte(yaml))
	require.NoError(t, err)
	return []TemplateEntry{{Name: tm.Name, Load: func() (*template.Template, error) { return tm, nil }}}
}

// resourceFake is a backend that takes a run's own resources.
type resourceFake struct {
	fakeBackend
	got []Resources
}

func (r *resourceFake) SubmitWithResources(ctx context.Context, spec engine.RunSpec, res Resources) (engine.RunInfo, error) {
	r.mu.Lock()
	r.got = append(r.got, res)
	r.mu.Unlock()
	return r.Submit(ctx, spec)
}

// The placement preview is the shepherd's: two simulated A100s with a
// non-sharing run on GPU 0 hold one more run on GPU 1; a second run waits,
// unless both may share, when it joins the first.
func TestPreviewPlacementOnTheLiveSnapshot(t *testing.T) {
	snap := simSnapshot(t, "2xA100-80GB") // r1/train holds 20 GiB of GPU 0
	tm, err := template.Parse("t.yaml", []byte(gpuTemplateYAML))
	require.NoError(t, err)
	spec := func(lr float64) engine.RunSpec {
		return engine.RunSpec{Template: tm, Values: template.Values{"lr": lr, "gpus": int64(1), "gpu_memory": "24GiB"}}
	}
	specs := []engine.RunSpec{spec(0.1), spec(0.01)}
	p := previewPlacement(snap, specs, Resources{}, time.Now(), nil)
	require.Len(t, p, 2)
	require.Equal(t, "train → GPU 1 (80 GiB free)", p[0].where)
	require.Empty(t, p[0].wait)
	require.True(t, strings.HasPrefix(p[1].wait, "train would wait: "), p[1].wait)
	require.Contains(t, p[1].wait, "24 GiB", "the shepherd's reason names the need")

	shared := previewPlacement(snap, specs, Resources{Share: true}, time.Now(), nil)
	require.Empty(t, shared[1].wait, "two sharing runs fit on GPU 1 together")
	require.Contains(t, shared[1].where, "GPU 1")

	cpu := previewPlacement(snap, specs, Resources{UseGPUs: true, GPUs: 0}, time.Now(), nil)
	require.Equal(t, "on the CPU (no stage asks for a GPU)", cpu[0].where)

	// On a shared machine another user's stage holds GPU 1 (with 30 GiB
	// of its memory, which this user's simulated GPU does not show): the
	// first run waits too, even to share.
	st := twoTeams(time.Now())
	st.Leases = st.Leases[1:2] // ana's borrowed stage on GPU 1
	st.Processes = st.Processes[1:2]
	others := previewPlacement(snap, specs, Resources{}, time.Now(), &st)
	require.True(t, strings.HasPrefix(others[0].wait, "train would wait: "), "GPU 1 is ana's: %+v", others[0])
	sharing := previewPlacement(snap, specs, Resources{Share: true}, time.Now(), &st)
	require.NotContains(t, sharing[0].where, "GPU 1", "another user's stage shares its GPU with no one: %+v", sharing[0])
}

// A template whose stages all run on the CPU gets the run's own GPUs on
// every stage, as the engine gives them (engine.Needs): the preview and the
// Review's refusal say what the engine will do.
func TestRunsOwnGPUsOnACPUTemplateGoToEveryStage(t *testing.T) {
	snap := simSnapshot(t, "2xA100-80GB")
	tm, err := template.Parse("t.yaml", []byte("name: c\nruntime: {kind: local}\nstages:\n  - {name: work, command: [/bin/true]}\n"))
	require.NoError(t, err)
	specs := []engine.RunSpec{{Template: tm}}
	p := previewPlacement(snap, specs, Resources{UseGPUs: true, GPUs: 1, GPUMemMiB: 10 * 1024}, time.Now(), nil)
	require.Equal(t, "work → GPU 1 (80 GiB free)", p[0].where)
	require.ErrorContains(t, neverFits(snap, specs, Resources{UseGPUs: true, GPUs: 3}), "stage work can never start here: it needs 3 GPUs")
	require.Equal(t, "on the CPU (no stage asks for a GPU)", previewPlacement(snap, specs, Resources{}, time.Now(), nil)[0].where)
}

// The Resources step holds the GPU parameters (not the Parameters step),
// says where the run would go, and the Review shows it per run.
func TestWizardResourcesStepShowsPlacement(t *testing.T) {
	newTestApp(t)
	b := &fakeBackend{snap: simSnapshot(t, "2xA100-80GB")}
	wz := NewWizard(b, gpuEntries(t, gpuTemplateYAML), nil, nil, nil)
	test.NewWindow(wz.Content())
	wz.list.Select(0)
	wz.show(stepParams)
	require.NotContains(t, texts(wz.body), "gpu_memory", "GPU needs are not parameters of the model")
	wz.show(stepResources)
	texts := texts(wz.body)
	require.Contains(t, texts, "gpu_memory")
	require.True(t, wz.res.note.Visible(), "this engine takes no per-run CPUs: the step says so")
	require.Contains(t, wz.res.preview.Text, "would go now: train → GPU 1")
	fieldOf(wz, "gpu_memory").entry.SetText("81GiB")
	require.Contains(t, wz.res.preview.Text, "nowhere yet — train would wait: needs 1×81 GiB")
}

// A template with fixed GPU needs gets the run's own GPUs and memory from
// an engine that takes them; the Review refuses what can never fit and
// says where the rest would go.
func TestWizardRunsOwnResources(t *testing.T) {
	newTestApp(t)
	b := &resourceFake{fakeBackend: fakeBackend{snap: simSnapshot(t, "2xA100-80GB")}}
	launched := make(chan []string, 1)
	wz := NewWizard(b, gpuEntries(t, fixedGPUYAML), nil, func(ids []string, err error) {
		require.NoError(t, err)
		launched <- ids
	}, nil)
	test.NewWindow(wz.Content())
	wz.list.Select(0)
	wz.show(stepResources)
	require.False(t, wz.res.gpus.Disabled(), "this engine takes a run's own GPUs")
	wz.res.gpus.SetText("3")
	wz.show(stepReview)
	require.ErrorContains(t, wz.refusal, "needs 3 GPUs with 30 GiB each and this machine has 2 usable GPUs of at most 80 GiB. Lower GPUs or GPU memory on the Resources step.")
	require.True(t, wz.launch.Disabled())

	wz.show(stepResources)
	wz.res.gpus.SetText("1")
	wz.res.gpuMem.SetText("40GiB")
	wz.res.cpus.SetText("2.5")
	wz.res.estimate.SetText("1h30m")
	tap(wz.res.spot)
	require.Nil(t, wz.validate())
	wz.show(stepReview)
	require.Nil(t, wz.refusal)
	require.Len(t, wz.placed, 1)
	require.Equal(t, "train → GPU 1 (80 GiB free)", wz.placed[0].where)
	require.Equal(t, "1 GPU, 40 GiB per GPU, 2.5 CPUs, spot, estimate 1h30m0s", resourceLine(wz.resources))
	tap(wz.launch)
	select {
	case <-launched:
	case <-time.After(10 * time.Second):
		t.Fatal("the launch never finished")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Equal(t, []Resources{{GPUs: 1, UseGPUs: true, GPUMemMiB: 40 * 1024, CPUMilli: 2500, Spot: true, Estimate: 90 * time.Minute}}, b.got)
}

// Bad resources block Next with a message that says what to type; an
// engine that takes no per-run resources disables the controls and says so.
func TestWizardResourceInputIsChecked(t *testing.T) {
	newTestApp(t)
	b := &resourceFake{}
	wz := NewWizard(b, gpuEntries(t, fixedGPUYAML), nil, nil, nil)
	wz.list.Select(0)
	wz.show(stepResources)
	for _, c := range []struct {
		entry *keyEntry
		text  string
		want  string
	}{
		{wz.res.gpus, "two", `GPUs "two" is not a whole number from 0 to 64`},
		{wz.res.gpuMem, "lots", `GPU memory "lots"`},
		{wz.res.cpus, "-1", `CPUs "-1" is not a number above 0`},
		{wz.res.estimate, "soon", `estimate "soon" is not a duration (e.g. 45m, 2h or 1h30m)`},
	} {
		c.entry.SetText(c.text)
		require.True(t, wz.next.Disabled(), c.text)
		require.Contains(t, wz.status.Text, c.want)
		c.entry.SetText("")
		require.False(t, wz.next.Disabled())
	}

	plain := NewWizard(&fakeBackend{}, gpuEntries(t, fixedGPUYAML), nil, nil, nil)
	plain.list.Select(0)
	plain.show(stepResources)
	require.True(t, plain.res.spot.Disabled())
	require.True(t, plain.res.gpus.Disabled())
	require.True(t, plain.res.note.Visible())
	shown := texts(plain.body)
	require.NotContains(t, shown, "CPUs per stage", "a control the engine cannot honour is not offered")
	require.Contains(t, shown, "train: 1 GPU with 30 GiB each (the template's)")
}

// A sweep of a template whose sentinel retries defaults to "only flag";
// one run does not; the user's choice stands.
func TestWizardFlagOnlyForSweeps(t *testing.T) {
	const yaml = `name: s
runtime: {kind: local}
params:
  lr: {type: float, default: 0.01}
stages:
  - {name: train, command: [/bin/true]}
sentinel:
  nan: {do: retry, set: {lr: "*0.1"}}
`
	newTestApp(t)
	b := &resourceFake{}
	wz := NewWizard(b, gpuEntries(t, yaml), nil, nil, nil)
	wz.list.Select(0)
	wz.show(stepResources)
	require.False(t, wz.res.flagOnly.Checked, "one run: the template's sentinel acts")
	wz.show(stepParams)
	lr := fieldOf(wz, "lr")
	lr.sweep.SetChecked(true)
	lr.sweepEntry.SetText("0.1, 0.01")
	wz.show(stepResources)
	require.True(t, wz.res.flagOnly.Checked, "a sweep's points are only flagged")
	require.Nil(t, wz.validate())
	require.True(t, wz.resources.FlagOnly)
	tap(wz.res.flagOnly) // the user wants the retries
	wz.show(stepParams)
	wz.show(stepResources)
	require.False(t, wz.res.flagOnly.Checked, "the user's choice stands")

	// A template whose sentinel only flags offers no such choice.
	wz = NewWizard(b, gpuEntries(t, fixedGPUYAML), nil, nil, nil)
	wz.list.Select(0)
	wz.show(stepResources)
	require.NotContains(t, texts(wz.body), wz.res.flagOnly.Text)
	require.False(t, wz.resources.FlagOnly)
}
