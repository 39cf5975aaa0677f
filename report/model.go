package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is what one export describes: a single run (a run report) or
// two to a hundred runs (a comparison report). The caller fills it from the
// archive; every format renders the same Report.
type Report struct {
	Title     string    // shown at the top; empty: derived from the runs
	Generated time.Time // when the report was made; zero: not shown
	Runs      []Run
	// Study, when set, is the study whose trials the runs are: the report
	// opens with its section.
	Study *Study
}

// MaxRuns is the most runs one comparison report takes.
const MaxRuns = 100

// Run is one run as a report shows it.
type Run struct {
	ID              string
	Template        string
	TemplateVersion string
	TemplateSource  string
	State           string // queued, running, succeeded, failed, cancelled
	Error           string // why the run failed, when it did
	Params          []Param
	Seed            int64
	Executor        string
	Fingerprint     string
	Objective       Objective
	// Provenance lists what is known about where the run came from, in the
	// order to show it: image and digest, code and data hashes, git commit,
	// host, GPU models, driver. Unknown items are simply left out.
	Provenance []Item
	Created    time.Time
	Started    time.Time
	Finished   time.Time
	Stages     []Stage
	Metrics    []Metric
	Anomalies  []Anomaly
	GPUs       []GPUUsage
	// Host is what each stage used of the host (memory, CPU time), in
	// the run's stage order; stages without a record are left out.
	Host []HostUsage
	// Logs are the tails of the logs of failed stages.
	Logs []LogTail
}

// Param is one parameter of a run. Value is kept as the run recorded it
// (a float64, int64, string or bool), so that numbers can be plotted.
type Param struct {
	Name  string
	Value any
}

// String formats the value the way the CLI shows it.
func (p Param) String() string { return formatAny(p.Value) }

// Item is one labelled fact, such as a provenance entry.
type Item struct{ Label, Value string }

// Objective is the metric a run is judged by: Goal is "min" or "max".
// Metric "" means none was declared; the report then guesses (see
// [Run.EffectiveObjective]).
type Objective struct {
	Metric string `json:"metric"`
	Goal   string `json:"goal"`
}

// Stage is one stage of a run.
type Stage struct {
	Name        string        `json:"name"`
	State       string        `json:"state"`
	Attempts    int           `json:"attempts"`
	MaxAttempts int           `json:"max_attempts"`
	ExitCodes   []int         `json:"exit_codes"` // of each finished attempt, in order
	Duration    time.Duration `json:"duration_ns"`
	Reason      string        `json:"reason,omitempty"`
	// PointsLost counts its metric points that could never be stored (its
	// Reason says so too).
	PointsLost int64 `json:"points_lost,omitempty"`
}

// Metric is one curve: a key reported by one stage, from the attempt
// whose values count (the latest that reported it). Steps and Values have
// the same length; Walls is either nil or of the same length too.
type Metric struct {
	Stage   string
	Attempt int
	Key     string
	Steps   []int64
	Values  []float64
	Walls   []time.Time
}

// Anomaly is something the sentinel noticed, and what was done about it.
type Anomaly struct {
	At      time.Time `json:"at"`
	Stage   string    `json:"stage"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Action  string    `json:"action"`
}

// GPUUsage summarises one GPU over a run, from the per-minute GPU records:
// utilisation, the memory the run's own processes held, temperature and
// power (mean and peak), throttling and XID errors. A figure that was never
// reported is NaN. Simulated marks a simulated GPU: pretend telemetry, which
// every format labels as such.
type GPUUsage struct {
	Index     int
	Model     string
	UUID      string
	Simulated bool
	Stages    []string  // the run's stages that ran on it
	From, To  time.Time // the time the run held it

	MeanUtil, PeakUtil     float64 // %
	MeanMemMiB, PeakMemMiB float64 // the run's processes only
	TotalMemMiB            float64 // 0: unknown
	MeanTempC, PeakTempC   float64
	MeanPowerW, PeakPowerW float64
	PowerLimitW            float64 // 0: unknown

	Samples          int // readings behind the figures; 0: none recorded
	ThrottledSamples int // readings whose clocks a limit held down
	ThrottledMinutes int
	ThrottleReasons  []string
	XIDs             []XIDEvent
	// Events are the sentinel's findings about this GPU while the run held
	// it that are not the run's own anomalies (a GPU overheating).
	Events []Anomaly
	// Curve is the GPU minute by minute, oldest first.
	Curve []GPUPoint
}

// XIDEvent is one XID error of a GPU, in the minute it was recorded.
type XIDEvent struct {
	At   time.Time
	Code uint64
}

// GPUPoint is one minute of a GPU's record: means over the minute (the
// run's memory: its peak). NaN where not reported.
type GPUPoint struct {
	At                            time.Time
	UtilPct, MemMiB, TempC, Power float64
}

// Label names the GPU in tables and legends: "GPU 1 (simulated)".
func (g GPUUsage) Label() string {
	l := fmt.Sprintf("GPU %d", g.Index)
	if g.Simulated {
		l += " (simulated)"
	}
	return l
}

// LogTail is the end of one attempt's output.
type LogTail struct {
	Stage   string
	Attempt int
	Stream  string // "stdout" or "stderr"; empty: the two together
	Lines   []string
}

// Summary is a metric's final and extreme values.
type Summary struct {
	Points      int
	Final, Best float64 // Best follows the metric's goal (min or max)
	BestStep    int64
	FinalStep   int64
	Goal        string // "min" or "max"
	Finite      bool   // false: no finite value at all
}

// Summarize computes final and best values of m with the given goal
// ("min" or "max"; anything else is taken as [GuessGoal] of the key).
// NaN and infinite values are skipped for the best value.
func (m Metric) Summarize(goal string) Summary {
	if goal != "min" && goal != "max" {
		goal = GuessGoal(m.Key)
	}
	s := Summary{Points: len(m.Values), Goal: goal, Final: math.NaN(), Best: math.NaN()}
	if n := len(m.Values); n > 0 {
		s.Final, s.FinalStep = m.Values[n-1], m.Steps[n-1]
	}
	for i, v := range m.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if !s.Finite || (goal == "max" && v > s.Best) || (goal == "min" && v < s.Best) {
			s.Best, s.BestStep, s.Finite = v, m.Steps[i], true
		}
	}
	return s
}

// GuessGoal says whether smaller or larger is better for a metric, from
// its name: accuracies, scores and rewards go up, everything else (loss,
// error, perplexity, time) down.
func GuessGoal(key string) string {
	k := strings.ToLower(key)
	for _, up := range []string{"acc", "f1", "auc", "score", "precision", "recall", "reward", "bleu", "rouge", "map", "iou", "dice", "r2"} {
		if strings.Contains(k, up) {
			return "max"
		}
	}
	return "min"
}

// EffectiveObjective is the declared objective, or a guess when the
// template declared none: the first metric whose name says accuracy,
// else the last stage's loss, else the first metric.
func (r Run) EffectiveObjective() Objective {
	if r.Objective.Metric != "" {
		o := r.Objective
		if o.Goal != "min" && o.Goal != "max" {
			o.Goal = GuessGoal(o.Metric)
		}
		return o
	}
	for _, m := range r.Metrics {
		if GuessGoal(m.Key) == "max" {
			return Objective{Metric: m.Key, Goal: "max"}
		}
	}
	for i := len(r.Metrics) - 1; i >= 0; i-- {
		if strings.Contains(strings.ToLower(r.Metrics[i].Key), "loss") {
			return Objective{Metric: r.Metrics[i].Key, Goal: "min"}
		}
	}
	if len(r.Metrics) > 0 {
		return Objective{Metric: r.Metrics[0].Key, Goal: GuessGoal(r.Metrics[0].Key)}
	}
	return Objective{}
}

// ObjectiveMetric returns the curve of the objective: of the stages that
// reported it, the last one in stage order (validation after training).
func (r Run) ObjectiveMetric(o Objective) (Metric, bool) {
	var found Metric
	ok := false
	for _, m := range r.Metrics {
		if m.Key == o.Metric {
			found, ok = m, true
		}
	}
	return found, ok
}

// Name is how the run is called in titles and legends.
func (r Run) Name() string {
	if r.Template == "" {
		return r.ID
	}
	return r.Template + " " + r.ID
}

// Duration is how long the run took, or 0 when it has not finished.
func (r Run) Duration() time.Duration {
	if r.Started.IsZero() || r.Finished.IsZero() {
		return 0
	}
	return r.Finished.Sub(r.Started)
}

func (rep *Report) title() string {
	if rep.Title != "" {
		return rep.Title
	}
	if rep.Study != nil {
		return fmt.Sprintf("Study %s: %s", rep.Study.ID, rep.Study.Template)
	}
	switch len(rep.Runs) {
	case 0:
		return "Niuma report"
	case 1:
		return "Run report: " + rep.Runs[0].Name()
	}
	return fmt.Sprintf("Comparison of %d runs", len(rep.Runs))
}

func (rep *Report) check() error {
	if len(rep.Runs) == 0 {
		return fmt.Errorf("report: no runs to report on: pick at least one run")
	}
	if len(rep.Runs) > MaxRuns {
		return fmt.Errorf("report: %d runs is more than a comparison report takes (%d): select fewer runs", len(rep.Runs), MaxRuns)
	}
	for _, r := range rep.Runs {
		for _, m := range r.Metrics {
			if len(m.Steps) != len(m.Values) || (m.Walls != nil && len(m.Walls) != len(m.Values)) {
				return fmt.Errorf("report: run %s metric %s/%s has %d steps, %d values and %d wall times: they must match", r.ID, m.Stage, m.Key, len(m.Steps), len(m.Values), len(m.Walls))
			}
		}
	}
	return nil
}

// Ranked is one row of a comparison's ranking.
type Ranked struct {
	Run     *Run
	Value   float64 // best value of the objective; NaN when the run has none
	Final   float64
	HasData bool
}

// Ranking orders the runs by the comparison's objective, best first; runs
// without a value of it come last, in their given order.
func (rep *Report) Ranking() (Objective, []Ranked) {
	o := rep.objective()
	out := make([]Ranked, len(rep.Runs))
	for i := range rep.Runs {
		r := &rep.Runs[i]
		out[i] = Ranked{Run: r, Value: math.NaN(), Final: math.NaN()}
		if m, ok := r.ObjectiveMetric(o); ok {
			s := m.Summarize(o.Goal)
			if s.Finite {
				out[i].Value, out[i].Final, out[i].HasData = s.Best, s.Final, true
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.HasData != b.HasData {
			return a.HasData
		}
		if !a.HasData {
			return false
		}
		if o.Goal == "max" {
			return a.Value > b.Value
		}
		return a.Value < b.Value
	})
	return o, out
}

// objective of a comparison: the one most runs declare (ties: the first
// run's), else the first run's guess.
func (rep *Report) objective() Objective {
	count := map[Objective]int{}
	var best Objective
	for _, r := range rep.Runs {
		o := r.EffectiveObjective()
		if o.Metric == "" {
			continue
		}
		count[o]++
		if count[o] > count[best] {
			best = o
		}
	}
	return best
}

// ParamDiff returns the names of the parameters whose values are not the
// same in every run (a parameter missing from a run counts as different),
// sorted by name, and each run's value of them ("" when missing).
func (rep *Report) ParamDiff() (names []string, values [][]string) {
	all := map[string]bool{}
	for _, r := range rep.Runs {
		for _, p := range r.Params {
			all[p.Name] = true
		}
	}
	for name := range all {
		first, differs := "", false
		for i, r := range rep.Runs {
			v, ok := r.param(name)
			s := "\x00missing"
			if ok {
				s = formatAny(v)
			}
			if i == 0 {
				first = s
			} else if s != first {
				differs = true
				break
			}
		}
		if differs {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	values = make([][]string, len(rep.Runs))
	for i, r := range rep.Runs {
		values[i] = make([]string, len(names))
		for j, n := range names {
			if v, ok := r.param(n); ok {
				values[i][j] = formatAny(v)
			}
		}
	}
	return names, values
}

func (r Run) param(name string) (any, bool) {
	for _, p := range r.Params {
		if p.Name == name {
			return p.Value, true
		}
	}
	return nil, false
}

// formatAny prints a parameter value compactly: floats without trailing
// noise, everything else as fmt's %v.
func formatAny(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return formatNum(x)
	case float32:
		return formatNum(float64(x))
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// formatNum prints a metric value with enough digits to compare runs.
func formatNum(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatFloat(f, 'f', -1, 64)
	case math.Abs(f) >= 1e-3 && math.Abs(f) < 1e6:
		return strconv.FormatFloat(f, 'g', 5, 64)
	}
	return strconv.FormatFloat(f, 'e', 3, 64)
}

// toFloat returns a parameter value as a number, when it is one.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case bool:
		return 0, false
	}
	return 0, false
}

func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func exitCodes(s Stage) string {
	if len(s.ExitCodes) == 0 {
		return "–"
	}
	parts := make([]string, len(s.ExitCodes))
	for i, c := range s.ExitCodes {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ", ")
}

func sortStrings(s []string) { sort.Strings(s) }
