package app

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

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
