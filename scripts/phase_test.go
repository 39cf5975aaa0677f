package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// phase runs phase.sh NAME sh -c SCRIPT with its summary file.
func phase(t *testing.T, summary, name, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "phase.sh", name, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "NIUMA_PHASES="+summary)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// A phase of make test says how it went and how long it took, in one
// line after the command's own output, and keeps the command's exit
// status; the summary file gets every phase's line.
func TestPhaseSummarisesEachPhase(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "phases")
	out, code := phase(t, summary, "lint", "echo vet ok")
	require.Equal(t, 0, code)
	require.Regexp(t, `^vet ok\nmake test: lint: passed in \d+m\d\ds\n$`, out)

	out, code = phase(t, summary, "all packages", "echo FAIL niuma/x; exit 3")
	require.Equal(t, 3, code, "the command's status")
	require.Regexp(t, `make test: all packages: FAILED \(exit 3\) after \d+m\d\ds\n$`, out)

	b, err := os.ReadFile(summary)
	require.NoError(t, err)
	require.Regexp(t, `^make test: lint: passed in \d+m\d\ds\nmake test: all packages: FAILED \(exit 3\) after \d+m\d\ds\n$`, string(b))
}

// Without a command it says how to use it.
func TestPhaseWithoutACommand(t *testing.T) {
	out, err := exec.Command("bash", "phase.sh", "lint").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode())
	require.Contains(t, string(out), "usage: scripts/phase.sh NAME COMMAND")
}
