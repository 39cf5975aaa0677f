package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"niuma/engine"
	"niuma/engine/executor/slurm"
	"niuma/metrics"
	"niuma/metrics/textrule"
	"niuma/printable"
)

type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer, cols ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)}
	t.row(cols...)
	return t
}

// row prints one line of cells. A cell may hold what a workload or a
// template wrote: its control characters are escaped (a tab would also
// break the columns) and it is cut where no cell needs to be longer.
func (t *table) row(cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = printable.Cut(c, maxCell)
	}
	fmt.Fprintln(t.w, strings.Join(safe, "\t"))
}

// maxCell is the most runes of a table cell printed.
const maxCell = 1000

func (t *table) flush() error { return t.w.Flush() }

// number marshals a metric value; JSON has no NaN or Infinity, so those
// become the strings "NaN", "+Inf" and "-Inf".
type number float64

func (n number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

func (c *cli) ls(ctx context.Context, args []string) error {
	fs := c.flags("ls")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("n", 0, "show at most N runs")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	s, err := openReader(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	runs, err := s.engine.Runs(ctx, *limit)
	if err != nil {
		return err
	}
	c.noteIdle(s, runs)
	if *asJSON {
		if runs == nil {
			runs = []engine.RunInfo{}
		}
		return writeJSON(c.out, runs)
	}
	if len(runs) == 0 {
		fmt.Fprintln(c.out, "no runs yet: try `niuma run digits-mlp --wait`")
		return nil
	}
	now := time.Now()
	tw := newTable(c.out, "ID", "TEMPLATE", "STATE", "STAGES", "CREATED", "DURATION")
	for _, r := range runs {
		tw.row(r.ID, r.Template, string(r.State), stageChips(r.Stages), r.CreatedAt.Local().Format("Jan 02 15:04"), duration(r.Elapsed(now)))
	}
	return tw.flush()
}

// noteIdle warns when unfinished runs have no engine driving them, and
// starts one: a user who sees "running" deserves it to be true.
func (c *cli) noteIdle(s *stack, runs []engine.RunInfo) {
	for _, r := range runs {
		if !r.State.Done() {
			c.ensureEngine(s.home)
			return
		}
	}
}

// stageChips is a compact picture of a run's stages: one mark each.
func stageChips(stages []engine.StageInfo) string {
	var b strings.Builder
	for _, s := range stages {
		b.WriteString(chip(s.State))
	}
	return b.String()
}

func chip(s engine.State) string {
	switch s {
	case engine.Succeeded:
		return "✓"
	case engine.Running:
		return "▶"
	case engine.Failed:
		return "✗"
	case engine.Cancelled:
		return "⊘"
	case engine.Pruned:
		return "✂"
	default:
		return "·"
	}
}

func duration(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// noMetrics is what show says of a finished run with no metric: what
// was tried, and how to add a pattern.
var noMetrics = "no metrics captured: its output matched none of the formats read with no configuration (" +
	strings.Join(textrule.DetectedPresets(), ", ") + ") and it wrote no TensorBoard, CSV or JSON log where they are looked for. " +
	"Add a pattern under the stage's metrics:, e.g. metrics: [{pattern: 'loss (?P<loss>[0-9.]+)'}], name a preset, " +
	"or print JSON lines ({\"step\": 1, \"loss\": 0.5}) (docs/guide/metrics.md)"

// showJSON is `niuma show --json`.
type showJSON struct {
	engine.RunInfo
	Metrics   []metricJSON         `json:"metrics"`
	Anomalies []engine.AnomalyInfo `json:"anomalies"`
	GPUs      []engine.GPUUsage    `json:"gpus"`
	// HostUsage is what each stage used of the host (peak and mean
	// memory, its limit, CPU time), from the per-minute records of its
	// attempts' cgroups; a stage without a record is left out.
	HostUsage []engine.HostUsage `json:"host_usage"`
	// ETA is how long an unfinished run is expected to take still, and
	// what says so ("ETA 14 min, from 9 earlier runs"); "" when done.
	ETA string `json:"eta,omitempty"`
	// SlurmJobs is the Slurm job id of each stage whose latest attempt
	// was submitted to Slurm, by stage name.
	SlurmJobs map[string]string `json:"slurm_jobs,omitempty"`
	// Pruned is why a study's pruner stopped the run early (absent when
	// it did not).
	Pruned *prunedJSON `json:"pruned,omitempty"`
}

// slurmJobs names the Slurm job of each stage whose latest attempt runs,
// or ran, on Slurm: the id a user looks up with squeue, sacct or scancel.
func slurmJobs(r engine.RunInfo) map[string]string {
	var jobs map[string]string
	for _, st := range r.Stages {
		if len(st.History) == 0 || r.Dir == "" {
			continue
		}
		a := st.History[len(st.History)-1]
		if a.Executor != "slurm" {
			continue
		}
		if id := slurm.RecordedJobID(filepath.Join(r.Dir, st.Name), a.Number); id != "" {
			if jobs == nil {
				jobs = map[string]string{}
			}
			jobs[st.Name] = id
		}
	}
	return jobs
}

// withJob adds a stage's Slurm job to its note, unless the note names it.
func withJob(note, job string) string {
	switch {
	case job == "" || strings.Contains(note, "job "+job):
		return note
	case note == "":
		return "Slurm job " + job
	}
	return note + " (Slurm job " + job + ")"
}

type metricJSON struct {
	Stage      string  `json:"stage"`
	Key        string  `json:"key"`
	Points     int64   `json:"points"`
	Repeats    int64   `json:"repeated_steps"`
	Step       int64   `json:"last_step"`
	Value      number  `json:"last_value"`
	Min        *number `json:"min,omitempty"`
	Max        *number `json:"max,omitempty"`
	StepSource string  `json:"step_source,omitempty"`
}

func (c *cli) show(ctx context.Context, args []string) error {
	fs := c.flags("show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return exitError{code: 2, msg: "show needs one RUN (an ID, a unique prefix or its last part; see `niuma ls`)"}
	}
	if err := tooLong("run", maxNameArg, pos[0]); err != nil {
		return err
	}
	s, err := openReader(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	r, err := s.engine.Run(ctx, pos[0])
	if err != nil {
		return err
	}
	c.noteIdle(s, []engine.RunInfo{r})
	// The series' summaries are kept as points are written: no point is
	// read, however many the run has.
	infos, err := s.engine.MetricSeriesInfo(ctx, r.ID)
	if err != nil {
		return err
	}
	var ms []metricJSON
	for _, si := range infos {
		m := metricJSON{Stage: si.Stage, Key: si.Key, Points: si.Points, Repeats: si.Repeats, Step: si.Last.Step,
			Value: number(si.Last.Value), StepSource: si.StepSource}
		if !math.IsNaN(si.Min) {
			lo, hi := number(si.Min), number(si.Max)
			m.Min, m.Max = &lo, &hi
		}
		ms = append(ms, m)
	}
	anomalies, err := s.engine.Anomalies(ctx, r.ID)
	if err != nil {
		return err
	}
	gpus, err := s.engine.GPUUsage(ctx, r.ID)
	if err != nil {
		return err
	}
	host, err := s.engine.HostUsage(ctx, r.ID)
	if err != nil {
		return err
	}
	eta := ""
	if !r.State.Done() {
		e, err := s.engine.ETA(ctx, r)
		if err != nil {
			return err
		}
		eta = e.String()
	}
	pruned, err := prunedOf(ctx, s.store, r.ID)
	if err != nil {
		return err
	}
	if *asJSON {
		if ms == nil {
			ms = []metricJSON{}
		}
		if gpus == nil {
			gpus = []engine.GPUUsage{}
		}
		if host == nil {
			host = []engine.HostUsage{}
		}
		return writeJSON(c.out, showJSON{RunInfo: r, Metrics: ms, Anomalies: anomalies, GPUs: gpus, HostUsage: host, ETA: eta,
			SlurmJobs: slurmJobs(r), Pruned: pruned})
	}
	jobs := slurmJobs(r)
	now := time.Now()
	p := printable.String // what the run's template and workload wrote
	fmt.Fprintf(c.out, "run       %s\n", r.ID)
	fmt.Fprintf(c.out, "template  %s %s (%s)\n", p(r.Template), p(r.TemplateVersion), p(r.TemplateSource))
	fmt.Fprintf(c.out, "state     %s", r.State)
	if r.Error != "" {
		fmt.Fprintf(c.out, " — %s", p(r.Error))
	}
	if r.CancelRequested && !r.State.Done() {
		fmt.Fprint(c.out, " — cancel requested: its stages are being stopped")
	}
	fmt.Fprintln(c.out)
	if pruned != nil {
		fmt.Fprintf(c.out, "pruned    by study %s (trial %d): %s\n", pruned.Study, pruned.Trial, p(pruned.Evidence))
	}
	writeFailures(c.out, r)
	if r.MetricsWaiting != "" {
		fmt.Fprintf(c.out, "metrics   %s\n", p(r.MetricsWaiting))
	}
	if r.ObjectiveMissing != "" {
		fmt.Fprintf(c.out, "objective %s\n", p(r.ObjectiveMissing))
	}
	fmt.Fprintf(c.out, "params    %s\n", p(strings.Join(r.ParamPairs(), " ")))
	fmt.Fprintf(c.out, "seed      %d   priority %d   executor %s%s\n", r.Seed, r.Priority, p(r.Executor), runFlags(r))
	if r.Fingerprint != "" {
		fmt.Fprintf(c.out, "fingerprint %s\n", p(r.Fingerprint))
	}
	fmt.Fprintf(c.out, "created   %s   duration %s\n", r.CreatedAt.Local().Format(time.DateTime), duration(r.Elapsed(now)))
	if eta != "" {
		fmt.Fprintf(c.out, "%s\n", eta)
	}
	fmt.Fprintf(c.out, "dir       %s\n\n", p(r.Dir))
	tw := newTable(c.out, "STAGE", "STATE", "ATTEMPTS", "EXIT", "DURATION", "NOTE")
	for _, st := range r.Stages {
		exit := "-"
		if st.ExitCode != nil {
			exit = strconv.Itoa(*st.ExitCode)
		}
		d := time.Duration(0)
		if !st.StartedAt.IsZero() {
			end := st.FinishedAt
			if end.IsZero() {
				end = now
			}
			d = end.Sub(st.StartedAt)
		}
		tw.row(st.Name, string(st.State), st.AttemptsText(), exit, duration(d), withJob(st.Reason, jobs[st.Name]))
	}
	if err := tw.flush(); err != nil {
		return err
	}
	for _, st := range r.Stages {
		for _, m := range st.MetricsRead {
			fmt.Fprintf(c.out, "%s: %s\n", p(st.Name), p(m.String()))
		}
	}
	if len(ms) > 0 {
		fmt.Fprintln(c.out)
		tw = newTable(c.out, "STAGE", "METRIC", "LAST", "STEP", "POINTS", "REPEATED", "MIN", "MAX")
		for _, m := range ms {
			lo, hi := "-", "-"
			if m.Min != nil {
				lo, hi = formatValue(float64(*m.Min)), formatValue(float64(*m.Max))
			}
			tw.row(m.Stage, m.Key, formatValue(float64(m.Value)), strconv.FormatInt(m.Step, 10),
				strconv.FormatInt(m.Points, 10), strconv.FormatInt(m.Repeats, 10), lo, hi)
		}
		if err := tw.flush(); err != nil {
			return err
		}
	} else if started(r) && !r.State.Done() {
		fmt.Fprintln(c.out, "\nno metrics yet")
	} else if started(r) && r.State != engine.Cancelled {
		fmt.Fprintln(c.out, "\n"+noMetrics)
	}
	if len(host) > 0 {
		fmt.Fprintln(c.out, "\nHOST (memory and CPU time of each stage, from its cgroup's per-minute records)")
		tw = &table{w: tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)}
		for _, u := range host {
			tw.row("  "+u.Stage, u.Summary())
		}
		if err := tw.flush(); err != nil {
			return err
		}
	}
	if len(gpus) > 0 {
		fmt.Fprintln(c.out, "\nGPUS (from the per-minute GPU records)")
		for _, g := range gpus {
			fmt.Fprintf(c.out, "  %s\n", gpuLine(g))
		}
	}
	if len(anomalies) > 0 {
		fmt.Fprintln(c.out, "\nANOMALIES")
		for _, a := range anomalies {
			where := a.Stage
			if a.GPU != "" {
				where += " on " + a.GPU
			}
			msg := a.Message
			if !a.DismissedAt.IsZero() {
				msg = "(dismissed) " + msg
			}
			fmt.Fprintf(c.out, "  #%-4d %s  %-8s %-14s %s: %s\n", a.ID, a.At.Local().Format(time.TimeOnly), p(string(a.Severity)), p(string(a.Kind)), p(where), p(msg))
			if a.Fix != "" {
				fmt.Fprintf(c.out, "  %s  fix: %s\n", strings.Repeat(" ", 5+1+8+1+8+1+14), p(a.Fix))
			}
		}
	}
	return nil
}

func started(r engine.RunInfo) bool {
	for _, st := range r.Stages {
		if st.Attempts > 0 {
			return true
		}
	}
	return false
}

// writeFailures leads with why each failed stage failed: the recognised
// cause and its fix, then the last lines of its stderr.
func writeFailures(w io.Writer, r engine.RunInfo) {
	for _, st := range r.Stages {
		f := st.Failure
		if f == nil {
			continue
		}
		what := f.Summary
		if what == "" {
			what = st.Reason
		}
		fmt.Fprintf(w, "failed    stage %s, attempt %d: %s\n", st.Name, f.Attempt, what)
		if f.Fix != "" {
			fmt.Fprintf(w, "  fix     %s\n", f.Fix)
		}
		for i, l := range f.Tail {
			label := "        "
			if i == 0 {
				label = "  stderr"
			}
			fmt.Fprintf(w, "%s  %s\n", label, l)
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cli) logs(ctx context.Context, args []string) error {
	fs := c.flags("logs")
	follow := fs.Bool("follow", false, "keep printing new output until the stage ends")
	fs.BoolVar(follow, "f", false, "short for --follow")
	attempt := fs.Int("attempt", 0, "which attempt (default: the latest)")
	raw := fs.Bool("raw", false, "print the output exactly as the stage wrote it (control characters too)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return exitError{code: 2, msg: "logs needs RUN and optionally a STAGE"}
	}
	if err := tooLong("run", maxNameArg, pos[0]); err != nil {
		return err
	}
	if err := tooLong("stage name", maxNameArg, pos[1:]...); err != nil {
		return err
	}
	s, err := openReader(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	r, err := s.engine.Run(ctx, pos[0])
	if err != nil {
		return err
	}
	stages := r.Stages
	if len(pos) == 2 {
		stages = nil
		for _, st := range r.Stages {
			if st.Name == pos[1] {
				stages = append(stages, st)
			}
		}
		if len(stages) == 0 {
			names := make([]string, len(r.Stages))
			for i, st := range r.Stages {
				names[i] = st.Name
			}
			return fmt.Errorf("run %s has no stage %q (stages: %s)", r.ID, pos[1], strings.Join(names, ", "))
		}
	}
	for _, st := range stages {
		if *follow && *attempt == 0 {
			// Following: wait for the stage to start (or to be skipped).
			if st, err = c.awaitStart(ctx, s.engine, r.ID, st.Name); err != nil {
				return err
			}
		}
		n := *attempt
		if n == 0 {
			n = st.Attempts
		}
		one := len(stages) == 1 // the stage asked for: what is not there is an error
		switch {
		case n < 0:
			return exitError{code: 2, msg: fmt.Sprintf("--attempt %d: give an attempt's number, 1 or more", n)}
		case st.Attempts == 0 && one:
			return fmt.Errorf("stage %s of run %s has not started (it is %s), so it has no output yet", st.Name, r.ID, st.State)
		case st.Attempts == 0:
			fmt.Fprintf(c.out, "── %s: not started ──\n", st.Name)
			continue
		case n > st.Attempts && one:
			return fmt.Errorf("stage %s of run %s has no attempt %d: it has had %d", st.Name, r.ID, n, st.Attempts)
		case n > st.Attempts:
			fmt.Fprintf(c.out, "── %s: no attempt %d ──\n", st.Name, n)
			continue
		}
		if len(stages) > 1 {
			fmt.Fprintf(c.out, "── %s (attempt %d) ──\n", st.Name, n)
		}
		stdout, stderr := engine.LogPaths(r, st.Name, n)
		if !*follow {
			for _, p := range []string{stdout, stderr} {
				if err := copyFile(c.out, p, *raw); err != nil {
					return err
				}
			}
			continue
		}
		if err := c.followStage(ctx, s.engine, r.ID, st.Name, n, *raw, stdout, stderr); err != nil {
			return err
		}
	}
	return nil
}

// awaitStart polls a stage until it has an attempt or has ended.
func (c *cli) awaitStart(ctx context.Context, eng *engine.Engine, runID, stage string) (engine.StageInfo, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := eng.Run(ctx, runID)
		if err != nil {
			return engine.StageInfo{}, err
		}
		for _, st := range r.Stages {
			if st.Name == stage && (st.Attempts > 0 || st.State.Done()) {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return engine.StageInfo{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// followStage prints a stage's output as it is written until the attempt
// ends (or the user interrupts).
func (c *cli) followStage(ctx context.Context, eng *engine.Engine, runID, stage string, attempt int, raw bool, paths ...string) error {
	show := printable.Text
	if raw {
		show = func(s string) string { return s }
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var followers []*metrics.Follower
	done := make(chan struct{}, len(paths))
	lines := make(chan string, 1024)
	for _, p := range paths {
		f := &metrics.Follower{Path: p, OnLine: func(line []byte, _ int64) { lines <- string(line) }}
		followers = append(followers, f)
		go func() { _ = f.Run(fctx); done <- struct{}{} }()
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	finished, stopping := 0, false
	for finished < len(paths) {
		select {
		case l := <-lines:
			fmt.Fprintln(c.out, show(l))
		case <-done:
			finished++
		case <-tick.C:
			if stopping {
				continue
			}
			r, err := eng.Run(ctx, runID)
			if err != nil {
				return err
			}
			for _, st := range r.Stages {
				if st.Name == stage && (st.Attempts != attempt || st.State != engine.Running) {
					stopping = true
					for _, f := range followers {
						go f.Stop() // Stop drains into lines, which this loop empties
					}
				}
			}
		}
	}
	for {
		select {
		case l := <-lines:
			fmt.Fprintln(c.out, show(l))
		default:
			return nil
		}
	}
}

// copyFile prints a log file: line by line with control characters
// escaped (printable.Text), or as it is when raw.
func copyFile(w io.Writer, path string, raw bool) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if raw {
		_, err = io.Copy(w, f)
		return err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		// A line longer than the buffer comes in pieces; a piece may then
		// split a character, which shows as escaped bytes.
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := io.WriteString(w, printable.Text(string(line))); werr != nil {
				return werr
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}

func (c *cli) dismiss(ctx context.Context, args []string) error {
	fs := c.flags("dismiss")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return exitError{code: 2, msg: "dismiss needs RUN and the anomaly's number (as `niuma show RUN` lists it, e.g. 12 or #12)"}
	}
	if err := tooLong("run", maxNameArg, pos[0]); err != nil {
		return err
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(pos[1], "#"), 10, 64)
	if err != nil {
		return exitError{code: 2, msg: fmt.Sprintf("dismiss: %q is not an anomaly number (as `niuma show RUN` lists it, e.g. 12)", pos[1])}
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.engine.Dismiss(ctx, pos[0], n); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "dismissed anomaly #%d\n", n)
	return nil
}

// gpuLine is one GPU of a run for `niuma show`: what it is (simulated or
// not) and how the run used it; what the GPU did not report is left out.
func gpuLine(g engine.GPUUsage) string {
	name := g.Name
	if g.Simulated {
		name += " (simulated)"
	}
	parts := []string{fmt.Sprintf("GPU %d", g.Index), strings.TrimSpace(name), g.UUID}
	if g.Samples == 0 {
		return strings.Join(append(parts, "no record of the run's time yet"), "  ")
	}
	mp := func(label string, st engine.Stat, format string) {
		if !math.IsNaN(st.Mean) || !math.IsNaN(st.Peak) {
			parts = append(parts, fmt.Sprintf("%s "+format+" mean / "+format+" peak", label, st.Mean, st.Peak))
		}
	}
	mp("util", g.Util, "%.0f%%")
	if !math.IsNaN(g.RunMem.Peak) {
		parts = append(parts, fmt.Sprintf("run's memory %.0f MiB peak", g.RunMem.Peak))
	}
	mp("temp", g.Temp, "%.0f °C")
	mp("power", g.Power, "%.0f W")
	if g.Throttled > 0 {
		parts = append(parts, fmt.Sprintf("throttled %d/%d readings (%s)", g.Throttled, g.Samples, strings.Join(g.ThrottleReasons, ", ")))
	}
	for _, x := range g.XIDs {
		parts = append(parts, fmt.Sprintf("XID %d at %s", x.Code, x.At.Local().Format(time.TimeOnly)))
	}
	return strings.Join(parts, "  ")
}
