package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor/slurm/slurmtest"
)

// These tests run the CLI against the real single-node clusters that
// scripts/slurm-up.sh starts; they skip when a cluster does not answer,
// and fail in CI, which starts both.

func TestDemoRunsOnSlurm(t *testing.T) {
	slurmtest.Need(t, slurmtest.WithAccounting)
	if err := exec.Command("/usr/bin/python3", "-c", "import torch, sklearn").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the demo needs python3-torch and python3-sklearn (make deps installs them): %v", err)
		}
		t.Skip("python3-torch or python3-sklearn missing: run make deps")
	}
	tempHome(t)
	t.Setenv("SLURM_CONF", slurmtest.WithAccounting.Conf)
	code, out, errOut := niuma(t, "run", "digits-mlp", "--executor", "slurm", "--set", "epochs=5", "--wait")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "executor slurm")
	s := showJSONOf(t, runID(t, out))
	require.Equal(t, "succeeded", s.State)
	for _, st := range s.Stages {
		require.Equal(t, "succeeded", st.State, st.Name)
	}
	for _, m := range s.Metrics {
		if m.Stage == "train" && m.Key == "loss" {
			require.Equal(t, 5, m.Points)
		}
	}
	code, logs, _ := niuma(t, "logs", runID(t, out), "train")
	require.Equal(t, 0, code)
	require.Contains(t, logs, `"val_acc"`)
}

func TestShowSaysWhyASlurmStageWaits(t *testing.T) {
	c := slurmtest.WithoutAccounting
	slurmtest.Need(t, c)
	home := tempHome(t)
	t.Setenv("SLURM_CONF", c.Conf)
	release := filepath.Join(t.TempDir(), "go")
	out, err := c.Run(context.Background(), "sbatch", "--parsable", "--gres=gpu:4", "--output=/dev/null",
		"--wrap", "while [ ! -e "+release+" ]; do sleep 0.2; done")
	require.NoError(t, err)
	holder := strings.TrimSpace(string(out))
	t.Cleanup(func() { slurmtest.Cancel(c, holder) })

	tmpl := writeTemplate(t, "name: g\nruntime: {kind: slurm}\nstages:\n  - name: train\n    gpus: 1\n    command: [sh, -c, 'echo ran']\n")
	type result struct {
		code     int
		out, err string
	}
	ran := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := Main([]string{"run", tmpl, "--wait"}, &out, &errb)
		ran <- result{code, out.String(), errb.String()}
	}()
	var id, text string
	require.Eventually(t, func() bool {
		if id == "" {
			m, _ := filepath.Glob(filepath.Join(home, "runs", "*"))
			if len(m) == 0 {
				return false
			}
			id = filepath.Base(m[0])
		}
		_, text, _ = niuma(t, "show", id)
		return strings.Contains(text, "(Slurm: Resources)")
	}, time.Minute, 200*time.Millisecond, "niuma show never said why: %s", text)
	require.Regexp(t, `train\s+running\s+1 of 1\s+.*in Slurm's queue as job \d+: the GPUs, CPUs or memory it asks for are in use; it starts when they free up \(Slurm: Resources\)`, text)
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	select {
	case r := <-ran:
		require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.out, r.err)
	case <-time.After(2 * time.Minute):
		t.Fatal("niuma run --wait did not end")
	}
	require.Equal(t, "succeeded", showJSONOf(t, id).State)
}

// Niuma killed with SIGKILL while its Slurm jobs run, and while a job ends
// and the controller forgets it (MinJobAge is 2 s on the cluster without
// accounting): the next niuma resolves each stage exactly once, from the
// job it left (never a second submission), with no metric point twice.
func TestKilledNiumaResolvesItsSlurmJobs(t *testing.T) {
	bin := buildNiuma(t)
	for _, tt := range []struct {
		name    string
		cluster slurmtest.Cluster
		forget  bool // the job ends and is forgotten before the next niuma starts
	}{
		{"killed while the job runs (accounting)", slurmtest.WithAccounting, false},
		{"killed while the job runs (no accounting)", slurmtest.WithoutAccounting, false},
		{"the job ends and is forgotten meanwhile (no accounting)", slurmtest.WithoutAccounting, true},
		{"the job ends meanwhile (accounting)", slurmtest.WithAccounting, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cluster
			slurmtest.Need(t, c)
			home := tempHome(t)
			tmpl := writeTemplate(t, `name: k
runtime: {kind: slurm}
stages:
  - name: a
    retries: 1
    command: [sh, -c, 'for i in 1 2 3; do echo "{\"step\": $i, \"loss\": 1}"; done; while [ ! -f a/go ]; do sleep 0.1; done; for i in 4 5 6; do echo "{\"step\": $i, \"loss\": 1}"; done']
  - name: b
    needs: [a]
    command: ["true"]
`)
			env := append(os.Environ(), "NIUMA_HOME="+home, "NIUMA_BACKGROUND_ENGINE=off", "SLURM_CONF="+c.Conf)
			t.Setenv("SLURM_CONF", c.Conf)
			var out bytes.Buffer
			wait := exec.Command(bin, "run", tmpl, "--wait")
			wait.Env, wait.Stdout, wait.Stderr = env, &out, &out
			require.NoError(t, wait.Start())

			// Until the attempt's job is recorded and its first points stored.
			var id, runDir string
			require.Eventually(t, func() bool {
				m, _ := filepath.Glob(filepath.Join(home, "runs", "*"))
				if len(m) != 1 {
					return false
				}
				runDir, id = m[0], filepath.Base(m[0])
				s, ok := storedRun(t, id)
				return ok && len(s.Metrics) == 1 && s.Metrics[0].Points == 3
			}, 2*time.Minute, 50*time.Millisecond, "output: %s", out.String())
			jobFile := filepath.Join(runDir, "a", ".attempt-1.job")
			b, err := os.ReadFile(jobFile)
			require.NoError(t, err)
			jobID := strings.TrimSpace(string(b))
			t.Cleanup(func() { slurmtest.Cancel(c, jobID) })
			require.NoError(t, wait.Process.Signal(syscall.SIGKILL))
			_ = wait.Wait()
			require.Equal(t, "running", showJSONOf(t, id).State, "nobody has looked yet")

			if tt.forget {
				require.NoError(t, os.WriteFile(filepath.Join(runDir, "a", "go"), nil, 0o644))
				if c.Accounting {
					require.Eventually(t, func() bool {
						b, _ := os.ReadFile(filepath.Join(runDir, "a", ".attempt-1.exit"))
						return len(b) > 0
					}, time.Minute, 50*time.Millisecond)
				} else {
					slurmtest.Forget(t, c, jobID, 2*time.Minute)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			eng := exec.CommandContext(ctx, bin, "engine", "--until-idle")
			eng.Env = env
			var engOut bytes.Buffer
			eng.Stdout, eng.Stderr = &engOut, &engOut
			require.NoError(t, eng.Start())
			if !tt.forget {
				require.NoError(t, os.WriteFile(filepath.Join(runDir, "a", "go"), nil, 0o644))
			}
			require.NoError(t, eng.Wait(), engOut.String())

			s := showJSONOf(t, id)
			require.Equal(t, "succeeded", s.State, "engine log:\n%s", engOut.String())
			require.Equal(t, 1, s.Stages[0].Attempts, "adopted, not submitted again")
			require.Equal(t, "succeeded", s.Stages[1].State)
			require.Len(t, s.Metrics, 1)
			require.Equal(t, 6, s.Metrics[0].Points, "each point once")
			ids, err := c.Run(context.Background(), "squeue", "--noheader", "--states=all", "--name=niuma-"+id+".a.1", "--format=%i")
			require.NoError(t, err)
			require.Contains(t, []string{"", jobID}, strings.TrimSpace(string(ids)), "one job for the attempt")
		})
	}
}

// `niuma show` names the Slurm job of a stage that runs on Slurm, the id a
// user looks up with squeue, sacct or scancel, in the table and in JSON.
func TestShowNamesTheSlurmJob(t *testing.T) {
	c := slurmtest.WithoutAccounting
	slurmtest.Need(t, c)
	home := tempHome(t)
	t.Setenv("SLURM_CONF", c.Conf)
	tmpl := writeTemplate(t, "name: j\nruntime: {kind: slurm}\nstages:\n  - name: train\n    command: [sh, -c, 'echo started; while [ ! -f train/go ]; do sleep 0.1; done']\n")
	ran := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		ran <- Main([]string{"run", tmpl, "--wait"}, &out, &errb)
	}()
	var id, job, text string
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(home, "runs", "*"))
		if len(m) != 1 {
			return false
		}
		id = filepath.Base(m[0])
		b, err := os.ReadFile(filepath.Join(m[0], "train", "attempt-1.stdout.log"))
		if err != nil || !strings.Contains(string(b), "started") {
			return false
		}
		b, _ = os.ReadFile(filepath.Join(m[0], "train", ".attempt-1.job"))
		job = strings.TrimSpace(string(b))
		return job != ""
	}, 2*time.Minute, 100*time.Millisecond)
	t.Cleanup(func() { slurmtest.Cancel(c, job) })
	// Once Niuma has seen the job run (it showed its queue reason, with
	// the id, before).
	require.Eventually(t, func() bool {
		_, text, _ = niuma(t, "show", id)
		return regexp.MustCompile(`train\s+running\s+1 of 1\s+-\s+\S+\s+Slurm job ` + job + `\n`).MatchString(text)
	}, time.Minute, 100*time.Millisecond, "niuma show never named the job: %s", text)
	_, out, _ := niuma(t, "show", id, "--json")
	var s struct {
		SlurmJobs map[string]string `json:"slurm_jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, map[string]string{"train": job}, s.SlurmJobs)

	require.NoError(t, os.WriteFile(filepath.Join(home, "runs", id, "train", "go"), nil, 0o644))
	select {
	case code := <-ran:
		require.Equal(t, 0, code)
	case <-time.After(2 * time.Minute):
		t.Fatal("niuma run --wait did not end")
	}
	_, text, _ = niuma(t, "show", id)
	require.Regexp(t, `train\s+succeeded\s+1 of 1\s+0\s+\S+\s+Slurm job `+job+`\n`, text, "still named once it has ended")
}
