package app

import (
	"context"
	"net"
	"os"
	"strconv"

	"niuma/exporter"
)

// envMetricsAddr names the environment variable with the address the
// process that drives runs serves Prometheus metrics on (the window reads
// it; `niuma engine --metrics-addr` defaults to it). Empty: no metrics.
const envMetricsAddr = "NIUMA_METRICS_ADDR"

// envMetricsPerRun, when "1" or "true", adds series labelled with run IDs.
const envMetricsPerRun = "NIUMA_METRICS_PER_RUN"

// serveMetrics serves /metrics on addr until ctx ends and returns the
// address it listens on.
func (s *stack) serveMetrics(ctx context.Context, addr string) (net.Addr, error) {
	perRun, _ := strconv.ParseBool(os.Getenv(envMetricsPerRun))
	x := exporter.New(s.engine, exporter.Options{PerRun: perRun, Logger: s.logger})
	return exporter.Serve(ctx, addr, x.Handler())
}
