package logcap

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fill writes to path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestFullDiskLosesNoOutput: what a command prints while the log's disk
// is full waits in the capper (and the pipe), and is in the log, in
// order, once there is room again.
func TestFullDiskLosesNoOutput(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI runs as root)")
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("the capper that waits for room is perl's")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	filler := filepath.Join(dir, "filler")
	fill(t, filler)

	stdout, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	// 20,000 lines, about 230 KiB: more than a pipe and the capper hold,
	// so the command itself waits.
	const lines = 20000
	cmd := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt `+fmt.Sprint(lines)+` ]; do echo "line $i"; i=$((i+1)); done`)
	c, err := Attach(cmd, 0, stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.Started()
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	// The disk stays full until the command is seen blocked: its output
	// has nowhere to go.
	deadline := time.Now().Add(30 * time.Second)
	for blocked := false; !blocked; {
		if time.Now().After(deadline) {
			t.Fatal("the command never blocked on its full pipe")
		}
		select {
		case err := <-ended:
			t.Fatalf("the command ended (%v) though its output could not be written", err)
		case <-time.After(50 * time.Millisecond):
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", cmd.Process.Pid))
		blocked = strings.Contains(string(b), "pipe") || strings.Contains(string(b), "wait")
		if st, _ := os.Stat(filepath.Join(dir, "stdout.log")); st != nil && st.Size() > 0 {
			t.Fatalf("%d bytes were written to a full disk", st.Size())
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the command did not end once the disk had room")
	}
	c.Wait(30 * time.Second)
	b, err := os.ReadFile(filepath.Join(dir, "stdout.log"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(got) != lines {
		t.Fatalf("the log has %d lines, want %d", len(got), lines)
	}
	for i, l := range got {
		if l != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}
