package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/executor/docker"
	"niuma/engine/executor/slurm"
	"niuma/engine/sandbox"
	"niuma/gpumon"
	"niuma/printable"
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
	home      string
	store     *storage.DB
	engine    *engine.Engine
	docker    *docker.Executor // nil when no Docker client could be configured
	slurm     *slurm.Executor  // nil when Slurm's tools are not installed; slurmNote says so
	slurmNote string
	// processes says how local attempts' processes are found, limited and
	// ended (local.Executor.Mode): the board shows it, as niuma doctor does.
	processes string
	settings  Settings
	gpus      gpumon.Opened
	sampler   *gpumon.Sampler
	logger    *slog.Logger
	driveErrV error // set before drive's done is closed
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
	db, err := openArchive(home)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if os.Getenv("NIUMA_DEBUG") != "" {
		logger = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	settings, err := loadSettings(home)
	if err != nil {
		db.Close()
		return nil, err
	}
	logCap, err := logCapSetting()
	if err != nil {
		db.Close()
		return nil, err
	}
	lx := localExecutor()
	lx.LogCap = logCap
	execs := []executor.Executor{lx}
	// The slurm executor is there wherever Slurm's tools are; its stages
	// wait, queued, while the controller does not answer.
	sx, slurmNote := slurmExecutor(home, settings.Slurm)
	if sx != nil {
		execs = append(execs, sx)
	}
	var dx *docker.Executor
	// The docker executor is there whether or not a daemon answers now:
	// its stages wait, queued, until one does. Only a client that cannot
	// even be configured (a malformed DOCKER_HOST) leaves it out.
	if api, err := docker.NewMoby(); err == nil {
		dx = docker.New(api, home)
		dx.OnPull = pullProgress(logOut)
		dx.LogCap = logCap
		if err := containerSettings(dx); err != nil {
			db.Close()
			return nil, err
		}
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
		// The per-minute records of the stages' host use (memory, CPU
		// time) are kept as long as the GPU records.
		Prune: func(ctx context.Context, before time.Time) error {
			_, err := db.DeleteGPUSamplesBefore(ctx, before)
			_, herr := db.DeleteHostSamplesBefore(ctx, before)
			return errors.Join(err, herr)
		},
		Store:  func(ctx context.Context, ms []gpumon.Minute) error { return engine.RecordGPUMinutes(ctx, db, ms) },
		Logger: logger,
	})
	policy, host, err := settings.Shepherd.placement()
	if err != nil {
		gpus.Close()
		db.Close()
		return nil, err
	}
	eng, err = engine.New(engine.Options{
		Home:      home,
		Store:     db,
		Executors: execs,
		GPUs:      sampler,
		Logger:    logger,
		Owners:    owners,
		Policy:    policy,
		Host:      host,
		Machine:   machineArbiter(),
	})
	if err != nil {
		gpus.Close()
		db.Close()
		return nil, err
	}
	return &stack{home: home, store: db, engine: eng, docker: dx, slurm: sx, slurmNote: slurmNote, processes: lx.Mode(), settings: settings,
		gpus: gpus, sampler: sampler, logger: logger}, nil
}

// containerSettings applies the user's settings of the containers'
// sandbox: NIUMA_CONTAINER_ROOT=1 lets templates run containers as root,
// NIUMA_CONTAINER_PIDS_LIMIT=N sets how many processes and threads a
// container may hold (templates may only lower it).
func containerSettings(dx *docker.Executor) error {
	switch v := os.Getenv(sandbox.RootSetting); v {
	case "", "0":
	case "1":
		dx.AllowRoot = true
	default:
		return fmt.Errorf("%s=%s: set it to 1 to let templates run containers as root, or leave it unset", sandbox.RootSetting, printable.Cut(v, 32))
	}
	if v := os.Getenv(sandbox.PidsSetting); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s=%s: give a positive number of processes and threads per container, e.g. %d (the default)",
				sandbox.PidsSetting, printable.Cut(v, 32), sandbox.DefaultPidsLimit)
		}
		dx.PidsLimit = n
	}
	return nil
}

func (s *stack) close() {
	_ = s.gpus.Close()
	s.store.Close()
}

// driveErr is why the engine stopped driving, once done is closed: nil
// after ctx ended, else (e.g.) a damaged archive it refused to own.
func (s *stack) driveErr() error { return s.driveErrV }

// drive runs the engine loop until ctx ends or the engine gives up (a
// damaged archive: driveErr says why); done is closed when it has stopped
// (attempts keep running; metrics are flushed).
func (s *stack) drive(parent context.Context) (done <-chan struct{}) {
	ctx, cancel := context.WithCancel(parent)
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
		defer cancel()
		if err := s.engine.Drive(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.driveErrV = err
			slog.Error("engine stopped", "err", err)
			cancel() // the sampler serves the engine: it stops with it
		}
		wg.Wait()
	}()
	return ch
}
