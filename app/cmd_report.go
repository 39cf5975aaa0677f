package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/report"
)

// reportFormats are the formats `niuma report` writes, by name and file
// extension.
var reportFormats = map[string]string{"html": ".html", "pdf": ".pdf", "md": ".md", "csv": ".csv", "json": ".json"}

func (c *cli) report(ctx context.Context, args []string) error {
	fs := c.flags("report")
	format := fs.String("format", "", "html, pdf, md, csv or json (default: from -o's extension, else html)")
	out := fs.String("o", "", "where to write the report; - for standard output (default: report-RUN.FORMAT here)")
	page := fs.String("page", "a4", "PDF page size: a4 or letter")
	noCurves := fs.Bool("no-curves", false, "leave the metric charts out")
	noLogs := fs.Bool("no-logs", false, "leave the log tails of failed stages out")
	studyID := fs.String("study", "", "a study's report: its trials, best so far and pruning evidence, then its runs compared")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *studyID != "" && len(pos) > 0 {
		return exitError{code: 2, msg: "report --study STUDY takes no RUN: the study's trials are its runs"}
	}
	if len(pos) == 0 && *studyID == "" {
		return exitError{code: 2, msg: "report needs at least one RUN (an ID, a unique prefix or its last part; see `niuma ls`)"}
	}
	if err := tooLong("run", maxNameArg, pos...); err != nil {
		return err
	}
	if len(pos) > report.MaxRuns {
		return exitError{code: 2, msg: fmt.Sprintf("report takes at most %d runs, not %d", report.MaxRuns, len(pos))}
	}
	f := strings.ToLower(*format)
	if f == "" {
		f = strings.TrimPrefix(strings.ToLower(filepath.Ext(*out)), ".")
		if f == "markdown" {
			f = "md"
		}
		if _, ok := reportFormats[f]; !ok {
			f = "html"
		}
	}
	if _, ok := reportFormats[f]; !ok {
		return exitError{code: 2, msg: fmt.Sprintf("--format %s: use html, pdf, md, csv or json", *format)}
	}
	if p := strings.ToLower(*page); p != "a4" && p != "letter" {
		return exitError{code: 2, msg: fmt.Sprintf("--page %s: use a4 or letter", *page)}
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	var st *report.Study
	if *studyID != "" {
		if st, pos, err = reportStudy(ctx, s.store, *studyID); err != nil {
			return err
		}
	}
	rep, err := buildReport(ctx, s.engine, pos)
	if err != nil {
		return err
	}
	rep.Study = st
	path := *out
	switch {
	case path == "" && st != nil:
		path = "report-" + st.ID + reportFormats[f]
	case path == "":
		path = "report-" + rep.Runs[0].ID + reportFormats[f]
	}
	opt := report.Options{Page: *page, NoCurves: *noCurves, NoLogs: *noLogs}
	doc, files, err := renderReport(rep, f, opt, assetDir(path))
	if err != nil {
		return err
	}
	if path == "-" {
		if len(files) > 0 {
			return exitError{code: 2, msg: "a Markdown report has figures in a folder beside it: give a file with -o"}
		}
		_, err := c.out.Write(doc)
		return err
	}
	if err := writeReportFiles(path, doc, files); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "wrote %s (%s, %s", path, reportSize(len(doc)), runsCount(len(rep.Runs)))
	if len(files) > 0 {
		fmt.Fprintf(c.out, ", %d figures in %s", len(files), filepath.Join(filepath.Dir(path), assetDir(path)))
	}
	fmt.Fprintln(c.out, ")")
	return nil
}

// renderReport writes a report in one format. Markdown comes with its
// figures, named under dir relative to the document.
func renderReport(rep *report.Report, format string, opt report.Options, dir string) ([]byte, []report.File, error) {
	switch format {
	case "html":
		b, err := report.HTML(rep, opt)
		return b, nil, err
	case "pdf":
		if opt.FallbackFont == nil {
			opt.FallbackFont = fallbackFont()
		}
		b, err := report.PDF(rep, opt)
		return b, nil, err
	case "md":
		return report.Markdown(rep, opt, dir)
	case "csv":
		b, err := report.CSV(rep)
		return b, nil, err
	case "json":
		b, err := report.JSON(rep)
		return b, nil, err
	}
	return nil, nil, fmt.Errorf("unknown report format %q: use html, pdf, md, csv or json", format)
}

// fallbackFontPaths are TrueType fonts with Chinese glyphs that Debian and
// Ubuntu packages install (fonts-droid-fallback); $NIUMA_REPORT_FONT comes
// first. The PDF's own fonts cover Latin, Greek and Cyrillic only.
var fallbackFontPaths = []string{
	"/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
	"/usr/share/fonts/truetype/droid/DroidSansFallback.ttf",
}

// fallbackFont reads the first fallback font found, or returns nil (the
// PDF then prints such characters as "?").
func fallbackFont() []byte {
	paths := fallbackFontPaths
	if p := os.Getenv("NIUMA_REPORT_FONT"); p != "" {
		paths = append([]string{p}, paths...)
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			return b
		}
	}
	return nil
}

// assetDir names the folder beside a Markdown report that holds its
// figures: r.md → r_files.
func assetDir(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base)) + "_files"
}

// writeReportFiles writes the document and its figures; the document is
// written last, through a temporary file, so that a reader never sees half
// a report.
func writeReportFiles(path string, doc []byte, files []report.File) error {
	dir := filepath.Dir(path)
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create the figures folder: %w", err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return fmt.Errorf("write figure: %w", err)
		}
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write report: %w (is the folder writable?)", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(doc); err != nil {
		tmp.Close()
		return fmt.Errorf("write report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func reportSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// reportSource is what a report is built from; *engine.Engine has it.
type reportSource interface {
	Run(ctx context.Context, idOrPrefix string) (engine.RunInfo, error)
	LastMetrics(ctx context.Context, runID string) ([]engine.Point, error)
	Series(ctx context.Context, runID, stage, key string) ([]engine.Point, error)
	Anomalies(ctx context.Context, runID string) ([]engine.AnomalyInfo, error)
	GPUUsage(ctx context.Context, runID string) ([]engine.GPUUsage, error)
	HostUsage(ctx context.Context, runID string) ([]engine.HostUsage, error)
}

// logTailLines is how much of a failed stage's log a report shows.
const logTailLines = 40

// buildReport reads runs from the archive into a report model: the run,
// every metric curve, the objective from the run's template snapshot, and
// the log tails of failed stages.
func buildReport(ctx context.Context, src reportSource, ids []string) (*report.Report, error) {
	rep := &report.Report{Generated: time.Now()}
	seen := map[string]bool{}
	for _, id := range ids {
		info, err := src.Run(ctx, id)
		if err != nil {
			return nil, err
		}
		if seen[info.ID] {
			continue
		}
		seen[info.ID] = true
		r, err := reportRun(ctx, src, info)
		if err != nil {
			return nil, fmt.Errorf("report on run %s: %w", info.ID, err)
		}
		rep.Runs = append(rep.Runs, r)
	}
	return rep, nil
}

// reportError leads with why the run failed: each failed stage's
// recognised cause and fix, then the engine's reason; and says when
// metric points wait or the objective never appeared.
func reportError(info engine.RunInfo) string {
	var parts []string
	for _, st := range info.Stages {
		if f := st.Failure; f != nil && f.Summary != "" {
			p := fmt.Sprintf("stage %s, attempt %d: %s", st.Name, f.Attempt, f.Summary)
			if f.Fix != "" {
				p += ". Fix: " + f.Fix
			}
			parts = append(parts, p)
		}
	}
	if info.Error != "" {
		parts = append(parts, info.Error)
	}
	if info.MetricsWaiting != "" {
		parts = append(parts, info.MetricsWaiting)
	}
	if info.ObjectiveMissing != "" {
		parts = append(parts, info.ObjectiveMissing)
	}
	return strings.Join(parts, ". ")
}

func reportRun(ctx context.Context, src reportSource, info engine.RunInfo) (report.Run, error) {
	r := report.Run{
		ID: info.ID, Template: info.Template, TemplateVersion: info.TemplateVersion, TemplateSource: info.TemplateSource,
		State: string(info.State), Error: reportError(info), Seed: info.Seed, Executor: info.Executor, Fingerprint: info.Fingerprint,
		Created: info.CreatedAt, Started: info.StartedAt, Finished: info.FinishedAt,
	}
	names := make([]string, 0, len(info.Params))
	for k := range info.Params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		r.Params = append(r.Params, report.Param{Name: k, Value: info.Params[k]})
	}

	// The template snapshot says what the objective is and where the code ran.
	snap := filepath.Join(info.Dir, "template.yaml")
	if data, err := os.ReadFile(snap); err == nil {
		sum := sha256.Sum256(data)
		r.Provenance = append(r.Provenance, report.Item{Label: "Template", Value: "sha256:" + hex.EncodeToString(sum[:6]) + " (snapshot in the run folder)"})
		if t, err := template.Parse(snap, data); err == nil {
			r.Objective = report.Objective{Metric: t.Objective.Metric, Goal: t.Objective.Goal}
			switch {
			case t.Runtime.Image == "":
			case info.Executor == "local": // the template's fallback: the image was not there
				r.Provenance = append(r.Provenance, report.Item{Label: "Image",
					Value: "none: it ran on the host (the template's fallback: local), not in " + t.Runtime.Image})
			default:
				r.Provenance = append(r.Provenance, report.Item{Label: "Image", Value: t.Runtime.Image})
			}
		}
	}
	if info.TemplateSource != "" {
		r.Provenance = append(r.Provenance, report.Item{Label: "Code", Value: info.TemplateSource})
	}
	if h, err := os.Hostname(); err == nil {
		// Runs execute on the workstation that keeps their archive.
		r.Provenance = append(r.Provenance, report.Item{Label: "Host", Value: h})
	}
	usage, err := src.GPUUsage(ctx, info.ID)
	if err != nil {
		return r, err
	}
	if len(usage) > 0 {
		// Every GPU the attempts ran on, named from the GPU records: a
		// simulated one says so here too.
		gpus := make([]string, len(usage))
		for i, u := range usage {
			gpus[i] = gpuProvenance(u)
		}
		r.Provenance = append(r.Provenance, report.Item{Label: "GPUs", Value: strings.Join(gpus, "; ")})
	}
	for _, u := range usage {
		r.GPUs = append(r.GPUs, reportGPU(u))
	}
	host, err := src.HostUsage(ctx, info.ID)
	if err != nil {
		return r, err
	}
	for _, u := range host {
		r.Host = append(r.Host, reportHost(u))
	}

	for _, st := range info.Stages {
		s := report.Stage{Name: st.Name, State: string(st.State), Attempts: st.Attempts, MaxAttempts: st.MaxAttempts, Reason: st.Reason,
			PointsLost: st.PointsLost}
		for _, a := range st.History {
			if a.ExitCode != nil {
				s.ExitCodes = append(s.ExitCodes, *a.ExitCode)
			}
		}
		if len(st.History) == 0 && st.ExitCode != nil {
			s.ExitCodes = []int{*st.ExitCode}
		}
		if !st.StartedAt.IsZero() && !st.FinishedAt.IsZero() {
			s.Duration = st.FinishedAt.Sub(st.StartedAt)
		}
		r.Stages = append(r.Stages, s)
		if st.State == engine.Failed && st.Attempts > 0 {
			stdout, stderr := engine.LogPaths(info, st.Name, st.Attempts)
			for _, lf := range []struct{ stream, path string }{{"stderr", stderr}, {"stdout", stdout}} {
				if lines := tailLines(lf.path, logTailLines, lf.stream == "stdout"); len(lines) > 0 {
					r.Logs = append(r.Logs, report.LogTail{Stage: st.Name, Attempt: st.Attempts, Stream: lf.stream, Lines: lines})
				}
			}
		}
	}

	last, err := src.LastMetrics(ctx, info.ID)
	if err != nil {
		return r, err
	}
	for _, p := range last {
		pts, err := src.Series(ctx, info.ID, p.Stage, p.Key)
		if err != nil {
			return r, err
		}
		m := report.Metric{Stage: p.Stage, Key: p.Key, Steps: make([]int64, len(pts)), Values: make([]float64, len(pts)), Walls: make([]time.Time, len(pts))}
		for i, q := range pts {
			m.Steps[i], m.Values[i], m.Walls[i], m.Attempt = q.Step, q.Value, q.Wall, q.Attempt
		}
		r.Metrics = append(r.Metrics, m)
	}

	anomalies, err := src.Anomalies(ctx, info.ID)
	if err != nil {
		return r, err
	}
	r.Anomalies = reportAnomalies(anomalies)
	return r, nil
}

// gpuProvenance names a GPU an attempt ran on: "GPU-… (simulated NVIDIA
// H100 80GB HBM3, index 0)", or the bare UUID when it was never sampled.
func gpuProvenance(u engine.GPUUsage) string {
	if u.Name == "" && !u.Simulated {
		return u.UUID
	}
	what := u.Name
	if u.Simulated {
		what = strings.TrimSpace("simulated " + what)
	}
	return fmt.Sprintf("%s (%s, index %d)", u.UUID, what, u.Index)
}

// reportGPU is the report's picture of one GPU's use by a run.
func reportGPU(u engine.GPUUsage) report.GPUUsage {
	g := report.GPUUsage{Index: u.Index, Model: u.Name, UUID: u.UUID, Simulated: u.Simulated, Stages: u.Stages,
		From: u.From, To: u.To, MeanUtil: u.Util.Mean, PeakUtil: u.Util.Peak,
		MeanMemMiB: u.RunMem.Mean, PeakMemMiB: u.RunMem.Peak, TotalMemMiB: float64(u.MemTotalMiB),
		MeanTempC: u.Temp.Mean, PeakTempC: u.Temp.Peak, MeanPowerW: u.Power.Mean, PeakPowerW: u.Power.Peak,
		PowerLimitW: u.PowerLimitW, Samples: u.Samples, ThrottledSamples: u.Throttled,
		ThrottledMinutes: u.ThrottledMinutes, ThrottleReasons: u.ThrottleReasons}
	if g.Model == "" {
		g.Model = "unknown model"
	}
	for _, x := range u.XIDs {
		g.XIDs = append(g.XIDs, report.XIDEvent{At: x.At, Code: x.Code})
	}
	for _, a := range u.Anomalies {
		g.Events = append(g.Events, report.Anomaly{At: a.At, Stage: a.Stage, Kind: a.Kind, Message: a.Message, Action: "flagged"})
	}
	for _, m := range u.Minutes {
		mem := math.NaN()
		if m.RunMemMaxMiB > 0 {
			mem = float64(m.RunMemMaxMiB)
		}
		g.Curve = append(g.Curve, report.GPUPoint{At: m.At, UtilPct: m.UtilMean, MemMiB: mem, TempC: m.TempMean, Power: m.PowerMean})
	}
	return g
}

// reportHost is the report's picture of what one stage used of the host.
func reportHost(u engine.HostUsage) report.HostUsage {
	h := report.HostUsage{Stage: u.Stage, Attempts: u.Attempts, PeakMemBytes: u.MemPeakBytes, MeanMemBytes: u.MemMeanBytes,
		MemLimitBytes: u.MemLimitBytes, CPUSeconds: u.CPUSeconds, CPULimitMilli: u.CPULimitMilli, Samples: u.Samples}
	for _, m := range u.Minutes {
		h.Curve = append(h.Curve, report.HostPoint{At: m.At, Attempt: m.Attempt, MemMaxBytes: m.MemMaxBytes, CPUSeconds: m.CPUSeconds})
	}
	return h
}

// tailLines returns the last n lines of a file, reading at most its last
// 64 KiB; a missing file has none. With skipMetrics, JSON objects (metric
// lines, already in the charts) are left out.
func tailLines(path string, n int, skipMetrics bool) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const window = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(st.Size()-window, io.SeekStart); err != nil {
			return nil
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	if skipMetrics {
		kept := lines[:0]
		for _, l := range lines {
			if t := strings.TrimSpace(l); !(strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}")) {
				kept = append(kept, l)
			}
		}
		lines = kept
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// reportExporter is the window's "Export report…" over this data
// directory: the same model and formats as `niuma report`.
func (s *stack) reportExporter() func(ctx context.Context, ids []string, format string, opt report.Options, assetDir string) ([]byte, []report.File, error) {
	return func(ctx context.Context, ids []string, format string, opt report.Options, assetDir string) ([]byte, []report.File, error) {
		rep, err := buildReport(ctx, s.engine, ids)
		if err != nil {
			return nil, nil, err
		}
		return renderReport(rep, format, opt, assetDir)
	}
}

// reportAnomalies pairs each anomaly with what the engine did about it
// (an "action_" event of the same stage that followed); "flagged" when
// nothing was done.
func reportAnomalies(evs []engine.AnomalyInfo) []report.Anomaly {
	var out []report.Anomaly
	for i, ev := range evs {
		if strings.HasPrefix(ev.Kind, "action_") {
			continue
		}
		a := report.Anomaly{At: ev.At, Stage: ev.Stage, Kind: ev.Kind, Message: ev.Message, Action: "flagged"}
		if ev.Fix != "" {
			a.Message += " Fix: " + ev.Fix
		}
		for _, next := range evs[i+1:] {
			if !strings.HasPrefix(next.Kind, "action_") {
				break
			}
			if next.Stage == ev.Stage {
				a.Action = next.Message
				break
			}
		}
		out = append(out, a)
	}
	return out
}
