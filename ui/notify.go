package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
)

// bellIcon is a bell (Material Design's "notifications"), themed like
// Fyne's own icons.
var bellIcon = theme.NewThemedResource(fyne.NewStaticResource("bell.svg", []byte(
	`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M12 22c1.1 0 2-.9 2-2h-4c0 1.1.9 2 2 2zm6-6v-5c0-3.07-1.64-5.64-4.5-6.32V4c0-.83-.67-1.5-1.5-1.5s-1.5.67-1.5 1.5v.68C7.63 5.36 6 7.92 6 11v5l-2 2v1h16v-1l-2-2z"/></svg>`)))

// note is one notification: what happened, to which run, when.
type note struct {
	title, body string
	runID       string
	at          time.Time
	bad         bool // a failure or trouble: drawn in the danger colour
	quiet       bool // for the bell's list only: no toast, nothing on the desktop
}

// noteFor is what the window says about an engine event, or false when
// the event is not worth interrupting anyone for.
func noteFor(ev engine.Event) (note, bool) {
	at := ev.At
	if at.IsZero() {
		at = time.Now()
	}
	switch {
	case ev.Kind == engine.RunChanged && ev.State == engine.Succeeded:
		return note{title: "Run finished", body: "Run " + ev.RunID + " succeeded.", runID: ev.RunID, at: at}, true
	case ev.Kind == engine.RunChanged && ev.State == engine.Failed:
		msg := "Run " + ev.RunID + " failed."
		if ev.Reason != "" {
			msg += " " + ev.Reason
		}
		return note{title: "Run failed", body: msg, runID: ev.RunID, at: at, bad: true}, true
	case ev.Kind == engine.AnomalyRaised && ev.Reason != "":
		where := ev.RunID
		if ev.Stage != "" {
			where += "/" + ev.Stage
		}
		// An info (a plateau, what the engine did about an anomaly) is
		// kept under the bell without interrupting anyone.
		info := ev.Severity == "info"
		title := "Trouble in " + where
		if info {
			title = "Note on " + where
		}
		return note{title: title, body: ev.Reason, runID: ev.RunID, at: at, bad: !info, quiet: info}, true
	}
	return note{}, false
}

// notification is the desktop's version of an event's note, or nil.
func notification(ev engine.Event) *fyne.Notification {
	n, ok := noteFor(ev)
	if !ok || n.quiet {
		return nil
	}
	return fyne.NewNotification(n.title, n.body)
}

// maxNotes bounds the bell's list: the newest are kept.
const maxNotes = 100

// notices shows notifications inside the window, whatever the desktop
// offers: a toast in the bottom right corner for a few seconds, and the
// bell's list of everything since the window opened.
type notices struct {
	mu     sync.Mutex
	tasks  tasks  // the toasts' timers; close ends them
	list   []note // newest first
	unread int

	bell   *widget.Button
	toast  *fyne.Container // the toast's card, in layer
	layer  *fyne.Container // over the window's content
	tTitle *widget.Label
	tBody  *widget.Label
	tOpen  *widget.Button
	shown  int // which toast is up, so an old timer does not hide a newer one
	win    fyne.Window
	onOpen func(runID string)
	// toastFor is how long a toast stays; tests shorten it.
	toastFor time.Duration
}

func newNotices(win fyne.Window) *notices {
	n := &notices{win: win, toastFor: 8 * time.Second}
	n.bell = widget.NewButtonWithIcon("", bellIcon, n.showList)
	n.bell.Importance = widget.LowImportance
	n.tTitle = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	n.tBody = widget.NewLabel("")
	n.tBody.Wrapping = fyne.TextWrapWord
	n.tOpen = widget.NewButton("Open run", nil)
	closeBtn := widget.NewButtonWithIcon("", theme.CancelIcon(), func() { n.hideToast() })
	closeBtn.Importance = widget.LowImportance
	bg := canvas.NewRectangle(theme.Color(theme.ColorNameOverlayBackground))
	bg.CornerRadius = 10
	bg.StrokeColor = theme.Color(theme.ColorNameInputBorder)
	bg.StrokeWidth = 1
	card := container.NewBorder(container.NewBorder(nil, nil, nil, closeBtn, n.tTitle), container.NewHBox(n.tOpen), nil, nil, n.tBody)
	n.toast = container.NewStack(bg, container.NewPadded(card))
	n.toast.Hide()
	n.layer = container.New(&cornerLayout{size: fyne.NewSize(380, 150)}, n.toast)
	n.refreshBell()
	return n
}

// add shows a note as a toast and puts it on the bell's list.
func (n *notices) add(nt note) {
	n.mu.Lock()
	n.list = append([]note{nt}, n.list...)
	if len(n.list) > maxNotes {
		n.list = n.list[:maxNotes]
	}
	n.unread++
	if nt.quiet {
		n.mu.Unlock()
		n.refreshBell()
		return
	}
	n.shown++
	id := n.shown
	n.mu.Unlock()
	n.refreshBell()
	n.tTitle.SetText(nt.title)
	n.tBody.SetText(nt.body)
	n.tTitle.Importance = widget.MediumImportance
	if nt.bad {
		n.tTitle.Importance = widget.DangerImportance
	}
	n.tTitle.Refresh()
	run := nt.runID
	n.tOpen.OnTapped = func() {
		n.hideToast()
		if n.onOpen != nil && run != "" {
			n.onOpen(run)
		}
	}
	if run == "" {
		n.tOpen.Hide()
	} else {
		n.tOpen.Show()
	}
	n.toast.Show()
	n.layer.Refresh()
	n.tasks.Follow(context.Background(), func(ctx context.Context) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.toastFor):
		}
		onUI(func() {
			n.mu.Lock()
			current := n.shown == id
			n.mu.Unlock()
			if current {
				n.hideToast()
			}
		})
	})
}

func (n *notices) hideToast() {
	n.toast.Hide()
	n.layer.Refresh()
}

func (n *notices) refreshBell() {
	n.mu.Lock()
	unread := n.unread
	n.mu.Unlock()
	if unread == 0 {
		n.bell.SetText("")
		n.bell.Importance = widget.LowImportance
	} else {
		n.bell.SetText(fmt.Sprint(unread))
		n.bell.Importance = widget.WarningImportance
	}
	n.bell.Refresh()
}

// showList opens the bell's list; opening it marks everything read.
func (n *notices) showList() {
	n.mu.Lock()
	list := append([]note(nil), n.list...)
	n.unread = 0
	n.mu.Unlock()
	n.refreshBell()
	if n.win == nil {
		return
	}
	box := container.NewVBox()
	if len(list) == 0 {
		box.Add(widget.NewLabel("Nothing yet: finished and failed runs and anomalies show here."))
	}
	var d *widget.PopUp
	for _, nt := range list {
		title := widget.NewLabelWithStyle(nt.at.Local().Format("15:04:05")+"  "+nt.title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		if nt.bad {
			title.Importance = widget.DangerImportance
		}
		body := widget.NewLabel(nt.body)
		body.Wrapping = fyne.TextWrapWord
		row := container.NewVBox(title, body)
		if nt.runID != "" {
			run := nt.runID
			open := widget.NewButton("Open", func() {
				d.Hide()
				if n.onOpen != nil {
					n.onOpen(run)
				}
			})
			open.Importance = widget.LowImportance
			row = container.NewVBox(container.NewBorder(nil, nil, nil, open, title), body)
		}
		box.Add(row)
		box.Add(widget.NewSeparator())
	}
	scroll := container.NewVScroll(box)
	scroll.SetMinSize(fyne.NewSize(420, 380))
	d = widget.NewPopUp(container.NewBorder(heading("Notifications"), nil, nil, nil, scroll), n.win.Canvas())
	// A tap outside hides a pop-up: its keys then fall to what is under it.
	pushKeysWhile(n.win.Canvas(), nil, func() { d.Hide() }, d.Visible)
	d.ShowAtPosition(fyne.NewPos(n.win.Canvas().Size().Width-440, 48))
}

// cornerLayout puts its one object in the bottom right corner at size.
type cornerLayout struct{ size fyne.Size }

func (l *cornerLayout) MinSize([]fyne.CanvasObject) fyne.Size { return fyne.NewSize(0, 0) }

func (l *cornerLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	pad := theme.Padding() * 3
	for _, o := range objs {
		s := fyne.NewSize(min(l.size.Width, size.Width-2*pad), max(l.size.Height, o.MinSize().Height))
		o.Resize(s)
		o.Move(fyne.NewPos(size.Width-s.Width-pad, size.Height-s.Height-pad))
	}
}
