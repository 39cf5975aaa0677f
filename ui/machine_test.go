package ui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/machine"
	"niuma/shepherd"
)

// sharedBackend is a fakeBackend on a machine shared through the machine
// service, whose status the test sets.
type sharedBackend struct {
	*fakeBackend
	status machine.Status
	err    error
}

func (s *sharedBackend) Shared() bool { return true }
func (s *sharedBackend) MachineStatus(context.Context) (machine.Status, error) {
	return s.status, s.err
}

// twoTeams is a machine of two simulated A100s: ana (vision) holds both,
// one borrowed from nlp; bo (nlp) waits for his share back.
func twoTeams(now time.Time) machine.Status {
	g0, g1 := "GPU-51a1a7ed-0000-4000-8000-000000000000", "GPU-51a1a7ed-0000-4000-8000-000000000001"
	return machine.Status{
		User: "bo", Team: "nlp", Policy: "herd", HalfLife: 7 * 24 * time.Hour, Simulated: true,
		GPUs: []machine.GPU{{Index: 0, UUID: g0, Name: "NVIDIA A100-SXM4-80GB"}, {Index: 1, UUID: g1, Name: "NVIDIA A100-SXM4-80GB"}},
		Teams: []machine.Team{
			{Name: "vision", Members: []string{"ana"}, Nominal: 1, BorrowLimit: shepherd.NoLimit, LendLimit: shepherd.NoLimit,
				Held: 2, Borrowed: 1, BorrowedFrom: map[string]float64{"nlp": 1}, LentTo: map[string]float64{}, Usage: 3.5,
				FairShare: 0.31, Reclaimable: []string{"tok-a2"}},
			{Name: "nlp", Members: []string{"bo"}, Nominal: 1, BorrowLimit: 1, LendLimit: shepherd.NoLimit,
				LentTo: map[string]float64{"vision": 1}, BorrowedFrom: map[string]float64{}, FairShare: 1},
		},
		Leases: []machine.Lease{
			{ID: "tok-a1", User: "ana", Team: "vision", Run: "20261201-090000-aaaaaa", RunName: "resnet", Stage: "train",
				GPUs: []string{g0}, Indices: []int{0}, Since: now.Add(-time.Hour)},
			{ID: "tok-a2", User: "ana", Team: "vision", Run: "20261201-090100-bbbbbb", RunName: "resnet", Stage: "train",
				GPUs: []string{g1}, Indices: []int{1}, Since: now.Add(-30 * time.Minute), Borrowed: true,
				Reclaim: "team nlp wants its share back for bo's run 20261201-100000-cccccc (bert): this run borrowed it"},
		},
		Queue: []machine.Waiting{{User: "bo", Team: "nlp", Run: "20261201-100000-cccccc", RunName: "bert", Stage: "train", GPUs: 1,
			Since: now, Code: shepherd.WaitReclaiming, Reason: "within its team's share: reclaiming GPUs lent to vision (stopping ana:20261201-090100-bbbbbb/train)"}},
		Processes: []machine.Process{{GPU: g0, User: "ana", Run: "20261201-090000-aaaaaa", MemMiB: 20480},
			{GPU: g1, User: "ana", Run: "20261201-090100-bbbbbb", MemMiB: 30720}},
	}
}

func TestMachineLineSaysWhoSharesTheMachine(t *testing.T) {
	require.Contains(t, machineLine(machineModel{}), "Single user")
	st := twoTeams(time.Now())
	require.Equal(t, "Shared machine: you are bo, team nlp (0 of its 1 GPU share held) · 1 other user: 2 stages holding 2 GPU(s), 0 waiting",
		machineLine(machineModel{shared: true, status: st}))
	st.User, st.Team = "ana", "vision"
	require.Equal(t, "Shared machine: you are ana, team vision (2 of its 1 GPU share held, 1 borrowed) · 1 other user: 0 stages holding 0 GPU(s), 1 waiting",
		machineLine(machineModel{shared: true, status: st}))
	require.Contains(t, machineLine(machineModel{shared: true, err: errors.New("connection refused")}),
		"the machine service does not answer, so runs wait for it: connection refused")
}

func TestTheBoardShowsOtherUsersRunsButNothingOfTheirs(t *testing.T) {
	now := time.Now()
	b := &sharedBackend{fakeBackend: &fakeBackend{snap: simSnapshot(t, "2xA100-80GB")}, status: twoTeams(now)}
	newTestApp(t)
	v := NewBoard(b)
	w := test.NewWindow(v.Content())
	w.Resize(fyne.NewSize(1200, 900))
	t.Cleanup(w.Close)
	v.Reload(context.Background())

	require.Contains(t, v.machineT.Text, "you are bo, team nlp")
	require.True(t, v.others.Visible())
	rows := tableText(v.othersRows)
	require.Len(t, v.othersRows.Objects, 2, "ana's two stages; bo's own waiting run is in his queue, not here")
	require.Contains(t, rows, "ana | 090000-aaaaaa | resnet | train | GPU 0 |")
	require.Contains(t, rows, "being reclaimed: team nlp wants its share back")
	require.Contains(t, rows, "ana | 090100-bbbbbb | resnet | train | GPU 1 |")

	// The cards name what other users hold on them; on simulated GPUs,
	// with its memory (GPU 0 has the board's own r1 too).
	require.Equal(t, "on it: r1/train, ana's resnet", v.views[0].runs.Text)
	require.Equal(t, "on it: ana's resnet (borrowed)", v.views[1].runs.Text)
	require.Equal(t, "mem 30.0 / 80 GiB", v.views[1].memT, "ana's 30 GiB on an otherwise idle simulated GPU")

	// Every GPU process by user: ana's simulated leases join the table.
	procs := 0
	for _, r := range v.procs.rows.Objects {
		cells := rowTexts(r)
		if cells[2] == "ana" {
			procs++
			require.Contains(t, cells[5], "ana's run")
		}
	}
	require.Equal(t, 2, procs)

	// A single user's board says so, and shows no other users.
	single := NewBoard(&fakeBackend{snap: simSnapshot(t, "2xA100-80GB")})
	w2 := test.NewWindow(single.Content())
	t.Cleanup(w2.Close)
	single.Reload(context.Background())
	require.Equal(t, singleUser, single.machineT.Text)
	require.False(t, single.others.Visible())
}

func TestTheTeamsPageShowsSharesLendingAndWhatWouldBeReclaimed(t *testing.T) {
	now := time.Now()
	b := &sharedBackend{fakeBackend: &fakeBackend{}, status: twoTeams(now)}
	newTestApp(t)
	w := test.NewWindow(nil)
	t.Cleanup(w.Close)
	runs := NewMainView(b, w)
	s := NewShell(b, runs, Options{Templates: func() ([]TemplateEntry, error) { return demoEntries(t), nil }}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1400, 900))
	var names []string
	for _, it := range s.tabs.Items {
		names = append(names, it.Text)
	}
	require.Equal(t, []string{"Board", "Runs", "Archive", "Teams", "Templates", "Settings"}, names)
	show(t, s, "Teams")
	settle(t)
	v := s.teams
	require.Contains(t, v.status.Text, "policy herd, fair-share half-life 7d")
	teams := tableText(v.teams)
	require.Contains(t, teams, "vision | ana | 1 | 2 | 1 | — | nlp 1 | 3.50 GPU-h | 0.31 | borrows no limit · lends no limit")
	require.Contains(t, teams, "nlp | bo | 1 | 0 | 0 | vision 1 | — | 0.00 GPU-h | 1.00 | borrows 1 · lends no limit")
	require.Contains(t, tableText(v.lending), "Team vision borrows 1 GPU(s) of team nlp's idle share")
	reclaim := tableText(v.reclaim)
	require.Contains(t, reclaim, "1. team vision: ana's run 090100-bbbbbb (resnet, stage train) on GPU 1 — being reclaimed now")
	require.NotContains(t, reclaim, "aaaaaa", "a run within its team's share is never reclaimed")
	require.Len(t, v.leases.Objects, 2)
	require.Contains(t, tableText(v.queue), "bo | nlp | 100000-cccccc | bert | train | 1 | within its team's share: reclaiming GPUs lent to vision")

	// The service away: the page says so and shows nothing stale.
	b.err = errors.New("connection refused")
	v.Reload(context.Background())
	settle(t)
	require.Contains(t, v.status.Text, "does not answer")
	require.Empty(t, v.teams.Objects)
}

func TestAMachineWithoutTeamsSaysHowItShares(t *testing.T) {
	st := twoTeams(time.Now())
	st.Teams = nil
	v := newTeamsView(func(context.Context) machineModel { return machineModel{shared: true, status: st} })
	newTestApp(t)
	v.apply(machineModel{shared: true, status: st}, time.Now())
	require.Contains(t, tableText(v.teams), "No teams are set: every user's runs share one queue")
	require.Contains(t, tableText(v.reclaim), "Without teams nothing is reclaimed")
}

// tableText is every label's text under c, rows joined by newlines and cells
// by " | ".
func tableText(c fyne.CanvasObject) string {
	var rows []string
	if cont, ok := c.(*fyne.Container); ok {
		for _, o := range cont.Objects {
			rows = append(rows, strings.Join(rowTexts(o), " | "))
		}
	}
	return strings.Join(rows, "\n")
}

func rowTexts(o fyne.CanvasObject) []string {
	switch x := o.(type) {
	case *widget.Label:
		return []string{x.Text}
	case *fyne.Container:
		var out []string
		for _, c := range x.Objects {
			out = append(out, rowTexts(c)...)
		}
		return out
	}
	return nil
}
