package ui

import (
	"context"
	"math"
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
	"niuma/gpumon"
)

// testChart is a chart laid out at w×h points and drawn once at one pixel
// per point, so that hit-tests have a frame.
func testChart(t testing.TB, s []chartSeries, w, h float32) *chart {
	t.Helper()
	newTestApp(t)
	c := newChart()
	c.SetSeries("train · loss", s)
	c.Resize(fyne.NewSize(w, h))
	if _, err := c.render(int(w), int(h), 1); err != nil {
		t.Fatal(err)
	}
	return c
}

// lossSeries is n points of a decaying loss, one a second from t0.
func lossSeries(name string, n int, t0 time.Time, scale float64) chartSeries {
	s := newChartSeries(name, n)
	for i := range n {
		s.add(int64(i), t0.Add(time.Duration(i)*time.Second), scale*2/float64(i+1))
	}
	return s
}

// pointAt is the widget point over data step x of the chart.
func pointAt(c *chart, x float64) fyne.Position {
	fr := c.frame
	return fyne.NewPos(float32(fr.PixelX(x))/c.scale, float32(fr.Area.Min.Y+fr.Area.Dy()/2)/c.scale)
}

func TestChartHoverShowsEverySeriesAtThePointer(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.Local)
	c := testChart(t, []chartSeries{lossSeries("attempt 1", 50, t0, 1), lossSeries("attempt 2", 100, t0.Add(time.Minute), 0.5)}, 800, 400)
	lines, x, ok := c.hoverLines(pointAt(c, 40))
	require.True(t, ok)
	require.Len(t, lines, 2, "one line per series")
	require.Contains(t, lines[0], "attempt 1:  0.04878")
	require.Contains(t, lines[0], "step 40")
	require.Contains(t, lines[0], "14:00:40 (+40s)", "wall time and time since the start")
	require.Contains(t, lines[1], "attempt 2:  0.02439")
	require.Contains(t, lines[1], "14:01:40")
	require.InDelta(t, c.frame.PixelX(40), float64(x), 1, "the line stands at the nearest step")

	_, _, ok = c.hoverLines(fyne.NewPos(2, 2))
	require.False(t, ok, "outside the plot area: no box")

	// The same through the mouse events, drawing the overlay.
	c.MouseIn(&desktop.MouseEvent{PointEvent: fyne.PointEvent{Position: pointAt(c, 10)}})
	require.True(t, c.r.line.Visible())
	require.True(t, c.r.tipBG.Visible())
	require.Contains(t, c.r.tip[0].Text, "step 10")
	c.MouseOut()
	require.False(t, c.r.line.Visible())
}

func TestChartDragZoomsAndDoubleClickResets(t *testing.T) {
	t0 := time.Now()
	c := testChart(t, []chartSeries{lossSeries("loss", 1000, t0, 1)}, 800, 400)
	zoomed := false
	c.OnZoom = func(on bool) { zoomed = on }
	from, to := pointAt(c, 200), pointAt(c, 400)
	c.Dragged(&fyne.DragEvent{PointEvent: fyne.PointEvent{Position: from.Add(fyne.NewPos(5, 0))}, Dragged: fyne.NewDelta(5, 0)})
	c.Dragged(&fyne.DragEvent{PointEvent: fyne.PointEvent{Position: to}, Dragged: fyne.NewDelta(to.X-from.X-5, 0)})
	require.True(t, c.r.box.Visible(), "the zoom box is drawn while dragging")
	c.DragEnd()
	require.True(t, zoomed)
	require.True(t, c.Zoomed())
	require.InDelta(t, 200, c.view.XMin, 3)
	require.InDelta(t, 400, c.view.XMax, 3)
	require.False(t, c.view.HasY(), "a flat drag zooms X only; Y fits the data in view")
	_, err := c.render(800, 400, 1)
	require.NoError(t, err)
	require.InDelta(t, 200, c.frame.XMin, 3, "the chart shows the dragged range")

	c.DoubleTapped(nil)
	require.False(t, c.Zoomed())
	require.False(t, zoomed)

	require.False(t, c.zoomTo(pointAt(c, 100), pointAt(c, 100.5)), "a click is not a zoom")
	// A tall box fixes Y too.
	a, b := pointAt(c, 100), pointAt(c, 300)
	b.Y += 60
	require.True(t, c.zoomTo(a, b))
	require.True(t, c.view.HasY())
}

func TestChartSmoothingDrawsTheRawSeriesFaint(t *testing.T) {
	s := newChartSeries("loss", 4)
	for i, v := range []float64{4, 0, 4, 0} {
		s.add(int64(i), time.Time{}, v)
	}
	c := testChart(t, []chartSeries{s}, 600, 300)
	require.Len(t, c.plotSeries(), 1, "no smoothing: the series as it is")
	c.SetSmoothing(0.6)
	ps := c.plotSeries()
	require.Len(t, ps, 2)
	require.True(t, ps[0].Faint, "the raw values are faint behind")
	require.Equal(t, ps[0].Slot, ps[1].Slot, "in the same colour")
	require.InDelta(t, 2.7755, ps[1].Y[2], 1e-3, "the smoothed curve is TensorBoard's de-biased EMA")
	_, err := c.render(600, 300, 1)
	require.NoError(t, err)
	lines, _, ok := c.hoverLines(pointAt(c, 2))
	require.True(t, ok)
	require.Contains(t, lines[0], "loss:  4  (smoothed ")

	p := newCurvePanel()
	p.chart = c
	p.smooth.SetValue(0.9)
	require.Equal(t, "0.90", p.smoothV.Text)
}

func TestChartXAxisModes(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.Local)
	c := testChart(t, []chartSeries{lossSeries("loss", 120, t0, 1)}, 800, 400)
	require.Equal(t, float64(0), c.frame.XMin)
	c.SetMode(xRelative)
	_, err := c.render(800, 400, 1)
	require.NoError(t, err)
	require.Equal(t, float64(0), c.frame.XMin, "relative time starts at 0 s")
	require.Equal(t, float64(119), c.frame.XMax)
	c.SetMode(xWall)
	_, err = c.render(800, 400, 1)
	require.NoError(t, err)
	require.Equal(t, float64(t0.Unix()), c.frame.XMin, "wall time is the clock")
	c.SetLogY(true)
	_, err = c.render(800, 400, 1)
	require.NoError(t, err)
	require.True(t, c.frame.LogY)
}

func TestChartFillsItsPane(t *testing.T) {
	newTestApp(t)
	p := newCurvePanel()
	p.chart.SetSeries("t", []chartSeries{lossSeries("loss", 50, time.Now(), 1)})
	w := test.NewWindow(p.content)
	defer w.Close()
	w.Resize(fyne.NewSize(800, 500))
	small := p.chart.Size()
	w.Resize(fyne.NewSize(1400, 800))
	big := p.chart.Size()
	require.Greater(t, big.Width, small.Width+500, "the chart takes the width it is given")
	require.Greater(t, big.Height, small.Height+200)
	w.Canvas().Capture() // draws the raster at the new size
	require.InDelta(t, float64(big.Width), float64(p.chart.img.Bounds().Dx())/float64(p.chart.scale), 1, "and is drawn at it")
}

func TestAttemptOverlay(t *testing.T) {
	pts := []engine.Point{
		{Attempt: 1, Step: 1, Value: 2}, {Attempt: 1, Step: 2, Value: 1e15}, {Attempt: 1, Step: 3, Value: math.NaN()},
		{Attempt: 2, Step: 1, Value: 2}, {Attempt: 2, Step: 2, Value: 1}, {Attempt: 2, Step: 3, Value: 0.5},
	}
	s := attemptSeries("loss", pts, nil)
	require.Len(t, s, 2, "every attempt is drawn")
	require.Equal(t, "attempt 1", s[0].name)
	require.True(t, s[0].dashed, "the earlier attempt is dashed")
	require.False(t, s[1].dashed)
	require.NotEqual(t, s[0].slot, s[1].slot)
	require.True(t, math.IsNaN(s[0].ys[2]), "the NaN is kept: the chart marks it")

	// With the attempts' parameters (from the read model), the label says
	// what set each apart.
	params := map[int]map[string]any{1: {"lr": 1.0, "hidden": 64.0}, 2: {"lr": 0.1, "hidden": 64.0}}
	s = attemptSeries("loss", pts, params)
	require.Equal(t, "attempt 1: lr=1", s[0].name)
	require.Equal(t, "attempt 2: lr=0.1", s[1].name)
	require.Equal(t, "loss", attemptSeries("loss", pts[:3], nil)[0].name, "one attempt is named by its metric")
}

// A run the sentinel retried shows both attempts on the chart, the badge,
// and "attempt 2 of 2, 1 by the sentinel".
func TestSentinelRetriedRunView(t *testing.T) {
	now := time.Now()
	var pts []engine.Point
	for i := range 10 {
		pts = append(pts, engine.Point{Stage: "train", Key: "loss", Attempt: 1, Step: int64(i), Value: math.Pow(10, float64(i))})
	}
	for i := range 30 {
		pts = append(pts, engine.Point{Stage: "train", Key: "loss", Attempt: 2, Step: int64(i), Value: 2 / float64(i+1)})
	}
	b := &anomalyBackend{fakeBackend: fakeBackend{series: pts, runs: []engine.RunInfo{{ID: "r1", Template: "digits-mlp", State: engine.Succeeded,
		CreatedAt: now, Params: map[string]any{"lr": 0.1},
		Stages: []engine.StageInfo{{Name: "train", State: engine.Succeeded, Attempts: 2, MaxAttempts: 2, History: []engine.AttemptInfo{
			{Number: 1, State: "failed", Reason: "retrying after nan with lr: 1 → 0.1; exit 2"}, {Number: 2, State: "succeeded"}}}}}}},
		anomalies: []engine.AnomalyInfo{{ID: 1, Stage: "train", Kind: "nan", Severity: "critical", Message: "loss is NaN at step 9"},
			{ID: 2, Stage: "train", Kind: "action_retry", Severity: "info", Message: "retrying after nan with lr: 1 → 0.1"}}}
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	v := NewMainView(b, w)
	w.SetContent(v.Content())
	w.Resize(fyne.NewSize(1200, 780))
	v.Reload(context.Background())
	v.SelectRun("r1")
	v.Reload(context.Background())
	series := v.detail.curves.chart.series
	require.Len(t, series, 2)
	require.Equal(t, "attempt 1", series[0].name)
	require.True(t, series[0].dashed)
	require.Contains(t, strings.Join(texts(v.detail.badges), " "), "changed by the sentinel")
	require.Contains(t, strings.Join(texts(v.detail.stages), "\n"), "attempt 2 of 2, 1 by the sentinel")
	require.Contains(t, strings.Join(texts(v.detail.stages), "\n"), "attempt 1: failed — retrying after nan with lr: 1 → 0.1")
}

// anomalyBackend is a fakeBackend with chosen anomalies.
type anomalyBackend struct {
	fakeBackend
	anomalies []engine.AnomalyInfo
}

func (a *anomalyBackend) Anomalies(context.Context, string) ([]engine.AnomalyInfo, error) {
	return a.anomalies, nil
}

func TestLaunchedVersusRanParameters(t *testing.T) {
	r := engine.RunInfo{Params: map[string]any{"lr": 0.1, "hidden": 64.0}}
	require.Equal(t, "Parameters: hidden=64 · lr=0.1", paramsText(r, nil))
	require.Equal(t, "Parameters: hidden=64 · lr 1 → 0.1", paramsText(r, map[string]any{"lr": 1.0, "hidden": 64.0}),
		"a parameter the sentinel changed reads launched → ran")
}

func TestDAGLayout(t *testing.T) {
	st := []engine.StageInfo{
		{Name: "prep", State: engine.Succeeded, Attempts: 1, MaxAttempts: 1},
		{Name: "train", Needs: []string{"prep"}, State: engine.Running, Attempts: 2, MaxAttempts: 2},
		{Name: "eval-a", Needs: []string{"train"}, State: engine.Queued, MaxAttempts: 1},
		{Name: "eval-b", Needs: []string{"train"}, State: engine.Queued, MaxAttempts: 1},
		{Name: "report", Needs: []string{"eval-a", "eval-b"}, State: engine.Queued, MaxAttempts: 1},
	}
	nodes, cols, rows := dagLayout(st, map[string]int{"train": 1}, time.Now())
	require.Equal(t, 4, cols)
	require.Equal(t, 2, rows, "two evaluations side by side")
	require.Equal(t, [2]int{2, 1}, [2]int{nodes[3].col, nodes[3].row})
	require.Equal(t, []int{2, 3}, nodes[4].needs)
	require.Equal(t, "attempt 2 of 2, 1 by the sentinel", nodes[1].line2)
	require.Equal(t, "not started", nodes[2].line2)
}

func TestRunsListGroupsASweep(t *testing.T) {
	now := time.Now()
	mk := func(id string, lr float64, created time.Duration) engine.RunInfo {
		return engine.RunInfo{ID: id, Template: "digits-mlp", State: engine.Succeeded, CreatedAt: now.Add(-created), Sweep: "s1",
			Params: map[string]any{"lr": lr, "hidden": 64.0, "epochs": 30.0}}
	}
	b := &fakeBackend{runs: []engine.RunInfo{
		{ID: "solo", Template: "digits-mlp", State: engine.Running, CreatedAt: now, Params: map[string]any{"lr": 0.5}},
		mk("a", 0.1, time.Minute), mk("b", 0.01, 2*time.Minute), mk("c", 0.001, 3*time.Minute)}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	require.Equal(t, 5, v.list.Length(), "a run alone, a sweep's header and its three runs")
	require.NotNil(t, v.rows[1].group)
	all := strings.Join(texts(v.list), "\n")
	require.Contains(t, all, "Sweep of 3 runs · digits-mlp")
	require.Contains(t, all, "over lr · 3 succeeded")
	require.Contains(t, all, "a · lr=0.1", "a sweep's run shows what differs, not hidden=64")
	require.NotContains(t, all, "hidden=64")

	v.list.Select(1) // the header folds the sweep
	require.Equal(t, 2, v.list.Length())
	v.mu.Lock()
	require.Empty(t, v.selected, "a header is not a run")
	v.mu.Unlock()
	v.SelectRun("b") // opening one of its runs unfolds it
	require.Equal(t, 5, v.list.Length())
}

func TestArchiveParameterColumnsAndSweeps(t *testing.T) {
	now := time.Now()
	runs := archiveRuns(now)
	for i := range runs {
		if runs[i].Template == "digits-mlp" && runs[i].State == engine.Succeeded {
			runs[i].Sweep = "s1"
		}
	}
	b := &fakeBackend{archive: runs}
	v, w := newArchiveRig(t, b)
	require.Equal(t, []string{"hidden", "lr", "optimizer", "rank"}, v.model.columns, "one column per parameter")
	_, cols := v.tableSize()
	require.Equal(t, archiveCols+4, cols)
	require.Len(t, v.model.view, 5, "three runs alone, a sweep of two under its header")
	g, ok := v.model.groupAt(2)
	require.True(t, ok)
	require.Equal(t, "▾ sweep · 2 runs", v.model.groupText(g, colID))
	require.Equal(t, "best: val_acc ↑ 0.97", v.model.groupText(g, colBest))
	require.Equal(t, "0.01, 1", v.model.groupText(g, archiveCols+1), "the lr column says what the sweep tried")
	e, _ := v.model.entry(3)
	require.Equal(t, "1", v.model.cellText(e, archiveCols+1))

	v.table.Select(widget.TableCellID{Row: 2, Col: colID}) // the header folds
	require.Len(t, v.model.view, 3)
	v.table.Select(widget.TableCellID{Row: 2, Col: colPick}) // its tick picks the whole sweep
	require.Len(t, v.model.pickedRuns(), 2)

	v.SortBy(archiveCols + 1) // by lr
	for row := range v.model.view {
		if _, ok := v.model.groupAt(row); ok {
			v.table.Select(widget.TableCellID{Row: row, Col: colID}) // unfold
			break
		}
	}
	require.Len(t, v.model.view, 5)

	// The columns are choosable, Enter keeps the choice.
	tap(v.columns)
	require.NotNil(t, w.Canvas().Overlays().Top(), "a dialog lists the parameters")
	for _, o := range test.LaidOutObjects(w.Canvas().Overlays().Top()) {
		if c, ok := o.(*keyCheck); ok && (c.Text == "rank" || c.Text == "hidden") {
			c.SetChecked(false)
		}
	}
	pressKey(w, fyne.KeyReturn)
	require.Nil(t, w.Canvas().Overlays().Top())
	require.Equal(t, []string{"lr", "optimizer"}, v.model.columns)
	require.ElementsMatch(t, []string{"hidden", "rank"}, fyne.CurrentApp().Preferences().StringList(prefHiddenColumns), "remembered")
	tap(v.columns)
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top())
	require.Equal(t, []string{"lr", "optimizer"}, v.model.columns, "Escape changes nothing")
}

func TestHyperparameterView(t *testing.T) {
	now := time.Now()
	var runs []engine.ArchiveEntry
	for i, lr := range []float64{0.0001, 0.001, 0.01, 0.1, 1} {
		opt := []string{"adam", "sgd"}[i%2]
		e := engine.ArchiveEntry{RunInfo: engine.RunInfo{ID: "r" + string(rune('a'+i)), Template: "digits-mlp", State: engine.Succeeded,
			CreatedAt: now, Params: map[string]any{"lr": lr, "optimizer": opt, "hidden": 64.0}}, Objective: "val_acc", Goal: "max",
			Best: 0.9 + 0.01*float64(i), HasBest: true}
		runs = append(runs, e)
	}
	runs = append(runs, engine.ArchiveEntry{RunInfo: engine.RunInfo{ID: "other", Template: "llm", State: engine.Succeeded}, HasBest: true, Best: 3})
	b := &fakeBackend{archive: runs}
	v, _ := newArchiveRig(t, b)
	v.ParamLog = func(tmpl, p string) (bool, bool) { return p == "lr", tmpl == "digits-mlp" }
	var opened string
	v.OnOpen = func(id string) { opened = id }
	v.Hyperparameters()
	hv := v.hparamView
	require.NotNil(t, hv)
	require.Len(t, hv.runs, 5, "the runs of the template most runs have")
	require.Contains(t, hv.note, "Runs of other templates are left out")
	require.Equal(t, []string{"lr", "optimizer"}, hv.params, "hidden is the same everywhere")
	require.True(t, hv.log["lr"], "lr is on a log axis, as its schema says")
	require.Equal(t, []string{"adam", "sgd"}, hv.choices["optimizer"])

	img, hit, err := hv.renderScatter(800, 400, 1, false)
	require.NoError(t, err)
	require.Equal(t, 800, img.Bounds().Dx())
	// The dot of lr=0.01 (run rc), found through the chart's own frame.
	var pos fyne.Position
	found := false
	for y := 0; y < 400 && !found; y++ {
		for x := 0; x < 800 && !found; x++ {
			if hit(float64(x), float64(y)) == "rc" {
				pos, found = fyne.NewPos(float32(x), float32(y)), true
			}
		}
	}
	require.True(t, found, "the dot of lr=0.01 can be clicked")
	hv.scatter.Resize(fyne.NewSize(800, 400))
	hv.scatter.mu.Lock()
	hv.scatter.hit, hv.scatter.scale = hit, 1
	hv.scatter.mu.Unlock()
	test.TapAt(hv.scatter, pos)
	require.Equal(t, "rc", opened, "a click on a point opens its run")

	_, phit, err := hv.renderParallel(800, 400, 1, false)
	require.NoError(t, err)
	hitAny := map[string]bool{}
	for y := 0; y < 400; y += 2 {
		for x := 0; x < 800; x += 4 {
			if id := phit(float64(x), float64(y)); id != "" {
				hitAny[id] = true
			}
		}
	}
	require.Len(t, hitAny, 5, "every run's line can be clicked")
}

func TestBoardProcessTableAndProgress(t *testing.T) {
	now := time.Now()
	snap := gpumon.Snapshot{Source: gpumon.SourceNVML, Driver: "550.54", At: now, GPUs: []gpumon.GPU{
		{Index: 0, UUID: "GPU-0", Name: "NVIDIA A100", MemTotalMiB: 81920, MemUsedMiB: 30000, Healthy: true, UtilPercent: f64(80),
			Processes: []gpumon.Process{
				{PID: 4242, MemMiB: 20480, Owner: &gpumon.Owner{RunID: "r1", Stage: "train", Attempt: 2}},
				{PID: 777, MemMiB: 9000},
			}},
	}}
	runs := []engine.RunInfo{
		{ID: "r1", Template: "digits-mlp", State: engine.Running, CreatedAt: now, StartedAt: now.Add(-time.Minute), Sweep: "s",
			Params: map[string]any{"lr": 0.1, "hidden": 64.0}, Stages: stages(engine.Succeeded, engine.Running)},
		{ID: "r2", Template: "digits-mlp", State: engine.Queued, CreatedAt: now, Sweep: "s",
			Params: map[string]any{"lr": 0.01, "hidden": 64.0}, Stages: stages(engine.Queued, engine.Queued)},
		{ID: "r0", Template: "digits-mlp", State: engine.Failed, CreatedAt: now.Add(-time.Hour), FinishedAt: now.Add(-time.Minute),
			Error: "stage train failed: exit 2", Stages: stages(engine.Failed)},
	}
	b := &progressBackend{fakeBackend: fakeBackend{snap: snap, runs: runs}}
	v := newTestBoard(t, &b.fakeBackend)
	v.backend = b
	v.ProcessInfo = func(pid int) (string, string) {
		if pid == 4242 {
			return "ada", "/usr/bin/python3 train.py"
		}
		return "bob", "/opt/other/render --gpu"
	}
	var hist []gpumon.Point
	for i := range 600 {
		hist = append(hist, gpumon.Point{At: now.Add(time.Duration(i-600) * time.Second), Util: 50, MemUsedMiB: 30000})
	}
	v.History = func(string) []gpumon.Point { return hist }
	v.Reload(context.Background())

	procs := strings.Join(labelTexts(v.procs.content), "|")
	require.Contains(t, procs, "4242|ada|/usr/bin/python3 train.py|20 GiB|r1/train (attempt 2)")
	require.Contains(t, procs, "777|bob|/opt/other/render --gpu|8.8 GiB|not Niuma's")

	queue := strings.Join(texts(v.list), "\n")
	require.Contains(t, queue, "train step 12/30", "progress from the workload's total_steps")
	require.Contains(t, queue, "lr=0.1", "the parameters that differ in its sweep")
	require.NotContains(t, queue, "hidden=64")

	recent := strings.Join(texts(v.recent), " ")
	require.Contains(t, recent, "failed")
	require.Contains(t, recent, "stage train failed: exit 2", "a recently finished run says how it ended")

	pts := v.views[0].hist.series()
	require.Len(t, pts[0].X, 300, "five minutes of the sampler's history")
	v.window.SetSelected("last 15 min")
	require.Len(t, v.views[0].hist.series()[0].X, 600, "all there is of fifteen")
}

// progressBackend reports r1's train stage at step 12 of 30.
type progressBackend struct{ fakeBackend }

func (p *progressBackend) LastMetrics(_ context.Context, id string) ([]engine.Point, error) {
	return []engine.Point{{Stage: "train", Attempt: 1, Key: "loss", Step: 12, Value: 0.3},
		{Stage: "train", Attempt: 1, Key: "total_steps", Step: 12, Value: 30}}, nil
}

func TestNotificationsBell(t *testing.T) {
	newTestApp(t)
	w := test.NewWindow(nil)
	defer w.Close()
	b := &fakeBackend{}
	runs := NewMainView(b, w)
	s := NewShell(b, runs, Options{DesktopNotifications: func() (bool, string) { return false, "no D-Bus session bus" }}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1200, 780))
	require.False(t, s.desktopOK.Load())
	s.onEvent(context.Background(), engine.Event{Kind: engine.RunChanged, RunID: "r1", State: engine.Succeeded})
	s.onEvent(context.Background(), engine.Event{Kind: engine.Metrics, RunID: "r1"})
	s.onEvent(context.Background(), engine.Event{Kind: engine.AnomalyRaised, RunID: "r2", Stage: "train", Reason: "loss is NaN", Severity: "critical"})
	require.Equal(t, "2", s.notices.bell.Text, "two notices unread")
	require.True(t, s.notices.toast.Visible())
	require.Equal(t, "Trouble in r2/train", s.notices.tTitle.Text, "the newest is the toast")
	var opened string
	s.notices.onOpen = func(id string) { opened = id }
	tap(s.notices.tOpen)
	require.Equal(t, "r2", opened)
	require.False(t, s.notices.toast.Visible())
	s.onEvent(context.Background(), engine.Event{Kind: engine.AnomalyRaised, RunID: "r2", Stage: "train", Reason: "val_acc has not improved", Severity: "info"})
	require.False(t, s.notices.toast.Visible(), "an info waits under the bell")
	require.Equal(t, "3", s.notices.bell.Text)
	require.Nil(t, notification(engine.Event{Kind: engine.AnomalyRaised, RunID: "r2", Reason: "x", Severity: "info"}), "nor on the desktop")

	tap(s.notices.bell)
	require.Equal(t, "", s.notices.bell.Text, "opening the list reads them")
	list := strings.Join(texts(w.Canvas().Overlays().Top()), "\n")
	require.Contains(t, list, "Run r1 succeeded.")
	require.Contains(t, list, "loss is NaN")
	pressKey(w, fyne.KeyEscape)
	require.Nil(t, w.Canvas().Overlays().Top(), "Escape closes the list")

	show(t, s, "Settings")
	require.Contains(t, strings.Join(texts(s.tabs.Selected().Content), "\n"), "Desktop notifications: unavailable (no D-Bus session bus)")
}

func TestToastGoesAway(t *testing.T) {
	newTestApp(t)
	n := newNotices(nil)
	t.Cleanup(n.tasks.Close)
	n.toastFor = 10 * time.Millisecond
	n.add(note{title: "Run finished", body: "Run r1 succeeded."})
	require.True(t, n.toast.Visible())
	waitForViews(t) // the toast's timer has run out and returned
	require.False(t, n.toast.Visible())
}

// labelTexts collects the text of every label under o (not what each
// draws, which texts also has).
func labelTexts(o fyne.CanvasObject) []string {
	var out []string
	walk(o, fyne.Position{}, func(o fyne.CanvasObject, _ fyne.Position, _ []*container.Scroll) {
		if l, ok := o.(*widget.Label); ok {
			out = append(out, l.Text)
		}
	}, nil)
	return out
}
