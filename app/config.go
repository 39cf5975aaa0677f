package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/executor/docker"
	"niuma/engine/executor/local"
	"niuma/gpumon"
	"niuma/storage"
)

// Home is the data directory: $NIUMA_HOME, else $XDG_DATA_HOME/niuma, else
// ~/.local/share/niuma. It holds niuma.db and runs/<run-id>/.
func Home() (string, error) {
	if h := os.Getenv("NIUMA_HOME"); h != "" {
		return filepath.Abs(h)
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "niuma"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("cannot find a data directory: set NIUMA_HOME")
	}
	return filepath.Join(home, ".local", "share", "niuma"), nil
}

// stack is everything a command needs, opened once.
type stack struct {
	home    string
	store   *storage.DB
	engine  *engine.Engine
	docker  *docker.Executor // nil when no Docker client could be configured
	gpus    gpumon.Opened
	sampler *gpumon.Sampler
	logger  *slog.Logger
}

// open opens the data directory, its database and an engine over them.
// The engine's loop is not started: commands that drive runs call its Run.
func open(logOut io.Writer) (*stack, error) {
	home, err := Home()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(home, "runs"), 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", home, err)
	}
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if os.Getenv("NIUMA_DEBUG") != "" {
		logger = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	execs := []executor.Executor{local.New()}
	var dx *docker.Executor
	// The docker executor is there whether or not a daemon answers now:
	// its stages wait, queued, until one does. Only a client that cannot
	// even be configured (a malformed DOCKER_HOST) leaves it out.
	if api, err := docker.NewMoby(); err == nil {
		dx = docker.New(api, home)
		dx.OnPull = pullProgress(logOut)
		execs = append(execs, dx)
	} else {
		logger.Warn("the docker executor is unavailable", "err", err)
	}

	// Processes in Niuma's containers are traced to their runs through the
	// containers' labels. A nil *docker.Executor must not become a non-nil
	// interface, hence the variable.
	var labeler gpumon.ContainerLabeler
	if dx != nil {
		labeler = dx
	}

	// GPUs: NVML when it initialises; simulated GPUs when asked for
	// ($NIUMA_SIMULATE_GPUS) and no real one is present; else none, with
	// the reason. The sampler is the one picture the engine, the board
	// and the sentinel read.
	// Local stages are traced through their process groups, which the
	// engine reports to the same resolver as it starts and adopts them.
	owners := gpumon.NewOwners(labeler)
	gpus, err := gpumon.Open(context.Background(), gpumon.Config{
		NVML: gpumon.NVMLOptions{Owners: owners, Logger: logger}})
	if err != nil {
		db.Close()
		return nil, err
	}
	if gpus.Note != "" {
		logger.Warn(gpus.Note)
	}
	var eng *engine.Engine // the sampler starts (in drive) only once eng is set
	sampler := gpumon.NewSampler(gpus.Source, gpumon.SamplerOptions{
		OnSample: func(snap gpumon.Snapshot) { eng.ObserveGPUs(context.Background(), snap) },
		Prune: func(ctx context.Context, before time.Time) error {
			_, err := db.DeleteGPUSamplesBefore(ctx, before)
			return err
		},
		Store: func(ctx context.Context, ms []gpumon.Minute) error {
			out := make([]storage.GPUSample, len(ms))
			for i, m := range ms {
				out[i] = storage.GPUSample(m)
			}
			return db.AddGPUSamples(ctx, out)
		},
		Logger: logger,
	})
	eng, err = engine.New(engine.Options{
		Home:      home,
		Store:     db,
		Executors: execs,
		GPUs:      sampler,
		Logger:    logger,
		Owners:    owners,
	})
	if err != nil {
		gpus.Close()
		db.Close()
		return nil, err
	}
	return &stack{home: home, store: db, engine: eng, docker: dx, gpus: gpus, sampler: sampler, logger: logger}, nil
}

func (s *stack) close() {
	_ = s.gpus.Close()
	s.store.Close()
}

// drive runs the engine loop until ctx ends; done is closed when it has
// stopped (attempts keep running; metrics are flushed).
func (s *stack) drive(ctx context.Context) (done <-chan struct{}) {
	ch := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.sampler.Run(ctx) // stores the unfinished minute when ctx ends
	}()
	if s.gpus.NVML != nil {
		go func() {
			if err := s.gpus.NVML.WatchHealth(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("GPU health watch stopped", "err", err)
			}
		}()
	}
	go func() {
		defer close(ch)
		if err := s.engine.Drive(ctx); err != nil && !errors.Is(err, context.Canceled) {
			slog.Error("engine stopped", "err", err)
		}
		wg.Wait()
	}()
	return ch
}
