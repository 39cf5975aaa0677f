package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// simulatedRun is a run on two simulated GPUs: one with a throttled minute
// and an XID, one whose records are gone.
func simulatedRun() Run {
	r := demoRun("20261129-100000-51a1a7", 0.003, 4)
	g0 := gpuUsage(0, "NVIDIA H100 80GB HBM3", true, r.Started, 5, 4)
	g0.ThrottledSamples, g0.ThrottledMinutes, g0.ThrottleReasons = 12, 1, []string{"sw_thermal_slowdown"}
	g0.XIDs = []XIDEvent{{At: r.Started.Add(2 * time.Minute), Code: 79}}
	g0.Events = []Anomaly{{At: r.Started.Add(3 * time.Minute), Kind: "overheating", Message: "GPU is at 86 °C"}}
	g1 := GPUUsage{Index: 1, Model: "NVIDIA H100 80GB HBM3", Simulated: true, UUID: "GPU-51a1a7ed-0000-4000-8000-000000000001",
		Stages: []string{"train"}, MeanUtil: math.NaN(), PeakUtil: math.NaN(), MeanMemMiB: math.NaN(), PeakMemMiB: math.NaN(),
		MeanTempC: math.NaN(), PeakTempC: math.NaN(), MeanPowerW: math.NaN(), PeakPowerW: math.NaN()}
	r.GPUs = []GPUUsage{g0, g1}
	return r
}

func TestGPUSectionOfASimulatedRun(t *testing.T) {
	rep := &Report{Runs: []Run{simulatedRun()}}
	doc, _ := mustHTML(t, rep, Options{})
	body := text(doc)
	for _, want := range []string{
		"Simulated GPUs (NIUMA_SIMULATE_GPUS): these figures are pretend telemetry",
		"GPU 0 (simulated)", "GPU 1 (simulated)", "NVIDIA H100 80GB HBM3 (simulated)",
		"12 of 300 readings (sw_thermal_slowdown)", "XID 79", "overheating: GPU is at 86 °C",
		"No GPU record covers the time the run held GPU 1 (simulated)",
		"GPU utilisation (simulated)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the HTML report does not say %q", want)
		}
	}
	rows := tableAfter(t, doc, "GPU usage")
	if len(rows) != 3 || rows[2][1] != "–" || rows[2][5] != "–" {
		t.Errorf("GPU table = %q, want a dash for the GPU without records", rows)
	}
	if got := rows[1][6]; got != "79" {
		t.Errorf("XID column = %q", got)
	}
	// 3 curves of the run, 4 of the GPUs (one line each: GPU 1 has none).
	if n := len(elements(doc, "svg")); n != 7 {
		t.Errorf("%d charts, want 7", n)
	}

	md, files, err := Markdown(rep, Options{}, "r_files")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "GPU 0 (simulated)") || !strings.Contains(string(md), "pretend telemetry") {
		t.Error("the Markdown report does not label the GPUs simulated")
	}
	if len(files) != 7 {
		t.Errorf("%d figures, want 7", len(files))
	}

	pdf := readPDF(t, mustPDF(t, rep, Options{}))
	flat := strings.Join(strings.Fields(pdf.text), " ")
	for _, want := range []string{"GPU 0 (simulated)", "pretend telemetry", "XID 79"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the PDF does not say %q", want)
		}
	}

	js, err := JSON(rep)
	if err != nil {
		t.Fatalf("JSON with unreported (NaN) GPU figures: %v", err)
	}
	var back struct {
		Runs []struct {
			GPUs []struct {
				Simulated bool   `json:"simulated"`
				MeanUtil  any    `json:"mean_util_percent"`
				XIDs      []any  `json:"xids"`
				Curve     []any  `json:"curve"`
				UUID      string `json:"uuid"`
			} `json:"gpus"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	gs := back.Runs[0].GPUs
	if len(gs) != 2 || !gs[0].Simulated || !gs[1].Simulated || gs[1].MeanUtil != "NaN" || len(gs[0].XIDs) != 1 || len(gs[0].Curve) != 5 {
		t.Errorf("JSON GPUs = %+v", gs)
	}
}

func TestGPUSectionOfACPURun(t *testing.T) {
	r := demoRun("20261129-100000-c0c0c0", 0.003, 4)
	r.GPUs = nil
	doc, _ := mustHTML(t, &Report{Runs: []Run{r}}, Options{})
	if !strings.Contains(text(doc), "The run used no GPU.") {
		t.Error("a CPU run's report says it used no GPU")
	}
	if n := len(elements(doc, "svg")); n != 3 {
		t.Errorf("%d charts, want the 3 curves only", n)
	}
}

func TestGPUSectionOfAComparison(t *testing.T) {
	rep := comparison(3)
	rep.Runs[0].GPUs = simulatedRun().GPUs[:1]
	rep.Runs[2].GPUs = nil
	doc, _ := mustHTML(t, rep, Options{})
	rows := tableAfter(t, doc, "GPU usage")
	if len(rows) != 4 {
		t.Fatalf("GPU table = %q, want a row per run", rows)
	}
	found := map[string]string{}
	for _, row := range rows[1:] {
		found[row[0]] = row[1]
	}
	if got := found[rep.Runs[0].ID]; got != "GPU 0 (simulated) NVIDIA H100 80GB HBM3" {
		t.Errorf("run 0's GPU = %q", got)
	}
	if got := found[rep.Runs[2].ID]; got != "none" {
		t.Errorf("a run without GPUs = %q", got)
	}
	body := text(doc)
	if !strings.Contains(body, "pretend telemetry") || !strings.Contains(body, "GPU utilisation (simulated)") {
		t.Error("a comparison with a simulated run says so")
	}
}
