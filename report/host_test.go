package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// hostRun is a demo run with host records: train three minutes (two
// attempts, a memory and CPU limit), validate one reading.
func hostRun() Run {
	r := demoRun("20261129-100000-4057ed", 0.003, 4)
	var curve []HostPoint
	for i := range 3 {
		curve = append(curve, HostPoint{At: r.Started.Add(time.Duration(i) * time.Minute).Truncate(time.Minute), Attempt: 1 + i/2,
			MemMaxBytes: int64(i+1) << 29, CPUSeconds: 60})
	}
	r.Host = []HostUsage{
		{Stage: "train", Attempts: []int{1, 2}, PeakMemBytes: 1288490189, MeanMemBytes: 900 << 20, MemLimitBytes: 4 << 30,
			CPUSeconds: 192.4, CPULimitMilli: 2000, Samples: 170, Curve: curve},
		{Stage: "validate", Attempts: []int{1}, PeakMemBytes: 3 << 19, MeanMemBytes: 1 << 20, CPUSeconds: 0.42, Samples: 1,
			Curve: []HostPoint{{At: r.Started.Truncate(time.Minute), Attempt: 1, MemMaxBytes: 1 << 20, CPUSeconds: 0.42}}},
	}
	return r
}

// A run report has a stage's peak memory, its limit and its CPU time in
// every format: HTML, Markdown, PDF and JSON.
func TestHostSectionOfARun(t *testing.T) {
	rep := &Report{Runs: []Run{hostRun()}}
	doc, _ := mustHTML(t, rep, Options{})
	rows := tableAfter(t, doc, "Memory and CPU")
	want := [][]string{
		{"stage", "peak memory", "memory limit", "mean memory", "CPU time", "CPU limit", "attempts"},
		{"train", "1.2 GiB", "4 GiB", "900 MiB", "3m12s", "2", "1, 2"},
		{"validate", "1.5 MiB", "none", "1 MiB", "0.42 s", "none", "1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("host table = %q, want %q", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("host table row %d = %q, want %q", i, rows[i], want[i])
		}
	}
	if !strings.Contains(text(doc), "Memory of each stage") {
		t.Error("the HTML report has no memory curve")
	}

	md, _, err := Markdown(rep, Options{}, "r_files")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"## Memory and CPU", "| train | 1.2 GiB | 4 GiB | 900 MiB | 3m12s | 2 | 1, 2 |"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("the Markdown report does not say %q", w)
		}
	}

	pdf := readPDF(t, mustPDF(t, rep, Options{}))
	flat := strings.Join(strings.Fields(pdf.text), " ")
	for _, w := range []string{"Memory and CPU", "1.2 GiB", "3m12s"} {
		if !strings.Contains(flat, w) {
			t.Errorf("the PDF does not say %q", w)
		}
	}

	js, err := JSON(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Runs []struct {
			Host []HostUsage `json:"host_usage"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	h := back.Runs[0].Host
	if len(h) != 2 || h[0].Stage != "train" || h[0].PeakMemBytes != 1288490189 || h[0].MemLimitBytes != 4<<30 ||
		h[0].CPUSeconds != 192.4 || h[0].CPULimitMilli != 2000 || len(h[0].Curve) != 3 || h[1].CPUSeconds != 0.42 {
		t.Errorf("JSON host_usage = %+v", h)
	}
}

// A run without records says why; its JSON has an empty list, not null.
func TestHostSectionWithoutRecords(t *testing.T) {
	r := demoRun("20261129-100000-c0c0c0", 0.003, 4)
	doc, _ := mustHTML(t, &Report{Runs: []Run{r}}, Options{})
	if !strings.Contains(text(doc), "No stage of the run has a record of its memory and CPU time") {
		t.Error("a run without host records does not say so")
	}
	js, err := JSON(&Report{Runs: []Run{r}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"host_usage":[]`) {
		t.Errorf("JSON without host records: %s", js)
	}
}

// A comparison lists each run's stages with their peak memory and CPU
// time.
func TestHostSectionOfAComparison(t *testing.T) {
	rep := comparison(3)
	rep.Runs[1].Host = hostRun().Host
	doc, _ := mustHTML(t, rep, Options{})
	rows := tableAfter(t, doc, "Memory and CPU")
	if len(rows) != 3 || rows[1][0] != rep.Runs[1].ID || rows[1][1] != "train" || rows[1][2] != "1.2 GiB" || rows[1][4] != "3m12s" {
		t.Errorf("comparison host table = %q", rows)
	}
}
