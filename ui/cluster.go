package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ClusterNode is one node of a Slurm cluster as the Cluster page shows it
// (what `niuma cluster` prints): its state, CPUs, memory and GPUs,
// allocated and total.
type ClusterNode struct {
	Name       string
	State      string // idle, mixed, allocated, down, drained, …
	Partitions []string
	Default    bool // in the default partition
	Usable     bool // Slurm may start jobs on it
	CPUs       int
	CPUsAlloc  int
	MemoryMiB  int64
	MemAlloc   int64
	GPUs       int
	GPUsAlloc  int
	Reason     string // why it is down or drained, as the admin wrote it
}

// ClusterJob is one job of yours in the cluster's queue; Niuma's own name
// the run, stage and attempt they are.
type ClusterJob struct {
	ID, Name, State, Partition, Nodes string
	GPUs                              int
	Waiting                           string // a pending job's reason in words
	RunID, Stage                      string
	Attempt                           int
}

// ClusterInfo is a read of the cluster: nodes, your jobs, and the GPUs free
// in the partition Niuma submits to.
type ClusterInfo struct {
	Nodes     []ClusterNode
	Jobs      []ClusterJob
	FreeGPUs  int
	Partition string // "" = the default partition
}

// clusterView is the Cluster page: the Slurm cluster's nodes and your jobs,
// read every few seconds while the page is on screen.
type clusterView struct {
	read    func(ctx context.Context) (ClusterInfo, error)
	onOpen  func(runID string)
	shown   atomic.Bool
	tasks   tasks // the page's reads; close ends them
	status  *widget.Label
	nodes   *fyne.Container
	jobs    *fyne.Container
	content fyne.CanvasObject
}

var (
	nodeColumns = []float32{150, 110, 150, 90, 100, 170, 0}
	jobColumns  = []float32{90, 100, 110, 60, 300, 0}
)

func newClusterView(read func(ctx context.Context) (ClusterInfo, error)) *clusterView {
	v := &clusterView{read: read, status: widget.NewLabel("Reading the cluster…"), nodes: container.NewVBox(), jobs: container.NewVBox()}
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
		title("Nodes"), head(nodeColumns, "node", "state", "partitions", "GPUs", "CPUs", "memory", "note"), widget.NewSeparator(), v.nodes,
		title("Your jobs"), head(jobColumns, "job", "state", "partition", "GPUs", "Niuma run / stage", "why it waits, or where it runs"), widget.NewSeparator(), v.jobs)
	top := container.NewBorder(nil, nil, nil, refresh, v.status)
	v.content = container.NewBorder(container.NewPadded(top), nil, nil, nil, container.NewVScroll(container.NewPadded(body)))
	return v
}

// Reload reads the cluster once and shows it.
func (v *clusterView) Reload(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	info, err := v.read(ctx)
	onUI(func() { v.apply(info, err, time.Now()) })
}

// close stops the page's reads and its follow.
func (v *clusterView) close() { v.tasks.Close() }

// follow reads the cluster every few seconds while the page is on screen.
func (v *clusterView) follow(ctx context.Context) {
	tick := time.NewTicker(5 * time.Second)
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

func (v *clusterView) apply(info ClusterInfo, err error, now time.Time) {
	if err != nil {
		v.status.Importance = widget.WarningImportance
		v.status.SetText("No cluster to show: " + err.Error())
		v.nodes.Objects, v.jobs.Objects = nil, nil
		v.nodes.Refresh()
		v.jobs.Refresh()
		return
	}
	where := "the default partition"
	if info.Partition != "" {
		where = "partition " + info.Partition
	}
	v.status.Importance = widget.MediumImportance
	v.status.SetText(fmt.Sprintf("Slurm: %d %s, %d GPU(s) free in %s · read %s (GPUs and CPUs are allocated/total)",
		len(info.Nodes), plural(len(info.Nodes), "node", "nodes"), info.FreeGPUs, where, now.Format("15:04:05")))
	var nodes []fyne.CanvasObject
	for _, n := range info.Nodes {
		nodes = append(nodes, v.row(nodeColumns, nodeCells(n), !n.Usable, nil))
	}
	if len(nodes) == 0 {
		nodes = append(nodes, widget.NewLabel("The cluster lists no nodes."))
	}
	v.nodes.Objects = nodes
	v.nodes.Refresh()
	var jobs []fyne.CanvasObject
	for _, j := range info.Jobs {
		var open func()
		if j.RunID != "" && v.onOpen != nil {
			id := j.RunID
			open = func() { v.onOpen(id) }
		}
		jobs = append(jobs, v.row(jobColumns, jobCells(j), false, open))
	}
	if len(jobs) == 0 {
		jobs = append(jobs, widget.NewLabel("No jobs of yours in the queue."))
	}
	v.jobs.Objects = jobs
	v.jobs.Refresh()
}

// nodeCells are a node's columns.
func nodeCells(n ClusterNode) []string {
	parts := strings.Join(n.Partitions, ",")
	if n.Default {
		parts += "*"
	}
	return []string{n.Name, n.State, parts, fmt.Sprintf("%d/%d", n.GPUsAlloc, n.GPUs), fmt.Sprintf("%d/%d", n.CPUsAlloc, n.CPUs),
		fmt.Sprintf("%s/%s", mibText(n.MemAlloc), mibText(n.MemoryMiB)), n.Reason}
}

// jobCells are a job's columns.
func jobCells(j ClusterJob) []string {
	owner := "not Niuma's"
	if j.RunID != "" {
		owner = j.RunID + "/" + j.Stage + " #" + strconv.Itoa(j.Attempt)
	}
	why := j.Waiting
	if why == "" {
		why = "on " + j.Nodes
	}
	return []string{j.ID, strings.ToLower(j.State), j.Partition, strconv.Itoa(j.GPUs), owner, why}
}

func (v *clusterView) row(cols []float32, cells []string, bad bool, open func()) fyne.CanvasObject {
	objs := make([]fyne.CanvasObject, len(cells))
	for i, c := range cells {
		if i == 4 && open != nil && len(cols) == len(jobColumns) {
			b := widget.NewButton(c, open)
			b.Importance = widget.LowImportance
			b.Alignment = widget.ButtonAlignLeading
			objs[i] = b
			continue
		}
		l := widget.NewLabel(c)
		l.Truncation = fyne.TextTruncateEllipsis
		if bad && i == 1 {
			l.Importance = widget.DangerImportance
		}
		objs[i] = l
	}
	return container.New(&widthsLayout{widths: cols}, objs...)
}

// widthsLayout lays a row's cells out at fixed widths, a zero width
// taking what is left.
type widthsLayout struct{ widths []float32 }

func (l *widthsLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var w, h float32
	for i, o := range objs {
		h = max(h, o.MinSize().Height)
		if i < len(l.widths) && l.widths[i] > 0 {
			w += l.widths[i]
		} else {
			w += 80
		}
	}
	return fyne.NewSize(w, h)
}

func (l *widthsLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	var fixed float32
	for i := range objs {
		if i < len(l.widths) {
			fixed += l.widths[i]
		}
	}
	flex := max(80, size.Width-fixed)
	x := float32(0)
	for i, o := range objs {
		w := flex
		if i < len(l.widths) && l.widths[i] > 0 {
			w = l.widths[i]
		}
		o.Move(fyne.NewPos(x, 0))
		o.Resize(fyne.NewSize(w, size.Height))
		x += w
	}
}
