package ui

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/machine"
	"niuma/sentinel"
	"niuma/shepherd"
)

// Resources is what a run asks of the machine on top of its template's
// stages, as the wizard's Resources step chooses it. The zero value keeps
// the template's needs. GPUs and GPU memory that the template sets through
// parameters (gpus: ${params.gpus}) are chosen as those parameters instead,
// so that every engine honours them.
type Resources struct {
	GPUs      int   // per GPU stage; 0 keeps the template's (UseGPUs)
	UseGPUs   bool  // GPUs is set (0 then means: run on the CPU)
	GPUMemMiB int64 // per GPU of a GPU stage; 0 keeps the template's
	CPUMilli  int64 // per stage, thousandths of a CPU; 0: none asked
	Spot      bool  // may be stopped with SIGTERM for higher-priority work and requeued
	Share     bool  // may share a GPU with other runs when memory fits
	// Estimate is how long the GPU stage runs, the user's guess; 0 leaves
	// it to the predictor.
	Estimate time.Duration
	// FlagOnly makes the sentinel only flag (and notify) for these runs,
	// never retry or stop them: a retried point of a sweep would quietly
	// become another point. The default for a launch of several runs.
	FlagOnly bool
}

// zero reports whether r keeps every need of the template.
func (r Resources) zero() bool { return r == Resources{} }

// resourceBackend is what the engine offers when it takes a run's own
// resources: a submit that applies them to the run's stages (GPUs and GPU
// memory to the stages that ask for GPUs, CPUs to every stage; spot, share
// and the estimate to the run), validated as the CLI validates --gpus,
// --gpu-memory, --cpus, --spot, --share and --estimate. Without it the
// Resources step offers only what the template's parameters carry.
type resourceBackend interface {
	SubmitWithResources(ctx context.Context, spec engine.RunSpec, res Resources) (engine.RunInfo, error)
}

// resourceControls are the Resources step's widgets for what a run needs.
type resourceControls struct {
	gpus, gpuMem, cpus, estimate *keyEntry
	spot, share                  *keyCheck
	flagOnly                     *keyCheck     // shown when the template's sentinel acts
	flagTouched                  bool          // the user set flagOnly: no default overrides it
	acts                         bool          // the template's sentinel retries or stops: flagOnly is offered
	note                         *widget.Label // what this engine cannot take
	preview                      *widget.Label // where the first run would go now
}

func newResourceControls(changed func()) *resourceControls {
	rc := &resourceControls{gpus: newKeyEntry(), gpuMem: newKeyEntry(), cpus: newKeyEntry(), estimate: newKeyEntry()}
	for _, e := range []*keyEntry{rc.gpus, rc.gpuMem, rc.cpus, rc.estimate} {
		e.OnChanged = func(string) { changed() }
	}
	rc.gpus.SetPlaceHolder("the template's")
	rc.gpuMem.SetPlaceHolder("the template's, e.g. 20GiB")
	rc.cpus.SetPlaceHolder("none asked, e.g. 4 or 2.5")
	rc.estimate.SetPlaceHolder("from earlier runs, e.g. 45m or 2h")
	rc.spot = newKeyCheck("spot: may be stopped for higher-priority work and resumed from its checkpoint", func(bool) { changed() })
	rc.share = newKeyCheck("share: may share a GPU with other runs when memory fits", func(bool) { changed() })
	rc.flagOnly = newKeyCheck("sentinel: only flag trouble, never retry or stop these runs (a retried point of a sweep becomes another point)", func(bool) {
		rc.flagTouched = true
		changed()
	})
	rc.note = widget.NewLabel("")
	rc.note.Importance = widget.LowImportance
	rc.note.Wrapping = fyne.TextWrapWord
	rc.note.Hide()
	rc.preview = widget.NewLabel("")
	rc.preview.Wrapping = fyne.TextWrapWord
	rc.preview.Hide()
	return rc
}

// reset empties every control: the template's needs.
func (rc *resourceControls) reset() {
	for _, e := range []*keyEntry{rc.gpus, rc.gpuMem, rc.cpus, rc.estimate} {
		e.SetText("")
	}
	rc.spot.SetChecked(false)
	rc.share.SetChecked(false)
	rc.flagOnly.SetChecked(false)
	rc.flagTouched = false
}

// defaultFlagOnly ticks "only flag" for a launch of several runs (a sweep),
// unless the user chose.
func (rc *resourceControls) defaultFlagOnly(runs int) {
	if rc.flagTouched {
		return
	}
	on := rc.flagOnly.OnChanged
	rc.flagOnly.OnChanged = nil // not the user's choice
	rc.flagOnly.SetChecked(runs > 1)
	rc.flagOnly.OnChanged = on
}

// sentinelActs reports whether the template's sentinel does more than flag
// or notify for some kind: only then is "only flag" a choice.
func sentinelActs(t *template.Template) bool {
	if t == nil {
		return false
	}
	for _, a := range t.Sentinel {
		if a.Do != sentinel.Flag && a.Do != sentinel.Notify && a.Do != "" {
			return true
		}
	}
	return false
}

// read parses the controls: the resources asked for, or what to fix.
func (rc *resourceControls) read() (Resources, error) {
	var r Resources
	if s := strings.TrimSpace(rc.gpus.Text); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 64 {
			return r, fmt.Errorf("GPUs %q is not a whole number from 0 to 64 (0 runs on the CPU)", s)
		}
		r.GPUs, r.UseGPUs = n, true
	}
	if s := strings.TrimSpace(rc.gpuMem.Text); s != "" {
		m, err := template.ParseGPUMemory(s)
		if err != nil {
			return r, fmt.Errorf("GPU memory %q: %v (e.g. 20GiB or 8000MiB)", s, err)
		}
		r.GPUMemMiB = m
	}
	if s := strings.TrimSpace(rc.cpus.Text); s != "" {
		c, err := strconv.ParseFloat(s, 64)
		if err != nil || c <= 0 || c > 1024 {
			return r, fmt.Errorf("CPUs %q is not a number above 0 (e.g. 4 or 2.5)", s)
		}
		r.CPUMilli = int64(c*1000 + 0.5)
	}
	if s := strings.TrimSpace(rc.estimate.Text); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return r, fmt.Errorf("estimate %q is not a duration (e.g. 45m, 2h or 1h30m)", s)
		}
		r.Estimate = d
	}
	r.Spot, r.Share = rc.spot.Checked, rc.share.Checked
	r.FlagOnly = rc.acts && rc.flagOnly.Checked && !rc.flagOnly.Disabled()
	return r, nil
}

// enable turns on the controls the engine can take: with takes, all; else
// none of the run's own (the template's parameters still set its GPUs).
func (rc *resourceControls) enable(takes bool) {
	for _, w := range []fyne.Disableable{rc.gpus, rc.gpuMem, rc.cpus, rc.estimate, rc.spot, rc.share, rc.flagOnly} {
		if takes {
			w.Enable()
		} else {
			w.Disable()
		}
	}
	if takes {
		rc.note.Hide()
		return
	}
	rc.note.SetText("CPUs, spot, share, an estimate and the sentinel's answers come from the template: this engine takes none of them per run.")
	rc.note.Show()
}

// resourceParams are the template's parameters that set its stages' GPUs
// or GPU memory: the Resources step shows them.
func resourceParams(t *template.Template) map[string]bool {
	out := map[string]bool{}
	if t == nil {
		return out
	}
	for _, st := range t.Stages {
		if st.GPUsParam != "" {
			out[st.GPUsParam] = true
		}
		if st.GPUMemoryParam != "" {
			out[st.GPUMemoryParam] = true
		}
	}
	return out
}

// stageNeed is one stage's need for the shepherd: the template's, with the
// run's values and its own resources on top. ok is false when the template
// cannot say (a value out of range: the Parameters step says so).
func stageNeed(s engine.RunSpec, st template.Stage, res Resources, id string) (shepherd.Need, bool) {
	values := s.Values
	if values == nil {
		values = s.Template.Defaults()
	}
	gpus, mem, err := s.Template.NeedsOf(st, values)
	if err != nil {
		return shepherd.Need{}, false
	}
	// The run's own GPUs, memory and estimate go where the engine puts
	// them (engine.Needs): to the stages that use GPUs, to every stage when
	// none does.
	gpuStage := gpus > 0 || st.GPUsParam != "" || !usesGPUs(s.Template, values)
	if res.UseGPUs && gpuStage {
		gpus = res.GPUs
	}
	if res.GPUMemMiB > 0 && gpuStage {
		mem = res.GPUMemMiB
	}
	n := shepherd.Need{ID: id, GPUs: gpus, GPUMemMiB: mem, CPUMilli: res.CPUMilli, Priority: s.Priority,
		Spot: res.Spot, Share: res.Share, ReadySince: time.Now()}
	if gpus > 0 {
		n.Estimate = res.Estimate
	}
	if n.CPUMilli == 0 && s.Template.Runtime.CPUs > 0 {
		n.CPUMilli = int64(s.Template.Runtime.CPUs*1000 + 0.5)
	}
	return n, true
}

// usesGPUs reports whether some stage of t asks for a GPU with these
// values.
func usesGPUs(t *template.Template, values template.Values) bool {
	for _, st := range t.Stages {
		if gpus, _, err := t.NeedsOf(st, values); err == nil && gpus > 0 {
			return true
		}
	}
	return false
}

// placement is where one run of a launch would go now, in words.
type placement struct {
	where string // "train → GPU 1", or "CPU only"
	wait  string // the shepherd's reason when a stage would wait
}

// previewPlacement asks the shepherd where each run's GPU stages would go
// now: the machine's GPUs as the live snapshot has them, the stages Niuma
// runs there as the running placements, and the runs of this launch as one
// queue, so that the second run of a sweep sees the room the first takes.
// It is the engine's policy over the engine's request builder
// (shepherd.Build); runs already queued are not in it, so "would start"
// means "if nothing ahead of it takes the room first".
//
// On a shared machine (shared set), other users' stages hold their GPUs
// too: the machine service decides, with the teams' shares, so a run the
// preview places may still wait for its team's turn.
func previewPlacement(snap gpumon.Snapshot, specs []engine.RunSpec, res Resources, now time.Time, shared *machine.Status) []placement {
	inv, running := inventoryOf(snap)
	if shared != nil {
		running = append(running, othersHold(shared, &inv, snap.Simulated)...)
	}
	freeNow := map[string]int64{} // before this launch takes any
	for _, g := range inv.GPUs {
		freeNow[g.UUID] = g.FreeMiB
	}
	out := make([]placement, len(specs))
	var queue []shepherd.Request
	type at struct{ run, stage int }
	var where []at
	for i, s := range specs {
		if s.Template == nil {
			continue
		}
		// A run's stages mostly run one after another: its largest GPU
		// stage stands for it.
		best, bestAt := shepherd.Need{}, -1
		for j, st := range s.Template.Stages {
			n, ok := stageNeed(s, st, res, fmt.Sprintf("%d/%s", i, st.Name))
			if ok && n.GPUs > 0 && int64(n.GPUs)*max(n.GPUMemMiB, 1) > int64(best.GPUs)*max(best.GPUMemMiB, 1) {
				best, bestAt = n, j
			}
		}
		if bestAt >= 0 {
			queue = append(queue, shepherd.Build(best))
			where = append(where, at{i, bestAt})
		}
	}
	decisions := shepherd.Schedule(shepherd.Herd(shepherd.HerdOptions{}), shepherd.State{Inventory: inv, Running: running, Queue: queue, Now: now})
	parts := make([][]string, len(specs))
	for k, d := range decisions {
		i, st := where[k].run, specs[where[k].run].Template.Stages[where[k].stage].Name
		if !d.Placed() {
			if out[i].wait == "" {
				out[i].wait = st + " would wait: " + d.Wait
			}
			continue
		}
		var names []string
		for _, g := range d.GPUs {
			names = append(names, gpuLabel(g, freeNow[g.UUID]))
		}
		parts[i] = append(parts[i], st+" → "+strings.Join(names, ", "))
	}
	for i := range out {
		switch {
		case len(parts[i]) > 0:
			out[i].where = strings.Join(parts[i], "; ")
		case out[i].wait == "":
			out[i].where = "on the CPU (no stage asks for a GPU)"
		}
	}
	return out
}

func gpuLabel(g shepherd.GPU, free int64) string {
	label := g.Label
	if label == "" {
		label = fmt.Sprintf("GPU %d", g.Index)
	}
	if g.TotalMiB > 0 {
		label += fmt.Sprintf(" (%s free)", mibText(free))
	}
	return label
}

// inventoryOf is the shepherd's view of a snapshot: its placeable devices
// with the memory free now, and what Niuma's stages hold on them.
func inventoryOf(snap gpumon.Snapshot) (shepherd.Inventory, []shepherd.Running) {
	inv := shepherd.Inventory{Reason: snap.Reason}
	held := map[string]*shepherd.Running{}
	for _, d := range snap.Devices() {
		inv.GPUs = append(inv.GPUs, shepherd.GPU{Index: d.Index, UUID: d.UUID, Model: d.Name, TotalMiB: d.MemTotalMiB,
			FreeMiB: max(0, d.MemTotalMiB-d.MemUsedMiB), Healthy: d.Healthy, Group: d.Group, Parent: d.Parent, Label: d.Label})
		for _, p := range d.Processes {
			if p.Owner == nil {
				continue
			}
			id := p.Owner.String()
			r := held[id]
			if r == nil {
				r = &shepherd.Running{ID: id, Start: snap.At}
				held[id] = r
			}
			r.GPUs = append(r.GPUs, d.UUID)
			r.MemPerGPUMiB = max(r.MemPerGPUMiB, p.MemMiB)
		}
	}
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	running := make([]shepherd.Running, 0, len(ids))
	for _, id := range ids {
		running = append(running, *held[id])
	}
	return inv, running
}

// resourceLine is what a run asks besides its template's, for the review.
func resourceLine(r Resources) string {
	var parts []string
	if r.UseGPUs {
		parts = append(parts, fmt.Sprintf("%d %s", r.GPUs, plural(r.GPUs, "GPU", "GPUs")))
	}
	if r.GPUMemMiB > 0 {
		parts = append(parts, mibText(r.GPUMemMiB)+" per GPU")
	}
	if r.CPUMilli > 0 {
		parts = append(parts, strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", float64(r.CPUMilli)/1000), "0"), ".0")+" CPUs")
	}
	if r.Spot {
		parts = append(parts, "spot")
	}
	if r.Share {
		parts = append(parts, "shares a GPU")
	}
	if r.Estimate > 0 {
		parts = append(parts, "estimate "+r.Estimate.String())
	}
	if r.FlagOnly {
		parts = append(parts, "sentinel only flags")
	}
	return strings.Join(parts, ", ")
}

// resourceForm lays out the Resources step: the run's needs first (the
// template's GPU parameters, or the run's own GPUs and memory), then how
// it is queued.
func (w *Wizard) resourceForm() fyne.CanvasObject {
	params := resourceParams(w.tmpl)
	needs := container.NewVBox()
	for _, f := range w.fields {
		if params[f.p.Name] {
			needs.Add(f.box)
		}
	}
	form := widget.NewForm()
	// Controls the engine cannot honour are not offered (a control that
	// does nothing misleads); the note says what the template decides.
	takes := !w.res.cpus.Disabled()
	if len(needs.Objects) == 0 {
		if takes {
			form.Append("GPUs per GPU stage", w.res.gpus)
			form.Append("GPU memory per GPU", w.res.gpuMem)
		} else if need := templateGPUNeed(w.tmpl); need != "" {
			form.Append("GPUs", widget.NewLabel(need))
		}
	}
	if takes {
		form.Append("CPUs per stage", w.res.cpus)
		form.Append("Estimate", w.res.estimate)
		form.Append("", w.res.spot)
		form.Append("", w.res.share)
		if w.res.acts {
			form.Append("", w.res.flagOnly)
		}
	}
	form.Append("Executor", w.executor)
	form.Append("Priority", w.priority)
	form.Append("Seed", w.seed)
	about := "Higher priority runs are placed first. Seed 0 lets Niuma choose one for each run."
	if takes {
		about += " An estimate lets the shepherd fit short runs into gaps; without one it uses earlier runs of the template."
	}
	note := widget.NewLabel(about)
	note.Wrapping = fyne.TextWrapWord
	note.Importance = widget.LowImportance
	// Where the first run would go follows the GPU needs it answers, below
	// them: its text changes length as they are typed, and nothing the
	// user points at may move.
	return container.NewVScroll(container.NewVBox(needs, w.res.preview, w.resErr, w.res.note, form, note))
}

// templateGPUNeed says what the template's stages ask of the GPUs, for a
// template whose needs no parameter sets: "train: 1 × 30 GiB".
func templateGPUNeed(t *template.Template) string {
	if t == nil {
		return ""
	}
	var parts []string
	for _, st := range t.Stages {
		if st.GPUs > 0 {
			parts = append(parts, st.Name+": "+needText(st.GPUs, st.GPUMemoryMiB))
		}
	}
	if len(parts) == 0 {
		return "none: every stage runs on the CPU"
	}
	return strings.Join(parts, "; ") + " (the template's)"
}

// updatePreview says on the Resources step where the first run would go
// now (the Review says it for every run).
func (w *Wizard) updatePreview() {
	if w.step != stepResources {
		return
	}
	specs, err := w.buildSpecs()
	if err != nil || len(specs) == 0 {
		w.res.preview.Hide()
		return
	}
	snap, serr := w.backend.GPUs(context.Background())
	if serr != nil {
		w.res.preview.Hide()
		return
	}
	p := previewPlacement(snap, specs[:1], w.resources, time.Now(), w.sharedStatus())[0]
	text := "Where the first run would go now: " + p.where
	w.res.preview.Importance = widget.SuccessImportance
	if p.wait != "" {
		text = "Where the first run would go now: nowhere yet — " + p.wait
		w.res.preview.Importance = widget.WarningImportance
	}
	w.res.preview.SetText(text)
	w.res.preview.Show()
}
