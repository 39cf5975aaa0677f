package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"niuma/engine"
	"niuma/engine/executor/docker"
	"niuma/engine/template"
	"niuma/printable"
	"niuma/storage"
)

func (c *cli) run(ctx context.Context, args []string) error {
	fs := c.flags("run")
	var sets multiFlag
	fs.Var(&sets, "set", "set a parameter: NAME=VALUE (repeatable)")
	executorName := fs.String("executor", "", "local, docker or slurm (default: the template's runtime)")
	priority := fs.Int("priority", 0, "higher runs first")
	seed := fs.Int64("seed", 0, "the run's global seed (default: derived from the template, values, code and data, so that a rerun is recognised)")
	wait := fs.Bool("wait", false, "block until the run ends; exit non-zero unless it succeeded")
	allowDup := fs.Bool("allow-duplicate", false, "run even when a run with the same fingerprint already succeeded")
	reuse := fs.Bool("reuse", false, "when a run with the same fingerprint already succeeded, print its ID instead of running")
	sweep := addSweepFlags(fs)
	needs := addNeedFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return exitError{code: 2, msg: "run needs exactly one TEMPLATE (see `niuma templates`)"}
	}
	if *allowDup && *reuse {
		return exitError{code: 2, msg: "--allow-duplicate and --reuse contradict each other: give one"}
	}
	var asked engine.RunSpec // what --gpus, --spot and the like ask for
	if err := needs.apply(&asked); err != nil {
		return err
	}
	if err := tooLong("template", maxPathArg, pos[0]); err != nil {
		return err
	}
	values := map[string]string{}
	for _, s := range sets {
		name, val, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return exitError{code: 2, msg: fmt.Sprintf("--set %s: write NAME=VALUE", printable.Shorten(s, 64))}
		}
		if m := printable.TooLong("parameter name", name, maxNameArg); m != "" {
			return exitError{code: 2, msg: "--set: " + m}
		}
		values[name] = val
	}
	home, err := Home()
	if err != nil {
		return err
	}
	t, err := loadTemplate(home, pos[0])
	if err != nil {
		return err
	}
	var runs []template.Values
	if sweep.many() {
		runs, err = sweep.expand(t, values, func(s string) { fmt.Fprintln(c.err, "note:", s) })
		if err != nil {
			return err
		}
	}
	vals, err := t.Resolve(values)
	if err != nil {
		return exitError{code: 2, msg: oneLine(fmt.Errorf("--set: %w", err))}
	}

	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	if (*executorName == "slurm" || (*executorName == "" && t.Runtime.Kind == "slurm")) && s.slurm == nil {
		return exitError{code: 1, msg: "cannot run on Slurm: " + s.slurmNote}
	}
	spec := engine.RunSpec{Template: t, Values: vals, Seed: *seed, Priority: *priority, Executor: *executorName,
		Needs: asked.Needs, Spot: asked.Spot, Share: asked.Share, FlagOnly: asked.FlagOnly}
	if sweep.many() {
		return c.runMany(ctx, s, spec, runs, *allowDup, *reuse, *wait)
	}
	if !*allowDup {
		// Identical inputs give identical results: say where the earlier
		// result is rather than spend the machine on it again.
		prov, err := s.engine.Provenance(ctx, spec)
		if err != nil {
			return err
		}
		dup, found, err := s.engine.FindDuplicate(ctx, prov.Fingerprint)
		if err != nil {
			return err
		}
		switch {
		case found && *reuse:
			fmt.Fprintln(c.out, dup.ID)
			return nil
		case found:
			return exitError{code: 1, msg: fmt.Sprintf("run %s already succeeded with these inputs (same template, values, seed %d, code and data; fingerprint %s): `niuma show %s` has its results; --reuse prints its ID, --allow-duplicate runs again, --seed N runs with another seed",
				dup.ID, prov.Seed, prov.Fingerprint, dup.ID)}
		}
	}
	ectx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	var engineDone <-chan struct{}
	if *wait {
		// Drive the run from this process when no other owns the data dir.
		engineDone = s.drive(ectx)
	}
	info, err := s.engine.Submit(ctx, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "run %s: %s %s, seed %d, executor %s\n", info.ID, t.Name, printable.String(t.Version), info.Seed, info.Executor)
	if info.ExecutorNote != "" {
		fmt.Fprintln(c.err, "note:", printable.String(info.ExecutorNote))
	}
	if !*wait {
		c.ensureEngine(s.home)
		fmt.Fprintf(c.out, "follow it with: niuma show %s   (or niuma logs %s --follow)\n", info.ID, info.ID)
		return nil
	}
	wctx, stopWait := s.whileDriving(ctx, engineDone)
	defer stopWait()
	final, werr := c.waitRun(wctx, s.engine, info.ID)
	stopEngine()
	<-engineDone
	if err := s.driveErr(); err != nil {
		return err
	}
	if err := s.handOver(c); err != nil {
		say(c.err, err.Error())
	}
	if werr != nil {
		if errors.Is(werr, context.Canceled) {
			return exitError{code: 130, msg: fmt.Sprintf("stopped waiting; run %s goes on in the background (niuma cancel %s stops it)", info.ID, info.ID)}
		}
		return werr
	}
	if final.State != engine.Succeeded {
		msg := fmt.Sprintf("run %s %s", final.ID, final.State)
		if final.Error != "" {
			msg += ": " + final.Error
		}
		return exitError{code: 1, msg: msg}
	}
	// A rerun of the same inputs (--allow-duplicate) that ends elsewhere
	// than the earlier one means the workload is not deterministic.
	// The owning engine checks when the run succeeds; checking here too
	// covers an owner that has not got to it yet (it is raised once).
	if _, err := s.engine.CheckReproducible(ctx, final.ID); err != nil {
		say(c.err, err.Error())
	}
	anomalies, err := s.engine.Anomalies(ctx, final.ID)
	if err != nil {
		return err
	}
	for _, a := range anomalies {
		if a.Kind == engine.KindNotReproducible {
			fmt.Fprintf(c.err, "warning: %s\n  fix: %s\n", printable.String(a.Message), printable.String(a.Fix))
		}
	}
	return nil
}

// waitRun follows a run until it ends, printing each stage's changes and,
// at most every few seconds, its latest metrics.
func (c *cli) waitRun(ctx context.Context, eng *engine.Engine, id string) (engine.RunInfo, error) {
	sub := eng.Subscribe(256)
	defer sub.Close()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	seen := map[string]string{}
	lastMetrics := map[string]time.Time{}
	for {
		info, err := eng.Run(ctx, id)
		if err != nil {
			return info, err
		}
		for _, st := range info.Stages {
			line := string(st.State)
			if st.Reason != "" {
				line += ": " + st.Reason
			}
			if st.State == engine.Running && st.MaxAttempts > 1 {
				line += fmt.Sprintf(" (attempt %d of %d)", st.Attempts, st.MaxAttempts)
			}
			if st.State.Done() && !st.StartedAt.IsZero() && !st.FinishedAt.IsZero() {
				line += fmt.Sprintf(" in %s", st.FinishedAt.Sub(st.StartedAt).Round(100*time.Millisecond))
			}
			if seen[st.Name] != line {
				seen[st.Name] = line
				fmt.Fprintf(c.out, "  %-12s %s\n", st.Name, printable.String(line))
			}
		}
		if info.State.Done() {
			fmt.Fprintf(c.out, "run %s %s in %s%s\n", info.ID, info.State, info.Elapsed(time.Now()).Round(100*time.Millisecond), bestOf(ctx, eng, info))
			return info, nil
		}
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case ev, ok := <-sub.C:
			if ok && ev.Kind == engine.Metrics && ev.RunID == id && time.Since(lastMetrics[ev.Stage]) > 3*time.Second {
				lastMetrics[ev.Stage] = time.Now()
				fmt.Fprintln(c.out, fitWidth(fmt.Sprintf("  %-12s %s", ev.Stage, printable.String(formatPoints(ev.Points))), termWidth(c.out)))
			}
			if ok && ev.Kind == engine.Notified && eng.Owner() {
				announce(c.err, ev)
			}
		case <-tick.C:
		}
	}
}

func formatPoints(pts []engine.Point) string {
	if len(pts) == 0 {
		return ""
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Key < pts[j].Key })
	parts := []string{fmt.Sprintf("step %d", pts[0].Step)}
	for _, p := range pts {
		parts = append(parts, fmt.Sprintf("%s=%s", p.Key, formatValue(p.Value)))
	}
	return strings.Join(parts, " ")
}

func formatValue(v float64) string { return fmt.Sprintf("%.4g", v) }

// handOver starts a background engine when this process was driving runs
// that have not finished, so that leaving `--wait` never strands them.
func (s *stack) handOver(c *cli) error {
	if engine.OwnerAlive(s.home) {
		return nil
	}
	infos, err := s.engine.Runs(context.Background(), 0)
	if err != nil {
		return err
	}
	for _, r := range infos {
		if !r.State.Done() {
			c.ensureEngine(s.home)
			return nil
		}
	}
	return nil
}

// ensureEngine starts `niuma engine --until-idle` in the background when no
// process owns the data directory, so queued runs start without a window.
// NIUMA_BACKGROUND_ENGINE=off turns this off (for tests, or for users who
// prefer to run `niuma engine` themselves).
func (c *cli) ensureEngine(home string) {
	if engine.OwnerAlive(home) || os.Getenv("NIUMA_BACKGROUND_ENGINE") == "off" {
		return
	}
	pid, err := spawnEngine(home)
	if err != nil {
		fmt.Fprintf(c.err, "niuma: could not start the background engine (%v); run `niuma engine` to drive queued runs\n", err)
		return
	}
	fmt.Fprintf(c.err, "niuma: started the background engine (pid %d, log %s)\n", pid, filepath.Join(home, "engine.log"))
}

func spawnEngine(home string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(filepath.Join(home, "engine.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(self, "engine", "--until-idle")
	cmd.Env = append(os.Environ(), "NIUMA_HOME="+home)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	return pid, cmd.Process.Release()
}

func (c *cli) engineCmd(ctx context.Context, args []string) error {
	fs := c.flags("engine")
	untilIdle := fs.Bool("until-idle", false, "exit once no run is queued or running")
	metricsAddr := fs.String("metrics-addr", os.Getenv(envMetricsAddr),
		"serve Prometheus metrics on this address, e.g. 127.0.0.1:9464 (default $"+envMetricsAddr+"; off when empty)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	done := s.drive(ectx)
	if !s.engine.Owner() {
		fmt.Fprintf(c.err, "niuma engine: waiting for the process that owns %s to exit\n", s.home)
	}
	select {
	case <-s.engine.Ready():
	case <-done:
		return s.driveErr()
	}
	fmt.Fprintf(c.err, "niuma engine: driving runs in %s (pid %d)\n", s.home, os.Getpid())
	if *metricsAddr != "" {
		srv, err := s.serveMetrics(ectx, *metricsAddr)
		if err != nil {
			stop()
			<-done
			return err
		}
		fmt.Fprintf(c.err, "niuma engine: Prometheus metrics on http://%s/metrics\n", srv)
	}
	go announceAll(ectx, s.engine, c.err)
	if !*untilIdle {
		<-done
		return nil
	}
	idleSince := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			if s.engine.Active() > 0 {
				idleSince = time.Now()
			} else if time.Since(idleSince) > 5*time.Second {
				stop()
				<-done
				fmt.Fprintln(c.err, "niuma engine: no more runs; exiting")
				return nil
			}
		}
	}
}

func (c *cli) cancel(ctx context.Context, args []string) error {
	fs := c.flags("cancel")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return exitError{code: 2, msg: "cancel needs a RUN"}
	}
	if err := tooLong("run", maxNameArg, pos...); err != nil {
		return err
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	for _, ref := range pos {
		id, err := s.engine.ResolveID(ctx, ref)
		if errors.Is(err, storage.ErrNotFound) {
			// Not this archive's: perhaps another user's, on this machine.
			if err := c.cancelElsewhere(ctx, s.engine, ref, err); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		var ended *engine.EndedError
		switch err := s.engine.Cancel(ctx, id); {
		case errors.As(err, &ended):
			// What cancel is for holds already: on to the next run.
			fmt.Fprintf(c.out, "%s: nothing to stop\n", ended)
			continue
		case err != nil:
			return err
		}
		fmt.Fprintf(c.out, "cancelling %s\n", id)
	}
	c.ensureEngine(s.home)
	return nil
}

func (c *cli) templates(args []string) error {
	home, err := Home()
	if err != nil {
		return err
	}
	tw := newTable(c.out, "NAME", "VERSION", "SOURCE", "DESCRIPTION")
	for _, t := range listTemplates(home) {
		if t.Err != nil {
			tw.row(t.Name, "-", t.Source, "INVALID: "+oneLine(t.Err))
			continue
		}
		tw.row(t.Name, t.Version, t.Source, t.Description)
	}
	return tw.flush()
}

// pullProgress draws an image pull as one progress line on w: the bytes
// of all layers so far against their total, redrawn at most every 200ms.
func pullProgress(w io.Writer) func(docker.PullProgress) {
	var (
		tally   docker.PullTally
		mu      sync.Mutex
		drawn   time.Time
		started bool
	)
	return func(p docker.PullProgress) {
		c, t, done := tally.Add(p)
		mu.Lock()
		defer mu.Unlock()
		if done {
			if started {
				fmt.Fprintf(w, "\rpulling %s: done%30s\n", p.Image, "")
				started = false
			}
			return
		}
		if time.Since(drawn) < 200*time.Millisecond {
			return
		}
		drawn, started = time.Now(), true
		if t == 0 {
			fmt.Fprintf(w, "\rpulling %s: %s", p.Image, p.Status)
			return
		}
		const width = 30
		n := int(c * width / t)
		fmt.Fprintf(w, "\rpulling %s [%s%s] %3d%% %d/%d MB", p.Image,
			strings.Repeat("=", n), strings.Repeat(" ", width-n), c*100/t, c>>20, t>>20)
	}
}

// bestOf is what a finished run's line adds about its objective: ", best
// val_acc 0.9778"; nothing when it declares none or reported none.
func bestOf(ctx context.Context, eng *engine.Engine, info engine.RunInfo) string {
	a, err := eng.Entry(ctx, info)
	if err != nil || !a.HasBest {
		return ""
	}
	return fmt.Sprintf(", best %s %s", printable.String(a.Objective), formatValue(a.Best))
}
