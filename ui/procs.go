package ui

import (
	"fmt"
	"sort"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"niuma/engine"
	"niuma/gpumon"
)

// procRow is one process on a GPU, as the board's table lists it.
type procRow struct {
	gpu     string // "0"
	pid     string // "—" for a simulated holder
	user    string
	command string
	mem     string // "2.0 GiB"
	owner   string // "RUN/STAGE (attempt 2)", or "not Niuma's"
	host    string // what its stage uses of the host: "3.1 GiB · 2m0s CPU" ("" when unknown)
	niuma   bool
	memMiB  int64
}

// processRows lists every process on every GPU, heaviest first per GPU.
// info names a process' user and command (nil: unknown); usage is what
// the running stages use of the host, by run and stage (from their
// cgroups; nil: unknown).
func processRows(snap gpumon.Snapshot, info func(pid int) (user, command string), usage map[[2]string]engine.StageUsage) []procRow {
	var out []procRow
	for _, g := range snap.GPUs {
		procs := append([]gpumon.Process(nil), g.Processes...)
		sort.SliceStable(procs, func(i, j int) bool { return procs[i].MemMiB > procs[j].MemMiB })
		for _, p := range procs {
			r := procRow{gpu: fmt.Sprint(g.Index), pid: "—", user: "—", command: "—", mem: mibText(p.MemMiB), memMiB: p.MemMiB,
				owner: "not Niuma's"}
			if p.PID > 0 {
				r.pid = fmt.Sprint(p.PID)
				if info != nil {
					if u, c := info(p.PID); u != "" || c != "" {
						r.user, r.command = orDash(u), orDash(c)
					}
				}
			} else if snap.Simulated {
				r.command = "(simulated: what the run reserved)"
			}
			if p.Owner != nil {
				r.niuma = true
				r.owner = p.Owner.String()
				if p.Owner.Attempt > 1 {
					r.owner += fmt.Sprintf(" (attempt %d)", p.Owner.Attempt)
				}
				if u, ok := usage[[2]string{p.Owner.RunID, p.Owner.Stage}]; ok {
					r.host = mibText(u.MemoryBytes>>20) + " · " + shortDuration(time.Duration(u.CPUSeconds*float64(time.Second))) + " CPU"
				}
			}
			out = append(out, r)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// procColumns are the table's columns and their widths, in points; the
// command takes what is left.
var procColumns = []struct {
	title string
	width float32
}{{"GPU", 44}, {"PID", 70}, {"user", 90}, {"command", 0}, {"GPU memory", 110}, {"run / stage", 270}}

// procTable lists the GPUs' processes under the cards, nvitop-style.
type procTable struct {
	content *fyne.Container
	rows    *fyne.Container
	empty   *widget.Label
	// mode says how Niuma finds and limits its stages' processes: apart
	// from content, so that a machine without GPUs (no table) shows it too.
	mode *widget.Label
}

func newProcTable() *procTable {
	t := &procTable{rows: container.NewVBox(), empty: widget.NewLabel("No process holds GPU memory."), mode: widget.NewLabel("")}
	t.empty.Importance = widget.LowImportance
	t.mode.Importance = widget.LowImportance
	t.mode.Wrapping = fyne.TextWrapWord
	t.mode.Hide()
	head := make([]fyne.CanvasObject, len(procColumns))
	for i, c := range procColumns {
		l := widget.NewLabelWithStyle(c.title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		head[i] = l
	}
	t.content = container.NewVBox(
		widget.NewLabelWithStyle("Processes", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		container.New(&columnsLayout{}, head...), widget.NewSeparator(), t.rows, t.empty)
	t.content.Hide()
	return t
}

// setMode shows how a stage's processes are found and limited ("" hides
// it).
func (t *procTable) setMode(mode string) {
	if mode == "" {
		t.mode.Hide()
		return
	}
	t.mode.SetText("Stages' processes: " + mode)
	t.mode.Show()
}

// set shows the rows (hidden altogether on a machine without GPUs).
func (t *procTable) set(rows []procRow, gpus bool) {
	if !gpus {
		t.content.Hide()
		return
	}
	t.content.Show()
	objs := make([]fyne.CanvasObject, 0, len(rows))
	for _, r := range rows {
		owner := r.owner
		if r.host != "" {
			owner += " · " + r.host
		}
		cells := []string{r.gpu, r.pid, r.user, r.command, r.mem, owner}
		labels := make([]fyne.CanvasObject, len(cells))
		for i, c := range cells {
			l := widget.NewLabel(c)
			l.Truncation = fyne.TextTruncateEllipsis
			if i == 3 || i == 1 {
				l.TextStyle = fyne.TextStyle{Monospace: true}
			}
			if i == 5 {
				if r.niuma {
					l.Importance = widget.HighImportance
				} else {
					l.Importance = widget.WarningImportance
				}
			}
			labels[i] = l
		}
		objs = append(objs, container.New(&columnsLayout{}, labels...))
	}
	t.rows.Objects = objs
	t.rows.Refresh()
	if len(rows) == 0 {
		t.empty.Show()
	} else {
		t.empty.Hide()
	}
}

// columnsLayout lays a row's cells out at procColumns' widths, the
// zero-width column taking what is left.
type columnsLayout struct{}

func (columnsLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var w, h float32
	for i, o := range objs {
		ms := o.MinSize()
		h = max(h, ms.Height)
		if i < len(procColumns) && procColumns[i].width > 0 {
			w += procColumns[i].width
		} else {
			w += 80
		}
	}
	return fyne.NewSize(w, h)
}

func (columnsLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	var fixed float32
	for i := range objs {
		if i < len(procColumns) {
			fixed += procColumns[i].width
		}
	}
	flex := max(80, size.Width-fixed)
	x := float32(0)
	for i, o := range objs {
		w := flex
		if i < len(procColumns) && procColumns[i].width > 0 {
			w = procColumns[i].width
		}
		o.Move(fyne.NewPos(x, 0))
		o.Resize(fyne.NewSize(w, size.Height))
		x += w
	}
}
