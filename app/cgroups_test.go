package app

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A local stage allocating twice its memory: is killed by its cgroup's
// limit, and the run says so: the attempt's reason, and the fix.
func TestStageMemoryIsItsLimit(t *testing.T) {
	lx := localExecutor()
	if lx.Cgroups == nil || !lx.Cgroups.Features().Memory {
		t.Skipf("no cgroup memory limits here: %s", lx.Mode())
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl allocates the memory here; it is not installed")
	}
	tempHome(t)
	tmpl := writeTemplate(t, `name: greedy
stages:
  - name: train
    memory: 64MiB
    command: [perl, -e, '$x = "a" x (128*1024*1024); print "survived\n"']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.NotEqual(t, 0, code, "%s\n%s", out, errOut)
	id := runID(t, out)
	code, out, _ = niuma(t, "show", id, "--json")
	require.Equal(t, 0, code)
	var shown struct {
		State  string `json:"state"`
		Stages []struct {
			State  string `json:"state"`
			Reason string `json:"reason"`
		} `json:"stages"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.Equal(t, "failed", shown.State)
	require.Len(t, shown.Stages, 1)
	reason := shown.Stages[0].Reason
	require.True(t, strings.HasPrefix(reason, "out of memory (limit 64 MiB, peak "), "reason %q", reason)
	require.Contains(t, out, "raise the stage's memory: in the template (now 64 MiB)")
	code, out, _ = niuma(t, "logs", id, "train")
	require.Equal(t, 0, code)
	require.NotContains(t, out, "survived")
}

// niuma doctor says how a local attempt's processes are found: by a
// cgroup per attempt where this machine gives one, else by the token
// scan, and why.
func TestDoctorSaysWhichProcessModeIsInForce(t *testing.T) {
	tempHome(t)
	code, out, _ := niuma(t, "doctor")
	require.Equal(t, 0, code, out)
	if lx := localExecutor(); lx.Cgroups != nil {
		require.Contains(t, out, "processes: cgroup v")
	} else {
		require.Contains(t, out, "processes: token scan")
	}
	t.Setenv(cgroupsEnv, "off")
	code, out, _ = niuma(t, "doctor", "--json")
	require.Equal(t, 0, code, out)
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.False(t, rep.Cgroups)
	require.Contains(t, rep.Processes, "token scan")
	require.Contains(t, rep.Processes, "NIUMA_CGROUPS=off")
}

// A run whose data directory (a 20 MiB tmpfs) fills mid-run is paused,
// says so, and once space is freed goes on and stores every point: 4,000
// metric lines, 4,000 points, none lost.
func TestFullDataDiskPausesTheRunAndLosesNoPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a 20 MiB tmpfs needs root (CI runs as root)")
	}
	home := t.TempDir()
	if err := syscall.Mount("tmpfs", home, "tmpfs", 0, "size=20m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(home, syscall.MNT_DETACH) })
	t.Setenv("NIUMA_HOME", home)
	t.Setenv("NIUMA_BACKGROUND_ENGINE", "off")
	// Steps 1-1000, then (once the test has filled the disk) 1001-4000:
	// 650 KiB, more than the pipe and the capper hold, so the stage is
	// still running when the disk is full.
	tmpl := writeTemplate(t, `name: filler
stages:
  - name: train
    command: [sh, -c, 'pad=$(printf "%0200d" 0); i=1; while [ $i -le 4000 ]; do echo "{\"step\": $i, \"loss\": 0.5, \"pad\": \"$pad\"}"; if [ $i -eq 1000 ]; then touch half; while [ ! -e resume ]; do sleep 0.05; done; fi; i=$((i+1)); done']
`)
	type ran struct {
		code     int
		out, err string
	}
	done := make(chan ran, 1)
	go func() {
		code, out, errOut := niuma(t, "run", tmpl, "--wait")
		done <- ran{code, out, errOut}
	}()
	var runDir string
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(home, "runs", "*", "half"))
		if len(m) == 1 {
			runDir = filepath.Dir(m[0])
		}
		return runDir != ""
	}, 60*time.Second, 20*time.Millisecond, "the stage never reached step 1000")
	id := filepath.Base(runDir)
	filler := filepath.Join(home, "filler")
	fillDisk(t, home)
	require.NoError(t, os.WriteFile(filepath.Join(runDir, "resume"), nil, 0o644))

	defer func() {
		if t.Failed() {
			_, out, _ := niuma(t, "show", id)
			t.Log(out)
			b, _ := exec.Command("sh", "-c", "for f in /sys/fs/cgroup/freezer/niuma/*/freezer.state; do echo $f; cat $f; done; df "+home).CombinedOutput()
			t.Log(string(b))
		}
	}()
	lx := localExecutor()
	if lx.Cgroups != nil && lx.Cgroups.Features().Freeze {
		require.Eventually(t, func() bool {
			code, out, _ := niuma(t, "show", id, "--json")
			return code == 0 && strings.Contains(out, "paused: disk full")
		}, 20*time.Second, 100*time.Millisecond, "the stage never said it was paused")
	} else {
		// The disk stays full until the points are seen waiting for it:
		// freed at once, it would test nothing.
		t.Logf("no freezer (%s): the stage waits on its full pipe instead", lx.Mode())
		require.Eventually(t, func() bool {
			code, out, _ := niuma(t, "show", id, "--json")
			return code == 0 && strings.Contains(out, "not yet stored: disk full")
		}, 20*time.Second, 100*time.Millisecond, "the stage's points never waited for the full disk")
	}
	require.NoError(t, os.Remove(filler))
	var r ran
	select {
	case r = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end once the disk had room")
	}
	require.Equal(t, 0, r.code, "%s\n%s", r.out, r.err)
	s := showJSONOf(t, id)
	require.Equal(t, "succeeded", s.State)
	var points int
	for _, m := range s.Metrics {
		if m.Key == "loss" {
			points = m.Points
		}
	}
	require.Equal(t, 4000, points, "every point is stored")
	code, out, _ := niuma(t, "show", id, "--json")
	require.Equal(t, 0, code)
	require.NotContains(t, out, "paused: disk full", "the pause is over")
}

// What a local stage used of the host is stored as it runs and is there
// after the run ended, in another command: `niuma show` gives each
// stage's peak memory, its limit and its CPU time, `--json` the same per
// stage, and the run's report has them.
func TestShowAndReportGiveEachStagesHostUse(t *testing.T) {
	lx := localExecutor()
	if lx.Cgroups == nil || !lx.Cgroups.Features().Memory {
		t.Skipf("no cgroup memory accounting here: %s", lx.Mode())
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl holds the memory and burns the CPU here; it is not installed")
	}
	tempHome(t)
	tmpl := writeTemplate(t, `name: burner
stages:
  - name: train
    memory: 256MiB
    cpus: 1
    command: [perl, -e, '$x = "a" x (64*1024*1024); 1 while $i++ < 2e7']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	id := runID(t, out)

	code, out, errOut = niuma(t, "show", id, "--json")
	require.Equal(t, 0, code, errOut)
	var shown struct {
		Host []struct {
			Stage         string  `json:"stage"`
			Attempts      []int   `json:"attempts"`
			MemPeakBytes  int64   `json:"mem_peak_bytes"`
			MemLimitBytes int64   `json:"mem_limit_bytes"`
			CPUSeconds    float64 `json:"cpu_seconds"`
			CPULimitMilli int64   `json:"cpu_limit_milli"`
			Minutes       []any   `json:"minutes"`
		} `json:"host_usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.Len(t, shown.Host, 1, out)
	h := shown.Host[0]
	require.Equal(t, "train", h.Stage)
	require.Equal(t, []int{1}, h.Attempts)
	require.GreaterOrEqual(t, h.MemPeakBytes, int64(64<<20), "the peak holds the 64 MiB")
	require.Equal(t, int64(256<<20), h.MemLimitBytes)
	require.Greater(t, h.CPUSeconds, 0.05, "2e7 turns of perl's loop")
	if lx.Cgroups.Features().CPU {
		require.Equal(t, int64(1000), h.CPULimitMilli)
	}
	require.NotEmpty(t, h.Minutes)

	code, out, _ = niuma(t, "show", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "HOST (memory and CPU time of each stage")
	require.Regexp(t, `\n\s+train\s+peak memory \d+(\.\d)? MiB of 256 MiB (\(mean [^)]+\) )?· CPU time \d+\.\d\d s`, out)

	code, out, errOut = niuma(t, "report", id, "--format", "json", "-o", "-")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Runs []struct {
			Host []struct {
				Stage        string  `json:"stage"`
				PeakMemBytes int64   `json:"peak_mem_bytes"`
				CPUSeconds   float64 `json:"cpu_seconds"`
			} `json:"host_usage"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Runs, 1)
	require.Len(t, rep.Runs[0].Host, 1)
	require.Equal(t, "train", rep.Runs[0].Host[0].Stage)
	require.Equal(t, h.MemPeakBytes, rep.Runs[0].Host[0].PeakMemBytes)
	require.InDelta(t, h.CPUSeconds, rep.Runs[0].Host[0].CPUSeconds, 1e-9)
}
