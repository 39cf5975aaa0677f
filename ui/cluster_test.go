package ui

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/require"
)

func TestClusterPageShowsNodesAndJobs(t *testing.T) {
	newTestApp(t)
	w := test.NewWindow(nil)
	t.Cleanup(w.Close)
	info := ClusterInfo{FreeGPUs: 3, Partition: "gpu",
		Nodes: []ClusterNode{
			{Name: "gpu01", State: "mixed", Partitions: []string{"gpu"}, Default: true, Usable: true, CPUs: 32, CPUsAlloc: 8,
				MemoryMiB: 256000, MemAlloc: 64000, GPUs: 4, GPUsAlloc: 1},
			{Name: "gpu02", State: "drained", Partitions: []string{"gpu"}, CPUs: 32, GPUs: 4, MemoryMiB: 256000, Reason: "fan broken"}},
		Jobs: []ClusterJob{
			{ID: "4211", State: "PENDING", Partition: "gpu", GPUs: 2, Waiting: "the GPUs it asks for are in use (Slurm: Resources)",
				RunID: "r1", Stage: "train", Attempt: 1},
			{ID: "4212", State: "RUNNING", Partition: "gpu", GPUs: 1, Nodes: "gpu01"}}}
	b := &fakeBackend{}
	runs := NewMainView(b, w)
	s := NewShell(b, runs, Options{Cluster: func(context.Context) (ClusterInfo, error) { return info, nil }}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	w.Resize(fyne.NewSize(1200, 780))
	var names []string
	for _, it := range s.tabs.Items {
		names = append(names, it.Text)
	}
	require.Equal(t, []string{"Board", "Runs", "Archive", "Cluster", "Templates", "Settings"}, names)

	s.cluster.Reload(context.Background())
	got := texts(s.cluster.content)
	for _, want := range []string{"gpu01", "mixed", "gpu*", "1/4", "8/32", "62 GiB/250 GiB", "drained", "fan broken",
		"4211", "pending", "r1/train #1", "the GPUs it asks for are in use (Slurm: Resources)", "not Niuma's", "on gpu01"} {
		require.Contains(t, got, want)
	}
	require.Contains(t, s.cluster.status.Text, "Slurm: 2 nodes, 3 GPU(s) free in partition gpu")

	// A job of a run opens the run.
	var opened string
	s.cluster.onOpen = func(id string) { opened = id }
	s.cluster.Reload(context.Background())
	for _, o := range s.cluster.jobs.Objects {
		if row, ok := o.(*fyne.Container); ok {
			if b, ok := row.Objects[4].(interface{ Tapped(*fyne.PointEvent) }); ok {
				b.Tapped(&fyne.PointEvent{})
			}
		}
	}
	require.Equal(t, "r1", opened)

	// No Slurm: the page says why.
	s.cluster.read = func(context.Context) (ClusterInfo, error) {
		return ClusterInfo{}, errors.New("Slurm's tools (sbatch, squeue, sacct) are not installed here")
	}
	s.cluster.Reload(context.Background())
	require.Equal(t, "No cluster to show: Slurm's tools (sbatch, squeue, sacct) are not installed here", s.cluster.status.Text)
	require.Empty(t, s.cluster.jobs.Objects)
}

// httpMetrics is a MetricsServer that listens for real (a stand-in for the
// exporter's handler), so that a taken port is a real refusal.
type httpMetrics struct {
	mu  sync.Mutex
	srv *http.Server
}

func (h *httpMetrics) Serve(addr string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.srv != nil {
		_ = h.srv.Close()
		h.srv = nil
	}
	if addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "niuma_up 1\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	h.srv = srv
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

func TestSettingsServesPrometheusMetrics(t *testing.T) {
	newTestApp(t)
	w := test.NewWindow(nil)
	t.Cleanup(w.Close)
	srv := &httpMetrics{}
	t.Cleanup(func() { _, _ = srv.Serve("") })
	b := &fakeBackend{}
	s := NewShell(b, NewMainView(b, w), Options{Metrics: srv}, w)
	t.Cleanup(s.Close)
	w.SetContent(s.Content())
	show(t, s, "Settings")
	m := s.metrics
	require.Contains(t, texts(s.tabs.Selected().Content), "Prometheus metrics")
	require.Equal(t, "Not serving. Type an address and press Serve (or Enter).", m.status.Text)

	m.addr.SetText("127.0.0.1:0")
	w.Canvas().Focus(m.addr)
	pressKey(w, fyne.KeyReturn) // Enter serves
	require.Regexp(t, `^Serving http://127\.0\.0\.1:\d+/metrics$`, m.status.Text)
	resp, err := http.Get("http://" + m.serving + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "niuma_up 1\n", string(body))
	require.Equal(t, "127.0.0.1:0", fyne.CurrentApp().Preferences().String(prefMetricsAddr), "the choice is kept for next time")

	// A port another program holds is refused with what to do.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	m.addr.SetText(taken.Addr().String())
	tap(m.serve)
	require.Contains(t, m.status.Text, "could not serve on "+taken.Addr().String())
	require.Contains(t, m.status.Text, "Pick another port")
	require.True(t, m.stop.Disabled())

	m.addr.SetText("127.0.0.1:0")
	tap(m.serve)
	at := m.serving
	tap(m.stop)
	require.Equal(t, "", m.serving)
	_, err = http.Get("http://" + at + "/metrics")
	require.Error(t, err, "stopped")

	// The environment's address is served at start and wins.
	fyne.CurrentApp().Preferences().SetString(prefMetricsAddr, taken.Addr().String())
	s2 := NewShell(b, NewMainView(b, w), Options{Metrics: srv, MetricsAddr: "127.0.0.1:0"}, w)
	t.Cleanup(s2.Close)
	s2.metrics.start(s2.opts.MetricsAddr)
	require.Regexp(t, `^Serving http://127\.0\.0\.1:\d+/metrics$`, s2.metrics.status.Text)
}
