package machine

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// Socket is where this user's Niuma finds the machine service:
// $NIUMA_MACHINE_SOCKET, else DefaultSocket.
func Socket() string {
	if s := os.Getenv("NIUMA_MACHINE_SOCKET"); s != "" {
		return s
	}
	return DefaultSocket
}

// Unit is where make install-system puts the service's systemd unit. While
// it is there the service counts as installed even when its socket is not
// (the service failed before it listened, or is restarting): users' Niuma
// wait for it rather than place alone.
const Unit = "/etc/systemd/system/niuma-machine.service"

// Installed says whether a machine service is installed for socket: the
// socket exists, or, for the default socket, the systemd unit does. A
// Niuma that finds none places alone.
func Installed(socket string) bool {
	if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		return true
	}
	if socket != DefaultSocket {
		return false
	}
	_, err := os.Stat(Unit)
	return err == nil
}

// Present is the question an engine asks at each pass: is a machine
// service installed? A service installed or removed while Niuma runs is
// noticed within presentEvery.
type Present interface{ Present() bool }

// presentEvery is how long Client.Present trusts its last look.
const presentEvery = time.Second

// Client is a user's connection to the machine service. It keeps one
// connection, dialled on first use and again after any failure; calls are
// serialised over it.
type Client struct {
	socket string

	// turn is held by the call using the connection. It is a channel, not
	// a mutex, so that a caller whose context ends while another call is in
	// flight (the window asking for a preview) gives up instead of waiting.
	turn chan struct{}
	conn net.Conn
	rd   *bufio.Reader

	seen struct {
		sync.Mutex
		at      time.Time
		present bool
	}
}

// NewClient returns a client of the service at socket; nothing is dialled
// until the first call.
func NewClient(socket string) *Client {
	return &Client{socket: socket, turn: make(chan struct{}, 1)}
}

// Present says whether the service is installed now (Installed), looking
// at most every presentEvery.
func (c *Client) Present() bool {
	c.seen.Lock()
	defer c.seen.Unlock()
	if now := time.Now(); now.Sub(c.seen.at) >= presentEvery {
		c.seen.at, c.seen.present = now, Installed(c.socket)
	}
	return c.seen.present
}

// take waits for the connection's turn, or for ctx to end.
func (c *Client) take(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return Unreachable(c.socket, ctx.Err())
	}
}

func (c *Client) give() { <-c.turn }

// Socket is the service's socket path.
func (c *Client) Socket() string { return c.socket }

// callTimeout bounds a call whose context has no deadline.
const callTimeout = 10 * time.Second

// Close drops the connection.
func (c *Client) Close() error {
	c.turn <- struct{}{}
	defer c.give()
	c.drop()
	return nil
}

func (c *Client) drop() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	c.conn, c.rd = nil, nil
}

// call sends req and reads its response. A failure to reach the service
// or to read its answer is ErrUnreachable; the service's own errors come
// back as they are, and a refusal as *Refused.
func (c *Client) call(ctx context.Context, req Request) (Response, error) {
	if err := c.take(ctx); err != nil {
		return Response{}, err
	}
	defer c.give()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(callTimeout)
	}
	if c.conn == nil {
		d := net.Dialer{Deadline: deadline}
		conn, err := d.DialContext(ctx, "unix", c.socket)
		if err != nil {
			return Response{}, Unreachable(c.socket, err)
		}
		c.conn, c.rd = conn, bufio.NewReaderSize(conn, 64<<10)
	}
	// The deadline is set on this call's own connection: drop() may clear
	// c.conn before the AfterFunc runs.
	conn := c.conn
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var resp Response
	if err := WriteMessage(conn, req); err != nil {
		c.drop()
		return Response{}, Unreachable(c.socket, err)
	}
	if err := ReadMessage(c.rd, &resp); err != nil {
		c.drop()
		return Response{}, Unreachable(c.socket, err)
	}
	switch {
	case resp.Refused:
		return resp, &Refused{Reason: resp.Error}
	case resp.Error != "":
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

// Place implements Arbiter.
func (c *Client) Place(ctx context.Context, ask Ask) (Answer, error) {
	resp, err := c.call(ctx, Request{Op: OpPlace, Ask: &ask})
	if err != nil {
		return Answer{}, err
	}
	if resp.Answer == nil {
		return Answer{}, errors.New("the machine service's answer to a placement is empty")
	}
	return *resp.Answer, nil
}

// Claim implements Arbiter.
func (c *Client) Claim(ctx context.Context, cl Claim) error {
	_, err := c.call(ctx, Request{Op: OpClaim, Claim: &cl})
	return err
}

// Release implements Arbiter.
func (c *Client) Release(ctx context.Context, token string) error {
	_, err := c.call(ctx, Request{Op: OpRelease, Token: token})
	return err
}

// Status implements Arbiter.
func (c *Client) Status(ctx context.Context) (Status, error) {
	resp, err := c.call(ctx, Request{Op: OpStatus})
	if err != nil {
		return Status{}, err
	}
	if resp.Status == nil {
		return Status{}, errors.New("the machine service's status is empty")
	}
	return *resp.Status, nil
}

// Cancel implements Arbiter.
func (c *Client) Cancel(ctx context.Context, run string) (CancelResult, error) {
	resp, err := c.call(ctx, Request{Op: OpCancel, Run: run})
	if err != nil {
		return CancelResult{}, err
	}
	if resp.Cancel == nil {
		return CancelResult{}, errors.New("the machine service's answer to a cancel is empty")
	}
	return *resp.Cancel, nil
}

var (
	_ Arbiter = (*Client)(nil)
	_ Present = (*Client)(nil)
)
