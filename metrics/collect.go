package metrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"niuma/metrics/pathglob"
	"niuma/metrics/textrule"
	"niuma/storage"
)

// Sources says where one stage's metrics come from, besides the JSON lines
// every stage may print: its text rules and the files its tools write.
type Sources struct {
	// Rules are the stage's text rules (presets and patterns), tried in
	// order on each line of the streams they read.
	Rules []textrule.Rule
	// TensorBoard and CSV are globs relative to the run directory (see
	// Glob) of event files and CSV logs to read, besides the usual places.
	TensorBoard []string
	CSV         []string
}

// DefaultTensorBoard are where TensorBoard event files are read from
// without being named: the stage's tb/, and runs/ (SummaryWriter's default)
// and lightning_logs/ (Lightning's) in the stage's folder and in the run
// directory, the workload's working directory.
var (
	DefaultTensorBoardStage = []string{"tb/**", "runs/*/**", "lightning_logs/*/**"}
	DefaultTensorBoardRun   = []string{"runs/*/**", "lightning_logs/*/**"}
	// DefaultCSV, in both folders: Lightning's CSVLogger (in its save_dir
	// or the folder itself), Ultralytics' results.csv (runs/TASK/NAME/),
	// timm's summary.csv (output/train/NAME/).
	DefaultCSV = []string{"lightning_logs/*/metrics.csv", "*/lightning_logs/*/metrics.csv", "runs/*/*/results.csv", "output/train/*/summary.csv"}
)

// FileScope is which files a Collector reads beside stdout and stderr.
type FileScope int

const (
	// AllFiles: metrics.jsonl, and TensorBoard and CSV files in the stage
	// folder, the run folder and the template's locations.
	AllFiles FileScope = iota
	// StageFiles: metrics.jsonl and the stage folder's default
	// TensorBoard and CSV locations.
	StageFiles
	// NoFiles: stdout and stderr alone.
	NoFiles
)

// CursorStore is what a Collector reads from storage when it starts:
// *storage.DB implements it.
type CursorStore interface {
	MetricCursors(ctx context.Context, runID, stage string, attempt int) (map[string]storage.MetricCursor, error)
	MaxSteps(ctx context.Context, runID, stage string, attempt int) (map[string]int64, error)
}

// Collector gathers the metrics of one stage attempt from every source at
// once: its stdout and stderr (JSON lines and text rules), the stage's
// metrics.jsonl, TensorBoard event files and CSV logs. Each source resumes
// at its stored cursor, so an attempt adopted after a restart (or read
// again) stores each point exactly once. It is the one thing the engine
// starts per attempt.
type Collector struct {
	Store   CursorStore
	Writer  *Writer
	RunID   string
	Stage   string
	Attempt int
	// RunDir and StageDir are the run's and the stage's folders; Stdout
	// and Stderr the attempt's log files.
	RunDir, StageDir string
	// StageFolder says whether a folder in RunDir is a stage's own (the
	// engine knows its layout); nil: none is.
	StageFolder    func(dir string) bool
	Stdout, Stderr string
	Sources        Sources
	// Since: files last modified before it belong to an earlier attempt.
	Since time.Time
	// OnPoints gets every batch of points as it is read (from several
	// goroutines); the slice is reused after the call.
	OnPoints func(pts []storage.MetricPoint)
	// OnNote gets what the user should know about the sources: a rule that
	// matched nothing ("metrics_unmatched"), a damaged TensorBoard file
	// ("tensorboard_damaged"). kind is a code, message and fix sentences.
	OnNote func(kind, message, fix string)
	// Files says which files beside stdout and stderr it reads: every
	// source (AllFiles, the default), the stage folder's alone
	// (StageFiles), or none (NoFiles). A re-read after the record was
	// lost, with no attempt start to tell one attempt's files from
	// another's, narrows it.
	Files FileScope
	// MaxKeys is the most distinct metric keys the attempt may report
	// (0: DefaultMaxKeys); points of further keys are dropped, with one
	// note ("metrics_keys_limit").
	MaxKeys int
	Logger  *slog.Logger

	stops   []func()
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	watches []*RuleWatch
	// The output streams' followers, stopped (and drained) before the
	// files' are, and how many have read to their end once.
	streamStops []func()
	streamsWG   sync.WaitGroup
	streams     int32
	caughtUp    atomic.Int32
	// trainerPrints: a stream is read as hf-trainer, so trainer_state.json,
	// the same values at the global step, is not read as well.
	trainerPrints atomic.Bool
}

// skipTrainerState says whether trainer_state.json is to wait or be left
// unread: until stdout and stderr have been read to their end once, it is
// not known whether the Trainer's dicts are in them; once they are, the
// file holds the same values.
func (c *Collector) skipTrainerState() bool {
	return c.caughtUp.Load() < c.streams || c.trainerPrints.Load()
}

// Start loads the attempt's cursors and starts following. The sources are
// checked (their rules and globs must compile: the template parser checked
// them already).
func (c *Collector) Start(ctx context.Context) error {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	var rules []*textrule.Matcher
	for _, r := range c.Sources.Rules {
		m, err := textrule.Compile(r)
		if err != nil {
			return fmt.Errorf("metrics rule %s: %w", r.Name(), err)
		}
		rules = append(rules, m)
	}
	var tbLocs, csvLocs, jsonLocs, stateLocs []Location
	// add appends a location per pattern; skip names folders not to look
	// in (nil: none).
	add := func(dst *[]Location, base string, patterns []string, skip func(string) bool) error {
		for _, p := range patterns {
			g, err := pathglob.Parse(p)
			if err != nil {
				return err
			}
			*dst = append(*dst, Location{Base: base, Glob: g, Skip: skip})
		}
		return nil
	}
	// The run folder's default patterns leave the stages' folders to
	// their stages: read by every stage, a stage's files were stored once
	// for each. A template's own patterns may name any folder.
	notStages := c.StageFolder
	var err error
	switch c.Files {
	case AllFiles:
		err = errors.Join(
			add(&tbLocs, c.StageDir, DefaultTensorBoardStage, nil), add(&tbLocs, c.RunDir, DefaultTensorBoardRun, notStages),
			add(&tbLocs, c.RunDir, c.Sources.TensorBoard, nil),
			add(&csvLocs, c.StageDir, DefaultCSV, nil), add(&csvLocs, c.RunDir, DefaultCSV, notStages),
			add(&csvLocs, c.RunDir, c.Sources.CSV, nil),
			add(&jsonLocs, c.StageDir, DefaultJSONLines, nil), add(&jsonLocs, c.RunDir, DefaultJSONLines, notStages),
			add(&stateLocs, c.StageDir, DefaultTrainerState, nil), add(&stateLocs, c.RunDir, DefaultTrainerState, notStages))
	case StageFiles:
		err = errors.Join(add(&tbLocs, c.StageDir, DefaultTensorBoardStage, nil), add(&csvLocs, c.StageDir, DefaultCSV, nil),
			add(&jsonLocs, c.StageDir, DefaultJSONLines, nil), add(&stateLocs, c.StageDir, DefaultTrainerState, nil))
	}
	if err != nil {
		return err
	}

	cursors, err := c.Store.MetricCursors(ctx, c.RunID, c.Stage, c.Attempt)
	if err != nil {
		return err
	}
	// The keys the attempt stored already (it is adopted after a restart)
	// count against its limit; without cursors (points stored before
	// cursors existed) their steps are skipped too.
	stored, err := c.Store.MaxSteps(ctx, c.RunID, c.Stage, c.Attempt)
	if err != nil {
		return err
	}
	var skip map[string]int64
	if len(cursors) == 0 {
		skip = stored
	}
	storedKeys := make([]string, 0, len(stored))
	for k := range stored {
		storedKeys = append(storedKeys, k)
	}
	// Sorted, so that an attempt stored over the limit (a lower limit
	// now) keeps the same keys whatever the map's order.
	sort.Strings(storedKeys)
	keys := NewKeyLimit(c.MaxKeys, storedKeys, c.keysExceeded)

	for _, r := range c.Sources.Rules {
		w := &RuleWatch{Rule: r, Limit: DefaultRuleWatchLines, Unmatched: c.unmatched}
		c.watches = append(c.watches, w)
	}

	fctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	stream := func(name, path string, withRules bool) {
		cur := cursors[name]
		in := NewIngestor(c.Writer, c.RunID, c.Stage, c.Attempt, skip)
		in.SetKeyLimit(keys)
		line := int64(0)
		if withRules && len(rules) > 0 {
			// Each stream has its own matchers (their state is per stream).
			var ms []*textrule.Matcher
			var ws []*RuleWatch
			for i, r := range c.Sources.Rules {
				if !r.Reads(name) {
					continue
				}
				m, _ := textrule.Compile(r)
				ms = append(ms, m)
				ws = append(ws, c.watches[i])
				if r.Step == textrule.StepLine && cur.Offset > 0 {
					line = countLines(path, cur.Offset)
				}
			}
			in.SetRules(ms, ws)
		}
		if withRules && len(rules) == 0 {
			// No rules: the stream's format is found from its lines.
			in.SetDetect(func(presets []string) {
				if slices.Contains(presets, "hf-trainer") {
					c.trainerPrints.Store(true)
				}
			})
		}
		in.SetSource(name, line)
		in.Restore(cur.State)
		var caught sync.Once
		caughtUp := func() { caught.Do(func() { c.caughtUp.Add(1) }) }
		f := &Follower{Path: path, From: cur.Offset, Logger: log, OnLine: func(l []byte, end int64) {
			pts, _ := in.LineAt(l, end, time.Now())
			if len(pts) > 0 && c.OnPoints != nil {
				c.OnPoints(pts)
			}
		}, OnEnd: caughtUp}
		c.streamStops = append(c.streamStops, f.Stop)
		c.streams++
		c.streamsWG.Add(1)
		go func() {
			defer c.streamsWG.Done()
			defer caughtUp()
			if err := f.Run(fctx); err != nil && fctx.Err() == nil {
				log.Warn("follow stage output", "file", path, "err", err)
			}
			if fctx.Err() == nil { // read to its end (Stop), not abandoned
				if pts := in.End(); len(pts) > 0 && c.OnPoints != nil {
					c.OnPoints(pts)
				}
			}
		}()
	}
	if c.Stdout != "" {
		stream("stdout", c.Stdout, true)
	}
	if c.Stderr != "" {
		stream("stderr", c.Stderr, true)
	}
	if c.StageDir != "" && c.Files != NoFiles {
		stream("file:metrics.jsonl", filepath.Join(c.StageDir, "metrics.jsonl"), false)
	}

	tb := &TBFollower{Locations: tbLocs, RunDir: c.RunDir, RunID: c.RunID, Stage: c.Stage, Attempt: c.Attempt,
		Writer: c.Writer, Skip: skip, Cursors: cursors, Since: c.Since, Logger: log, OnPoints: c.OnPoints, Keys: keys,
		OnProblem: func(path string, err error) {
			c.note("tensorboard_damaged",
				fmt.Sprintf("TensorBoard event file %s is damaged (%v); its readable scalars were kept", filepath.Base(path), err),
				"nothing to do unless curves are missing: a writer killed mid-record or a disk error leaves such a file")
		}}
	csvF := &CSVFollower{Locations: csvLocs, RunDir: c.RunDir, RunID: c.RunID, Stage: c.Stage, Attempt: c.Attempt,
		Writer: c.Writer, Cursors: cursors, Since: c.Since, Logger: log, OnPoints: c.OnPoints, Keys: keys}
	jsonF := &JSONFollower{Lines: jsonLocs, States: stateLocs, RunDir: c.RunDir, RunID: c.RunID, Stage: c.Stage, Attempt: c.Attempt,
		Writer: c.Writer, Cursors: cursors, Since: c.Since, Logger: log, OnPoints: c.OnPoints, Keys: keys,
		SkipStates: c.skipTrainerState}
	c.stops = append(c.stops, tb.Stop, csvF.Stop, jsonF.Stop)
	c.wg.Add(3)
	go func() {
		defer c.wg.Done()
		if err := jsonF.Run(fctx); err != nil && fctx.Err() == nil {
			log.Warn("follow JSON logs", "run", c.RunID, "stage", c.Stage, "err", err)
		}
	}()
	go func() {
		defer c.wg.Done()
		if err := tb.Run(fctx); err != nil && fctx.Err() == nil {
			log.Warn("follow TensorBoard logs", "run", c.RunID, "stage", c.Stage, "err", err)
		}
	}()
	go func() {
		defer c.wg.Done()
		if err := csvF.Run(fctx); err != nil && fctx.Err() == nil {
			log.Warn("follow CSV logs", "run", c.RunID, "stage", c.Stage, "err", err)
		}
	}()
	return nil
}

// Stop reads every source to its end (the attempt has ended), hands the
// points to the writer and returns. It may block while the writer's store
// fails and its queue is full: the points wait, nothing is dropped. Then
// call Stored.
func (c *Collector) Stop() {
	// The output streams first: what they hold decides whether
	// trainer_state.json is read.
	stopAll(c.streamStops)
	c.streamsWG.Wait()
	stopAll(c.stops)
	c.wg.Wait()
	if c.cancel != nil {
		c.cancel()
	}
	for _, w := range c.watches {
		w.End()
	}
}

// stopAll calls the stops at once and waits for them all.
func stopAll(stops []func()) {
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Add(1)
		go func() { defer wg.Done(); stop() }()
	}
	wg.Wait()
}

// Abandon stops following without draining (this process stops owning the
// attempt; the next owner reads on from the stored cursors).
func (c *Collector) Abandon() {
	if c.cancel != nil {
		c.cancel()
	}
	c.streamsWG.Wait()
	c.wg.Wait()
}

// Stored waits until every point the collector handed to the writer is
// stored, however long the store fails; it returns early only when ctx
// ends (with its error) or the writer is closed. The engine reports an
// attempt's end only after Stored, so a stage never succeeds with points
// still missing from the archive.
func (c *Collector) Stored(ctx context.Context) error {
	return c.Writer.Flush(ctx)
}

func (c *Collector) note(kind, msg, fix string) {
	if c.OnNote != nil {
		c.OnNote(kind, msg, fix)
	}
}

// keysExceeded is the one note of an attempt over its limit on keys.
func (c *Collector) keysExceeded(max, ignored int) {
	c.note("metrics_keys_limit",
		fmt.Sprintf("stage %s reported more than %s distinct metric keys, the limit per stage: its first %s keys are kept and go on "+
			"being recorded; %s more keys in the same line, and every new key after them, are ignored",
			c.Stage, thousands(int64(max)), thousands(int64(max)), thousands(int64(ignored))),
		"log fewer distinct keys (aggregate per-class or per-layer values, or write them to a file of the stage's own); "+
			"keys that carry an id or a counter in their name are the usual cause")
}

// thousands writes n with comma separators: 10000 → "10,000".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (c *Collector) unmatched(r textrule.Rule, lines int64) {
	streams := "stdout and stderr"
	if r.Stream == textrule.Stdout || r.Stream == textrule.Stderr {
		streams = r.Stream
	}
	what := fmt.Sprintf("the first %d lines", lines)
	if lines < DefaultRuleWatchLines {
		what = fmt.Sprintf("its %d lines", lines)
	}
	c.note("metrics_unmatched",
		fmt.Sprintf("metrics %s matched nothing in %s of %s", r.Name(), what, streams),
		"compare it with the stage's output (niuma logs RUN STAGE): choose the preset that fits, or write a pattern with named groups")
}

// countLines counts the newlines in the first n bytes of a file.
func countLines(path string, n int64) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.LimitReader(f, n), 64<<10)
	var lines int64
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		lines += int64(bytes.Count(buf[:k], []byte("\n")))
		if err != nil {
			return lines
		}
	}
}
