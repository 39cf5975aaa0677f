package app

import (
	"net"
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBusTarget(t *testing.T) {
	for addr, want := range map[string][2]string{
		"unix:path=/run/user/1000/bus":                {"unix", "/run/user/1000/bus"},
		"unix:abstract=/tmp/dbus-x,guid=1":            {"unix", "@/tmp/dbus-x"},
		"tcp:host=127.0.0.1,port=4000":                {"tcp", "127.0.0.1:4000"},
		"nonce-tcp:x;unix:path=/b":                    {"unix", "/b"},
		"launchd:env=DBUS_LAUNCHD_SESSION_BUS_SOCKET": {"", ""},
	} {
		n, target := busTarget(addr)
		require.Equal(t, want, [2]string{n, target}, addr)
	}
}

// A bus that answers is found; one that does not is said to be missing,
// with the reason.
func TestSessionBus(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+sock)
	ok, why := sessionBus()
	require.True(t, ok, why)

	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(dir, "none"))
	ok, why = sessionBus()
	require.False(t, ok)
	require.Contains(t, why, "does not answer")

	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	ok, why = sessionBus()
	require.False(t, ok)
	require.Contains(t, why, "not set")
}

// The process table's user and command come from /proc: this process's.
func TestProcessInfoReadsProc(t *testing.T) {
	u, c := processInfo(os.Getpid())
	me, err := user.Current()
	require.NoError(t, err)
	require.Equal(t, me.Username, u)
	require.Contains(t, c, filepath.Base(os.Args[0]))
	u, c = processInfo(1 << 30)
	require.Empty(t, u+c, "a process that does not exist is unknown")
}
