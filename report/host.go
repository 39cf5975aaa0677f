package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"niuma/plot"
)

// HostUsage is what one stage of a run used of the host, from the
// per-minute records of its attempts' cgroups (local stages): memory in
// bytes, CPU time in seconds, over every recorded attempt.
type HostUsage struct {
	Stage         string      `json:"stage"`
	Attempts      []int       `json:"attempts"`
	PeakMemBytes  int64       `json:"peak_mem_bytes"`
	MeanMemBytes  int64       `json:"mean_mem_bytes"`
	MemLimitBytes int64       `json:"mem_limit_bytes"` // 0: none
	CPUSeconds    float64     `json:"cpu_seconds"`
	CPULimitMilli int64       `json:"cpu_limit_milli"` // thousandths of a CPU; 0: none
	Samples       int         `json:"samples"`         // readings of its memory while it ran
	Curve         []HostPoint `json:"curve"`           // minute by minute, oldest first
}

// HostPoint is one minute of one attempt of a stage.
type HostPoint struct {
	At          time.Time `json:"at"`
	Attempt     int       `json:"attempt"`
	MemMaxBytes int64     `json:"mem_max_bytes"`
	CPUSeconds  float64   `json:"cpu_seconds"` // used in the minute
}

// hostOutline is a run report's section on the memory and CPU time of
// its stages.
func hostOutline(o *outline, r *Run, opt Options) {
	o.h(2, "Memory and CPU")
	if len(r.Host) == 0 {
		o.p("No stage of the run has a record of its memory and CPU time: they are recorded for local stages " +
			"that run in a cgroup of their own (see niuma doctor), minute by minute, and kept for 30 days.")
		return
	}
	rows := make([][]string, len(r.Host))
	for i, h := range r.Host {
		mean := "–" // no reading while it ran: a stage shorter than a second
		if h.Samples > 0 {
			mean = bytesText(h.MeanMemBytes)
		}
		rows[i] = []string{h.Stage, bytesText(h.PeakMemBytes), limitText(h.MemLimitBytes, bytesText), mean,
			cpuText(h.CPUSeconds), limitText(h.CPULimitMilli, cpusText), attemptList(h.Attempts)}
	}
	o.table([]string{"stage", "peak memory", "memory limit", "mean memory", "CPU time", "CPU limit", "attempts"},
		[]bool{false, true, true, true, true, true, false}, rows)
	o.p("From each attempt's cgroup, read about once a second: the peak is the cgroup's own high-water mark, " +
		"CPU time is user and system time of every process of the stage.")
	if opt.NoCurves {
		return
	}
	start := r.Started
	f := figure{Title: "Memory of each stage", XLabel: "minutes since the run started", YLabel: "MiB"}
	points := 0
	for _, h := range r.Host {
		s := plot.Series{Name: h.Stage}
		for _, p := range h.Curve {
			if start.IsZero() {
				start = p.At
			}
			s.X = append(s.X, minuteX(p.At, start))
			s.Y = append(s.Y, float64(p.MemMaxBytes)/(1<<20))
		}
		if len(s.X) > 0 {
			points += len(s.X)
			f.Series = append(f.Series, s)
		}
	}
	if points > len(f.Series) { // a single minute per stage makes no curve: the table says it all
		f.Caption = "The most memory each stage's readings saw in each minute."
		o.figure(f)
	}
}

// compareHostOutline is a comparison's section: the peak memory and CPU
// time of each run's stages.
func compareHostOutline(o *outline, ranked []Ranked) {
	var rows [][]string
	for _, rk := range ranked {
		for _, h := range rk.Run.Host {
			rows = append(rows, []string{rk.Run.ID, h.Stage, bytesText(h.PeakMemBytes), limitText(h.MemLimitBytes, bytesText),
				cpuText(h.CPUSeconds)})
		}
	}
	if len(rows) == 0 {
		return
	}
	o.h(2, "Memory and CPU")
	o.table([]string{"run", "stage", "peak memory", "memory limit", "CPU time"}, []bool{false, false, true, true, true}, rows)
}

// bytesText writes a memory size in binary units: "3.4 MiB", "512 MiB".
func bytesText(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size {
			v := float64(n) / float64(u.size)
			if v >= 100 || n%u.size == 0 {
				return fmt.Sprintf("%.0f %s", v, u.name)
			}
			return fmt.Sprintf("%.1f %s", v, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// cpuText writes CPU time: "1.9 ms", "0.42 s" under a minute, "3m12s"
// above.
func cpuText(sec float64) string {
	switch {
	case sec < 0.01:
		return fmt.Sprintf("%.1f ms", sec*1000)
	case sec < 60:
		return fmt.Sprintf("%.2f s", sec)
	}
	return time.Duration(sec * float64(time.Second)).Round(time.Second).String()
}

// cpusText writes a CPU limit in thousandths as CPUs: "2", "0.5".
func cpusText(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

func limitText(n int64, f func(int64) string) string {
	if n <= 0 {
		return "none"
	}
	return f(n)
}

func attemptList(as []int) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = strconv.Itoa(a)
	}
	return strings.Join(s, ", ")
}
