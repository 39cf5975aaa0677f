package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/gpumon"
)

// Each test here is a bug a new user tripped on, written down before it
// was fixed.

// walk calls fn for every object under o, with its absolute position.
func walk(o fyne.CanvasObject, at fyne.Position, fn func(o fyne.CanvasObject, at fyne.Position, scrolls []*container.Scroll), scrolls []*container.Scroll) {
	if !o.Visible() {
		return
	}
	at = at.Add(o.Position())
	fn(o, at, scrolls)
	if s, ok := o.(*container.Scroll); ok {
		scrolls = append(append([]*container.Scroll(nil), scrolls...), s)
		if s.Content != nil {
			walk(s.Content, at.Subtract(s.Offset), fn, scrolls)
		}
		return
	}
	if c, ok := o.(*fyne.Container); ok {
		for _, ch := range c.Objects {
			walk(ch, at, fn, scrolls)
		}
		return
	}
	if w, ok := o.(fyne.Widget); ok {
		for _, ch := range test.WidgetRenderer(w).Objects() {
			walk(ch, at, fn, scrolls)
		}
	}
}

// The Runs tab's "New run" button opens the wizard; it never submits a
// default run behind the user's back.
func TestBugRunsTabNewRunOpensTheWizard(t *testing.T) {
	b := &fakeBackend{}
	s, w := newTestShell(t, b)
	show(t, s, "Runs")
	tap(s.Runs.newRun)
	time.Sleep(0) // a submit would be on its way now
	b.mu.Lock()
	submitted := len(b.submitted)
	b.mu.Unlock()
	require.Zero(t, submitted, "nothing is launched by the button itself")
	require.NotNil(t, w.Canvas().Overlays().Top(), "the wizard opens")
	require.NotNil(t, s.wizard)
}

// Switching from a run whose view was scrolled down to another shows the
// other from its top, not some middle part (or a blank pane).
func TestBugScrollPositionResetsBetweenRuns(t *testing.T) {
	now := time.Now()
	long := engine.RunInfo{ID: "long", Template: "t", State: engine.Failed, CreatedAt: now,
		Stages: stages(engine.Succeeded, engine.Failed, engine.Cancelled, engine.Cancelled)}
	for i := range long.Stages {
		long.Stages[i].Reason = strings.Repeat("a long reason that wraps over several lines ", 8)
	}
	other := long
	other.ID = "other"
	b := &fakeBackend{runs: []engine.RunInfo{long, other}}
	v, w := newTestView(t, b)
	v.Reload(context.Background())
	v.SelectRun("long")
	v.Reload(context.Background())
	var scrolled []*container.Scroll
	walk(v.detail.content, fyne.Position{}, func(o fyne.CanvasObject, _ fyne.Position, _ []*container.Scroll) {
		if s, ok := o.(*container.Scroll); ok && s.Content != nil && s.Content.MinSize().Height > s.Size().Height {
			s.Content.Resize(fyne.NewSize(s.Size().Width, s.Content.MinSize().Height))
			s.ScrollToBottom()
			require.Positive(t, s.Offset.Y)
			scrolled = append(scrolled, s)
		}
	}, nil)
	require.NotEmpty(t, scrolled, "the long run's view scrolls")
	v.SelectRun("other")
	v.Reload(context.Background())
	w.Canvas().Refresh(v.Content())
	walk(v.detail.content, fyne.Position{}, func(o fyne.CanvasObject, _ fyne.Position, _ []*container.Scroll) {
		if s, ok := o.(*container.Scroll); ok {
			require.Zero(t, s.Offset.Y, "another run starts at the top")
		}
	}, nil)
}

// A run that disappears (deleted in the archive) leaves no selected row
// and no stale detail behind.
func TestBugDeletedRunLeavesNoStaleSelection(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{
		{ID: "r2", Template: "t", State: engine.Succeeded, CreatedAt: now},
		{ID: "r1", Template: "t", State: engine.Succeeded, CreatedAt: now},
	}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	v.list.Select(0)
	v.Reload(context.Background())
	require.Contains(t, v.detail.title.Text, "succeeded")
	b.mu.Lock()
	b.runs = b.runs[1:] // r2 was deleted
	b.mu.Unlock()
	v.Reload(context.Background())
	v.mu.Lock()
	sel := v.selected
	v.mu.Unlock()
	require.Empty(t, sel, "the deleted run is no longer selected")
	require.Equal(t, "Run r2 is not in this archive", v.detail.title.Text, "the pane says what became of it")
	require.True(t, v.export.Disabled(), "nothing to export")
}

// The log pane scrolls only vertically (long lines wrap), and it is not a
// scroll inside another scroll, which swallowed the wheel meant for the
// page.
func TestBugLogDoesNotCaptureTheWheel(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Failed, CreatedAt: now,
		Stages: []engine.StageInfo{{Name: "train", State: engine.Failed, Attempts: 1, MaxAttempts: 1}}}},
		logs: map[string]string{"r1/train/1": strings.Repeat("x", 400) + "\n" + engine.StderrMarker + "\nTraceback\n"}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	openTab(v.detail.content, "Log")
	found := false
	walk(v.detail.content, fyne.Position{}, func(o fyne.CanvasObject, _ fyne.Position, scrolls []*container.Scroll) {
		if o != v.detail.logText {
			return
		}
		found = true
		require.Len(t, scrolls, 1, "the log is in one scroll, not nested")
		require.Equal(t, container.ScrollVerticalOnly, scrolls[0].Direction, "the log never scrolls sideways")
	}, nil)
	require.True(t, found, "the log is shown")
}

// The run's note ("cancelled by request") does not overlap what follows.
func TestBugNoteDoesNotOverlapTheLog(t *testing.T) {
	now := time.Now()
	run := engine.RunInfo{ID: "r1", Template: "digits-mlp", State: engine.Running, CreatedAt: now,
		Params: map[string]any{"lr": 0.01, "hidden": 64, "epochs": 30, "optimizer": "adam", "batch_size": 64},
		Stages: []engine.StageInfo{{Name: "train", State: engine.Running, Attempts: 1, MaxAttempts: 1}}}
	b := &fakeBackend{runs: []engine.RunInfo{run}, logs: map[string]string{"r1/train/1": "epoch 1\n"}}
	v, w := newTestView(t, b)
	w.Resize(fyne.NewSize(1024, 700))
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	// The user cancels it: the run view gains the note.
	run.State, run.Error = engine.Cancelled, "cancelled by request"
	run.Stages[0].State = engine.Cancelled
	b.mu.Lock()
	b.runs = []engine.RunInfo{run}
	b.mu.Unlock()
	v.Reload(context.Background())
	type box struct {
		text        string
		left, right float32
		top, bot    float32
	}
	var boxes []box
	walk(v.detail.content, fyne.Position{}, func(o fyne.CanvasObject, at fyne.Position, scrolls []*container.Scroll) {
		if l, ok := o.(*widget.Label); ok && l.Text != "" && len(scrolls) == 0 {
			boxes = append(boxes, box{l.Text, at.X, at.X + l.Size().Width, at.Y, at.Y + l.Size().Height})
		}
	}, nil)
	var note *box
	for i := range boxes {
		if strings.Contains(boxes[i].text, "cancelled by request") {
			note = &boxes[i]
		}
	}
	require.NotNil(t, note)
	for _, b := range boxes {
		if b == *note || b.right <= note.left || b.left >= note.right {
			continue
		}
		overlap := min(b.bot, note.bot) - max(b.top, note.top)
		require.LessOrEqual(t, overlap, float32(0.5), "the note overlaps %q", b.text)
	}
}

// openTab selects the tab with this title under o, when there is one.
func openTab(o fyne.CanvasObject, title string) {
	walk(o, fyne.Position{}, func(o fyne.CanvasObject, _ fyne.Position, _ []*container.Scroll) {
		if tabs, ok := o.(*container.AppTabs); ok {
			for i, it := range tabs.Items {
				if it.Text == title {
					tabs.SelectIndex(i)
				}
			}
		}
	}, nil)
}

// At 1024 px the stage chips of a run row never cover its state badge.
func TestBugStageChipsDoNotCoverTheState(t *testing.T) {
	newTestApp(t)
	row := newRunRow().(*runRow)
	w := test.NewWindow(row)
	defer w.Close()
	// The runs list takes about half of a 1024 px window, less with the
	// split moved or a long template name.
	row.set(engine.RunInfo{ID: "20261129-194640-5e1879", Template: "digits-mlp", State: engine.Succeeded,
		Stages: stages(engine.Succeeded, engine.Succeeded, engine.Succeeded, engine.Succeeded)}, time.Now(), nil, sentinelChange{})
	w.Resize(fyne.NewSize(380, 80))
	row.Resize(fyne.NewSize(380, row.MinSize().Height))
	var stateRight, chipsLeft float32 = 0, 1e9
	walk(row, fyne.Position{}, func(o fyne.CanvasObject, at fyne.Position, _ []*container.Scroll) {
		if o == row.state {
			stateRight = at.X + o.Size().Width
		}
		if o == row.chips {
			chipsLeft = at.X
		}
	}, nil)
	require.Positive(t, stateRight)
	require.LessOrEqual(t, stateRight, chipsLeft, "the chips start after the state badge ends")
}

// A stage retried by the sentinel never reads "attempt 3/2".
func TestBugAttemptsNeverExceedTheirTotal(t *testing.T) {
	now := time.Now()
	st := engine.StageInfo{Name: "train", State: engine.Succeeded, Attempts: 3, MaxAttempts: 2}
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Succeeded, CreatedAt: now,
		Stages: []engine.StageInfo{st}}}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	for _, s := range texts(v.detail.content) {
		require.NotContains(t, s, "3/2")
	}
}

// A failed run's last error line is in the run's header, seen without
// scrolling.
func TestBugTracebackIsAboveTheFold(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Failed, CreatedAt: now,
		Error:  "stage train failed: exit 1 (attempt 1 of 1)",
		Stages: []engine.StageInfo{{Name: "train", State: engine.Failed, Attempts: 1, MaxAttempts: 1, Reason: "exit 1 (attempt 1 of 1)"}}}},
		logs: map[string]string{"r1/train/1": strings.Repeat("epoch\n", 150) + engine.StderrMarker +
			"\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nZeroDivisionError: division by zero\n"}}
	v, w := newTestView(t, b)
	w.Resize(fyne.NewSize(1024, 700))
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	seen := false
	walk(v.detail.content, fyne.Position{}, func(o fyne.CanvasObject, at fyne.Position, scrolls []*container.Scroll) {
		l, ok := o.(*widget.Label)
		if !ok || !strings.Contains(l.Text, "ZeroDivisionError: division by zero") || len(scrolls) > 0 {
			return
		}
		if at.Y+l.Size().Height <= 300 {
			seen = true
		}
	}, nil)
	require.True(t, seen, "the error line shows near the top, outside any scroll")
}

// A notification is shown in the window whether or not the desktop has a
// notification service (D-Bus).
func TestBugNotificationsShowInTheWindow(t *testing.T) {
	s, w := newTestShell(t, &fakeBackend{})
	s.onEvent(context.Background(), engine.Event{Kind: engine.RunChanged, RunID: "r9", State: engine.Failed, Reason: "stage train failed"})
	found := false
	for _, o := range append([]fyne.CanvasObject{w.Canvas().Content()}, w.Canvas().Overlays().List()...) {
		for _, txt := range texts(o) {
			if strings.Contains(txt, "r9") && strings.Contains(txt, "failed") {
				found = true
			}
		}
	}
	require.True(t, found, "the window says run r9 failed")
}

// The wizard refuses at Review a run this machine can never hold.
func TestBugNeverFittingRunIsRefusedAtReview(t *testing.T) {
	r := newWizardRig(t)
	r.b.snap = gpumon.Snapshot{GPUs: []gpumon.GPU{
		{Index: 0, UUID: "GPU-0", MemTotalMiB: 81920, Healthy: true},
		{Index: 1, UUID: "GPU-1", MemTotalMiB: 81920, Healthy: true}}}
	tm := r.w.entries[1]
	big := strings.Replace(demoYAML, "    command: [/bin/true]", "    command: [/bin/true]\n    gpus: 3", 1)
	tm.Load = func() (*templateT, error) { return parseT(t, big) }
	r.w.entries[1] = tm
	r.w.list.Select(1)
	tap(r.w.next)
	tap(r.w.next)
	tap(r.w.next)
	require.Equal(t, stepReview, r.w.step)
	require.True(t, r.w.launch.Disabled(), "Launch is refused")
	require.Contains(t, r.w.status.Text, "never")
}

// After Clone, the next Ctrl+N starts from the values last launched, not
// the cloned run's.
func TestBugCloneDoesNotLeakIntoTheNextWizard(t *testing.T) {
	s, _ := newTestShell(t, &fakeBackend{})
	s.CloneRun(engine.RunInfo{ID: "r1", Template: "demo", Params: map[string]any{"lr": 0.5, "hidden": 128.0}})
	require.Equal(t, "0.5", fieldOf(s.wizard, "lr").entry.Text, "the clone is prefilled")
	tap(s.wizard.cancel)
	s.OpenWizard()
	s.wizard.list.Select(1)
	require.Equal(t, "0.01", fieldOf(s.wizard, "lr").entry.Text, "a new run starts from the defaults")
}

func fieldOf(w *Wizard, name string) *paramField {
	for _, f := range w.fields {
		if f.p.Name == name {
			return f
		}
	}
	panic("no field " + name)
}

type templateT = template.Template

func parseT(t *testing.T, yaml string) (*template.Template, error) {
	t.Helper()
	return template.Parse("t.yaml", []byte(yaml))
}

// pressKey types a key as the desktop driver does: to the focused object,
// else to the canvas.
func pressKey(w fyne.Window, name fyne.KeyName) {
	asUser(func() {
		ev := &fyne.KeyEvent{Name: name}
		if f := w.Canvas().Focused(); f != nil {
			f.TypedKey(ev)
			return
		}
		if h := w.Canvas().OnTypedKey(); h != nil {
			h(ev)
		}
	})
}

// Escape cancels the wizard, whatever has the focus.
func TestBugEscapeClosesTheWizard(t *testing.T) {
	s, w := newTestShell(t, &fakeBackend{})
	s.OpenWizard()
	require.NotNil(t, w.Canvas().Overlays().Top())
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape closed the wizard")

	s.OpenWizard()
	s.wizard.list.Select(1)
	tap(s.wizard.next)
	w.Canvas().Focus(fieldOf(s.wizard, "lr").entry)
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape closed the wizard from a focused entry")
}

// Found in the first-use trial: a reload that began before a click on a
// run, and ended after it, undid the click: the run picked before (or
// none) came back.
func TestBugAReloadInFlightKeepsTheNewSelection(t *testing.T) {
	now := time.Now()
	b := &gatedBackend{fakeBackend: fakeBackend{runs: []engine.RunInfo{
		{ID: "r1", Template: "new", State: engine.Succeeded, CreatedAt: now},
		{ID: "r0", Template: "old", State: engine.Succeeded, CreatedAt: now}}}}
	v, _ := newTestView(t, &b.fakeBackend)
	v.backend = b
	v.Reload(context.Background())
	v.SelectRun("r0")
	v.Reload(context.Background())
	require.Contains(t, v.detail.title.Text, "old")

	b.gate = make(chan struct{})
	b.entered = make(chan struct{}, 1) // buffered: the reload may get there before the test waits
	done := make(chan struct{})
	go func() { v.Reload(context.Background()); close(done) }() // reads r0, then waits
	wait := func(ch <-chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
	}
	wait(b.entered, "the reload never read the run")
	v.SelectRun("r1") // the click, while that reload is in flight
	close(b.gate)
	wait(done, "the reload never ended")
	v.mu.Lock()
	sel := v.selected
	v.mu.Unlock()
	require.Equal(t, "r1", sel, "the click stands")
	require.True(t, v.selInfo == nil || v.selInfo.ID == "r1", "Clone and Cancel never act on the run picked before")
	v.Reload(context.Background()) // as the view's loop does at once
	require.Contains(t, v.detail.title.Text, "new")
}

// gatedBackend holds LastMetrics until gate closes, once entered is
// signalled (when both are set).
type gatedBackend struct {
	fakeBackend
	gate, entered chan struct{}
}

func (g *gatedBackend) LastMetrics(ctx context.Context, id string) ([]engine.Point, error) {
	if g.gate != nil {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.gate
	}
	return g.fakeBackend.LastMetrics(ctx, id)
}

// Found in the first-use trial: a run opened from the board showed "Select
// a run" (or the run shown before) until its read came back, seconds on a
// busy machine; the click now shows at once which run is coming.
func TestBugOpeningARunSaysSoAtOnce(t *testing.T) {
	now := time.Now()
	b := &gatedBackend{fakeBackend: fakeBackend{runs: []engine.RunInfo{
		{ID: "r1", Template: "new", State: engine.Running, CreatedAt: now},
		{ID: "r0", Template: "old", State: engine.Succeeded, CreatedAt: now}}}}
	v, _ := newTestView(t, &b.fakeBackend)
	v.backend = b
	v.Reload(context.Background())
	v.SelectRun("r0")
	v.Reload(context.Background())
	require.Contains(t, v.detail.title.Text, "old")
	v.SelectRun("r1") // no reload yet: the read is on its way
	require.Equal(t, "Opening run r1…", v.detail.title.Text)
	require.False(t, v.detail.body.Visible(), "r0's curves and stages are not shown as r1's")
	v.Reload(context.Background())
	require.Contains(t, v.detail.title.Text, "new")
}

// Found in the first-use trial: the board redrew its charts every second
// behind the other pages, slowing the page on screen on a busy machine.
func TestBugBoardRedrawsOnlyWhenShown(t *testing.T) {
	s, _ := newTestShell(t, &fakeBackend{})
	require.True(t, s.boardShown.Load(), "the board is home")
	show(t, s, "Runs")
	require.False(t, s.boardShown.Load())
	show(t, s, "Board")
	require.True(t, s.boardShown.Load())
}

// Found in the first-use trial: with the cursor in a text field (the
// Runs search, the archive's, the Settings address), Ctrl+N did nothing:
// Fyne hands a shortcut to the focused widget only.
func TestBugCtrlNWorksFromATextField(t *testing.T) {
	s, w := newTestShell(t, &fakeBackend{})
	sc := &desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault}
	for _, f := range []struct {
		page  string
		entry fyne.Focusable
	}{{"Runs", s.Runs.query}, {"Archive", s.Archive.query}} {
		show(t, s, f.page)
		w.Canvas().Focus(f.entry)
		// What the driver does: the focused widget gets the shortcut.
		w.Canvas().Focused().(fyne.Shortcutable).TypedShortcut(sc)
		require.NotNil(t, w.Canvas().Overlays().Top(), "Ctrl+N from the %s search opens the wizard", f.page)
		tap(s.wizard.cancel)
		require.Nil(t, w.Canvas().Overlays().Top())
	}
	// The field's own shortcuts stay its own.
	show(t, s, "Runs")
	s.Runs.query.SetText("lr=0.1")
	w.Canvas().Focus(s.Runs.query)
	w.Canvas().Focused().(fyne.Shortcutable).TypedShortcut(&fyne.ShortcutSelectAll{})
	require.Equal(t, "lr=0.1", s.Runs.query.SelectedText())
	require.Nil(t, w.Canvas().Overlays().Top())
}

// Found in the first-use trial: a job on the Cluster page whose run is in
// another archive opened "Select a run", as if the click had missed.
func TestBugOpeningARunThatIsNotHereSaysSo(t *testing.T) {
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Succeeded, CreatedAt: time.Now()}}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	v.SelectRun("run-85712b")
	v.Reload(context.Background())
	require.Equal(t, "Run run-85712b is not in this archive", v.detail.title.Text)
	require.Contains(t, v.detail.idLine.Text, "another data directory (NIUMA_HOME)")
	v.SelectRun("r1")
	v.Reload(context.Background())
	require.Contains(t, v.detail.title.Text, "t ")
}
