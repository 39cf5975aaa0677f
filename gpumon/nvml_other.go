//go:build !linux || !cgo

package gpumon

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// NVMLOptions tunes an NVML source; see the Linux build.
type NVMLOptions struct {
	SlowEvery time.Duration
	Owners    OwnerResolver
	OnHealth  func(HealthEvent)
	Logger    *slog.Logger
	Now       func() time.Time
}

// NVML is unavailable in this build: NVML needs Linux and cgo.
type NVML struct{}

// OpenNVML always fails in this build, saying why.
func OpenNVML(NVMLOptions) (*NVML, error) {
	return nil, errors.New("GPU telemetry is unavailable: this build of niuma has no NVML support (it needs Linux and cgo)")
}

// Driver implements the Linux build's method.
func (*NVML) Driver() string { return "" }

// Close implements the Linux build's method.
func (*NVML) Close() error { return nil }

// Snapshot implements Source.
func (*NVML) Snapshot(context.Context) (Snapshot, error) {
	return Snapshot{}, errors.New("GPU snapshot: NVML is unavailable in this build")
}

// WatchHealth implements the Linux build's method.
func (*NVML) WatchHealth(context.Context) error { return nil }
