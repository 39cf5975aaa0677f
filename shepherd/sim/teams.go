package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"niuma/shepherd"
)

// ShareModes are how SharesOf splits a machine among teams.
var ShareModes = []string{"even", "proportional"}

// SharesOf splits gpus whole GPUs among the jobs' teams: evenly, or in
// proportion to each team's GPU-time (GPUs × duration) in jobs. Every team
// gets at least one GPU (so there must be at least as many GPUs as teams);
// the rest goes by largest remainder, ties by name. Borrowing and lending
// are not limited.
func SharesOf(jobs []Job, gpus int, mode string) ([]shepherd.Team, error) {
	work := map[string]float64{}
	for _, j := range jobs {
		work[j.Team] += float64(max(j.GPUs, 1)) * j.Duration
	}
	names := sortedKeys(work)
	if len(names) == 0 {
		return nil, fmt.Errorf("no jobs to share the machine among")
	}
	if len(names) > gpus {
		return nil, fmt.Errorf("%d teams and %d GPUs: each team needs a GPU of its own; use a larger --gpus", len(names), gpus)
	}
	var total float64
	for _, n := range names {
		switch mode {
		case "even":
			work[n] = 1
		case "proportional":
		default:
			return nil, fmt.Errorf("shares %q: use even or proportional", mode)
		}
		total += work[n]
	}
	quota := make([]float64, len(names))
	alloc := make([]int, len(names))
	sum := 0
	for i, n := range names {
		quota[i] = float64(gpus) * work[n] / total
		alloc[i] = max(1, int(math.Floor(quota[i])))
		sum += alloc[i]
	}
	// Take back from those furthest above their quota (the minimum of one
	// GPU can overshoot), then hand out the rest by largest remainder.
	for sum > gpus {
		k := -1
		for i := range alloc {
			if alloc[i] > 1 && (k < 0 || float64(alloc[i])-quota[i] > float64(alloc[k])-quota[k]) {
				k = i
			}
		}
		alloc[k]--
		sum--
	}
	for sum < gpus {
		k := 0
		for i := range alloc {
			if quota[i]-float64(alloc[i]) > quota[k]-float64(alloc[k]) {
				k = i
			}
		}
		alloc[k]++
		sum++
	}
	teams := make([]shepherd.Team, len(names))
	for i, n := range names {
		teams[i] = shepherd.Team{Name: n, Nominal: float64(alloc[i]), BorrowLimit: shepherd.NoLimit, LendLimit: shepherd.NoLimit}
	}
	return teams, nil
}

// SetTeams names each job's team from a column of the trace (values by
// data row, as ReadColumn returns them).
func SetTeams(jobs []Job, values []string) {
	for i := range jobs {
		if r := jobs[i].Row; r >= 0 && r < len(values) {
			jobs[i].Team = values[r]
		}
	}
}

// ReadColumn returns one column of a trace file, a value per data row.
func ReadColumn(r io.Reader, column string) ([]string, error) {
	rows, err := readCSV(r, []string{column})
	if err != nil {
		return nil, fmt.Errorf("read the team column: %w", err)
	}
	out := make([]string, len(rows))
	for i, row := range rows {
		out[i] = row[0]
	}
	return out, nil
}

// TeamStats are one team's figures in a shared replay, beside the same
// team alone on a static partition of its share (the no-sharing baseline,
// from the same jobs).
type TeamStats struct {
	Share float64 `json:"share_gpus"`
	Jobs  int     `json:"jobs"`
	// AvgJCT and StaticAvgJCT are over the jobs both replays completed:
	// a job wider than the team's partition never runs there
	// (StaticRefused).
	AvgJCT        float64 `json:"avg_jct_s"`
	StaticAvgJCT  float64 `json:"static_avg_jct_s"`
	Compared      int     `json:"compared"` // jobs both replays ran
	StaticRefused int     `json:"static_refused,omitempty"`
	// Borrowed is the team's GPU-time beyond its share, as a share of its
	// own; Preempted how many of its runs' attempts a reclaim or a
	// preemption stopped.
	AvgWait   float64 `json:"avg_wait_s"`
	Preempted int     `json:"preempted"`
}

// TeamReport is a replay with teams: the machine's figures and each
// team's.
type TeamReport struct {
	Report
	Utilization float64              `json:"utilization"` // GPUUtil, by the name the team table uses
	Shares      string               `json:"shares"`
	Teams       map[string]TeamStats `json:"teams"`
}

// String is the report as a user reads it: the machine's figures, then a
// line per team beside its static partition.
func (r TeamReport) String() string {
	var b strings.Builder
	b.WriteString(r.Report.String())
	fmt.Fprintf(&b, "  per team (%s shares; JCT over the jobs its static partition also ran):\n", r.Shares)
	for _, n := range r.teamNames() {
		t := r.Teams[n]
		ratio := "—"
		if t.StaticAvgJCT > 0 {
			ratio = fmt.Sprintf("%.2f×", t.AvgJCT/t.StaticAvgJCT)
		}
		if t.Compared == 0 {
			fmt.Fprintf(&b, "    %-10s share %3.0f GPUs  %6d jobs  none of them fits its share alone, so there is nothing to compare", n,
				t.Share, t.Jobs)
		} else {
			fmt.Fprintf(&b, "    %-10s share %3.0f GPUs  %6d jobs  JCT avg %s  alone on its share %s  (%s)", n, t.Share, t.Jobs,
				Hours(t.AvgJCT), Hours(t.StaticAvgJCT), ratio)
		}
		if t.StaticRefused > 0 && t.Compared > 0 {
			fmt.Fprintf(&b, "  %d too wide for its share alone", t.StaticRefused)
		}
		b.WriteString("\n")
	}
	if n, q := r.WorstTeam(); n != "" {
		fmt.Fprintf(&b, "  worst off against its own partition: %s at %.2f×\n", n, q)
	}
	return b.String()
}

// ReplayTeams replays jobs on cfg's machine shared among teams (the jobs'
// Team) with the given shares, and each team alone on a static partition
// of its share, with the same policy and estimates.
func ReplayTeams(jobs []Job, cfg Config, teams []shepherd.Team, shares string, workers int) TeamReport {
	if cfg.HalfLife <= 0 {
		cfg.HalfLife = 7 * 24 * time.Hour
	}
	shared := cfg
	shared.Teams = teams
	type result struct {
		rep  Report
		done []*sjob
	}
	results := make([]result, len(teams)+1)
	work := make(chan int)
	done := make(chan struct{})
	run := func(k int) {
		if k == len(teams) {
			rep, d := replay(jobs, shared, hooks{})
			results[k] = result{rep, d}
			return
		}
		t := teams[k]
		var own []Job
		for _, j := range jobs {
			if j.Team == t.Name {
				own = append(own, j)
			}
		}
		c := cfg
		c.GPUs = int(t.Nominal)
		if c.GroupSize <= 0 || c.GroupSize > c.GPUs {
			c.GroupSize = c.GPUs
		}
		rep, d := replay(own, c, hooks{})
		results[k] = result{rep, d}
	}
	workers = max(1, workers)
	for range workers {
		go func() {
			for k := range work {
				run(k)
			}
			done <- struct{}{}
		}()
	}
	for k := len(teams); k >= 0; k-- {
		work <- k
	}
	close(work)
	for range workers {
		<-done
	}
	out := TeamReport{Report: results[len(teams)].rep, Shares: shares, Teams: map[string]TeamStats{}}
	out.Utilization = out.GPUUtil
	byID := map[string]*sjob{}
	for _, j := range results[len(teams)].done {
		byID[j.ID] = j
	}
	for k, t := range teams {
		ts := TeamStats{Share: t.Nominal, StaticRefused: results[k].rep.Refused}
		var jct, sjct, wait []float64
		for _, sj := range results[k].done {
			j := byID[sj.ID]
			if j == nil {
				continue
			}
			jct = append(jct, j.end-j.Submit)
			sjct = append(sjct, sj.end-sj.Submit)
			wait = append(wait, j.first-j.Submit)
		}
		for _, j := range results[len(teams)].done {
			if j.Team == t.Name {
				ts.Jobs++
				ts.Preempted += j.preempted
			}
		}
		if ts.Compared = len(jct); ts.Compared > 0 {
			ts.AvgJCT, ts.StaticAvgJCT, ts.AvgWait = mean(jct), mean(sjct), mean(wait)
		}
		out.Teams[t.Name] = ts
	}
	return out
}

// WorstTeam is the team whose average JCT is furthest above its static
// partition's, with that ratio (shared / static).
func (r TeamReport) WorstTeam() (string, float64) {
	worst, ratio := "", 0.0
	for _, n := range r.teamNames() {
		t := r.Teams[n]
		if t.StaticAvgJCT <= 0 {
			continue
		}
		if q := t.AvgJCT / t.StaticAvgJCT; worst == "" || q > ratio {
			worst, ratio = n, q
		}
	}
	return worst, ratio
}

// teamNames lists a report's teams by name.
func (r TeamReport) teamNames() []string {
	names := make([]string, 0, len(r.Teams))
	for n := range r.Teams {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
