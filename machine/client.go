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

// Installed says whether a machine service listens (or listened) at
// socket: the socket file exists. A Niuma that finds none places alone.
func Installed(socket string) bool {
	fi, err := os.Stat(socket)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// Client is a user's connection to the machine service. It keeps one
// connection, dialled on first use and again after any failure; calls are
// serialised over it.
type Client struct {
	socket string

	mu   sync.Mutex
	conn net.Conn
	rd   *bufio.Reader
}

// NewClient returns a client of the service at socket; nothing is dialled
// until the first call.
func NewClient(socket string) *Client { return &Client{socket: socket} }

// Socket is the service's socket path.
func (c *Client) Socket() string { return c.socket }

// callTimeout bounds a call whose context has no deadline.
const callTimeout = 10 * time.Second

// Close drops the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
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
	c.mu.Lock()
	defer c.mu.Unlock()
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
	_ = c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var resp Response
	if err := WriteMessage(c.conn, req); err != nil {
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

var _ Arbiter = (*Client)(nil)
