package app

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine"
)

// curvesTemplate prints a loss curve and an accuracy; when fail is set its
// train stage says why on stderr and exits 3.
const curvesTemplate = `name: curves
version: "2"
objective: {metric: acc, goal: max}
params:
  fail: {type: bool, default: false}
  note: {type: string, default: plain}
stages:
  - name: train
    command: [sh, -c, 'for i in 1 2 3 4 5; do echo "{\"step\": $i, \"loss\": 0.$((9-i)), \"acc\": 0.$((4+i))}"; done; echo "loss is NaN" >&2; [ "${params.fail}" = false ] || exit 3']
`

func TestReportCommand(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, curvesTemplate)
	code, out, errOut := niuma(t, "run", tmpl, "--set", `note=<script>alert(1)</script> "q" & a`, "--wait")
	require.Equal(t, 0, code, errOut)
	ok := runID(t, out)
	code, out, _ = niuma(t, "run", tmpl, "--set", "fail=true", "--wait")
	require.Equal(t, 1, code)
	failed := runID(t, out)
	dir := t.TempDir()

	t.Run("HTML of one run", func(t *testing.T) {
		p := filepath.Join(dir, "r.html")
		code, out, errOut := niuma(t, "report", ok, "-o", p)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "wrote "+p)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		s := string(b)
		require.Contains(t, s, "acc = 0.9 (best, at step 5; final 0.9)")
		require.Contains(t, s, "&lt;script&gt;alert(1)&lt;/script&gt; &#34;q&#34; &amp; a")
		require.NotContains(t, s, "<script>")
	})
	t.Run("Markdown with figures of a failed run", func(t *testing.T) {
		p := filepath.Join(dir, "f.md")
		code, _, errOut := niuma(t, "report", failed, "-o", p)
		require.Equal(t, 0, code, errOut)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Contains(t, string(b), "## Logs of failed stages")
		require.Contains(t, string(b), "loss is NaN")
		require.FileExists(t, filepath.Join(dir, "f_files", "fig01-acc.png"))
	})
	t.Run("CSV of a comparison", func(t *testing.T) {
		p := filepath.Join(dir, "all.csv")
		code, _, errOut := niuma(t, "report", ok, failed, "--format", "csv", "-o", p)
		require.Equal(t, 0, code, errOut)
		f, err := os.Open(p)
		require.NoError(t, err)
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		require.NoError(t, err)
		require.Len(t, rows, 1+2*2*5, "a header and 5 steps of loss and acc per run")
	})
	t.Run("PDF of a comparison", func(t *testing.T) {
		p := filepath.Join(dir, "c.pdf")
		code, _, errOut := niuma(t, "report", ok, failed, "-o", p, "--page", "letter")
		require.Equal(t, 0, code, errOut)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(b), "%PDF-"))
	})
	t.Run("JSON to standard output", func(t *testing.T) {
		code, out, errOut := niuma(t, "report", ok, "--format", "json", "-o", "-")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, `"objective":{"metric":"acc","goal":"max"}`)
	})
}

func TestReportRefusesBadUsage(t *testing.T) {
	tempHome(t)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no run", []string{"report"}, 2, "report needs at least one RUN"},
		{"unknown format", []string{"report", "x", "--format", "docx"}, 2, "--format docx: use html, pdf, md, csv or json"},
		{"unknown page", []string{"report", "x", "--page", "a3"}, 2, "--page a3: use a4 or letter"},
		{"unknown run", []string{"report", "nope", "-o", "-"}, 1, `no run "nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := niuma(t, tc.args...)
			require.Equal(t, tc.code, code)
			require.Contains(t, errOut, tc.want)
		})
	}
}

func TestReportAnomaliesPairActions(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	got := reportAnomalies([]engine.AnomalyInfo{
		{Stage: "train", Kind: "grad_explosion", Message: "gradients are exploding.", At: at},
		{Stage: "train", Kind: "divergence", Message: "loss is diverging.", Fix: "lower lr", At: at},
		{Stage: "train", Kind: "action_retry", Message: "retrying after divergence with lr: 1 → 0.1", At: at},
	})
	require.Len(t, got, 2)
	require.Equal(t, "flagged", got[0].Action)
	require.Equal(t, "loss is diverging. Fix: lower lr", got[1].Message)
	require.Equal(t, "retrying after divergence with lr: 1 → 0.1", got[1].Action)
}

// A run on simulated GPUs: the report has a GPU section with curves, drawn
// from the records the sampler stored, and says "simulated" in the section,
// the curves and the provenance.
func TestReportOfARunOnSimulatedGPUs(t *testing.T) {
	tempHome(t)
	t.Setenv("NIUMA_SIMULATE_GPUS", "2xA100-80GB")
	tmpl := writeTemplate(t, `name: gpu-curves
stages:
  - name: train
    gpus: 1
    gpu_memory: 12GiB
    command: [sh, -c, 'for i in 1 2 3; do echo "{\"step\": $i, \"loss\": 0.$((9-i))}"; sleep 0.5; done']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, errOut)
	id := runID(t, out)

	p := filepath.Join(t.TempDir(), "r.html")
	code, _, errOut = niuma(t, "report", id, "-o", p)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	s := string(b)
	require.Contains(t, s, "GPU usage")
	require.Contains(t, s, "pretend telemetry", "the section says the GPUs are simulated")
	require.Contains(t, s, "GPU 0 (simulated)")
	require.Contains(t, s, "(simulated NVIDIA A100-SXM4-80GB, index 0)", "the provenance names the attempt's GPU as simulated")
	require.Contains(t, s, "12288 MiB of 81920", "the run's memory: what it was given")
	require.Contains(t, s, "GPU utilisation (simulated)", "the curves are labelled too")
	require.NotContains(t, s, "No GPU record covers")

	code, out, errOut = niuma(t, "report", id, "--format", "json", "-o", "-")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"simulated":true`)

	code, out, errOut = niuma(t, "show", id)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "GPU 0  NVIDIA A100-SXM4-80GB (simulated)  GPU-")
	require.Contains(t, out, "run's memory 12288 MiB peak")
}

// A run whose template names an image but that ran on the host (the
// image was missing: fallback: local) is not reported as run in it.
func TestReportSaysAFallbackRunUsedNoImage(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, "name: f\nruntime: {kind: docker, image: niuma-test/absent:1, fallback: local}\nstages:\n  - name: a\n    command: [\"true\"]\n")
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, errOut)
	id := runID(t, out)
	require.Contains(t, out, "executor local")
	p := filepath.Join(t.TempDir(), "r.md")
	code, _, errOut = niuma(t, "report", id, "-o", p)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Contains(t, string(b), "none: it ran on the host (the template's fallback: local), not in niuma-test/absent:1")
}
