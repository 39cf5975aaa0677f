package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// niuma runs the CLI in this process against a fresh data directory.
func niuma(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func tempHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("NIUMA_HOME", home)
	t.Setenv("NIUMA_BACKGROUND_ENGINE", "off")
	return home
}

func writeTemplate(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

type shown struct {
	State  string `json:"state"`
	Error  string `json:"error"`
	Stages []struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		Attempts int    `json:"attempts"`
		ExitCode *int   `json:"exit_code"`
	} `json:"stages"`
	Metrics []struct {
		Stage  string  `json:"stage"`
		Key    string  `json:"key"`
		Points int     `json:"points"`
		Value  float64 `json:"last_value"`
	} `json:"metrics"`
}

func showJSONOf(t *testing.T, id string) shown {
	t.Helper()
	code, out, errOut := niuma(t, "show", id, "--json")
	require.Equal(t, 0, code, errOut)
	var s shown
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	return s
}

// storedRun is showJSONOf for a condition that polls: a run's folder is
// written before its row is stored (intent before action), so a run found
// by its folder may not be shown yet, and that is no failure.
func storedRun(t *testing.T, id string) (shown, bool) {
	t.Helper()
	code, out, _ := niuma(t, "show", id, "--json")
	var s shown
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		return shown{}, false
	}
	return s, true
}

// runID picks the run ID out of `niuma run`'s first line.
func runID(t *testing.T, out string) string {
	t.Helper()
	f := strings.Fields(out)
	require.GreaterOrEqual(t, len(f), 2, out)
	return strings.TrimSuffix(f[1], ":")
}

func TestRunRefusesInvalidInputAndStoresNothing(t *testing.T) {
	tempHome(t)
	cycle := writeTemplate(t, "name: c\nstages:\n  - name: a\n    needs: [b]\n    command: [\"true\"]\n  - name: b\n    needs: [a]\n    command: [\"true\"]\n")
	unknown := writeTemplate(t, "name: u\nstages:\n  - name: a\n    needs: [prep]\n    command: [\"true\"]\n")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"a cycle", []string{"run", cycle}, []string{"t.yaml:", "cycle", "a → b → a"}},
		{"an unknown stage", []string{"run", unknown}, []string{"t.yaml:4", `unknown stage "prep"`}},
		{"a value of the wrong type", []string{"run", "digits-mlp", "--set", "lr=abc"}, []string{"lr", `"abc" is not a number`}},
		{"an unknown parameter", []string{"run", "digits-mlp", "--set", "lrr=1"}, []string{`unknown parameter "lrr"`}},
		{"a value out of range", []string{"run", "digits-mlp", "--set", "epochs=0"}, []string{"epochs"}},
		{"a missing template", []string{"run", "no-such-template"}, []string{`no template "no-such-template"`}},
		{"a malformed --set", []string{"run", "digits-mlp", "--set", "lr"}, []string{"NAME=VALUE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := niuma(t, tt.args...)
			require.NotEqual(t, 0, code)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
			for _, w := range tt.want {
				require.Contains(t, errOut, w)
			}
		})
	}
	code, out, _ := niuma(t, "ls", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, "[]", strings.TrimSpace(out), "nothing is stored for an invalid spec")
}

func TestFailingStageShowsItsExitCodeAfterRetries(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, "name: three\nstages:\n  - name: a\n    command: [sh, -c, \"exit 3\"]\n    retries: 2\n")
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 1, code, "--wait exits non-zero unless the run succeeded")
	require.Contains(t, errOut, "exited with code 3")
	id := runID(t, out)

	s := showJSONOf(t, id)
	require.Equal(t, "failed", s.State)
	require.Equal(t, 3, s.Stages[0].Attempts)
	require.Equal(t, 3, *s.Stages[0].ExitCode)
	code, text, _ := niuma(t, "show", id)
	require.Equal(t, 0, code)
	require.Regexp(t, `a\s+failed\s+3 of 3\s+3\s`, text)
}

func TestDemoRunsEndToEnd(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch, sklearn").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the demo needs python3-torch and python3-sklearn (make deps installs them): %v", err)
		}
		t.Skip("python3-torch or python3-sklearn missing: run make deps")
	}
	tempHome(t)
	code, out, errOut := niuma(t, "run", "digits-mlp", "--wait")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	s := showJSONOf(t, runID(t, out))
	require.Equal(t, "succeeded", s.State)
	require.Len(t, s.Stages, 4)
	for _, st := range s.Stages {
		require.Equal(t, "succeeded", st.State, st.Name)
	}
	metric := map[string]float64{}
	points := map[string]int{}
	for _, m := range s.Metrics {
		metric[m.Stage+"/"+m.Key] = m.Value
		points[m.Stage+"/"+m.Key] = m.Points
	}
	require.GreaterOrEqual(t, points["train/loss"], 20)
	require.Greater(t, metric["train/val_acc"], 0.9)

	code, logs, _ := niuma(t, "logs", runID(t, out), "train")
	require.Equal(t, 0, code)
	require.Contains(t, logs, `"val_acc"`)
	code, tl, _ := niuma(t, "templates")
	require.Equal(t, 0, code)
	require.Contains(t, tl, "digits-mlp")
}

// buildNiuma compiles the real binary, for tests that kill it.
func buildNiuma(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "niuma")
	cmd := exec.Command("go", "build", "-o", bin, "niuma")
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Run())
	return bin
}

// Killing `niuma run --wait` with SIGKILL leaves the stage running on its
// own; the next niuma adopts it (or, when its process died too, marks it
// lost and retries it). The run is never left "running" with no process.
func TestKilledNiumaIsRecovered(t *testing.T) {
	bin := buildNiuma(t)
	for _, tt := range []struct {
		name         string
		killStage    bool
		wantAttempts int
	}{
		{"the stage survives and is adopted", false, 1},
		{"the stage died too and is retried", true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := tempHome(t)
			tmpl := writeTemplate(t, `name: slow
stages:
  - name: a
    retries: 1
    command: [sh, -c, 'mkdir -p a; echo $$$$ > a/pid.$NIUMA_ATTEMPT; [ "$NIUMA_ATTEMPT" = 2 ] && exit 0; while [ ! -f a/go ]; do sleep 0.05; done']
  - name: b
    needs: [a]
    command: ["true"]
`)
			env := append(os.Environ(), "NIUMA_HOME="+home, "NIUMA_BACKGROUND_ENGINE=off")
			var out bytes.Buffer
			wait := exec.Command(bin, "run", tmpl, "--wait")
			wait.Env, wait.Stdout, wait.Stderr = env, &out, &out
			require.NoError(t, wait.Start())

			var runDir string
			require.Eventually(t, func() bool {
				m, _ := filepath.Glob(filepath.Join(home, "runs", "*", "a", "pid.1"))
				if len(m) == 1 {
					runDir = filepath.Dir(filepath.Dir(m[0]))
				}
				return len(m) == 1
			}, 60*time.Second, 20*time.Millisecond)
			// However the test ends, the stage's wait loop ends with it.
			t.Cleanup(func() { _ = os.WriteFile(filepath.Join(runDir, "a", "go"), nil, 0o644) })
			require.NoError(t, wait.Process.Signal(syscall.SIGKILL))
			_ = wait.Wait()
			id := filepath.Base(runDir)
			require.Equal(t, "running", showJSONOf(t, id).State, "nobody has looked yet")

			if tt.killStage {
				pid, err := os.ReadFile(filepath.Join(runDir, "a", "pid.1"))
				require.NoError(t, err)
				var p int
				_, err = fmtSscan(strings.TrimSpace(string(pid)), &p)
				require.NoError(t, err)
				pgid, err := syscall.Getpgid(p)
				require.NoError(t, err)
				require.NoError(t, syscall.Kill(-pgid, syscall.SIGKILL)) // the stage's whole process group
			}

			// Start niuma again.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			eng := exec.CommandContext(ctx, bin, "engine", "--until-idle")
			eng.Env = env
			var engOut bytes.Buffer
			eng.Stdout, eng.Stderr = &engOut, &engOut
			require.NoError(t, eng.Start())
			require.NoError(t, os.WriteFile(filepath.Join(runDir, "a", "go"), nil, 0o644))
			require.NoError(t, eng.Wait(), engOut.String()) // --until-idle: it exits once the run has ended

			s := showJSONOf(t, id)
			require.Equal(t, "succeeded", s.State, "engine log:\n%s", engOut.String())
			require.Equal(t, tt.wantAttempts, s.Stages[0].Attempts)
			require.Equal(t, "succeeded", s.Stages[1].State)
		})
	}
}

func fmtSscan(s string, p *int) (int, error) { return fmt.Sscan(s, p) }

// `niuma cancel` of a run that has already ended says there was nothing
// to stop and goes on with the next run, exiting 0: what cancel is for
// holds.
func TestCancelOfAnEndedRunGoesOn(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, "name: c\nstages:\n  - name: a\n    command: [\"true\"]\n")
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, errOut)
	done := runID(t, out)
	code, out, errOut = niuma(t, "run", tmpl, "--allow-duplicate") // queued: no engine runs it here
	require.Equal(t, 0, code, errOut)
	queued := runID(t, out)

	code, out, errOut = niuma(t, "cancel", done, queued)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "run "+done+" has already succeeded: nothing to stop\n")
	require.Contains(t, out, "cancelling "+queued+"\n", "the next run is cancelled")
}

// A flag a command does not take, or a bad value, is one line that says
// where the flags are listed (exit 2); --help lists them on stdout (exit 0).
func TestFlagErrorsAndHelp(t *testing.T) {
	tempHome(t)
	code, out, errOut := niuma(t, "run", "digits-mlp", "--bogus")
	require.Equal(t, 2, code)
	require.Empty(t, out)
	require.Equal(t, "niuma: run: flag provided but not defined: -bogus; `niuma run --help` lists its flags\n", errOut)
	code, _, errOut = niuma(t, "ls", "-n", "x")
	require.Equal(t, 2, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, `invalid value "x" for flag -n`)
	code, out, errOut = niuma(t, "run", "--help")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	require.Contains(t, out, "Usage of niuma run:")
	require.Contains(t, out, "-allow-duplicate")
}

// `niuma logs` of an attempt or a stage that has no output says why,
// instead of printing nothing.
func TestLogsOfWhatDidNotRunSaysSo(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, "name: l\nstages:\n  - name: a\n    command: [sh, -c, 'echo hello']\n")
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, errOut)
	ran := runID(t, out)
	code, out, _ = niuma(t, "logs", ran, "a")
	require.Equal(t, 0, code)
	require.Equal(t, "hello\n", out)
	code, out, errOut = niuma(t, "logs", ran, "a", "--attempt", "5")
	require.Equal(t, 1, code, out)
	require.Equal(t, "niuma: stage a of run "+ran+" has no attempt 5: it has had 1\n", errOut)

	code, out, errOut = niuma(t, "run", tmpl, "--allow-duplicate") // queued: no engine runs it here
	require.Equal(t, 0, code, errOut)
	queued := runID(t, out)
	code, _, errOut = niuma(t, "logs", queued, "a")
	require.Equal(t, 1, code)
	require.Equal(t, "niuma: stage a of run "+queued+" has not started (it is queued), so it has no output yet\n", errOut)
}

// `niuma show` of a run whose cancel is on its way says so, and a run
// still going gets no advice about metrics it may yet report.
func TestShowSaysACancelIsOnItsWay(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, "name: s\nstages:\n  - name: a\n    command: [\"true\"]\n")
	code, out, errOut := niuma(t, "run", tmpl) // queued: no engine runs it here
	require.Equal(t, 0, code, errOut)
	id := runID(t, out)
	code, _, errOut = niuma(t, "cancel", id)
	require.Equal(t, 0, code, errOut)
	code, out, errOut = niuma(t, "show", id)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "state     queued — cancel requested: its stages are being stopped\n")
	require.NotContains(t, out, "no metrics captured")
}

// `niuma run --wait` ends with the run's best objective, as the archive
// ranks it.
func TestWaitEndsWithTheObjective(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, "name: o\nobjective: {metric: acc, goal: max}\nstages:\n  - name: a\n    command: [sh, -c, 'echo \"{\\\"step\\\": 1, \\\"acc\\\": 0.5}\"; echo \"{\\\"step\\\": 2, \\\"acc\\\": 0.75}\"; echo \"{\\\"step\\\": 3, \\\"acc\\\": 0.625}\"']\n")
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `\nrun \S+ succeeded in [0-9.]+m?s, best acc 0\.75\n$`, out)
}
