package exporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics in Prometheus' exposition format, and a line
// saying where the metrics are at /.
func (x *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(x.Registry(), promhttp.HandlerOpts{ErrorLog: nil, Timeout: x.opts.Timeout + time.Second}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "Niuma's Prometheus metrics are at /metrics")
	})
	return mux
}

// Serve listens on addr (host:port; port 0 picks a free one) and serves h
// until ctx ends. It returns the address it listens on, or why it cannot.
func Serve(ctx context.Context, addr string, h http.Handler) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics on %s: %w (is another process using the port? pick another with --metrics-addr)", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = ln.Close()
		}
	}()
	return ln.Addr(), nil
}
