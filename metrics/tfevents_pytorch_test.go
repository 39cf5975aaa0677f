package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pytorchWriter writes scalars with PyTorch's own SummaryWriter: "loss" as
// simple_value (the default) and "acc" as a tensor (new_style=True, what
// recent TensorBoard writers do), at steps 0..2.
const pytorchWriter = `
import sys
from torch.utils.tensorboard import SummaryWriter
w = SummaryWriter(log_dir=sys.argv[1])
for step in range(3):
    w.add_scalar("loss", 1.0 / (step + 1), step)
    w.add_scalar("acc", 0.25 * step, step, new_style=True)
w.close()
`

// TestReadsPyTorchSummaryWriterFiles checks the reader against files the
// real writer produced. It needs /usr/bin/python3 with torch and
// tensorboard; without them it is skipped (the fixtures generated in the
// other tests cover the same wire format).
func TestReadsPyTorchSummaryWriterFiles(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch.utils.tensorboard").Run(); err != nil {
		t.Skip("/usr/bin/python3 has no torch.utils.tensorboard (pip install tensorboard)")
	}
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "-c", pytorchWriter, dir).CombinedOutput()
	require.NoError(t, err, string(out))
	files, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	got, err := ReadEventFile(b)
	require.NoError(t, err)
	vals := map[string][]float64{}
	for _, s := range got {
		vals[s.Tag] = append(vals[s.Tag], s.Value)
		assert.False(t, s.Wall.IsZero())
	}
	assert.InDeltaSlice(t, []float64{1, 0.5, 1.0 / 3}, vals["loss"], 1e-6)
	assert.Equal(t, []float64{0, 0.25, 0.5}, vals["acc"])
}
