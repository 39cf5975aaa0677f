package docker

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor/docker/dockertest"
	"niuma/engine/executor/logcap"
)

// A container's stream beyond the cap: the log keeps its first LogCap
// bytes, says where it was cut and how many bytes were dropped. The same
// workload run uncapped beside it gives the whole stream.
func TestLogCapOfAContainer(t *testing.T) {
	f := newFixture(t)
	whole := f.job("whole", dockertest.Workload, "metrics", "500")
	require.True(t, f.run(whole).Success())
	full, err := os.ReadFile(whole.StdoutPath)
	require.NoError(t, err)
	require.Greater(t, len(full), 4096)

	f.x.LogCap = 4096
	capped := f.job("capped", dockertest.Workload, "metrics", "500")
	require.True(t, f.run(capped).Success())
	got, err := os.ReadFile(capped.StdoutPath)
	require.NoError(t, err)
	require.Equal(t, string(full[:4096])+"\n"+logcap.CutNotice("stdout", 4096)+logcap.Notice("stdout", 4096, int64(len(full)-4096)),
		string(got))
	errLog, err := os.ReadFile(capped.StderrPath)
	require.NoError(t, err)
	require.NotContains(t, string(errLog), "[niuma]", "stderr is under its cap")
}
