package machine

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// silentServer accepts connections and never answers, as a service stuck
// behind its lock would.
func silentServer(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "m.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return sock
}

// Calls that time out one after another, from several goroutines, each
// come back unreachable; none touches a connection another call dropped.
func TestClientCallsThatTimeOutDoNotRace(t *testing.T) {
	c := NewClient(silentServer(t))
	defer c.Close()
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
				_, err := c.Status(ctx)
				cancel()
				require.True(t, errors.Is(err, ErrUnreachable), "call %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
}

// A caller whose context ends while another call holds the connection
// gives up at once instead of waiting for that call.
func TestClientCallerGivesUpWhileAnotherCallWaits(t *testing.T) {
	c := NewClient(silentServer(t))
	defer c.Close()
	long, cancelLong := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Status(long); done <- err }()
	// Wait until the long call holds the turn.
	require.Eventually(t, func() bool { return len(c.turn) == 1 }, 5*time.Second, time.Millisecond)
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	_, err := c.Status(short)
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, c.turn, 1, "the long call still holds the connection")
	cancelLong()
	require.Error(t, <-done)
}

// A service counts as installed while its socket exists; a socket path
// with none (and no systemd unit, which only the default socket has) is a
// machine without one.
func TestInstalledFollowsTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	require.False(t, Installed(sock))
	c := NewClient(sock)
	require.False(t, c.Present())
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	require.True(t, Installed(sock))
}
