package ui

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"
)

// newTestApp is test.NewTempApp that, at the test's end, waits until no
// goroutine of any view is left (the test closes the views it started
// goroutines in). One left running would draw, through fyne.Do, into the
// next test's window and app.
func newTestApp(tb testing.TB) fyne.App {
	tb.Helper()
	turn = &userTurn
	a := test.NewTempApp(tb)
	tb.Cleanup(func() { waitForViews(tb) })
	return a
}

// viewsDeadline is how long a closed view's goroutines may take to
// return: generous, for a loaded machine; a leak waits it out and fails.
const viewsDeadline = 30 * time.Second

// waitForViews waits until every view goroutine has returned, or fails
// the test with the stacks of those left.
func waitForViews(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(viewsDeadline)
	for running.Load() > 0 {
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			var ours []string
			for _, g := range strings.Split(buf.String(), "\n\n") {
				if strings.Contains(g, "niuma/ui.") && !strings.Contains(g, "waitForViews") {
					ours = append(ours, g)
				}
			}
			tb.Fatalf("%d view goroutines outlived the test (a view left open?):\n%s", running.Load(), strings.Join(ours, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// userTurn is the ui's turn (onui.go) in the tests: held while a test
// acts as the user, as Fyne's one thread is busy with an event.
var userTurn sync.Mutex

// asUser runs act holding the turn, then waits for what it started.
func asUser(act func()) {
	userTurn.Lock()
	act()
	userTurn.Unlock()
	mustSettle()
}

// tap taps o as a user would and waits for what the tap started.
func tap(o fyne.Tappable) { asUser(func() { test.Tap(o) }) }

// mustSettle is settle for a helper with no test at hand: it panics when
// the goroutines do not return in time.
func mustSettle() {
	if n := busyFor(viewsDeadline); n > 0 {
		panic(fmt.Sprintf("%d view goroutines still busy after %s", n, viewsDeadline))
	}
}

// busyFor waits up to d until no view goroutine is busy, and says how
// many still are.
func busyFor(d time.Duration) int64 {
	deadline := time.Now().Add(d)
	for {
		n := running.Load() - following.Load()
		if n <= 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until every view goroutine that does one thing (a reload,
// a read a tap started) has returned, leaving those that follow (Follow's
// refreshers and tickers). The test driver runs fyne.Do on the caller's
// goroutine, so such a goroutine's fill draws at the same time as the
// test: a test settles before it acts again on what the fill draws.
func settle(tb testing.TB) {
	tb.Helper()
	if n := busyFor(viewsDeadline); n > 0 {
		tb.Fatalf("%d view goroutines still busy after %s", n, viewsDeadline)
	}
}

// show switches the window to a page and waits for the reload its
// selection started.
func show(tb testing.TB, s *Shell, page string) {
	tb.Helper()
	asUser(func() { s.Show(page) })
}

// A view's goroutines end when it closes, whatever they wait on: the
// study view's ticker with its dialog still open, and one under a
// caller's context that has not ended.
func TestTasksEndWithTheirView(t *testing.T) {
	var ts tasks
	started := make(chan struct{}, 2)
	ts.Go(func(ctx context.Context) { started <- struct{}{}; <-ctx.Done() })
	ts.GoUnder(context.Background(), func(ctx context.Context) { started <- struct{}{}; <-ctx.Done() })
	<-started
	<-started
	require.EqualValues(t, 2, running.Load())
	ts.Close()
	waitForViews(t)
	ran := false
	ts.Go(func(context.Context) { ran = true })
	waitForViews(t)
	require.False(t, ran, "nothing starts on a closed view")

	// The caller's context ends the goroutine before the view closes.
	var other tasks
	defer other.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	other.GoUnder(ctx, func(ctx context.Context) { <-ctx.Done(); close(done) })
	cancel()
	<-done
	waitForViews(t)
}

// The study view left open when its page closes stops reading: its ticker
// ends with the view, so nothing of it reaches a later window.
func TestStudyViewStopsWithItsPage(t *testing.T) {
	b := &liveStudies{fakeBackend: fakeBackend{archive: archiveRuns(time.Now())}}
	b.set(StudyInfo{ID: "st1", Template: "demo", State: "running", Objective: "val_acc", Goal: "max", Budget: 8, Done: 2, Running: 2})
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	v := NewArchiveView(b, w)
	w.SetContent(v.Content())
	tap(v.studies)
	require.True(t, v.studiesOpen.Load())
	require.EqualValues(t, 1, running.Load(), "the open study view's ticker")
	v.Close()
	waitForViews(t)
	require.True(t, v.studiesOpen.Load(), "the dialog is still up; only its refresher stopped")
}

// A started window's goroutines (events, the board's and the runs page's
// refreshers, the cluster's follow) end with Shell.Close, though the
// context they were started under goes on.
func TestShellCloseStopsItsGoroutines(t *testing.T) {
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	b := &fakeBackend{}
	s := NewShell(b, NewMainView(b, w), Options{Cluster: func(context.Context) (ClusterInfo, error) { return ClusterInfo{}, nil }}, w)
	w.SetContent(s.Content())
	s.Start(context.Background())
	require.GreaterOrEqual(t, running.Load(), int64(4))
	s.Close()
	waitForViews(t)
}

// No canvas image on screen is without a source: every page, the wizard
// and the study view, as drawn.
func TestEveryImageHasASource(t *testing.T) {
	b := &liveStudies{fakeBackend: fakeBackend{archive: archiveRuns(time.Now())}}
	b.set(StudyInfo{ID: "st1", Template: "demo", State: "running", Objective: "val_acc", Goal: "max", Budget: 8, Done: 2, Running: 2})
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	s := NewShell(b, NewMainView(b, w), Options{Templates: func() ([]TemplateEntry, error) { return demoEntries(t), nil },
		Cluster: func(context.Context) (ClusterInfo, error) { return ClusterInfo{}, nil }}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1200, 780))
	check := func(where string) {
		t.Helper()
		images := 0
		objs := test.LaidOutObjects(w.Canvas().Content())
		for _, o := range w.Canvas().Overlays().List() {
			objs = append(objs, test.LaidOutObjects(o)...)
		}
		for _, o := range objs {
			// A hidden one may be empty: Fyne's entry keeps one for its
			// validation state, which it fills before it shows it.
			if img, ok := o.(*canvas.Image); ok && img.Visible() {
				images++
				require.True(t, img.Resource != nil || img.Image != nil || img.File != "", "%s: an image on screen without a source", where)
			}
		}
		require.NotZero(t, images, "%s: the page's icons are images", where)
	}
	for _, page := range []string{"Board", "Runs", "Archive", "Cluster", "Templates", "Settings"} {
		show(t, s, page)
		check(page)
	}
	show(t, s, "Archive")
	tap(s.Archive.studies)
	check("the study view")
	pressKey(w, fyne.KeyEscape)
	s.OpenWizard()
	check("the wizard")
}
