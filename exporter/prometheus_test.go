package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/executor/local"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/storage"
)

// prometheusBinary is Debian's prometheus, which make deps installs. Only
// where it cannot be installed does the test skip; in CI it must run.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is missing: `make deps` installs Debian's prometheus package")
		}
		t.Skip("prometheus is not installed (Debian: apt-get install prometheus, which `make deps` does); " +
			"the exporter's real-server test needs it")
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// A real Prometheus server scrapes a real engine's exporter (simulated
// GPUs, one run on a GPU and one waiting for the memory it holds) and answers PromQL
// about both through its HTTP API.
func TestARealPrometheusScrapesNiuma(t *testing.T) {
	bin := prometheusBinary(t)
	home := t.TempDir()
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	sim, err := gpumon.NewSimulated("2xA100-80GB", gpumon.SimOptions{Seed: 1})
	require.NoError(t, err)
	sampler := gpumon.NewSampler(sim, gpumon.SamplerOptions{Interval: 200 * time.Millisecond})
	eng, err := engine.New(engine.Options{Home: home, Store: db, Executors: []executor.Executor{local.New()},
		GPUs: sampler, PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	driven := make(chan struct{})
	go func() { defer close(driven); _ = eng.Drive(ctx) }()
	go func() { _ = sampler.Run(ctx) }()
	t.Cleanup(func() { stop(); <-driven })
	<-eng.Ready()

	submit := func(yaml string) engine.RunInfo {
		tm, err := template.Parse("t.yaml", []byte(yaml))
		require.NoError(t, err)
		info, err := eng.Submit(context.Background(), engine.RunSpec{Template: tm})
		require.NoError(t, err)
		return info
	}
	holder := submit("name: holder\nstages:\n  - name: train\n    gpus: 1\n    gpu_memory: 20GiB\n    command: [sh, -c, 'echo \"{\\\"step\\\": 1, \\\"loss\\\": 0.5}\"; sleep 60']\n")
	// The waiting run comes once the holder has its GPU, so that it waits
	// for the memory the holder keeps.
	require.Eventually(t, func() bool {
		r, err := eng.Run(context.Background(), holder.ID)
		return err == nil && r.Stages[0].State == engine.Running
	}, 30*time.Second, 20*time.Millisecond, "the holder runs")
	submit("name: waits\nstages:\n  - name: train\n    gpus: 2\n    gpu_memory: 70GiB\n    command: [\"true\"]\n")
	submit("name: quick\nstages:\n  - name: prep\n    command: [\"true\"]\n") // a finished stage: a duration
	t.Cleanup(func() { _ = eng.Cancel(context.Background(), holder.ID) })

	addr, err := Serve(ctx, "127.0.0.1:0", New(eng, Options{}).Handler())
	require.NoError(t, err)

	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: niuma\n    static_configs:\n      - targets: ['%s']\n", addr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644))
	web := "127.0.0.1:" + strconv.Itoa(freePort(t))
	prom := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web, "--log.level=warn")
	out, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	prom.Stdout, prom.Stderr = out, out
	require.NoError(t, prom.Start())
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		_ = prom.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})

	// query asks Prometheus, through its HTTP API, for the value of one
	// PromQL expression.
	query := func(q string) (float64, bool) {
		resp, err := http.Get("http://" + web + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil || r.Status != "success" || len(r.Data.Result) != 1 {
			return 0, false
		}
		s, _ := r.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	checkDashboard(t, web)
	for _, tc := range []struct {
		q    string
		want func(float64) bool
	}{
		{`up{job="niuma"}`, func(v float64) bool { return v == 1 }},
		{`niuma_queue_stages{reason="gpu_memory"}`, func(v float64) bool { return v == 1 }},
		{`niuma_queue_stages{reason="never_fits"}`, func(v float64) bool { return v == 0 }},
		{`sum(niuma_gpu_run_memory_bytes{simulated="true"})`, func(v float64) bool { return v == 20*1024*1024*1024 }},
		{`count(niuma_gpu_info{simulated="true",source="simulated"})`, func(v float64) bool { return v == 2 }},
		{`sum(niuma_runs{state=~"queued|running"})`, func(v float64) bool { return v == 2 }},
		{`sum(niuma_stage_duration_seconds_count{template="quick",stage="prep",state="succeeded"})`, func(v float64) bool { return v == 1 }},
		{`max(niuma_gpu_utilization_ratio) > 0`, func(v float64) bool { return v > 0 && v <= 1 }},
		{`niuma_metric_points_ingested_total`, func(v float64) bool { return v >= 1 }},
	} {
		var got float64
		var ok bool
		require.Eventually(t, func() bool {
			got, ok = query(tc.q)
			return ok && tc.want(got)
		}, 60*time.Second, 250*time.Millisecond, "PromQL %s: last answer %v (answered: %v)", tc.q, got, ok)
	}
}

// checkDashboard asks the real server to evaluate every expression of the
// sample Grafana dashboard (docs/grafana), so that a renamed metric or a
// typo in it fails here: each must parse, and each metric it names must be
// one the exporter serves.
func checkDashboard(t *testing.T, web string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "grafana", "niuma-dashboard.json"))
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.Panels)
	served := map[string]bool{}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + web + "/api/v1/label/__name__/values")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r struct {
			Data []string `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil {
			return false
		}
		for _, n := range r.Data {
			served[n] = true
		}
		return served["niuma_runs"] && served["niuma_stage_duration_seconds_bucket"]
	}, 60*time.Second, 250*time.Millisecond, "the server has scraped niuma")
	name := regexp.MustCompile(`\bniuma_[a-z_]+`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			expr := strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m")
			resp, err := http.Get("http://" + web + "/api/v1/query?query=" + url.QueryEscape(expr))
			require.NoError(t, err)
			var r struct {
				Status string `json:"status"`
				Error  string `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
			resp.Body.Close()
			require.Equal(t, "success", r.Status, "panel %q: %s: %s", p.Title, tg.Expr, r.Error)
			for _, n := range name.FindAllString(expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count")
				require.True(t, served[n] || served[base+"_bucket"], "panel %q names %s, which Niuma does not serve", p.Title, n)
			}
		}
	}
}
