package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"niuma/machine"
)

// Server serves an Arbiter on a Unix socket. Each connection's user is
// the socket's peer credentials (SO_PEERCRED), never what it says.
type Server struct {
	Arbiter *Arbiter
	Users   *Users
	Logger  *slog.Logger
	// SweepEvery is how often quiet holders' leftovers are given up.
	// Default 2s.
	SweepEvery time.Duration

	mu    sync.Mutex
	conns map[int]int // open connections by user
}

// Bounds on what one user's connections may hold of the service: a user
// who opens connections and never speaks, or never reads the answers,
// costs at most these.
const (
	maxConnsPerUser = 32
	idleConn        = 10 * time.Minute // an engine asks every second
	writeAnswer     = 10 * time.Second
)

// Listen makes the socket at path, readable and writable by every user
// (who may do what is the Arbiter's to say, by their credentials). A
// socket file left by a service that is gone is replaced; one a live
// service listens on is refused.
func Listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create the socket's directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: move it away, or give the service another --socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("a machine service already listens at %s: stop it first (systemctl stop niuma-machine)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("open the socket to every user: %w", err)
	}
	return l, nil
}

// Serve answers connections on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l *net.UnixListener) error {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Users == nil {
		s.Users = &Users{}
	}
	every := s.SweepEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.Arbiter.Sweep(ctx); err != nil && ctx.Err() == nil {
					s.Logger.Warn("sweep quiet holders' leases", "err", err)
				}
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var conns sync.Map
	defer conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		conns.Store(c, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns.Delete(c)
			defer c.Close()
			s.serveConn(ctx, c)
		}()
	}
}

// peer is the user at the other end of c.
func (s *Server) peer(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	uid := int(cred.Uid)
	return Peer{UID: uid, User: s.Users.Name(uid), Groups: s.Users.Groups(uid)}, nil
}

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	p, err := s.peer(c)
	if err != nil {
		s.Logger.Warn("a connection without credentials; closed", "err", err)
		return
	}
	if !s.open(p.UID) {
		_ = c.SetWriteDeadline(time.Now().Add(writeAnswer))
		_ = machine.WriteMessage(c, machine.Response{Error: fmt.Sprintf(
			"%s has %d connections to the machine service open already: close some (one per Niuma is enough)", p.User, maxConnsPerUser)})
		return
	}
	defer s.close(p.UID)
	rd := bufio.NewReaderSize(c, 64<<10)
	for {
		var req machine.Request
		_ = c.SetReadDeadline(time.Now().Add(idleConn))
		if err := machine.ReadMessage(rd, &req); err != nil {
			if errors.Is(err, machine.ErrTooLong) {
				_ = machine.WriteMessage(c, machine.Response{Error: "message longer than the service reads (32 MiB)"})
			}
			return
		}
		resp := s.handle(ctx, p, req)
		_ = c.SetWriteDeadline(time.Now().Add(writeAnswer))
		if err := machine.WriteMessage(c, resp); err != nil {
			return
		}
	}
}

// open counts a connection of uid's, refusing it past maxConnsPerUser.
func (s *Server) open(uid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[int]int{}
	}
	if s.conns[uid] >= maxConnsPerUser {
		return false
	}
	s.conns[uid]++
	return true
}

func (s *Server) close(uid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[uid]--; s.conns[uid] <= 0 {
		delete(s.conns, uid)
	}
}

// handle answers one request.
func (s *Server) handle(ctx context.Context, p Peer, req machine.Request) machine.Response {
	var resp machine.Response
	var err error
	switch req.Op {
	case machine.OpPlace:
		if req.Ask == nil {
			return machine.Response{Error: "place: no ask"}
		}
		var ans machine.Answer
		ans, err = s.Arbiter.Place(ctx, p, *req.Ask)
		resp.Answer = &ans
	case machine.OpClaim:
		if req.Claim == nil {
			return machine.Response{Error: "claim: no claim"}
		}
		err = s.Arbiter.Claim(ctx, p, *req.Claim)
	case machine.OpRelease:
		err = s.Arbiter.Release(ctx, p, req.Token)
	case machine.OpStatus:
		var st machine.Status
		st, err = s.Arbiter.Status(ctx, p)
		resp.Status = &st
	case machine.OpCancel:
		var cr machine.CancelResult
		cr, err = s.Arbiter.Cancel(ctx, p, req.Run)
		resp.Cancel = &cr
	default:
		return machine.Response{Error: fmt.Sprintf("unknown op %q (this service knows place, claim, release, status and cancel)", req.Op)}
	}
	if err != nil {
		var refused *machine.Refused
		resp = machine.Response{Error: err.Error(), Refused: errors.As(err, &refused)}
		if !resp.Refused {
			s.Logger.Warn("a call failed", "op", req.Op, "user", p.User, "err", err)
		}
	}
	return resp
}

// Lock makes this process the one service of a database: a second
// service on the same file would hand out the same GPUs twice. The kernel
// drops the lock when the process dies, however it dies.
func Lock(dbPath string) (release func(), err error) {
	path := dbPath + ".lock"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the service's lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another machine service uses %s: stop it first (systemctl stop niuma-machine)", dbPath)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
