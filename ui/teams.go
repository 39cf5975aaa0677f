package ui

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"niuma/machine"
)

// teamsView is the Teams page of a shared machine: each team's share,
// what it holds and borrows, who lends to whom, its fair share, what a
// reclaim would stop first, and every user's stages on the machine and in
// its queue, read from the machine service every few seconds while the
// page is on screen.
type teamsView struct {
	read    func(ctx context.Context) machineModel
	shown   atomic.Bool
	tasks   tasks // the page's reads; close ends them
	status  *widget.Label
	teams   *fyne.Container
	lending *fyne.Container
	reclaim *fyne.Container
	leases  *fyne.Container
	queue   *fyne.Container
	content fyne.CanvasObject
}

var (
	teamColumns  = []float32{100, 160, 60, 60, 80, 120, 120, 100, 80, 0}
	leaseColumns = []float32{100, 80, 130, 120, 80, 90, 0}
	queueColumns = []float32{100, 80, 130, 120, 80, 70, 0}
)

func newTeamsView(read func(ctx context.Context) machineModel) *teamsView {
	v := &teamsView{read: read, status: widget.NewLabel("Reading the machine service…"), teams: container.NewVBox(),
		lending: container.NewVBox(), reclaim: container.NewVBox(), leases: container.NewVBox(), queue: container.NewVBox()}
	v.status.Wrapping = fyne.TextWrapWord
	refresh := widget.NewButtonWithIcon("", theme.ViewRefreshIcon(), func() { v.tasks.Go(v.Reload) })
	head := func(cols []float32, names ...string) fyne.CanvasObject {
		var cells []fyne.CanvasObject
		for _, n := range names {
			cells = append(cells, widget.NewLabelWithStyle(n, fyne.TextAlignLeading, fyne.TextStyle{Bold: true}))
		}
		return container.New(&widthsLayout{widths: cols}, cells...)
	}
	body := container.NewVBox(
		title("Teams"),
		head(teamColumns, "team", "members", "share", "held", "borrowed", "lent to", "borrowed from", "usage", "fair share", "limits"),
		widget.NewSeparator(), v.teams,
		title("Who borrows from whom"), v.lending,
		title("What a reclaim would stop first"), v.reclaim,
		title("Holding GPUs, CPUs or memory"),
		head(leaseColumns, "user", "team", "run", "name", "stage", "GPUs", "since"), widget.NewSeparator(), v.leases,
		title("Waiting"),
		head(queueColumns, "user", "team", "run", "name", "stage", "GPUs", "why it waits"), widget.NewSeparator(), v.queue)
	top := container.NewBorder(nil, nil, nil, refresh, v.status)
	v.content = container.NewBorder(container.NewPadded(top), nil, nil, nil, container.NewVScroll(container.NewPadded(body)))
	return v
}

// Reload reads the machine once and shows it.
func (v *teamsView) Reload(ctx context.Context) {
	m := v.read(ctx)
	onUI(func() { v.apply(m, time.Now()) })
}

// close stops the page's reads and its follow.
func (v *teamsView) close() { v.tasks.Close() }

// follow reads the machine every few seconds while the page is on screen.
func (v *teamsView) follow(ctx context.Context) {
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if v.shown.Load() {
				v.Reload(ctx)
			}
		}
	}
}

func (v *teamsView) apply(m machineModel, now time.Time) {
	set := func(c *fyne.Container, objs []fyne.CanvasObject) {
		c.Objects = objs
		c.Refresh()
	}
	if !m.shared || m.err != nil {
		v.status.Importance = widget.WarningImportance
		v.status.SetText(machineLine(m))
		for _, c := range []*fyne.Container{v.teams, v.lending, v.reclaim, v.leases, v.queue} {
			set(c, nil)
		}
		return
	}
	st := m.status
	v.status.Importance = widget.MediumImportance
	line := machineLine(m) + fmt.Sprintf(" · policy %s, fair-share half-life %s · read %s", st.Policy, machine.FormatDuration(st.HalfLife), now.Format("15:04:05"))
	v.status.SetText(line)

	var teams []fyne.CanvasObject
	for _, r := range teamRows(st) {
		teams = append(teams, cellsRow(teamColumns, []string{r.name, r.members, r.share, r.held, r.borrowed, r.lent, r.from, r.usage, r.fair, r.limits}, r.mine))
	}
	if len(teams) == 0 {
		teams = append(teams, quiet("No teams are set: every user's runs share one queue, by priority. "+
			"Teams, their shares and limits are set in the service's settings (/etc/niuma/machine.yaml)."))
	}
	set(v.teams, teams)
	if len(st.Teams) > 0 {
		set(v.lending, notes(lendingLines(st)))
		set(v.reclaim, notes(reclaimLines(st)))
	} else {
		set(v.lending, notes([]string{"Without teams nothing is lent."}))
		set(v.reclaim, notes([]string{"Without teams nothing is reclaimed; a spot run may still be preempted for a run of higher priority."}))
	}
	var leases []fyne.CanvasObject
	for _, l := range st.Leases {
		what := ""
		if l.Borrowed {
			what = "borrowed: preemptible"
		}
		if l.Reclaim != "" {
			what = "being reclaimed: " + l.Reclaim
		}
		leases = append(leases, cellsRow(leaseColumns, []string{l.User, orDash(l.Team), shortID(l.Run), orDash(l.RunName), l.Stage,
			indexList(l.Indices), joinNonEmpty(" · ", l.Since.Local().Format("15:04"), what)}, l.User == st.User))
	}
	if len(leases) == 0 {
		leases = append(leases, quiet("No stage holds anything of this machine."))
	}
	set(v.leases, leases)
	var queue []fyne.CanvasObject
	for _, w := range st.Queue {
		queue = append(queue, cellsRow(queueColumns, []string{w.User, orDash(w.Team), shortID(w.Run), orDash(w.RunName), w.Stage,
			fmt.Sprint(w.GPUs), orDash(w.Reason)}, w.User == st.User))
	}
	if len(queue) == 0 {
		queue = append(queue, quiet("No stage waits."))
	}
	set(v.queue, queue)
}

// cellsRow is a table row of labels at the columns' widths; the user's
// own rows are marked.
func cellsRow(cols []float32, cells []string, mine bool) fyne.CanvasObject {
	objs := make([]fyne.CanvasObject, len(cells))
	for i, c := range cells {
		l := widget.NewLabel(c)
		l.Truncation = fyne.TextTruncateEllipsis
		if mine && i == 0 {
			l.Importance = widget.HighImportance
		}
		objs[i] = l
	}
	return container.New(&widthsLayout{widths: cols}, objs...)
}

func quiet(s string) fyne.CanvasObject {
	l := widget.NewLabel(s)
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.LowImportance
	return l
}

func notes(lines []string) []fyne.CanvasObject {
	out := make([]fyne.CanvasObject, len(lines))
	for i, s := range lines {
		l := widget.NewLabel(s)
		l.Wrapping = fyne.TextWrapWord
		out[i] = l
	}
	return out
}
