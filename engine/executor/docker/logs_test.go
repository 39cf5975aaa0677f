package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
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

// A container adopted after a restart: the bytes its log already holds
// count against the cap, and the log is cut where the whole stream's
// first LogCap bytes end.
func TestLogCapHoldsAcrossARecover(t *testing.T) {
	f := newFixture(t)
	hold := func(stage string) executor.Job {
		return f.job(stage, dockertest.Workload, "hold", "2", RunMount+"/"+stage+"/ready", RunMount+"/"+stage+"/go", "40")
	}
	whole := hold("whole")
	require.NoError(t, os.MkdirAll(whole.StageDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(whole.StageDir, "go"), nil, 0o644))
	require.True(t, f.run(whole).Success())
	full, err := os.ReadFile(whole.StdoutPath)
	require.NoError(t, err)

	const limit = 100
	f.x.LogCap = limit
	job := hold("a")
	h, err := f.x.Start(context.Background(), job)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Count(readFile(job.StdoutPath), "\n") == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Less(t, len(readFile(job.StdoutPath)), limit, "the first two lines are under the cap")
	ref := h.Ref()
	h.(executor.Releaser).Release() // as if this Niuma had died
	require.NoError(t, os.WriteFile(filepath.Join(job.StageDir, "go"), nil, 0o644))

	h2, err := f.x.Recover(context.Background(), job, ref)
	require.NoError(t, err)
	require.True(t, f.wait(h2).Success())
	require.Equal(t, string(full[:limit])+"\n"+logcap.CutNotice("stdout", limit)+logcap.Notice("stdout", limit, int64(len(full)-limit)),
		readFile(job.StdoutPath))
}
