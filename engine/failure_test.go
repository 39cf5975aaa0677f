package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The out-of-memory line of a real CUDA run (see
// sentinel/testdata/failures/README.md).
const realCUDAOOM = `torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use.`

// A stage that runs out of GPU memory is retried with half the batch when
// the template says so, and the run says what happened.
func TestCUDAOOMRetriesWithHalfTheBatch(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: oom
params:
  batch_size: {type: int, default: 64, min: 1, max: 4096}
sentinel:
  cuda_oom: {do: retry, set: {batch_size: "/2"}}
stages:
  - name: train
    command: [/bin/sh, -c, 'if [ $0 -gt 16 ]; then echo "Traceback (most recent call last):" >&2; echo "$1" >&2; exit 1; fi; echo "{\"step\": 1, \"loss\": 0.5}"', "${params.batch_size}", "`+realCUDAOOM+`"]
`)
	info, err := e.Submit(t.Context(), RunSpec{Template: tm})
	require.NoError(t, err)
	final := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, final.State, final.Error)
	assert.Equal(t, int64(16), toInt(final.Params["batch_size"]), "64 → 32 → 16")
	assert.Equal(t, 3, final.Stages[0].Attempts)
	evs, err := e.Anomalies(t.Context(), info.ID)
	require.NoError(t, err)
	var notes []string
	for _, ev := range evs {
		notes = append(notes, ev.Kind+": "+ev.Message)
	}
	assert.Contains(t, notes, "failure: attempt 1 failed: the GPU ran out of memory")
	assert.Contains(t, notes, "action_retry: retrying after cuda_oom with batch_size: 64 → 32")
	assert.Contains(t, notes, "action_retry: retrying after cuda_oom with batch_size: 32 → 16")
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case int64:
		return x
	}
	return -1
}

// Without the template's answer, the run fails and leads with the cause,
// its fix and the last lines of stderr.
func TestFailureInfoOfAKilledStage(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: killed
stages:
  - name: train
    command: [/bin/sh, -c, 'echo "allocating" >&2; kill -9 $$$$']
`)
	info, err := e.Submit(t.Context(), RunSpec{Template: tm})
	require.NoError(t, err)
	final := waitDone(t, e, info.ID)
	require.Equal(t, Failed, final.State)
	f := final.Stages[0].Failure
	require.NotNil(t, f)
	assert.Equal(t, "killed", f.Cause)
	assert.Contains(t, f.Fix, "journalctl -k")
	assert.Equal(t, []string{"allocating", "Killed"}, f.Tail, "the shell says Killed")
}

// A real reproduction of PyTorch's DataLoader running out of shared
// memory: the stage's /dev/shm is a 512 KiB tmpfs, as a container's
// --shm-size makes it. The failure names shm_size.
func TestDataLoaderShmReproduction(t *testing.T) {
	needRoot(t)
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("make test installs python3-torch; this test needs it")
		}
		t.Skip("needs /usr/bin/python3 with torch")
	}
	dir := t.TempDir()
	script := `import torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i): return torch.zeros(256, 1024)
for b in DataLoader(D(), batch_size=8, num_workers=2):
    pass
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dl.py"), []byte(script), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "template.yaml"), []byte(`
name: shm
stages:
  - name: train
    command: [unshare, -m, /bin/sh, -c, 'mount -t tmpfs -o size=512k tmpfs /dev/shm && exec /usr/bin/python3 "$0"', "${code}/dl.py"]
`), 0o644))
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, string(must(os.ReadFile(filepath.Join(dir, "template.yaml")))))
	tm.Dir = dir
	info, err := e.Submit(t.Context(), RunSpec{Template: tm})
	require.NoError(t, err)
	final := waitDone(t, e, info.ID)
	require.Equal(t, Failed, final.State)
	f := final.Stages[0].Failure
	require.NotNil(t, f, "tail: %v", final.Stages[0])
	assert.Equal(t, "shm", f.Cause)
	assert.Contains(t, f.Fix, "shm_size")
	// PyTorch says it in one of two ways, depending on whether a worker
	// dies of SIGBUS first or the main process fails to write its
	// segment first; both are the shared-memory failure.
	assert.True(t, strings.Contains(f.Line, "shared memory") ||
		strings.Contains(f.Line, "unable to write to file </torch_"), f.Line)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
