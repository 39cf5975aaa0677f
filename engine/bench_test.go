package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"niuma/engine/executor"
	"niuma/engine/template"
	"niuma/shepherd"
	"niuma/storage"
)

// The scheduling benchmarks drive the real engine (Drive, Submit, a SQLite
// file) over an executor whose attempts end as soon as they start, so
// that what they measure is the engine's own work per stage: the
// reconciler's passes, the transitions and their transactions, the
// attempt goroutines. A process start per stage comes on top of it with
// the local executor (BenchmarkAttemptTrue in engine/executor/local;
// bench/containment measures the two together).
//
//	go test ./engine -run '^$' -bench 'Chain|Wide' -benchtime 1x -count 3

// BenchmarkChain is a run of n stages, each needing the one before: one
// ready stage at a time, in a run of n.
func BenchmarkChain(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchRun(b, chainYAML(n, true), n, shepherd.Host{}) })
	}
}

// BenchmarkWide is a run of n independent stages of one CPU each on a host
// that gives its stages 2 CPUs: n ready at once, 2 running at a time.
func BenchmarkWide(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			x := benchRun(b, chainYAML(n, false), n, shepherd.Host{CPUMilli: 2000, MemMiB: 1 << 20})
			if x.most > 2 {
				b.Fatalf("%d attempts ran at once on a host of 2 CPUs", x.most)
			}
		})
	}
}

func chainYAML(n int, chain bool) string {
	var s strings.Builder
	s.WriteString("name: bench\nruntime: {kind: local}\nstages:\n")
	for i := range n {
		fmt.Fprintf(&s, "  - name: s%d\n    command: [\"true\"]\n", i)
		if chain && i > 0 {
			fmt.Fprintf(&s, "    needs: [s%d]\n", i-1)
		}
	}
	return s.String()
}

func benchRun(b *testing.B, yaml string, n int, host shepherd.Host) *instantExec {
	tm, err := template.Parse("bench.yaml", []byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	x := &instantExec{}
	var wall time.Duration
	for b.Loop() {
		home := b.TempDir()
		db, err := storage.Open(filepath.Join(home, "niuma.db"))
		if err != nil {
			b.Fatal(err)
		}
		e, err := New(Options{Home: home, Store: db, Executors: []executor.Executor{x}, Host: host,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		driven := make(chan struct{})
		go func() { defer close(driven); _ = e.Drive(ctx) }()
		<-e.Ready()
		sub := e.Subscribe(1024)
		t0 := time.Now()
		info, err := e.Submit(ctx, RunSpec{Template: tm})
		if err != nil {
			b.Fatal(err)
		}
		for ev := range sub.C {
			if ev.Kind == RunChanged && ev.RunID == info.ID && ev.State.Done() {
				if ev.State != Succeeded {
					b.Fatalf("the run ended %s: %s", ev.State, ev.Reason)
				}
				break
			}
		}
		wall += time.Since(t0)
		sub.Close()
		cancel()
		<-driven
		db.Close()
	}
	b.ReportMetric(float64(n*b.N)/wall.Seconds(), "stages/s")
	b.ReportMetric(0, "ns/op")
	return x
}

// instantExec's attempts succeed as soon as they start; it counts the most
// that were started and not yet waited for at once.
type instantExec struct {
	mu         sync.Mutex
	open, most int
}

func (*instantExec) Name() string { return "local" }

func (x *instantExec) Start(context.Context, executor.Job) (executor.Handle, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.open++
	x.most = max(x.most, x.open)
	return &instantHandle{x: x}, nil
}

func (*instantExec) Recover(context.Context, executor.Job, string) (executor.Handle, error) {
	return nil, executor.ErrGone
}

type instantHandle struct {
	x    *instantExec
	once sync.Once
}

func (*instantHandle) Ref() string { return "{}" }

func (h *instantHandle) Wait(context.Context) (executor.Exit, error) {
	h.once.Do(func() {
		h.x.mu.Lock()
		h.x.open--
		h.x.mu.Unlock()
	})
	return executor.Exit{Code: 0}, nil
}

func (*instantHandle) Stop(context.Context, time.Duration) error { return nil }
