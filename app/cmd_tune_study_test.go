package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/storage"
	"niuma/tuner"
)

// A workload whose score grows with x and with the step: trials with a
// small x fall behind early and the median rule stops them.
const rampTemplate = `name: ramp
objective: {metric: score, goal: max}
params:
  x: {type: float, default: 0.5, min: 0.01, max: 1}
  steps: {type: int, default: 10, min: 1, max: 100}
  mode: {type: choice, default: up, choices: [up, flat]}
  tag: {type: string, default: a}
tune: {search: [x, mode], pruner: median, warmup: 3}
stages:
  - name: train
    command: [awk, -v, "x=${params.x}", -v, "n=${params.steps}", -v, "m=${params.mode}", 'BEGIN { f = (m == "up") ? 1 : 0.6; for (i = 1; i <= n; i++) { printf "{\"step\": %d, \"score\": %.6f}\n", i, f * x * i / n; system("sleep 0.15") } }']
`

type statusOut struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Budget int    `json:"budget"`
	Runs   int    `json:"runs"`
	Best   *int   `json:"best"`
	Trials []struct {
		Number    int      `json:"number"`
		Run       string   `json:"run"`
		State     string   `json:"state"`
		Method    string   `json:"method"`
		Objective *float64 `json:"objective"`
		Pruned    *struct {
			Reason   string `json:"reason"`
			Evidence string `json:"evidence"`
			Compared []struct {
				Run string `json:"run"`
			} `json:"compared"`
		} `json:"pruned"`
	} `json:"trials"`
}

func studyStatus(t *testing.T, id string) statusOut {
	t.Helper()
	code, out, errOut := niuma(t, "tune", "--status", id, "--json")
	require.Equal(t, 0, code, errOut)
	var s statusOut
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	return s
}

// studyID picks the study ID out of `niuma tune T`'s first line.
func studyID(t *testing.T, out string) string {
	t.Helper()
	f := strings.Fields(out)
	require.GreaterOrEqual(t, len(f), 2, out)
	require.Equal(t, "study", f[0], out)
	return strings.TrimSuffix(f[1], ":")
}

func TestTuneStudyRunsPrunesAndReports(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, rampTemplate)
	code, out, errOut := niuma(t, "tune", tmpl, "--budget", "8", "--parallel", "2", "--wait")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	id := studyID(t, out)
	assert.Contains(t, out, "over x (float), mode (2 choices); 8 trials, 2 at once (as given), pruner median")
	assert.Contains(t, out, "pruned (run ")
	assert.Contains(t, out, "median of ")
	assert.Regexp(t, `study \S+ finished: 8 trials \(\d+ done, \d+ pruned, 0 failed, 0 cancelled\)`, out)
	assert.Contains(t, out, "the template's values (trial 0, run ")

	s := studyStatus(t, id)
	require.Equal(t, "finished", s.State)
	require.Len(t, s.Trials, 8)
	require.Equal(t, 8, s.Runs, "one run per trial")
	pruned := 0
	for _, tr := range s.Trials {
		if tr.State == "pruned" {
			pruned++
			require.NotNil(t, tr.Pruned, "trial %d: pruned without evidence", tr.Number)
			require.Equal(t, "below_median", tr.Pruned.Reason)
			require.NotEmpty(t, tr.Pruned.Compared)
			// The run itself was stopped through the engine, ends pruned, and says why.
			assert.Equal(t, "pruned", showJSONOf(t, tr.Run).State)
			code, shownOut, _ := niuma(t, "show", tr.Run)
			require.Equal(t, 0, code)
			assert.Contains(t, shownOut, "pruned    by study "+id+" (trial ")
		}
	}
	require.Positive(t, pruned)
	require.NotNil(t, s.Best)
	require.Equal(t, "defaults", s.Trials[0].Method)
	require.GreaterOrEqual(t, *s.Trials[*s.Best].Objective, *s.Trials[0].Objective)

	code, out, errOut = niuma(t, "tune", "--status", id)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "best so far (*)")
	assert.Contains(t, out, "suggested next: x=")
	assert.Contains(t, out, "parameter importance: x ")
	code, out, _ = niuma(t, "tune", "--status")
	require.Equal(t, 0, code)
	assert.Contains(t, out, id)
	assert.Contains(t, out, "8/8")

	code, _, errOut = niuma(t, "tune", "--resume", id, "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "has finished")

	// What the window's study view gets.
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	defer db.Close()
	sums, err := studySummaries(context.Background(), db, home)
	require.NoError(t, err)
	require.Len(t, sums, 1)
	sum := sums[0]
	assert.Equal(t, "done", sum.State)
	assert.Equal(t, 8, sum.Done)
	assert.Equal(t, pruned, sum.Pruned)
	assert.Zero(t, sum.Running)
	assert.True(t, sum.HasBest)
	assert.Equal(t, s.Trials[*s.Best].Run, sum.BestRun)
	assert.Nil(t, sum.Next, "a finished study suggests nothing more")

	// The study's report: its section first, the pruning evidence in it,
	// then its eight runs compared.
	path := filepath.Join(t.TempDir(), "study.html")
	code, out, errOut = niuma(t, "report", "--study", id, "-o", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "8 runs")
	html, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(html), "Study "+id+": ramp")
	assert.Contains(t, string(html), "median of ")
	assert.Contains(t, string(html), "best score so far")
	code, _, errOut = niuma(t, "report", "--study", id, s.Trials[0].Run)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "takes no RUN")
}

// Without --wait the study goes on in the background; --stop ends it:
// no more trials, the running ones cancelled and recorded.
func TestTuneStudyInTheBackgroundAndStop(t *testing.T) {
	bin := buildNiuma(t)
	home := tempHome(t)
	tmpl := writeTemplate(t, strings.Replace(rampTemplate, "default: 10, min: 1, max: 100", "default: 200, min: 1, max: 1000", 1))
	env := append(os.Environ(), "NIUMA_HOME="+home, "NIUMA_BACKGROUND_ENGINE=off")
	cmd := exec.Command(bin, "tune", tmpl, "--budget", "6", "--parallel", "2")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	id := studyID(t, string(out))
	assert.Contains(t, string(out), "driving it in the background (pid ")
	require.Eventually(t, func() bool {
		s := studyStatus(t, id)
		return len(s.Trials) == 2 && s.Trials[1].Run != ""
	}, time.Minute, 50*time.Millisecond)
	stop := exec.Command(bin, "tune", "--stop", id)
	stop.Env = env
	out, err = stop.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "stopping study "+id)
	require.Eventually(t, func() bool {
		s := studyStatus(t, id)
		for _, tr := range s.Trials {
			if tr.State != "cancelled" && tr.State != "done" {
				return false
			}
		}
		return s.State == "stopped"
	}, time.Minute, 50*time.Millisecond)
	s := studyStatus(t, id)
	require.Len(t, s.Trials, 2, "nothing launched after the stop")
	code, _, errOut := niuma(t, "tune", "--resume", id, "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "has stopped")
}

func TestTuneStudyRefusesBadInput(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, rampTemplate)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--space", "nope"}, `the template has no parameter "nope"`},
		{[]string{"--space", "tag"}, "tag: a string parameter cannot be searched"},
		{[]string{"--space", "x=0.5..2"}, "--space x=0.5..2: the template allows 0.01..1"},
		{[]string{"--space", "x=0.5"}, "write LO..HI"},
		{[]string{"--space", "x=0.1..0.5:cubic"}, `scale "cubic": use log or linear`},
		{[]string{"--space", "x", "--set", "x=0.3"}, "x is also fixed with --set"},
		{[]string{"--parallel", "many"}, "--parallel many: give auto or a number"},
		{[]string{"--budget", "0"}, "--budget 0: give 1 to 10000 trials"},
		{[]string{"--pruner", "hyperband"}, `pruner "hyperband": use none, median or asha`},
		{[]string{"--set", "x=7"}, "--set: "},
	} {
		code, _, errOut := niuma(t, append([]string{"tune", tmpl, "--wait"}, c.args...)...)
		assert.Equal(t, 2, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg, "%v", c.args)
	}
	code, _, errOut := niuma(t, "tune", "--status", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `no study "nope"`)
	code, out, _ := niuma(t, "tune", "--status")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "no studies yet", "nothing was stored for refused studies")
}

func TestAutoParallel(t *testing.T) {
	gpu := func(busy bool) gpumon.GPU {
		g := gpumon.GPU{UUID: "GPU-x", Healthy: true, MIGEnabled: new(bool)}
		if busy {
			g.Processes = []gpumon.Process{{PID: 1}}
		}
		return g
	}
	four := gpumon.Snapshot{GPUs: []gpumon.GPU{gpu(false), gpu(true), gpu(false), gpu(false)}}
	sick := gpu(false)
	sick.Healthy = false
	for _, c := range []struct {
		name               string
		snap               gpumon.Snapshot
		perTrial, cpus, bg int
		want               int
		why                string
	}{
		// 3 free GPUs / 1 per trial = 3
		{"one GPU a trial", four, 1, 2, 16, 3, "3 free GPUs of 4, 1 per trial"},
		// 3 free / 2 per trial = 1
		{"two GPUs a trial", four, 2, 2, 16, 1, "3 free GPUs of 4, 2 per trial"},
		{"no free GPU still runs one", gpumon.Snapshot{GPUs: []gpumon.GPU{gpu(true), sick}}, 1, 2, 16, 1, "0 free GPUs of 2"},
		// 16 cores / 2 = 8
		{"on the CPU", gpumon.Snapshot{}, 0, 16, 16, 8, "16 CPU cores, one trial per 2"},
		{"two cores", gpumon.Snapshot{}, 0, 2, 16, 1, "2 CPU cores"},
		{"never above the budget", gpumon.Snapshot{}, 0, 64, 5, 5, "64 CPU cores"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, why := autoParallel(c.snap, c.perTrial, c.cpus, c.bg)
			assert.Equal(t, c.want, n)
			assert.Contains(t, why, c.why)
		})
	}
}

// A study whose niuma is killed with SIGKILL mid-study carries on with
// `niuma tune --resume`: it finishes with its budget of trials, each its
// own run, none run twice.
func TestKilledStudyResumes(t *testing.T) {
	bin := buildNiuma(t)
	home := tempHome(t)
	tmpl := writeTemplate(t, rampTemplate)
	env := append(os.Environ(), "NIUMA_HOME="+home, "NIUMA_BACKGROUND_ENGINE=off")
	var out bytes.Buffer
	first := exec.Command(bin, "tune", tmpl, "--budget", "8", "--parallel", "2", "--wait")
	first.Env, first.Stdout, first.Stderr = env, &out, &out
	require.NoError(t, first.Start())

	var id string
	require.Eventually(t, func() bool {
		f := strings.Fields(out.String())
		if len(f) < 2 || f[0] != "study" {
			return false
		}
		id = strings.TrimSuffix(f[1], ":")
		s := studyStatus(t, id)
		return len(s.Trials) >= 4 // mid-study: some trials ended, some running
	}, 2*time.Minute, 50*time.Millisecond)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	before := studyStatus(t, id)
	require.Equal(t, "running", before.State, "killed, not finished:\n%s", out.String())
	require.Less(t, len(before.Trials), 8)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	again := exec.CommandContext(ctx, bin, "tune", "--resume", id, "--wait")
	again.Env = env
	var out2 bytes.Buffer
	again.Stdout, again.Stderr = &out2, &out2
	require.NoError(t, again.Run(), "before the kill:\n%s\nafter:\n%s", out.String(), out2.String())
	assert.Contains(t, out2.String(), "finished: 8 trials")

	s := studyStatus(t, id)
	require.Equal(t, "finished", s.State)
	require.Len(t, s.Trials, 8)
	require.Equal(t, 8, s.Runs, "no trial's run was submitted twice")
	runs := map[string]bool{}
	for i, tr := range s.Trials {
		require.Equal(t, i, tr.Number)
		require.NotEmpty(t, tr.Run)
		require.False(t, runs[tr.Run], "run %s is two trials", tr.Run)
		runs[tr.Run] = true
		require.Contains(t, []string{"done", "pruned"}, tr.State, "trial %d", tr.Number)
		// A trial the kill caught between submitting its run and linking
		// it has none yet: the resume links the run it finds (s.Runs
		// above says none was submitted twice), so only those linked
		// before are compared.
		if i < len(before.Trials) && before.Trials[i].Run != "" {
			require.Equal(t, before.Trials[i].Run, tr.Run, "trial %d kept its run across the kill", i)
		} else if i < len(before.Trials) {
			t.Logf("trial %d (%s) had no run linked when killed; resumed with run %s", i, before.Trials[i].State, tr.Run)
		}
	}
}

// Whatever --space says, the space is refused with a message or lies
// inside the template's schema.
func FuzzStudySpace(f *testing.F) {
	for _, s := range []string{"x", "x=0.1..0.5", "x=0.1..0.5:log", "mode=up", "mode=up,flat,up", "x=..", "x=1e400..2", "steps=2..3", "steps=2.5..3", "tag", "x=0.5..0.1", "x=nan..1"} {
		f.Add(s)
	}
	tm, err := template.Parse("ramp.yaml", []byte(rampTemplate))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, spec string) {
		sp, err := studySpace(tm, []string{spec}, nil)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, sp.Searchable())
		for _, p := range sp.Params {
			q, ok := tm.Space().Param(p.Name)
			require.True(t, ok)
			if p.Kind == tuner.Float || p.Kind == tuner.Int {
				require.GreaterOrEqual(t, p.Min, q.Min, spec)
				require.LessOrEqual(t, p.Max, q.Max, spec)
			}
			for _, c := range p.Choices {
				require.Contains(t, q.Choices, c)
			}
		}
	})
}

// `niuma tune --status STUDY` of a study still in its opening design says
// why it shows no prediction for the next trial.
func TestTuneStatusSaysTheDesignComesFirst(t *testing.T) {
	tempHome(t)
	path := writeTemplate(t, "name: d\nobjective: {metric: loss, goal: min}\nparams:\n  x: {type: float, default: 0.5, min: 0, max: 1}\n  y: {type: int, default: 1, min: 1, max: 9}\nstages:\n  - name: a\n    command: [\"true\"]\n")
	s, err := open(io.Discard)
	require.NoError(t, err)
	tm, err := loadTemplate(s.home, path)
	require.NoError(t, err)
	st, _, _, err := createStudy(context.Background(), s.engine, s.store, tm, path, nil, studyFlags{budget: 8, parallel: "1", pruner: "none", seed: 1})
	require.NoError(t, err)
	s.close()
	code, out, errOut := niuma(t, "tune", "--status", st.ID)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "suggested next: a point of the opening design, spread over the space (the model suggests from 5 results on; 0 so far)\n")
}
