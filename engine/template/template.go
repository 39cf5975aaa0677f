package template

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	"niuma/metrics/textrule"
	"niuma/sentinel"
)

// Kind is the type of a parameter.
type Kind string

// The parameter kinds a template may declare.
const (
	KindFloat  Kind = "float"
	KindInt    Kind = "int"
	KindBool   Kind = "bool"
	KindChoice Kind = "choice"
	KindString Kind = "string"
)

// Kinds lists every parameter kind, in the order used in messages.
var Kinds = []Kind{KindFloat, KindInt, KindBool, KindChoice, KindString}

// EngineVars are the variables, besides params.NAME, that the engine
// provides to ${...} references in stage commands and env values:
//
//	code      the template's directory (Template.Dir)
//	run_dir   the run directory
//	stage_dir the stage's own directory inside the run directory
//	run_id    the run's ID
//	stage     the stage's name
//	seed      the run's global seed
var EngineVars = []string{"code", "run_dir", "stage_dir", "run_id", "stage", "seed", "data"}

// Param is one entry of a template's parameter schema.
type Param struct {
	Name    string
	Type    Kind
	Default any      // float64 | int64 | bool | string, matching Type
	Min     *float64 // for float/int; nil = unbounded (whole numbers for int)
	Max     *float64 // for float/int; nil = unbounded (whole numbers for int)
	Log     bool     // log-scale slider hint; requires Min > 0
	Choices []string // for choice
	Help    string
	// When lists the conditions under which the parameter applies (all
	// must hold), e.g. momentum only when optimizer is sgd. A parameter
	// that does not apply keeps its value, is not swept and not searched.
	When []Condition
	Line int // line in the YAML, for errors
}

// Condition makes a parameter apply only when another parameter, declared
// above it, has one of the listed values (as FormatValue writes them).
type Condition struct {
	Param  string
	Values []string
	Line   int
}

// Stage is one step of an experiment's DAG.
type Stage struct {
	Name         string
	Command      []string // argv; never a shell string. May hold ${...} references (see Expand).
	Needs        []string // stages that must succeed first
	GPUs         int
	GPUMemoryMiB int64 // per-GPU memory the stage needs; 0 = unspecified
	// GPUsParam and GPUMemoryParam name the parameters that set GPUs and
	// GPUMemoryMiB per run (gpus: ${params.gpus}); GPUs and GPUMemoryMiB
	// then hold their defaults. NeedsOf gives a run's values.
	GPUsParam      string
	GPUMemoryParam string
	// CPUMilli and MemMiB are what it asks of the host (cpus: 2, memory:
	// 8GiB): CPUs in thousandths, 0 = the engine's default of one CPU;
	// memory 0 = not asked. Estimate is how long it is expected to run
	// (estimate: 40m), 0 = none: the predictor's estimate, else unknown.
	CPUMilli int64
	MemMiB   int64
	Estimate time.Duration
	Retries  int
	Timeout  time.Duration // 0 = none
	Env      map[string]string
	// Metrics are text rules for the stage's output (presets and patterns;
	// JSON lines need none). TensorBoard and CSV are globs, relative to the
	// run directory, of event files and CSV logs to read besides the usual
	// places (see the README's stage contract).
	Metrics     []textrule.Rule
	TensorBoard []string
	CSV         []string
	Line        int // line in the YAML, for errors
}

// Runtime says where stages run: Kind "local" (host processes), "docker"
// (containers of Image, which is then required; naming an image without a
// kind means docker) or "slurm" (batch jobs on a Slurm cluster; a stage
// runs in the node's own environment, so Image is not allowed).
//
// The other fields tune the container of a docker stage; a local stage
// ignores them. Zero values mean the executor's defaults (shared memory
// 1 GiB, bridge network, no memory or CPU limit, the user running Niuma,
// the machine's process limit, the container removed when it ends, every
// capability dropped). What no template can loosen is package sandbox's.
type Runtime struct {
	Kind  string
	Image string
	// Fallback "local" lets a docker template run on the host when its
	// image is not on this machine or Docker cannot be reached, without
	// the container's isolation; "" means its stages wait for Docker.
	Fallback string
	// Data is a directory of inputs (data: PATH, relative to the
	// template's directory); ${data} names it, read-only in a container.
	Data string

	ShmSizeMiB int64    // shm_size: /dev/shm; PyTorch DataLoader workers need more than Docker's 64 MB
	MemoryMiB  int64    // memory: hard memory limit; the kernel's OOM killer enforces it
	CPUs       float64  // cpus: CPU quota, e.g. 2.5
	User       string   // user: "uid[:gid]" or root (root only where sandbox.User allows it)
	Network    string   // network: "bridge" (default) or "none"
	Keep       bool     // keep: leave finished containers for inspection
	CapAdd     []string // cap_add: capabilities to keep, from sandbox.Capabilities, e.g. [SYS_PTRACE]
	PidsLimit  int64    // pids_limit: at most this many processes and threads (below the machine's limit)

	// Where a slurm stage's job goes; "" = the site's settings (slurm: in
	// settings.yaml), else Slurm's defaults. Memory and CPUs above become
	// the job's --mem and --cpus-per-task.
	Partition string // partition: one, or a comma-separated list Slurm may choose from
	Account   string // account: the Slurm account charged
	QOS       string // qos: the Slurm QOS
}

// Objective is the metric a run is judged by. Goal is "min" or "max";
// Metric "" means the template declares no objective.
type Objective struct {
	Metric string
	Goal   string
}

// Template is a parsed and validated experiment template.
type Template struct {
	Name, Description, Version string

	Runtime   Runtime
	Objective Objective
	Params    []Param // in YAML order
	Stages    []Stage // in YAML order
	// Sentinel says what to do about each kind of anomaly (flag when
	// absent): stop the run, or retry the attempt with changed parameters.
	Sentinel sentinel.Policy
	// Spot says its runs may be preempted: stopped with SIGTERM for
	// higher-priority work, requeued and resumed (NIUMA_RESUME set, the
	// stage directory kept). Share says they may share a GPU with other
	// runs when memory fits. A launch may set either for its runs.
	Spot, Share bool
	// Tune says which parameters a study searches and how it stops losing
	// trials (the tune: section).
	Tune Tune

	Source string // file path or "bundled:NAME", used in error messages
	Dir    string // directory the template came from ("" for in-memory); ${code} expands to it
	YAML   []byte // the original text

	// stageAt is where each stage is in Stages, as Parse left them: the
	// engine looks a stage up by name at every start, and a template may
	// have thousands. Stage checks it against Stages, so a template built
	// or changed by hand is still answered right.
	stageAt map[string]int
}

// ParseFile reads and parses the template at path. Errors name path as the
// file; Dir is set to the absolute directory holding the file.
func ParseFile(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError already names the file and the cause
	}
	t, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	t.Dir = filepath.Dir(abs)
	return t, nil
}

// Param returns the parameter called name.
func (t *Template) Param(name string) (Param, bool) {
	for _, p := range t.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Stage returns the stage called name.
func (t *Template) Stage(name string) (Stage, bool) {
	if i, ok := t.stageAt[name]; ok && i < len(t.Stages) && t.Stages[i].Name == name {
		return t.Stages[i], true
	}
	for _, s := range t.Stages {
		if s.Name == name {
			return s, true
		}
	}
	return Stage{}, false
}

// ParamNames returns the parameter names in alphabetical order.
func (t *Template) ParamNames() []string {
	names := make([]string, 0, len(t.Params))
	for _, p := range t.Params {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// Defaults returns every parameter's default value.
func (t *Template) Defaults() Values {
	v := make(Values, len(t.Params))
	for _, p := range t.Params {
		v[p.Name] = p.Default
	}
	return v
}

// Order returns the stage names in a deterministic topological order: a
// stage comes after every stage it needs, and among the stages that are
// ready at any point the one earliest in the YAML comes first. Templates
// from Parse are acyclic; for a hand-built template with a cycle, the
// stages that cannot be ordered follow in YAML order, and unknown needs are
// ignored. A repeated stage name appears once.
func (t *Template) Order() []string {
	index := make(map[string]int, len(t.Stages))
	for i, s := range t.Stages {
		if _, dup := index[s.Name]; !dup {
			index[s.Name] = i
		}
	}
	pending := make([]int, len(t.Stages)) // unmet needs per stage
	users := make([][]int, len(t.Stages)) // stages needing stage i
	var ready indexHeap
	for i, s := range t.Stages {
		if index[s.Name] != i {
			continue // a repeated name: ordered by its first occurrence
		}
		seen := map[string]bool{}
		for _, n := range s.Needs {
			j, ok := index[n]
			if !ok || j == i || seen[n] {
				continue
			}
			seen[n] = true
			pending[i]++
			users[j] = append(users[j], i)
		}
		if pending[i] == 0 {
			ready.push(i)
		}
	}
	out := make([]string, 0, len(index))
	placed := make([]bool, len(t.Stages))
	for ready.len() > 0 {
		i := ready.pop()
		placed[i] = true
		out = append(out, t.Stages[i].Name)
		for _, u := range users[i] {
			pending[u]--
			if pending[u] == 0 {
				ready.push(u)
			}
		}
	}
	for i, s := range t.Stages {
		if !placed[i] && index[s.Name] == i {
			out = append(out, s.Name)
		}
	}
	return out
}

// indexHeap is a min-heap of stage indices.
type indexHeap []int

func (h *indexHeap) len() int { return len(*h) }

func (h *indexHeap) push(x int) {
	*h = append(*h, x)
	a := *h
	for i := len(a) - 1; i > 0; {
		parent := (i - 1) / 2
		if a[parent] <= a[i] {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

func (h *indexHeap) pop() int {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a[l] < a[m] {
			m = l
		}
		if r < len(a) && a[r] < a[m] {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// indexStages fills stageAt; Parse calls it once the template is whole,
// and nothing writes it after, so concurrent readers need no lock.
func (t *Template) indexStages() {
	t.stageAt = make(map[string]int, len(t.Stages))
	for i, s := range t.Stages {
		t.stageAt[s.Name] = i
	}
}
