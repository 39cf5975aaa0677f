package engine

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"niuma/engine/executor"
	"niuma/engine/template"
)

// RunSpec is one run to be: a template, the values of its parameters, the
// run's seed and priority, and the executor to run it with.
type RunSpec struct {
	Template *template.Template
	Values   template.Values // nil = the template's defaults
	Seed     int64           // 0 = derived from the run's other inputs (see Engine.Provenance)
	Priority int
	Executor string // "" = the template's runtime kind
	// Sweep groups the runs of one launch (a sweep's points): they share
	// it, from NewSweepID. "" for a run launched alone.
	Sweep string
	// Spot and Share allow the shepherd to preempt the run or let it share
	// a GPU (besides what the template allows: either one says yes).
	Spot, Share bool
	// Needs override what the template's stages ask for.
	Needs Needs
	// FlagOnly makes the sentinel only flag (and notify) the run's
	// anomalies, never retry or stop it, whatever the template answers: a
	// retried point of a sweep would quietly become another point.
	FlagOnly bool
}

// NewSweepID returns an id for the runs of one sweep, sorting by time like
// run IDs ("s20261129-175700-3f2a").
func NewSweepID(now time.Time) string { return "s" + newRunID(now) }

// StudyPrefix begins every study's ID ("t20261202-010203-3f2a1b"): a
// study's trials share its ID as their sweep, and StudySweep tells them
// from a grid's.
const StudyPrefix = "t"

// StudySweep reports whether runs sharing sweep are a study's trials.
func StudySweep(sweep string) bool { return strings.HasPrefix(sweep, StudyPrefix) }

// newRunID returns an ID that sorts by creation time and is unique enough
// to type a short prefix of.
func newRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// NewSeed picks a random seed that fits in 31 bits, so that every
// framework's seeding function accepts it: for "run it again with a new
// seed" (a spec without a seed gets one derived from its inputs instead).
func NewSeed() int64 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return int64(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) & 0x7fffffff
}

// vars are the engine variables a stage's command may name as ${name}.
func vars(runID, runDir, stage, codeDir, dataDir string, seed int64, values template.Values) map[string]string {
	v := map[string]string{
		"code":      codeDir,
		"data":      dataDir,
		"run_dir":   runDir,
		"stage_dir": filepath.Join(runDir, stage),
		"run_id":    runID,
		"stage":     stage,
		"seed":      strconv.FormatInt(seed, 10),
	}
	for k, s := range values.Strings() {
		v["params."+k] = s
	}
	return v
}

// dataDir is the host path of a template's data directory: as written
// when absolute, else relative to the template's directory.
func dataDir(t *template.Template) string {
	d := t.Runtime.Data
	if d == "" || filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(t.Dir, d)
}

// containerOf is what a template says about its stages' containers.
func containerOf(rt template.Runtime) executor.Container {
	return executor.Container{
		ShmSizeMiB: rt.ShmSizeMiB, MemoryMiB: rt.MemoryMiB, CPUs: rt.CPUs, User: rt.User,
		Network: rt.Network, Keep: rt.Keep, CapAdd: rt.CapAdd, PidsLimit: rt.PidsLimit,
	}
}

// contractEnv is the environment the stage contract promises a workload.
func contractEnv(runID, runDir, stage string, attempt int, seed int64, values template.Values, extra map[string]string) map[string]string {
	env := map[string]string{
		"NIUMA_RUN_ID":  runID,
		"NIUMA_RUN_DIR": runDir,
		"NIUMA_STAGE":   stage,
		"NIUMA_ATTEMPT": strconv.Itoa(attempt),
		"NIUMA_SEED":    strconv.FormatInt(seed, 10),
		// Python buffers stdout when it is not a terminal; metrics should
		// arrive as they are printed.
		"PYTHONUNBUFFERED": "1",
	}
	for k, s := range values.Strings() {
		env["NIUMA_PARAM_"+envName(k)] = s
	}
	for k, s := range extra {
		env[k] = s
	}
	return env
}

// envName turns a parameter name into the suffix of its variable:
// "batch-size" → "BATCH_SIZE".
func envName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		default:
			return '_'
		}
	}, name)
}

// expandArgv expands ${...} in every element of a command.
func expandArgv(argv []string, v map[string]string) ([]string, error) {
	out := make([]string, len(argv))
	for i, a := range argv {
		s, err := template.Expand(a, v)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// sortedKeys is for stable output of maps.
func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stageFolder says whether dir, in a run's folder, is a stage's own: one
// level down, with an attempt's log in it (the layout stageLogPaths
// makes). The metrics readers leave such folders to their stages.
func stageFolder(runDir string) func(dir string) bool {
	return func(dir string) bool {
		if filepath.Dir(dir) != filepath.Clean(runDir) {
			return false
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "attempt-*.stdout.log"))
		return len(logs) > 0
	}
}

func stageLogPaths(runDir, stage string, attempt int) (stdout, stderr string) {
	dir := filepath.Join(runDir, stage)
	return filepath.Join(dir, fmt.Sprintf("attempt-%d.stdout.log", attempt)),
		filepath.Join(dir, fmt.Sprintf("attempt-%d.stderr.log", attempt))
}
