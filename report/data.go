package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"niuma/printable"
)

// CSV writes every metric point of every run as one row, after a header:
// run, stage, attempt, metric, step, value, wall (RFC 3339, empty when
// unknown), followed by one column per parameter (the union over runs,
// sorted by name; empty where a run lacks it). NaN and infinities are
// written as NaN, +Inf and -Inf. Text cells (csvText) have their control
// characters escaped and cannot start a spreadsheet formula.
func CSV(rep *Report) ([]byte, error) {
	if err := rep.check(); err != nil {
		return nil, err
	}
	names := paramNames(rep)
	var buf bytes.Buffer
	buf.Grow(pointCount(rep) * 48)
	w := csv.NewWriter(&buf)
	head := []string{"run", "stage", "attempt", "metric", "step", "value", "wall"}
	for _, n := range names {
		head = append(head, csvText(n))
	}
	if err := w.Write(head); err != nil {
		return nil, err
	}
	w.Flush()
	// Rows are assembled by hand: the text fields, quoted once by
	// encoding/csv, are the same for every point of a metric, and ten
	// million points through csv.Writer take many seconds.
	line := func(fields []string) []byte {
		var b bytes.Buffer
		cw := csv.NewWriter(&b)
		_ = cw.Write(fields) // writes to memory: cannot fail
		cw.Flush()
		return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	}
	var row []byte
	for _, r := range rep.Runs {
		params := make([]string, len(names))
		for j, n := range names {
			v, _ := r.param(n)
			params[j] = csvText(formatAny(v))
		}
		suffix := line(params)
		for _, m := range r.Metrics {
			prefix := line([]string{csvText(r.ID), csvText(m.Stage), strconv.Itoa(m.Attempt), csvText(m.Key)})
			for i, v := range m.Values {
				row = append(row[:0], prefix...)
				row = append(row, ',')
				row = strconv.AppendInt(row, m.Steps[i], 10)
				row = append(row, ',')
				row = append(row, csvNum(v)...)
				row = append(row, ',')
				if m.Walls != nil && !m.Walls[i].IsZero() {
					row = m.Walls[i].UTC().AppendFormat(row, time.RFC3339Nano)
				}
				if len(names) > 0 {
					row = append(row, ',')
					row = append(row, suffix...)
				}
				row = append(row, '\n')
				buf.Write(row)
			}
		}
	}
	return buf.Bytes(), nil
}

// csvText is a text cell: what a workload or template wrote, with its
// control characters escaped (printable.String), and with a leading ' when
// a spreadsheet would read it as a formula (=, +, -, @) and it is not a
// number.
func csvText(s string) string {
	s = printable.String(s)
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return "'" + s
		}
	}
	return s
}

func csvNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func paramNames(rep *Report) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range rep.Runs {
		for _, p := range r.Params {
			if !seen[p.Name] {
				seen[p.Name] = true
				names = append(names, p.Name)
			}
		}
	}
	sortStrings(names)
	return names
}

func pointCount(rep *Report) int {
	n := 0
	for _, r := range rep.Runs {
		for _, m := range r.Metrics {
			n += len(m.Values)
		}
	}
	return n
}

// JSON writes the runs with their parameters, stages and every metric
// point, as one object: {"generated": ..., "runs": [...]}. Metric values
// that JSON cannot hold (NaN, ±Inf) are written as the strings "NaN",
// "+Inf" and "-Inf", as `niuma show --json` does.
func JSON(rep *Report) ([]byte, error) {
	if err := rep.check(); err != nil {
		return nil, err
	}
	out := jsonReport{Title: rep.title(), Runs: make([]jsonRun, len(rep.Runs))}
	if !rep.Generated.IsZero() {
		g := rep.Generated.UTC()
		out.Generated = &g
	}
	for i, r := range rep.Runs {
		jr := jsonRun{
			ID: r.ID, Template: r.Template, TemplateVersion: r.TemplateVersion, State: r.State, Error: r.Error,
			Params: map[string]any{}, Seed: r.Seed, Executor: r.Executor, Fingerprint: r.Fingerprint,
			Objective: r.EffectiveObjective(), Provenance: map[string]string{},
			Stages: r.Stages, Anomalies: r.Anomalies, GPUs: r.GPUs, Host: append([]HostUsage{}, r.Host...),
		}
		for i, h := range jr.Host {
			if h.Curve == nil {
				jr.Host[i].Curve = []HostPoint{}
			}
		}
		for _, p := range r.Params {
			jr.Params[p.Name] = p.Value
		}
		for _, it := range r.Provenance {
			jr.Provenance[it.Label] = it.Value
		}
		for _, m := range r.Metrics {
			s := m.Summarize(goalFor(m.Key, jr.Objective))
			jm := jsonMetric{Stage: m.Stage, Attempt: m.Attempt, Key: m.Key, Final: jsonNum(s.Final), Best: jsonNum(s.Best), Goal: s.Goal,
				Steps: m.Steps, Values: jsonNums(m.Values)}
			jr.Metrics = append(jr.Metrics, jm)
		}
		out.Runs[i] = jr
	}
	var buf bytes.Buffer
	// Compact: indenting would re-scan hundreds of megabytes for a large
	// comparison; `jq .` pretty-prints when a person wants to read it.
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("report: write JSON: %w", err)
	}
	return buf.Bytes(), nil
}

type jsonReport struct {
	Title     string     `json:"title"`
	Generated *time.Time `json:"generated,omitempty"`
	Runs      []jsonRun  `json:"runs"`
}

type jsonRun struct {
	ID              string            `json:"id"`
	Template        string            `json:"template"`
	TemplateVersion string            `json:"template_version"`
	State           string            `json:"state"`
	Error           string            `json:"error,omitempty"`
	Params          map[string]any    `json:"params"`
	Seed            int64             `json:"seed"`
	Executor        string            `json:"executor"`
	Fingerprint     string            `json:"fingerprint"`
	Objective       Objective         `json:"objective"`
	Provenance      map[string]string `json:"provenance"`
	Stages          []Stage           `json:"stages"`
	Metrics         []jsonMetric      `json:"metrics"`
	Anomalies       []Anomaly         `json:"anomalies"`
	GPUs            []GPUUsage        `json:"gpus"`
	Host            []HostUsage       `json:"host_usage"`
}

type jsonMetric struct {
	Stage   string   `json:"stage"`
	Attempt int      `json:"attempt"`
	Key     string   `json:"key"`
	Goal    string   `json:"goal"`
	Final   jsonNum  `json:"final"`
	Best    jsonNum  `json:"best"`
	Steps   []int64  `json:"steps"`
	Values  jsonNums `json:"values"`
}

// jsonNums is a metric's values, written in one go: per-element
// marshalling through reflection is slow for millions of points.
type jsonNums []float64

func (ns jsonNums) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(ns)*20+2)
	b = append(b, '[')
	for i, f := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			b = append(b, '"')
			b = append(b, csvNum(f)...)
			b = append(b, '"')
		} else {
			b = strconv.AppendFloat(b, f, 'g', -1, 64)
		}
	}
	return append(b, ']'), nil
}

// jsonNum is a float64 that JSON can always hold.
type jsonNum float64

func (n jsonNum) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte(`"` + csvNum(f) + `"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// MarshalJSON writes a GPU's usage with the figures it never reported as
// the string "NaN", as the metric values are.
func (g GPUUsage) MarshalJSON() ([]byte, error) {
	type point struct {
		At      time.Time `json:"at"`
		UtilPct jsonNum   `json:"util_percent"`
		MemMiB  jsonNum   `json:"run_mem_mib"`
		TempC   jsonNum   `json:"temp_c"`
		PowerW  jsonNum   `json:"power_w"`
	}
	type xid struct {
		At   time.Time `json:"at"`
		Code uint64    `json:"code"`
	}
	out := struct {
		Index            int       `json:"index"`
		Model            string    `json:"model"`
		UUID             string    `json:"uuid"`
		Simulated        bool      `json:"simulated"`
		Stages           []string  `json:"stages"`
		From             time.Time `json:"from,omitzero"`
		To               time.Time `json:"to,omitzero"`
		MeanUtil         jsonNum   `json:"mean_util_percent"`
		PeakUtil         jsonNum   `json:"peak_util_percent"`
		MeanMemMiB       jsonNum   `json:"mean_run_mem_mib"`
		PeakMemMiB       jsonNum   `json:"peak_run_mem_mib"`
		TotalMemMiB      float64   `json:"total_mem_mib,omitempty"`
		MeanTempC        jsonNum   `json:"mean_temp_c"`
		PeakTempC        jsonNum   `json:"peak_temp_c"`
		MeanPowerW       jsonNum   `json:"mean_power_w"`
		PeakPowerW       jsonNum   `json:"peak_power_w"`
		PowerLimitW      float64   `json:"power_limit_w,omitempty"`
		Samples          int       `json:"samples"`
		ThrottledSamples int       `json:"throttled_samples"`
		ThrottledMinutes int       `json:"throttled_minutes"`
		ThrottleReasons  []string  `json:"throttle_reasons"`
		XIDs             []xid     `json:"xids"`
		Events           []Anomaly `json:"events"`
		Curve            []point   `json:"curve"`
	}{g.Index, g.Model, g.UUID, g.Simulated, g.Stages, g.From, g.To,
		jsonNum(g.MeanUtil), jsonNum(g.PeakUtil), jsonNum(g.MeanMemMiB), jsonNum(g.PeakMemMiB), g.TotalMemMiB,
		jsonNum(g.MeanTempC), jsonNum(g.PeakTempC), jsonNum(g.MeanPowerW), jsonNum(g.PeakPowerW), g.PowerLimitW,
		g.Samples, g.ThrottledSamples, g.ThrottledMinutes, nonNilStrings(g.ThrottleReasons), []xid{}, nonNilAnomalies(g.Events),
		make([]point, len(g.Curve))}
	for _, x := range g.XIDs {
		out.XIDs = append(out.XIDs, xid(x))
	}
	for i, p := range g.Curve {
		out.Curve[i] = point{p.At, jsonNum(p.UtilPct), jsonNum(p.MemMiB), jsonNum(p.TempC), jsonNum(p.Power)}
	}
	return json.Marshal(out)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilAnomalies(a []Anomaly) []Anomaly {
	if a == nil {
		return []Anomaly{}
	}
	return a
}
