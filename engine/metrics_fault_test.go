package engine

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/storage"
)

// faultYAML is a stage that waits for a go-ahead file, prints n metric
// lines at once, and exits.
const faultYAML = `
name: faults
params:
  dir: {type: string, default: ""}
  n: {type: int, default: 2000, min: 1, max: 1000000}
stages:
  - name: train
    command: [/bin/sh, -c, 'while [ ! -e "$0/go" ]; do sleep 0.05; done; i=0; while [ $i -lt $1 ]; do echo "{\"step\": $i, \"loss\": 0.5, \"acc\": 0.25}"; i=$((i+1)); done', "${params.dir}", "${params.n}"]
`

// needRoot mounts need root; CI runs as root, so there the test must run.
func needRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("this test mounts a small tmpfs and must run as root in CI")
	}
	t.Skip("mounting a tmpfs needs root (CI runs this test as root)")
}

// smallDisk mounts a tmpfs of size bytes and unmounts it after the test.
func smallDisk(t *testing.T, size string) string {
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "niuma-test", dir).CombinedOutput()
	require.NoError(t, err, "mount a tmpfs: %s", out)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes to a file on dir's file system until it is full.
func fill(t *testing.T, dir string) (release func()) {
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{1}, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "filling the disk: %v", err)
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last blocks
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	f.Close()
	return func() { require.NoError(t, os.Remove(path)) }
}

// When the database's disk is full, a stage's points wait (nothing is
// lost), the run says how many and why, the stage is not reported done
// while its points are missing, and once there is room every point is
// stored exactly once.
func TestMetricsWaitWhileTheDiskIsFull(t *testing.T) {
	needRoot(t)
	home := smallDisk(t, "6m")
	// The runs' folders (logs) live elsewhere: it is the database's disk
	// that fills up.
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(home, "runs")))
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	defer db.Close()
	h := &harness{t: t, home: home, store: db}
	e := h.engine()
	h.drive(e)

	ctl := t.TempDir()
	const n = 3000
	tm := parse(t, faultYAML)
	info, err := e.Submit(t.Context(), RunSpec{Template: tm, Values: map[string]any{"dir": ctl, "n": int64(n)}})
	require.NoError(t, err)
	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool { return r.Stages[0].State == Running })

	release := fill(t, home)
	require.NoError(t, os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644))
	// The points wait, and the run says so.
	r := waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool { return strings.Contains(r.MetricsWaiting, "disk full") })
	assert.Contains(t, r.MetricsWaiting, "metric points not yet stored: disk full")
	// The stage's process ends; the stage is still not done.
	exitFile := filepath.Join(r.Dir, "train", ".attempt-1.exit")
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The shim writes the status over the blank line the exit file
		// is given at the start.
		if b, err := os.ReadFile(exitFile); err == nil && strings.TrimSpace(string(b)) != "" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the stage's process did not end")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // room for a wrong "succeeded"
	r, err = e.Run(t.Context(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, Running, r.Stages[0].State, "not done while its points wait")
	assert.NotEmpty(t, r.MetricsWaiting)

	release()
	final := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, final.State, final.Error)
	count, err := db.CountMetricPoints(t.Context(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, 2*n, count, "every point stored, exactly once")
	assert.Empty(t, final.MetricsWaiting)
}

// lockEnv asks the test binary to hold the database's write lock: see
// TestHelperHoldsDatabaseLock.
const lockEnv = "NIUMA_TEST_HOLD_LOCK"

// TestHelperHoldsDatabaseLock is not a test: run by TestMetricsWaitWhile
// AnotherProcessHoldsTheLock as another process, it takes the database's
// write lock and keeps it until a file appears.
func TestHelperHoldsDatabaseLock(t *testing.T) {
	spec := os.Getenv(lockEnv)
	if spec == "" {
		return
	}
	dbPath, releaseFile, _ := strings.Cut(spec, "|")
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_busy_timeout=5000")
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	conn, err := db.Conn(context.Background())
	if err == nil {
		_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	}
	if err != nil {
		fmt.Println("lock:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	for {
		if _, err := os.Stat(releaseFile); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
	os.Exit(0)
}

// Another process holding the database's write lock longer than the busy
// timeout: points wait and are all stored once it lets go.
func TestMetricsWaitWhileAnotherProcessHoldsTheLock(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	ctl := t.TempDir()
	const n = 1000
	info, err := e.Submit(t.Context(), RunSpec{Template: parse(t, faultYAML), Values: map[string]any{"dir": ctl, "n": int64(n)}})
	require.NoError(t, err)
	sub := e.Subscribe(256)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool { return r.Stages[0].State == Running })

	releaseFile := filepath.Join(ctl, "release")
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsDatabaseLock$")
	helper.Env = append(os.Environ(), lockEnv+"="+filepath.Join(h.home, "niuma.db")+"|"+releaseFile)
	stdout, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	defer func() { _ = os.WriteFile(releaseFile, nil, 0o644); _ = helper.Wait() }()
	buf := make([]byte, 64)
	k, _ := stdout.Read(buf)
	require.Contains(t, string(buf[:k]), "locked")

	require.NoError(t, os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644))
	r := waitFor(t, ctx, e, sub, info.ID, func(r RunInfo) bool { return r.MetricsWaiting != "" })
	assert.Contains(t, r.MetricsWaiting, "database busy")
	require.NoError(t, os.WriteFile(releaseFile, nil, 0o644))
	final := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, final.State, final.Error)
	count, err := h.store.CountMetricPoints(t.Context(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, 2*n, count)
}
