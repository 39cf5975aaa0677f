package ui

import (
	"context"
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"niuma/machine"
	"niuma/shepherd"
)

// sharedMachine is how the window learns whether this Niuma shares the
// machine with other users through the machine service, and what the
// service shows any user (the engine has both). A Backend without it is a
// single user's.
type sharedMachine interface {
	Shared() bool
	MachineStatus(ctx context.Context) (machine.Status, error)
}

// machineRead is the timeout of one read of the machine service's status:
// the board is redrawn every second.
const machineRead = 2 * time.Second

// machineModel is what the board and the Teams page show of the machine.
type machineModel struct {
	shared bool
	status machine.Status
	err    error
}

// readMachine asks the backend for the machine's status, when it shares
// the machine.
func readMachine(ctx context.Context, b Backend) machineModel {
	sm, ok := b.(sharedMachine)
	if !ok || !sm.Shared() {
		return machineModel{}
	}
	ctx, cancel := context.WithTimeout(ctx, machineRead)
	defer cancel()
	st, err := sm.MachineStatus(ctx)
	return machineModel{shared: true, status: st, err: err}
}

// singleUser is the board's line without a machine service.
const singleUser = "Single user: Niuma places runs here on its own (no machine service shares this machine among users)."

// machineLine is the board's one line about who shares the machine:
// "Shared machine: you are ana, team vision (2 of its 1 GPU held, 1
// borrowed) · 2 other users' runs hold 3 GPUs, 1 waits".
func machineLine(m machineModel) string {
	if !m.shared {
		return singleUser
	}
	if m.err != nil {
		return "Shared machine: the machine service does not answer, so runs wait for it: " + m.err.Error()
	}
	st := m.status
	who := "you are " + st.User
	if st.Team != "" {
		who += ", team " + st.Team
		for _, t := range st.Teams {
			if t.Name == st.Team {
				who += fmt.Sprintf(" (%s of its %s GPU share held", gpuNum(t.Held), gpuNum(t.Nominal))
				if t.Borrowed > 0 {
					who += fmt.Sprintf(", %s borrowed", gpuNum(t.Borrowed))
				}
				who += ")"
			}
		}
	}
	others := map[string]bool{}
	gpus := map[string]bool{}
	running, waiting := 0, 0
	for _, l := range st.Leases {
		if l.User == st.User {
			continue
		}
		others[l.User] = true
		running++
		for _, g := range l.GPUs {
			gpus[g] = true
		}
	}
	for _, w := range st.Queue {
		if w.User != st.User {
			others[w.User] = true
			waiting++
		}
	}
	line := "Shared machine: " + who
	switch {
	case len(others) == 0:
		line += " · no other user's run holds or waits for this machine"
	default:
		line += fmt.Sprintf(" · %d other %s: %d %s holding %d GPU(s), %d waiting", len(others), plural(len(others), "user", "users"),
			running, plural(running, "stage", "stages"), len(gpus), waiting)
	}
	return line
}

// otherRow is one of another user's stages on the board: who, which run,
// on which GPUs, or why it waits. Never parameters, logs or metrics: the
// service has none.
type otherRow struct {
	user, run, name, stage, gpus, state string
	borrowed                            bool
}

// otherRows are the other users' stages, holding first.
func otherRows(st machine.Status) []otherRow {
	var out []otherRow
	for _, l := range st.Leases {
		if l.User == st.User {
			continue
		}
		state := "running since " + l.Since.Local().Format("15:04")
		if l.Borrowed {
			state += " · borrowed: preemptible"
		}
		if l.Reclaim != "" {
			state = "being reclaimed: " + l.Reclaim
		}
		out = append(out, otherRow{user: l.User, run: shortID(l.Run), name: l.RunName, stage: l.Stage, gpus: indexList(l.Indices),
			state: state, borrowed: l.Borrowed})
	}
	for _, w := range st.Queue {
		if w.User == st.User {
			continue
		}
		out = append(out, otherRow{user: w.User, run: shortID(w.Run), name: w.RunName, stage: w.Stage,
			gpus: fmt.Sprintf("needs %d", w.GPUs), state: "waits: " + orDash(w.Reason)})
	}
	return out
}

// otherProcRows are the GPU processes of other users' runs that this
// Niuma's own GPU source does not show: on a simulated machine each of
// their leases stands for one, as the service lists it.
func otherProcRows(st machine.Status, mine []procRow) []procRow {
	if !st.Simulated {
		return nil // real processes: the board's own table has them all, with their users
	}
	index := map[string]int{}
	for _, g := range st.GPUs {
		index[g.UUID] = g.Index
	}
	var out []procRow
	for _, p := range st.Processes {
		if p.User == st.User {
			continue
		}
		r := procRow{gpu: strconv.Itoa(index[p.GPU]), pid: "—", user: orDash(p.User), command: "(simulated: another user's lease)",
			mem: mibText(p.MemMiB), memMiB: p.MemMiB, owner: p.User + "'s run " + shortID(p.Run)}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].gpu < out[j].gpu })
	return append(mine, out...)
}

func indexList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	if len(parts) == 0 {
		return "—"
	}
	return "GPU " + strings.Join(parts, ", ")
}

// gpuNum writes a GPU count as a person does: "4", "2.5"; "—" for no
// limit.
func gpuNum(v float64) string {
	if v == shepherd.NoLimit {
		return "no limit"
	}
	if math.Abs(v-math.Round(v)) < 0.05 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// teamRow is one team on the Teams page.
type teamRow struct {
	name, members, share, held, borrowed, lent, from, usage, fair string
	limits                                                        string
	mine                                                          bool
}

func teamRows(st machine.Status) []teamRow {
	var out []teamRow
	for _, t := range st.Teams {
		r := teamRow{name: orDash(t.Name), members: orDash(strings.Join(t.Members, ", ")), share: gpuNum(t.Nominal),
			held: gpuNum(t.Held), borrowed: gpuNum(t.Borrowed), lent: shares(t.LentTo), from: shares(t.BorrowedFrom),
			usage: fmt.Sprintf("%.2f GPU-h", t.Usage), fair: fmt.Sprintf("%.2f", t.FairShare), mine: t.Name == st.Team}
		r.limits = "borrows " + gpuNum(t.BorrowLimit) + " · lends " + gpuNum(t.LendLimit)
		out = append(out, r)
	}
	return out
}

// shares writes "nlp 1, speech 0.5", or "—".
func shares(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0.05 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + gpuNum(m[k])
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

// lendingLines say who borrows from whom: "vision borrows 1 GPU of nlp's
// share".
func lendingLines(st machine.Status) []string {
	var out []string
	for _, t := range st.Teams {
		for _, lender := range sortedKeys(t.BorrowedFrom) {
			if v := t.BorrowedFrom[lender]; v > 0.05 {
				out = append(out, fmt.Sprintf("Team %s borrows %s GPU(s) of team %s's idle share: preemptible, given back when %s wants it.",
					t.Name, gpuNum(v), lender, lender))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "No team borrows: every run holds its own team's share.")
	}
	return out
}

// reclaimLines say what would be stopped, in order, should the lenders
// want their GPUs back: each borrowing team's leases, the last started
// first.
func reclaimLines(st machine.Status) []string {
	byToken := map[string]machine.Lease{}
	for _, l := range st.Leases {
		byToken[l.ID] = l
	}
	var out []string
	for _, t := range st.Teams {
		for i, tok := range t.Reclaimable {
			l, ok := byToken[tok]
			if !ok {
				continue
			}
			line := fmt.Sprintf("%d. team %s: %s's run %s (%s, stage %s) on %s", i+1, t.Name, l.User, shortID(l.Run), orDash(l.RunName), l.Stage, indexList(l.Indices))
			if l.Reclaim != "" {
				line += " — being reclaimed now: " + l.Reclaim
			}
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		out = append(out, "Nothing: no run holds a borrowed GPU.")
	}
	return out
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// otherColumns are the widths of the board's other users' rows.
var otherColumns = []float32{100, 130, 120, 80, 90, 0}

// maxOtherRows is how many of other users' stages the board lists under
// its queue (the Teams page has them all).
const maxOtherRows = 4

// showOthers fills the board's section of other users' stages (hidden
// when there are none).
func (v *Board) showOthers(rows []otherRow) {
	if len(rows) == 0 {
		v.others.Hide()
		return
	}
	shown := rows[:min(len(rows), maxOtherRows)]
	objs := make([]fyne.CanvasObject, 0, len(shown)+1)
	for _, r := range shown {
		objs = append(objs, cellsRow(otherColumns, []string{r.user, r.run, orDash(r.name), r.stage, r.gpus, r.state}, false))
	}
	if more := len(rows) - len(shown); more > 0 {
		objs = append(objs, quiet(fmt.Sprintf("and %d more: the Teams page lists them all", more)))
	}
	v.othersRows.Objects = objs
	v.othersRows.Refresh()
	v.others.Show()
}

func boldLabels(names ...string) []fyne.CanvasObject {
	out := make([]fyne.CanvasObject, len(names))
	for i, n := range names {
		out[i] = widget.NewLabelWithStyle(n, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	}
	return out
}

// shareCards adds other users' stages to the GPU cards: "on it:" names
// them by user and template, and on simulated GPUs (each user's Niuma
// simulates its own) their leases' memory joins the card's.
func shareCards(cards []gpuCardModel, st machine.Status, simulated bool) {
	mem := map[string]int64{}
	for _, p := range st.Processes {
		if p.User != st.User {
			mem[p.GPU] += p.MemMiB
		}
	}
	for i := range cards {
		c := &cards[i]
		var names []string
		for _, l := range st.Leases {
			if l.User == st.User || !slices.Contains(l.GPUs, c.uuid) {
				continue
			}
			name := l.User + "'s " + orDash(l.RunName)
			if l.Borrowed {
				name += " (borrowed)"
			}
			names = append(names, name)
		}
		if len(names) == 0 {
			continue
		}
		// Their processes, which this user may not trace: named now.
		own := strings.TrimPrefix(c.runs, "on it: ")
		var keep []string
		for _, o := range strings.Split(own, ", ") {
			if o != "idle" && o != "another process" && o != "" {
				keep = append(keep, o)
			}
		}
		c.runs = "on it: " + strings.Join(append(keep, names...), ", ")
		if simulated && st.Simulated && c.memTotal > 0 {
			c.memUsed = min(c.memTotal, c.memUsed+mem[c.uuid])
			c.mem = float64(c.memUsed) / float64(c.memTotal)
			c.memText = fmt.Sprintf("mem %.1f / %.0f GiB", float64(c.memUsed)/1024, float64(c.memTotal)/1024)
		}
	}
}

// othersHold are other users' stages as the shepherd's running
// placements, for the wizard's preview: each holds its GPUs (a stage's
// sharing is the service's to know, so none is offered to share). On
// simulated GPUs, which each user's Niuma simulates alone, their memory is
// taken off inv's free memory too.
func othersHold(st *machine.Status, inv *shepherd.Inventory, simulated bool) []shepherd.Running {
	var out []shepherd.Running
	for _, l := range st.Leases {
		if l.User == st.User || len(l.GPUs) == 0 {
			continue
		}
		out = append(out, shepherd.Running{ID: l.User + ":" + l.Run + "/" + l.Stage, GPUs: l.GPUs, Start: l.Since, Team: l.Team})
	}
	if simulated && st.Simulated {
		for _, p := range st.Processes {
			if p.User == st.User {
				continue
			}
			for i := range inv.GPUs {
				if inv.GPUs[i].UUID == p.GPU {
					inv.GPUs[i].FreeMiB = max(0, inv.GPUs[i].FreeMiB-p.MemMiB)
				}
			}
		}
	}
	return out
}

// sharedStatus is the machine service's status for the wizard's preview,
// read with a short timeout (the preview is drawn on Fyne's thread); nil
// on a single user's machine or when the service does not answer.
func (w *Wizard) sharedStatus() *machine.Status {
	sm, ok := w.backend.(sharedMachine)
	if !ok || !sm.Shared() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	st, err := sm.MachineStatus(ctx)
	if err != nil {
		return nil
	}
	return &st
}
