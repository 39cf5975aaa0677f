//go:build !nowindow

package app

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"

	"niuma/engine/executor/slurm"
	"niuma/ui"
)

// windowMetrics serves Prometheus metrics for the window's Settings page:
// one server at a time, moved or stopped when the user says so.
type windowMetrics struct {
	mu     sync.Mutex
	parent context.Context
	s      *stack
	stop   context.CancelFunc
	addr   string // the address asked for, served now
	at     string // where it listens
}

// Serve implements ui.MetricsServer.
func (m *windowMetrics) Serve(addr string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != nil && addr == m.addr {
		return m.at, nil // already there
	}
	if m.stop != nil {
		m.stop()
		m.stop, m.addr, m.at = nil, "", ""
	}
	if addr == "" {
		return "", nil
	}
	// The server just stopped may hold the port for a moment.
	deadline := time.Now().Add(2 * time.Second)
	for {
		ctx, cancel := context.WithCancel(m.parent)
		at, err := m.s.serveMetrics(ctx, addr)
		if err == nil {
			m.stop, m.addr, m.at = cancel, addr, at.String()
			return m.at, nil
		}
		cancel()
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner // the window says what to do itself
			}
			return "", err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterReader reads the Slurm cluster for the window's Cluster page
// through the slurm executor's read API, as `niuma cluster` does; nil when
// Slurm's tools are not installed (the page is then not shown).
func (s *stack) clusterReader() func(ctx context.Context) (ui.ClusterInfo, error) {
	x := s.slurm
	if x == nil {
		return nil
	}
	part := s.settings.Slurm.Partition
	return func(ctx context.Context) (ui.ClusterInfo, error) {
		nodes, err := x.Nodes(ctx)
		if err != nil {
			return ui.ClusterInfo{}, err
		}
		jobs, err := x.Jobs(ctx, "")
		if err != nil {
			return ui.ClusterInfo{}, err
		}
		info := ui.ClusterInfo{FreeGPUs: slurm.FreeGPUs(nodes, part), Partition: part}
		for _, n := range nodes {
			info.Nodes = append(info.Nodes, ui.ClusterNode{Name: n.Name, State: n.State, Partitions: n.Partitions, Default: n.Default,
				Usable: n.Usable(), CPUs: n.CPUs, CPUsAlloc: n.CPUsAlloc, MemoryMiB: n.MemoryMiB, MemAlloc: n.MemAlloc,
				GPUs: n.GPUs, GPUsAlloc: n.GPUsAlloc, Reason: strings.TrimSpace(n.Reason)})
		}
		for _, j := range jobs {
			info.Jobs = append(info.Jobs, ui.ClusterJob{ID: j.ID, Name: j.Name, State: j.State, Partition: j.Partition, Nodes: j.Nodes,
				GPUs: j.GPUs, Waiting: j.Waiting, RunID: j.RunID, Stage: j.Stage, Attempt: j.Attempt})
		}
		return info, nil
	}
}
