package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/storage"
)

// metricTemplate prints n metric points and a line of plain log.
const metricTemplate = `name: points
params:
  n: {type: int, default: 10, min: 1, max: 1000}
stages:
  - name: a
    command: [sh, -c, 'i=0; while [ $i -lt $NIUMA_PARAM_N ]; do echo "{\"step\": $i, \"loss\": 1}"; i=$((i+1)); done; echo done-a']
`

// runPoints runs the metric template to success and returns its ID.
func runPoints(t *testing.T, tmpl string, n int) string {
	t.Helper()
	code, out, errOut := niuma(t, "run", tmpl, "--set", fmt.Sprintf("n=%d", n), "--wait")
	require.Equal(t, 0, code, errOut)
	return runID(t, out)
}

// holdLockEnv asks the test binary to hold an archive's write lock: see
// TestHelperHoldsTheWriteLock.
const holdLockEnv = "NIUMA_TEST_HOLD_WRITE_LOCK"

// TestHelperHoldsTheWriteLock is not a test: run as another process by
// the tests below, it opens a write transaction on the archive named in
// its environment, says "locked", and holds it until its stdin closes.
func TestHelperHoldsTheWriteLock(t *testing.T) {
	path := os.Getenv(holdLockEnv)
	if path == "" {
		return
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err == nil {
		var conn *sql.Conn
		if conn, err = db.Conn(context.Background()); err == nil {
			if _, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err == nil {
				_, err = conn.ExecContext(context.Background(), "UPDATE runs SET priority = priority + 1")
			}
		}
	}
	if err != nil {
		fmt.Println("lock:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// holdWriteLock starts another process that holds the archive's write
// lock until the test ends (or release is called).
func holdWriteLock(t *testing.T, home string) (release func()) {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsTheWriteLock$")
	helper.Env = append(os.Environ(), holdLockEnv+"="+filepath.Join(home, "niuma.db"))
	stdin, err := helper.StdinPipe()
	require.NoError(t, err)
	stdout, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	done := false
	release = func() {
		if !done {
			done = true
			stdin.Close()
			_ = helper.Wait()
		}
	}
	t.Cleanup(release)
	buf := make([]byte, 128)
	k, _ := stdout.Read(buf)
	require.Contains(t, string(buf[:k]), "locked")
	return release
}

// readViews is what the read-only commands print about a run.
type readViews struct {
	ls, show, logs string
}

func readCommands(t *testing.T, id string) readViews {
	t.Helper()
	var v readViews
	var code int
	var errOut string
	code, v.ls, errOut = niuma(t, "ls", "--json")
	require.Equal(t, 0, code, "ls: %s", errOut)
	code, v.show, errOut = niuma(t, "show", id, "--json")
	require.Equal(t, 0, code, "show: %s", errOut)
	code, v.logs, errOut = niuma(t, "logs", id, "a")
	require.Equal(t, 0, code, "logs: %s", errOut)
	return v
}

// windowRuns opens the data directory the way the window does and lists
// what its views show.
func windowRuns(t *testing.T) []string {
	t.Helper()
	s, err := open(io.Discard)
	require.NoError(t, err)
	defer s.close()
	runs, err := s.engine.Runs(context.Background(), 0)
	require.NoError(t, err)
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// Another process holds a write transaction for longer than the busy
// timeout: ls, show and logs answer from the last committed state, at
// once, and what the lock holds back is really held back.
func TestReadCommandsWorkWhileAnotherProcessHoldsTheWriteLock(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, metricTemplate)
	id := runPoints(t, tmpl, 25)
	before := readCommands(t, id)

	holdWriteLock(t, home)
	got := readCommands(t, id)
	assert.JSONEq(t, before.ls, got.ls)
	assert.JSONEq(t, before.show, got.show)
	assert.Equal(t, before.logs, got.logs)
	assert.Contains(t, got.logs, "done-a")
	assert.Equal(t, 25, showJSONOf(t, id).Metrics[0].Points, "every point is there")
	assert.Equal(t, []string{id}, windowRuns(t), "the window's views, when it is not the owner")

	// The lock is real: a write waits the busy timeout and gives up.
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err, "opening a current archive writes nothing")
	defer db.Close()
	err = db.DeleteRun(context.Background(), id)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "locked")
}

// mountTmpfs mounts a small tmpfs for the test, or skips it where
// mounting is impossible.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the full-disk test needs root or CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk writes to a file under dir until the file system is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		require.ErrorIs(t, err, syscall.ENOSPC)
		return
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	for { // the last partial block
		if _, err := f.Write(chunk[:512]); err != nil {
			break
		}
	}
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	require.Zero(t, st.Bavail, "the disk is full")
}

// NIUMA_HOME on a full disk: ls, show and logs still work, and show what
// was stored; a run cannot be submitted, says why, and leaves nothing.
func TestReadCommandsWorkOnAFullDisk(t *testing.T) {
	for _, tt := range []struct {
		name   string
		holder bool // another process has the archive open (its index in place) and holds its write lock
	}{
		{"no process has the archive open", false},
		{"another process holds the archive's write lock", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := mountTmpfs(t, "8m")
			t.Setenv("NIUMA_HOME", home)
			t.Setenv("NIUMA_BACKGROUND_ENGINE", "off")
			tmpl := writeTemplate(t, metricTemplate)
			id := runPoints(t, tmpl, 50)
			before := readCommands(t, id)
			if tt.holder {
				holdWriteLock(t, home)
			}
			fillDisk(t, home)

			got := readCommands(t, id)
			assert.JSONEq(t, before.ls, got.ls)
			assert.JSONEq(t, before.show, got.show)
			assert.Equal(t, before.logs, got.logs)
			assert.Equal(t, 50, showJSONOf(t, id).Metrics[0].Points, "every point is there")
			if tt.holder {
				// Another process has it open, as an owner would; the
				// window is not the owner.
				assert.Equal(t, []string{id}, windowRuns(t), "the window's views")
			}

			code, _, errOut := niuma(t, "run", tmpl, "--set", "n=3")
			require.NotEqual(t, 0, code)
			assert.Contains(t, errOut, "no space left on device")
			assert.Equal(t, 1, runDirs(t, home), "a refused submit leaves no folder")
			got = readCommands(t, id)
			assert.JSONEq(t, before.ls, got.ls, "and no run")
		})
	}
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// backupNow takes a backup as the daily one at engine start does.
func backupNow(t *testing.T, home string) storage.BackupFile {
	t.Helper()
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	defer db.Close()
	b, err := db.Backup(context.Background(), engine.BackupDir(home))
	require.NoError(t, err)
	return b
}

// A zero-byte, truncated or bit-flipped niuma.db is refused by every
// command with a message naming it and what to do, and is not touched;
// `niuma doctor --repair` keeps it aside, restores the newest good backup
// and registers the run that was written after it. Nothing stored is lost:
// the backup's runs are intact, the later run is back with its logs.
func TestDamagedArchiveIsRefusedThenRepaired(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, db string)
		status string
	}{
		{"zero bytes", func(t *testing.T, db string) { require.NoError(t, os.Truncate(db, 0)) }, "refused"},
		{"truncated", func(t *testing.T, db string) {
			st, err := os.Stat(db)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(db, st.Size()/2))
		}, "damaged"},
		{"bit flipped in the schema", func(t *testing.T, db string) { flip(t, db, 100) }, "damaged"},
		{"another program's file", func(t *testing.T, db string) {
			require.NoError(t, os.WriteFile(db, []byte("PK\x03\x04 a zip, not an archive"), 0o644))
		}, "damaged"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := tempHome(t)
			tmpl := writeTemplate(t, metricTemplate)
			kept := []string{runPoints(t, tmpl, 5), runPoints(t, tmpl, 6)}
			backupNow(t, home)
			later := runPoints(t, tmpl, 7)
			db := filepath.Join(home, "niuma.db")
			tt.damage(t, db)
			damaged := sum(t, db)

			for _, args := range [][]string{{"ls"}, {"show", later}, {"logs", later}, {"run", tmpl, "--set", "n=8"}, {"engine", "--until-idle"}} {
				code, _, errOut := niuma(t, args...)
				require.Equal(t, 1, code, "%v: %s", args, errOut)
				assert.Contains(t, errOut, db, "%v names the archive", args)
				assert.Contains(t, errOut, "niuma doctor --repair", "%v says what to do", args)
				assert.Contains(t, errOut, "nothing was changed", "%v", args)
				assert.Equal(t, damaged, sum(t, db), "%v leaves the file as it was", args)
			}
			assert.Equal(t, 3, runDirs(t, home), "no run folder is touched")

			code, out, _ := niuma(t, "doctor", "--json")
			require.Equal(t, 1, code, out)
			var rep doctorReport
			require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
			assert.Equal(t, tt.status, rep.Status)
			require.Len(t, rep.Backups, 2, "the one taken at the first engine start and ours")
			assert.True(t, rep.Backups[0].Good)
			assert.Contains(t, rep.Advice, "niuma doctor --repair")

			code, out, errOut := niuma(t, "doctor", "--repair")
			require.Equal(t, 0, code, "%s%s", out, errOut)
			assert.Contains(t, out, "kept the "+tt.status+" archive aside")
			assert.Contains(t, out, "registered run "+later)
			assert.Contains(t, out, "read its 7 metric point(s) again from its folder")
			aside, err := filepath.Glob(filepath.Join(home, "damaged", "*", "niuma.db"))
			require.NoError(t, err)
			require.Len(t, aside, 1)
			assert.Equal(t, damaged, sum(t, aside[0]), "the damaged file is kept as it was")

			for _, id := range kept {
				s := showJSONOf(t, id)
				assert.Equal(t, "succeeded", s.State, "run %s is as the backup has it", id)
				require.Len(t, s.Metrics, 1)
			}
			s := showJSONOf(t, later)
			assert.Equal(t, "failed", s.State)
			assert.Contains(t, s.Error, "restored from the backup")
			code, logs, _ := niuma(t, "logs", later, "a")
			require.Equal(t, 0, code)
			assert.Contains(t, logs, "done-a", "the later run's logs are reachable again")
			require.Len(t, s.Metrics, 1, "its points are read again from its logs")
			assert.Equal(t, 7, s.Metrics[0].Points, "each point once")

			code, out, _ = niuma(t, "doctor")
			require.Equal(t, 0, code, out)
			assert.Contains(t, out, "nothing to do")
		})
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x01
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// Damage SQLite only finds by reading the pages: the archive opens, but
// the engine refuses to own it (quick_check) and says what to do.
func TestEngineRefusesAnArchiveThatFailsQuickCheck(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, metricTemplate)
	for i := range 3 {
		runPoints(t, tmpl, 200+i)
	}
	db := filepath.Join(home, "niuma.db")
	b, err := os.ReadFile(db)
	require.NoError(t, err)
	ps := int64(b[16])<<8 | int64(b[17])
	for pg := int64(1); pg < int64(len(b))/ps; pg++ {
		flip(t, db, pg*ps+5) // every b-tree page's cell content offset
	}
	damaged := sum(t, db)
	code, _, errOut := niuma(t, "engine", "--until-idle")
	require.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "quick_check")
	assert.Contains(t, errOut, "niuma doctor --repair")
	assert.Equal(t, damaged, sum(t, db))
	// The engine marked it: no command writes to it any more.
	for _, args := range [][]string{{"run", tmpl, "--set", "n=9", "--wait"}, {"run", tmpl, "--set", "n=9"}, {"engine", "--until-idle"}} {
		code, _, errOut = niuma(t, args...)
		require.Equal(t, 1, code, errOut)
		assert.Contains(t, errOut, "niuma doctor --repair", "%v", args)
		assert.Equal(t, damaged, sum(t, db), "%v leaves the file as it was", args)
	}
	assert.Equal(t, 3, runDirs(t, home))
	code, out, _ := niuma(t, "doctor")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "damaged")

	// No good backup holds these runs (the one taken at the first start
	// is older): the repair restores it, and registers the three folders.
	code, out, errOut = niuma(t, "doctor", "--repair")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.FileExists(t, filepath.Join(filepath.Dir(firstMatch(t, filepath.Join(home, "damaged", "*", "niuma.db"))), "niuma.db.damaged"),
		"the mark went aside with the damaged file")
	assert.Equal(t, 3, strings.Count(out, "registered run "), out)
	assert.NoFileExists(t, engine.DamagedMark(home))
	code, _, errOut = niuma(t, "engine", "--until-idle")
	assert.Equal(t, 0, code, errOut)
}

// A `niuma run` killed while it submits (its folder written, its row not
// yet: here it waits for a write lock another process holds) leaves a
// folder the next engine adopts; it then runs as submitted. A folder
// killed earlier, before its record was written, is moved aside with a
// note. Both are logged; neither is left silently.
func TestKilledSubmitIsAdoptedOrMovedAside(t *testing.T) {
	bin := buildNiuma(t)
	for _, tt := range []struct {
		name       string
		dropRecord bool // the kill came before run.json was written
	}{
		{"after its record was written", false},
		{"before its record was written", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := tempHome(t)
			tmpl := writeTemplate(t, metricTemplate)
			first := runPoints(t, tmpl, 3) // the archive exists, current
			env := append(os.Environ(), "NIUMA_HOME="+home, "NIUMA_BACKGROUND_ENGINE=off")

			release := holdWriteLock(t, home)
			var out bytes.Buffer
			run := exec.Command(bin, "run", tmpl, "--set", "n=4")
			run.Env, run.Stdout, run.Stderr = env, &out, &out
			require.NoError(t, run.Start())
			var dir string
			require.Eventually(t, func() bool {
				m, _ := filepath.Glob(filepath.Join(home, "runs", "*", "run.json"))
				for _, p := range m {
					if d := filepath.Dir(p); filepath.Base(d) != first {
						dir = d
					}
				}
				return dir != ""
			}, 30*time.Second, 5*time.Millisecond, "the submit writes its folder: %s", &out)
			require.NoError(t, run.Process.Signal(syscall.SIGKILL))
			_ = run.Wait()
			release()
			id := filepath.Base(dir)
			if tt.dropRecord {
				require.NoError(t, os.Remove(filepath.Join(dir, "run.json")))
			}
			code, shownOut, _ := niuma(t, "show", id)
			require.NotEqual(t, 0, code, "the run was never stored: %s; niuma run said: %s", shownOut, &out)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			eng := exec.CommandContext(ctx, bin, "engine", "--until-idle")
			eng.Env = env
			var engOut bytes.Buffer
			eng.Stdout, eng.Stderr = &engOut, &engOut
			require.NoError(t, eng.Run(), engOut.String())

			if !tt.dropRecord {
				assert.Contains(t, engOut.String(), "adopted a run folder")
				s := showJSONOf(t, id)
				assert.Equal(t, "succeeded", s.State, engOut.String())
				require.Len(t, s.Metrics, 1)
				assert.Equal(t, 4, s.Metrics[0].Points, "it ran with the values it was submitted with")
				return
			}
			assert.Contains(t, engOut.String(), "moved aside a run folder")
			moved := filepath.Join(engine.OrphansDir(home), id)
			note, err := os.ReadFile(filepath.Join(moved, "NOTE.txt"))
			require.NoError(t, err, engOut.String())
			assert.Contains(t, string(note), "interrupted")
			assert.FileExists(t, filepath.Join(moved, "params.json"), "nothing of the folder is lost")
			_, err = os.Stat(dir)
			assert.True(t, errors.Is(err, os.ErrNotExist), "runs/ has no orphan left")
			code, rep, _ := niuma(t, "doctor")
			assert.Equal(t, 0, code)
			assert.Contains(t, rep, "0 folder(s) without a run")
		})
	}
}

func firstMatch(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	require.NoError(t, err)
	require.NotEmpty(t, m, pattern)
	return m[0]
}

// A mark left on an archive that passes integrity_check now: doctor says
// so, and --repair keeps the archive (restores nothing) and lifts the mark.
func TestRepairOfAMarkedButSoundArchiveKeepsIt(t *testing.T) {
	home := tempHome(t)
	tmpl := writeTemplate(t, metricTemplate)
	id := runPoints(t, tmpl, 4)
	require.NoError(t, os.WriteFile(engine.DamagedMark(home), []byte("2026-01-01T00:00:00Z\nquick_check failed\n"), 0o644))
	code, _, errOut := niuma(t, "run", tmpl, "--set", "n=5")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "niuma doctor --repair")

	code, _, errOut = niuma(t, "ls")
	assert.Equal(t, 0, code, "reading goes on")
	assert.Contains(t, errOut, "warning: an engine found this archive damaged")
	code, out, _ := niuma(t, "doctor")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "only the mark is removed")
	code, out, errOut = niuma(t, "doctor", "--repair")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.NotContains(t, out, "restored")
	assert.Contains(t, out, "removed the mark")
	assert.Equal(t, "succeeded", showJSONOf(t, id).State)
	code, out, _ = niuma(t, "doctor")
	assert.Equal(t, 0, code, out)
}
