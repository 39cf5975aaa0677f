package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/logcap"
)

// A stream beyond the cap: its first LogCap bytes are in the log, the line
// that says it was cut, and at its end how many bytes were dropped; the
// other stream, under the cap, is untouched; the command's status is its
// own.
func TestLogCapCutsAStreamAndSaysHowMuchWasDropped(t *testing.T) {
	t.Parallel()
	for name, shell := range shells(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job := newJob(t, "sh", "-c", capStage)
			h := start(t, &Executor{Shell: shell, LogCap: 4096}, job)
			require.Equal(t, 3, wait(t, h).Code)

			full := capStageStdout()
			require.Equal(t, full[:4096]+"\n"+logcap.CutNotice("stdout", 4096)+logcap.Notice("stdout", 4096, int64(len(full)-4096)),
				readFile(t, job.StdoutPath))
			require.Equal(t, "warn\ndone\n", readFile(t, job.StderrPath), "stderr is under its cap")
		})
	}
}

// Without perl the shell capper cuts the same bytes and ends the log with
// the same count.
func TestLogCapWithoutPerl(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	for _, tool := range []string{"sh", "head", "wc", "mv"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	job := newJob(t, "sh", "-c", capStage)
	job.Env["PATH"] = bin
	h := start(t, &Executor{LogCap: 4096}, job)
	require.Equal(t, 3, wait(t, h).Code)
	full := capStageStdout()
	require.Equal(t, full[:4096]+"\n"+logcap.Notice("stdout", 4096, int64(len(full)-4096)), readFile(t, job.StdoutPath))
	require.Equal(t, "warn\ndone\n", readFile(t, job.StderrPath))
}

// capStage prints a metric line and 3000 lines of 10 bytes on stdout, two
// lines on stderr, and exits 3; capStageStdout is its stdout.
const capStage = `echo '{"step": 1, "loss": 0.5}'
i=0; while [ $i -lt 3000 ]; do echo 'garbage..'; i=$((i+1)); done
echo warn >&2; echo done >&2; exit 3`

func capStageStdout() string {
	return `{"step": 1, "loss": 0.5}` + "\n" + strings.Repeat("garbage..\n", 3000)
}

// Output comes through as it is written, not held back in a buffer: a
// reader following the log sees each line while the stage still runs.
func TestLogCapPassesLinesAsTheyCome(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", `echo '{"step": 1, "loss": 0.5}'; touch ready; while [ ! -e go ]; do sleep 0.05; done`)
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))
	deadline := time.Now().Add(10 * time.Second)
	for readFile(t, job.StdoutPath) != `{"step": 1, "loss": 0.5}`+"\n" {
		require.True(t, time.Now().Before(deadline), "the line is not in the log while the stage runs")
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, os.WriteFile(filepath.Join(job.RunDir, "go"), nil, 0o644))
	require.True(t, wait(t, h).Success())
}

// Output without newlines, far beyond the cap, does not reach the disk.
func TestLogCapBoundsGarbageWithoutNewlines(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", `head -c 50000000 /dev/zero; head -c 3000000 /dev/zero >&2`)
	h := start(t, &Executor{LogCap: 1 << 20}, job)
	require.True(t, wait(t, h).Success())
	for _, tt := range []struct {
		path, stream string
		total        int64
	}{{job.StdoutPath, "stdout", 50_000_000}, {job.StderrPath, "stderr", 3_000_000}} {
		fi, err := os.Stat(tt.path)
		require.NoError(t, err)
		notice := "\n" + logcap.CutNotice(tt.stream, 1<<20) + logcap.Notice(tt.stream, 1<<20, tt.total-1<<20)
		require.Equal(t, int64(1<<20+len(notice)), fi.Size(), tt.stream)
		b, err := os.ReadFile(tt.path)
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(string(b), notice), tt.stream)
	}
}

// The cappers outlive Stop's SIGTERM (sent to the whole group): what the
// command writes while it checkpoints is still in the log.
func TestLogCapKeepsWhatIsWrittenAfterSIGTERM(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", `trap 'sleep 0.2; echo checkpoint saved; exit 0' TERM
echo started; touch ready
while :; do sleep 0.05; done`)
	h := start(t, New(), job)
	waitForFile(t, filepath.Join(job.RunDir, "ready"))
	require.NoError(t, h.Stop(context.Background(), time.Minute))
	require.Equal(t, executor.Exit{Code: 0}, wait(t, h))
	require.Equal(t, "started\ncheckpoint saved\n", readFile(t, job.StdoutPath))
}

// A process the command left behind holds the log pipes open: the attempt
// still ends when the command does (after logGrace at most), and what the
// command wrote is in the log.
func TestLogCapDoesNotWaitForWhatTheCommandLeftBehind(t *testing.T) {
	t.Parallel()
	job := newJob(t, "sh", "-c", `sleep 60 & echo $! > gc.tmp && mv gc.tmp gc; echo bye`)
	h := start(t, New(), job)
	gc := readPID(t, filepath.Join(job.RunDir, "gc"))
	killLater(t, gc, shimPID(h))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := h.Wait(ctx)
	require.NoError(t, err, "the attempt ended although the left-behind sleep holds its stdout")
	require.True(t, ex.Success())
	require.Equal(t, "bye\n", readFile(t, job.StdoutPath))
}
