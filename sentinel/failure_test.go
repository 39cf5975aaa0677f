package sentinel

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func code(n int) *int { return &n }

// The stderr of real failures (see testdata/failures/README.md).
func TestDiagnoseRealFailures(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("testdata/failures/" + name)
		require.NoError(t, err)
		return string(b)
	}
	tests := []struct {
		name    string
		f       Failure
		cause   Cause
		inFix   string
		inLine  string
		summary string
	}{
		{"DataLoader workers with a tiny /dev/shm, in a container",
			Failure{ExitCode: code(1), Output: read("dataloader_shm.stderr"), Container: true, ShmSizeMiB: 1},
			CauseShm, "shm_size: 8GiB} (now 1 MiB)", "out of shared memory", "shared memory"},
		{"the same on the host",
			Failure{ExitCode: code(1), Output: read("dataloader_shm.stderr")},
			CauseShm, "enlarge /dev/shm", "", ""},
		{"CUDA out of memory",
			Failure{ExitCode: code(1), Output: read("cuda_oom.stderr")},
			CauseCUDAOOM, `sentinel: {cuda_oom: {do: retry, set: {batch_size: "/2"}}}`, "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB", "GPU ran out of memory"},
		{"killed",
			Failure{Signal: "killed", Output: read("killed.stderr")},
			CauseKilled, "journalctl -k", "", "SIGKILL"},
		{"a container's OOM kill",
			Failure{OOMKilled: true, Container: true, MemoryMiB: 512},
			CauseHostOOM, "runtime: {memory: ...} (now 512 MiB)", "", "out-of-memory killer"},
		{"a host stage's memory: limit",
			Failure{OOMKilled: true, StageMemoryMiB: 64, Signal: "killed"},
			CauseHostOOM, "raise the stage's memory: in the template (now 64 MiB)", "", "out-of-memory killer"},
		{"missing module",
			Failure{ExitCode: code(1), Output: read("missing_module.stderr"), Command: []string{"python3", "train.py"}, Resolved: "/usr/bin/python3"},
			CauseMissingModule, "/usr/bin/python3 -m pip install tensorboard", "No module named 'tensorboard'", "not installed for /usr/bin/python3"},
		{"wrong interpreter",
			Failure{ExitCode: code(1), Output: read("missing_module.stderr"), Command: []string{"python3", "train.py"},
				Interpreter: "/home/lab/venv/bin/python3", Resolved: "/usr/bin/python3"},
			CauseWrongInterpreter, "command: [/home/lab/venv/bin/python3, ...]", "", "another PATH"},
		{"a relative path",
			Failure{ExitCode: code(1), Output: read("file_not_found.stderr"), RunDir: "/data/niuma/runs/r1"},
			CauseFileNotFound, "${code}/data/train.csv", "", "looked for in the run directory (/data/niuma/runs/r1)"},
		{"a script given without ${code}",
			Failure{ExitCode: code(2), Output: "/usr/bin/python3: can't open file '/data/niuma/runs/r1/train.py': [Errno 2] No such file or directory\n"},
			CauseFileNotFound, "", "can't open file", "/data/niuma/runs/r1/train.py"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := Diagnose(tt.f)
			require.True(t, ok)
			assert.Equal(t, tt.cause, h.Cause)
			assert.Contains(t, h.Fix, tt.inFix)
			assert.Contains(t, h.Line, tt.inLine)
			assert.Contains(t, h.Summary, tt.summary)
		})
	}
	_, ok := Diagnose(Failure{ExitCode: code(1), Output: "Traceback (most recent call last):\nValueError: bad value\n"})
	assert.False(t, ok, "an ordinary error is not guessed at")
}

func TestCUDAOOMCanBeAnsweredWithARetry(t *testing.T) {
	pol, err := ParsePolicy(map[string]Action{"cuda_oom": {Do: Retry, Set: map[string]string{"batch_size": "/2"}}})
	require.NoError(t, err)
	d := pol.Decide(Anomaly{Kind: CUDAOOM, Run: "r"}, 1, map[string]any{"batch_size": int64(64)})
	assert.Equal(t, Retry, d.Do)
	assert.Equal(t, int64(32), d.Params["batch_size"])
	assert.Equal(t, []string{"batch_size: 64 → 32"}, d.Changes)
}
