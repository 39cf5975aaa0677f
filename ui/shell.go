package ui

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/gpumon"
)

// Options are what the app hands the window besides the engine.
type Options struct {
	// Templates lists the bundled templates and the user's own for the
	// wizard and the Templates page; nil offers none.
	Templates func() ([]TemplateEntry, error)
	// TemplateDir is where the user's own templates live, for the
	// Templates page's hint.
	TemplateDir string
	// DesktopNotifications says whether the desktop's notification
	// service answers (D-Bus on Linux) and, when not, why; nil: assume it
	// does. Notifications always show inside the window too.
	DesktopNotifications func() (ok bool, why string)
	// GPUHistory is the sampler's recent history of a GPU (oldest first),
	// for the board's utilisation and memory charts; nil: none kept.
	GPUHistory func(uuid string) []gpumon.Point
	// ProcessInfo names the user and command of a process on a GPU, for
	// the board's process table; nil: shown as unknown.
	ProcessInfo func(pid int) (user, command string)
	// Metrics serves Prometheus metrics from the window; the Settings
	// page chooses where (nil: the page says how to run the exporter).
	// MetricsAddr, from $NIUMA_METRICS_ADDR, is served from the start and
	// wins over the address chosen last time.
	Metrics     MetricsServer
	MetricsAddr string
	// Cluster reads the Slurm cluster for the Cluster page (nodes, your
	// jobs, free GPUs); nil: no such page.
	Cluster func(ctx context.Context) (ClusterInfo, error)
}

// Shell is the main window: navigation between the Board, the Runs, the
// Templates and the Settings, and the launch wizard on Ctrl+N.
type Shell struct {
	backend Backend
	opts    Options
	win     fyne.Window
	tasks   tasks // the shell's own goroutines: events, the board's ticker, reloads

	Board   *Board
	Runs    *MainView
	Archive *ArchiveView
	tabs    *container.AppTabs

	templates *widget.List
	tmplInfo  *widget.Label
	advice    *advicePane // the Templates page's "Suggested next"
	entries   []TemplateEntry
	remember  map[string]map[string]string
	wizardDlg dialog.Dialog
	wizard    *Wizard
	content   fyne.CanvasObject

	notifyCheck *widget.Check
	notices     *notices
	desktopOK   atomic.Bool // the desktop's notification service answers
	desktopWhy  string
	tmplCache   map[string]*template.Template // parsed templates by name, for the archive's schema look-ups

	// archiveShown is set while the Archive page is on screen: run
	// events reload it then (and only then: the read is heavy).
	archiveShown atomic.Bool
	// boardShown is set while the Board is on screen: it is redrawn once
	// a second then, and not while another page is (its charts cost the
	// CPU the page on screen needs).
	boardShown atomic.Bool

	// Pull shows image pulls in progress on the board.
	Pull *PullIndicator

	metrics *metricsSetting // nil without Options.Metrics
	cluster *clusterView    // nil without Options.Cluster
	teams   *teamsView      // nil on a single user's machine
}

// NewShell builds the main window's content over runs, a view built with
// NewMainView, which becomes the Runs page.
func NewShell(b Backend, runs *MainView, opts Options, win fyne.Window) *Shell {
	s := &Shell{backend: b, opts: opts, win: win, Runs: runs, remember: map[string]map[string]string{}, tmplCache: map[string]*template.Template{}}
	s.Board = NewBoard(b)
	s.Board.OnOpen = s.OpenRun
	s.Board.History = opts.GPUHistory
	s.Board.ProcessInfo = opts.ProcessInfo
	s.Board.Objective = s.objectiveOf
	runs.OnClone = s.CloneRun
	runs.OnNewRun = s.OpenWizard
	s.Archive = NewArchiveView(b, win)
	s.Archive.OnOpen = s.OpenRun
	s.Archive.OnLaunch = s.LaunchSuggested
	s.Archive.ParamLog = s.paramLog
	s.notices = newNotices(win)
	s.notices.onOpen = s.OpenRun
	s.desktopOK.Store(true)
	if opts.DesktopNotifications != nil {
		ok, why := opts.DesktopNotifications()
		s.desktopOK.Store(ok)
		s.desktopWhy = why
	}

	newRun := widget.NewButtonWithIcon("New run…", theme.ContentAddIcon(), s.OpenWizard)
	newRun.Importance = widget.HighImportance
	s.Pull = newPullIndicator()
	boardPage := container.NewBorder(container.NewPadded(container.NewBorder(nil, nil, nil, container.NewHBox(s.notices.bell, newRun), s.Pull.Content())), nil, nil, nil, s.Board.Content())

	if opts.Metrics != nil {
		s.metrics = newMetricsSetting(opts.Metrics)
	}
	s.tabs = container.NewAppTabs(
		container.NewTabItemWithIcon("Board", theme.ComputerIcon(), boardPage),
		container.NewTabItemWithIcon("Runs", theme.ListIcon(), runs.Content()),
		container.NewTabItemWithIcon("Archive", theme.StorageIcon(), s.Archive.Content()),
	)
	if opts.Cluster != nil {
		s.cluster = newClusterView(opts.Cluster)
		s.cluster.onOpen = s.OpenRun
		s.tabs.Append(container.NewTabItemWithIcon("Cluster", theme.GridIcon(), s.cluster.content))
	}
	if sm, ok := b.(sharedMachine); ok && sm.Shared() {
		s.teams = newTeamsView(func(ctx context.Context) machineModel { return readMachine(ctx, b) })
		s.tabs.Append(container.NewTabItemWithIcon("Teams", theme.AccountIcon(), s.teams.content))
	}
	s.tabs.Append(container.NewTabItemWithIcon("Templates", theme.DocumentIcon(), s.templatesPage()))
	s.tabs.Append(container.NewTabItemWithIcon("Settings", theme.SettingsIcon(), s.settingsPage()))
	s.tabs.SetTabLocation(container.TabLocationLeading)
	s.boardShown.Store(true) // the Board is home
	s.tabs.OnSelected = func(t *container.TabItem) {
		s.archiveShown.Store(t.Text == "Archive")
		s.boardShown.Store(t.Text == "Board")
		if s.cluster != nil {
			s.cluster.shown.Store(t.Text == "Cluster")
		}
		if s.teams != nil {
			s.teams.shown.Store(t.Text == "Teams")
		}
		switch t.Text {
		case "Teams":
			s.teams.tasks.Go(s.teams.Reload)
		case "Templates":
			s.loadTemplates()
		case "Archive":
			s.Archive.tasks.Go(s.Archive.Reload)
		case "Cluster":
			s.cluster.tasks.Go(s.cluster.Reload)
		case "Board":
			s.tasks.Go(s.Board.Reload)
		}
	}
	s.content = container.NewStack(s.tabs, s.notices.layer)
	if win != nil {
		win.Canvas().AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault},
			func(fyne.Shortcut) { s.OpenWizard() })
	}
	return s
}

// Content is the window's root object.
func (s *Shell) Content() fyne.CanvasObject { return s.content }

// Start keeps the board live (about once a second) and the runs page as
// NewMainView's Start does, and sends desktop notifications, until ctx ends.
func (s *Shell) Start(ctx context.Context) {
	s.Runs.Start(ctx)
	if s.metrics != nil {
		s.metrics.start(s.opts.MetricsAddr)
	}
	if s.cluster != nil {
		s.cluster.tasks.Follow(ctx, s.cluster.follow)
	}
	if s.teams != nil {
		s.teams.tasks.Follow(ctx, s.teams.follow)
	}
	sub := s.backend.Subscribe(256)
	s.tasks.Follow(ctx, func(ctx context.Context) {
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-sub.C:
				if !ok {
					return
				}
				s.onEvent(ctx, ev)
			}
		}
	})
	s.tasks.Follow(ctx, func(ctx context.Context) {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		s.Board.Reload(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if s.boardShown.Load() {
					s.Board.Reload(ctx)
				}
			}
		}
	})
}

// Close stops the window's goroutines, each page's and the wizard's: the
// board's and the runs page's refreshers, the cluster's follow, the study
// view's ticker, the toasts' timers. It does not wait for them (one may be
// waiting on Fyne's thread); a test waits until none is left.
func (s *Shell) Close() {
	s.tasks.Close()
	s.Runs.Close()
	s.Archive.Close()
	s.notices.tasks.Close()
	if s.cluster != nil {
		s.cluster.close()
	}
	if s.teams != nil {
		s.teams.close()
	}
	if s.wizard != nil {
		s.wizard.tasks.Close()
	}
}

// Show switches to a page by name: "Board", "Runs", "Archive", "Cluster"
// (with Options.Cluster), "Teams" (on a shared machine), "Templates" or
// "Settings".
func (s *Shell) Show(page string) {
	for _, t := range s.tabs.Items {
		if t.Text == page {
			s.tabs.Select(t)
		}
	}
}

// OpenRun shows a run on the Runs page.
func (s *Shell) OpenRun(id string) {
	s.Show("Runs")
	s.Runs.SelectRun(id)
}

// onEvent notifies of an engine event (in the window, and on the desktop
// when it can) and, while the Archive page is on screen, reloads it when a
// run appears or changes state.
func (s *Shell) onEvent(ctx context.Context, ev engine.Event) {
	if n, ok := noteFor(ev); ok {
		onUI(func() { s.notices.add(n) })
	}
	s.notify(ev)
	if s.archiveShown.Load() && (ev.Kind == engine.RunSubmitted || ev.Kind == engine.RunChanged) {
		s.Archive.reloadSoon(ctx)
	}
}

// prefNotify is the preference that turns desktop notifications off.
const prefNotify = "notifications.off"

// notify sends a desktop notification when a run finishes, fails or
// raises an anomaly, unless the user turned them off in Settings.
func (s *Shell) notify(ev engine.Event) {
	n := notification(ev)
	app := fyne.CurrentApp()
	if n == nil || app == nil || app.Preferences().Bool(prefNotify) || !s.desktopOK.Load() {
		return
	}
	app.SendNotification(n)
}

// template is a template by name, parsed once (nil when it cannot be).
func (s *Shell) template(name string) *template.Template {
	if t, ok := s.tmplCache[name]; ok {
		return t
	}
	var t *template.Template
	if s.opts.Templates != nil {
		es, _ := s.opts.Templates()
		for _, e := range es {
			if e.Name == name && e.Err == nil && e.Load != nil {
				t, _ = e.Load()
			}
		}
	}
	s.tmplCache[name] = t
	return t
}

// paramLog says whether a template's schema puts a parameter on a log
// scale.
func (s *Shell) paramLog(tmpl, param string) (log, known bool) {
	t := s.template(tmpl)
	if t == nil {
		return false, false
	}
	p, ok := t.Param(param)
	return p.Log, ok
}

// objectiveOf is a template's objective, for the board's finished runs.
func (s *Shell) objectiveOf(tmpl string) (metric, goal string) {
	if t := s.template(tmpl); t != nil {
		return t.Objective.Metric, t.Objective.Goal
	}
	return "", ""
}

// CloneRun opens the wizard on a run's template with its parameters,
// priority and executor filled in, ready to change and launch again.
func (s *Shell) CloneRun(r engine.RunInfo) {
	s.openPreset(r.Template, r.Params, r.Priority, r.Executor)
}

// LaunchSuggested opens the wizard on a template with the values a model
// suggests next (a study's, or the Templates page's), as a Clone does: the
// user reviews them and launches as usual (the duplicate check included).
// The parameters not given start from the template's defaults.
func (s *Shell) LaunchSuggested(tmpl string, values map[string]any) {
	s.openPreset(tmpl, values, 0, "")
}

// openPreset opens the wizard on a template with params filled in.
func (s *Shell) openPreset(tmpl string, params map[string]any, priority int, executor string) {
	values := map[string]string{}
	for k, x := range params {
		values[k] = formatParam(x)
	}
	s.OpenWizard()
	if err := s.wizard.Preset(tmpl, values, priority, executor); err != nil {
		showError(err, s.win)
	}
}

func (s *Shell) loadTemplates() {
	if s.opts.Templates == nil {
		s.entries = nil
	} else {
		es, err := s.opts.Templates()
		if err != nil && s.win != nil {
			showError(fmt.Errorf("listing templates: %w", err), s.win)
		}
		s.entries = es
	}
	if s.templates != nil {
		s.templates.Refresh()
	}
}

// OpenWizard shows the launch wizard in a dialog over the window.
func (s *Shell) OpenWizard() {
	s.loadTemplates()
	s.wizard = NewWizard(s.backend, s.entries, s.remember, func(ids []string, err error) {
		if err != nil {
			showError(err, s.win)
		}
		if len(ids) > 0 {
			s.Show("Board")
			s.tasks.Go(s.Board.Reload)
		}
	}, func() {
		if s.wizardDlg != nil {
			s.wizardDlg.Hide()
		}
	})
	s.wizard.Win = s.win
	s.wizard.OnOpenRun = s.OpenRun
	s.wizard.OnStudy = func(string) {
		// The new study shows in the Archive's study view, with its trials.
		s.Show("Archive")
		s.Archive.Studies()
	}
	s.wizardDlg = dialog.NewCustomWithoutButtons("New run", s.wizard.Content(), s.win)
	s.wizardDlg.Resize(wizardSize(s.win))
	w := s.wizard
	w.selectFirst()
	showWithKeys(s.wizardDlg, s.win, w.Enter, w.Cancel)
	w.focus()
}

// wizardSize fits the wizard in the window: 940×660 where there is room.
func wizardSize(win fyne.Window) fyne.Size {
	want := fyne.NewSize(940, 660)
	if win == nil {
		return want
	}
	have := win.Canvas().Size()
	if have.Width < 10 {
		return want
	}
	return fyne.NewSize(min(want.Width, have.Width-40), min(want.Height, have.Height-40))
}

func (s *Shell) templatesPage() fyne.CanvasObject {
	s.tmplInfo = widget.NewLabel("Pick a template.")
	s.tmplInfo.Wrapping = fyne.TextWrapWord
	s.templates = widget.NewList(func() int { return len(s.entries) }, func() fyne.CanvasObject {
		return widget.NewLabel("")
	}, func(i widget.ListItemID, o fyne.CanvasObject) {
		e := s.entries[i]
		o.(*widget.Label).SetText(e.Name + "  ·  " + sourceLabel(e.Source))
	})
	s.advice = newAdvicePane(s.LaunchSuggested, &s.tasks)
	s.templates.OnSelected = func(i widget.ListItemID) {
		e := s.entries[i]
		switch {
		case e.Err != nil:
			s.tmplInfo.SetText(e.Name + " does not parse:\n\n" + e.Err.Error())
			s.advice.hide()
		default:
			s.tmplInfo.SetText(fmt.Sprintf("%s %s (%s)\n\n%s", e.Name, e.Version, e.Source, e.Description))
			if adv, ok := s.backend.(adviser); ok {
				s.advice.show(context.Background(), adv, e.Name)
			}
		}
	}
	hint := "Your own templates: one folder each, with a template.yaml, under " + s.opts.TemplateDir
	if s.opts.TemplateDir == "" {
		hint = ""
	}
	h := widget.NewLabel(hint)
	h.Importance = widget.LowImportance
	h.Wrapping = fyne.TextWrapWord
	launch := widget.NewButtonWithIcon("New run…", theme.ContentAddIcon(), s.OpenWizard)
	split := container.NewHSplit(s.templates, container.NewVScroll(container.NewPadded(container.NewVBox(s.tmplInfo, s.advice.box))))
	split.Offset = 0.35
	return container.NewBorder(container.NewPadded(container.NewBorder(nil, nil, nil, launch, h)), nil, nil, nil, split)
}

func (s *Shell) settingsPage() fyne.CanvasObject {
	variant := "light"
	if isDark() {
		variant = "dark"
	}
	sim := os.Getenv("NIUMA_SIMULATE_GPUS")
	if sim == "" {
		sim = "not set (real GPUs through NVML, when there are any)"
	}
	lines := []string{
		"Appearance: follows the system (now " + variant + ").",
		"Executors: " + strings.Join(s.backend.Executors(), ", "),
		"Simulated GPUs (NIUMA_SIMULATE_GPUS): " + sim,
		"",
		"Keyboard: Ctrl+N opens the launch wizard; in every dialog Enter confirms and Escape cancels.",
	}
	if s.desktopOK.Load() {
		lines = append(lines, "Desktop notifications: available (they also show in the window, under the bell).")
	} else {
		lines = append(lines, "Desktop notifications: unavailable ("+s.desktopWhy+"); they show in the window, under the bell on the Board.")
	}
	l := widget.NewLabel(strings.Join(lines, "\n"))
	l.Wrapping = fyne.TextWrapWord
	s.notifyCheck = widget.NewCheck("Desktop notifications when a run finishes, fails or raises an anomaly", func(on bool) {
		if app := fyne.CurrentApp(); app != nil {
			app.Preferences().SetBool(prefNotify, !on)
		}
	})
	if app := fyne.CurrentApp(); app != nil {
		s.notifyCheck.Checked = !app.Preferences().Bool(prefNotify)
	}
	if !s.desktopOK.Load() {
		s.notifyCheck.Disable() // nothing to turn on: the window's own notices stay
	}
	page := container.NewVBox(widget.NewLabelWithStyle("Settings", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), s.notifyCheck, l,
		widget.NewSeparator())
	if s.metrics != nil {
		page.Add(s.metrics.content)
	} else {
		m := widget.NewLabel("Prometheus metrics: `niuma engine --metrics-addr 127.0.0.1:9464` serves them (docs/guide/prometheus.md).")
		m.Wrapping = fyne.TextWrapWord
		page.Add(m)
	}
	return container.NewVScroll(container.NewPadded(page))
}
