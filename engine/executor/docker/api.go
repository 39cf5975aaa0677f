package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// API is the part of the Docker Engine API the executor uses.
type API interface {
	// Ping checks that the daemon answers.
	Ping(ctx context.Context) error
	// ImageExists reports whether the image is present locally.
	ImageExists(ctx context.Context, image string) (bool, error)
	// ImageID returns the ID (sha256:…) of the local image a reference
	// names; ErrNotFound when there is none.
	ImageID(ctx context.Context, image string) (string, error)
	// Pull fetches an image, reporting progress as it goes.
	Pull(ctx context.Context, image string, progress func(PullProgress)) error
	// Create creates (does not start) a container.
	Create(ctx context.Context, opts client.ContainerCreateOptions) (id string, err error)
	// Wait registers a wait for the container to stop; the request is
	// acknowledged by the daemon before Wait returns, so a Start after it
	// cannot be missed. The channel yields one result.
	Wait(ctx context.Context, id string, cond container.WaitCondition) <-chan WaitResult
	// Attach connects to the container's output before it starts (nothing
	// is missed, as with `docker run`) and copies it, demultiplexed, in the
	// background until the stream ends or ctx does; copied returns then,
	// nil when the container stopped.
	Attach(ctx context.Context, id string, stdout, stderr io.Writer) (copied func() error, err error)
	Start(ctx context.Context, id string) error
	Inspect(ctx context.Context, id string) (State, error)
	// Logs copies the container's output, demultiplexed, from the start;
	// with follow it returns when the container stops.
	Logs(ctx context.Context, id string, follow bool, stdout, stderr io.Writer) error
	// Stop sends the stop signal and kills after grace.
	Stop(ctx context.Context, id string, grace time.Duration) error
	Remove(ctx context.Context, id string) error
	// List returns the containers, running or not, carrying all labels.
	List(ctx context.Context, labels map[string]string) ([]Summary, error)
	// Pids returns how many processes and threads a running container
	// holds and its limit (0: none, or unknown).
	Pids(ctx context.Context, id string) (current, limit int64, err error)
}

// PullProgress is one step of an image pull.
type PullProgress struct {
	Image   string
	Layer   string // "" for messages about the whole image
	Status  string // e.g. "Downloading", "Pull complete"
	Current int64  // bytes of this layer so far
	Total   int64  // bytes of this layer; 0 when unknown
}

// WaitResult is how a wait ended: an exit code, or an error when the wait
// itself broke (the daemon went away).
type WaitResult struct {
	Code int
	Err  error
}

// State is what the executor reads from an inspected container.
type State struct {
	ID string
	// Status is the daemon's word: "created" (never started), "running",
	// "exited", "dead", …; "" from a daemon that did not say.
	Status    string
	Running   bool
	ExitCode  int
	OOMKilled bool
	Error     string
	Labels    map[string]string
}

// Summary is one listed container.
type Summary struct {
	ID      string
	Name    string
	State   string // "created", "running", "exited", …
	Labels  map[string]string
	Created time.Time
}

// ErrNotFound is returned by API methods when the container or image does
// not exist.
var ErrNotFound = errors.New("not found")

// Moby implements API with the Moby client.
type Moby struct{ c *client.Client }

// NewMoby returns an API over the daemon the environment names
// (DOCKER_HOST and friends; the local socket otherwise). It does not
// contact the daemon.
func NewMoby() (*Moby, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Moby{c: c}, nil
}

// Close releases the client's connections.
func (m *Moby) Close() error { return m.c.Close() }

func notFound(err error) error {
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return err
}

// Ping implements API.
func (m *Moby) Ping(ctx context.Context) error {
	_, err := m.c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}

// ImageExists implements API.
func (m *Moby) ImageExists(ctx context.Context, image string) (bool, error) {
	_, err := m.c.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}

// ImageID implements API.
func (m *Moby) ImageID(ctx context.Context, image string) (string, error) {
	r, err := m.c.ImageInspect(ctx, image)
	if err != nil {
		return "", notFound(err)
	}
	return r.ID, nil
}

// Pull implements API. The daemon reports a failed pull inside the stream;
// that message is the error.
func (m *Moby) Pull(ctx context.Context, image string, progress func(PullProgress)) error {
	rc, err := m.c.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer rc.Close()
	for msg, err := range rc.JSONMessages(ctx) {
		if err != nil {
			return err
		}
		if msg.Error != nil {
			return errors.New(msg.Error.Message)
		}
		if progress != nil {
			p := PullProgress{Image: image, Layer: msg.ID, Status: msg.Status}
			if msg.Progress != nil {
				p.Current, p.Total = msg.Progress.Current, msg.Progress.Total
			}
			progress(p)
		}
	}
	return nil
}

// Create implements API.
func (m *Moby) Create(ctx context.Context, opts client.ContainerCreateOptions) (string, error) {
	r, err := m.c.ContainerCreate(ctx, opts)
	if err != nil {
		return "", notFound(err)
	}
	return r.ID, nil
}

// Wait implements API.
func (m *Moby) Wait(ctx context.Context, id string, cond container.WaitCondition) <-chan WaitResult {
	out := make(chan WaitResult, 1)
	w := m.c.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: cond})
	go func() {
		select {
		case r := <-w.Result:
			if r.Error != nil && r.Error.Message != "" {
				out <- WaitResult{Code: int(r.StatusCode), Err: errors.New(r.Error.Message)}
				return
			}
			out <- WaitResult{Code: int(r.StatusCode)}
		case err := <-w.Error:
			out <- WaitResult{Code: -1, Err: notFound(err)}
		}
	}()
	return out
}

// Attach implements API.
func (m *Moby) Attach(ctx context.Context, id string, stdout, stderr io.Writer) (func() error, error) {
	r, err := m.c.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, notFound(err)
	}
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_, err := stdcopy.StdCopy(stdout, stderr, r.Reader)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		done <- err
	}()
	// A hijacked connection does not watch ctx: close it when ctx ends.
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
		}
		r.Close()
	}()
	return func() error { return <-done }, nil
}

// Start implements API.
func (m *Moby) Start(ctx context.Context, id string) error {
	_, err := m.c.ContainerStart(ctx, id, client.ContainerStartOptions{})
	return notFound(err)
}

// Inspect implements API.
func (m *Moby) Inspect(ctx context.Context, id string) (State, error) {
	r, err := m.c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return State{}, notFound(err)
	}
	c := r.Container
	s := State{ID: c.ID}
	if c.State != nil {
		s.Status = string(c.State.Status)
		s.Running = c.State.Running || c.State.Restarting
		s.ExitCode = c.State.ExitCode
		s.OOMKilled = c.State.OOMKilled
		s.Error = c.State.Error
	}
	if c.Config != nil {
		s.Labels = c.Config.Labels
	}
	return s, nil
}

// Logs implements API.
func (m *Moby) Logs(ctx context.Context, id string, follow bool, stdout, stderr io.Writer) error {
	rc, err := m.c.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow})
	if err != nil {
		return notFound(err)
	}
	defer rc.Close()
	_, err = stdcopy.StdCopy(stdout, stderr, rc)
	return err
}

// Stop implements API.
func (m *Moby) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int((grace + time.Second - 1) / time.Second)
	_, err := m.c.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs})
	return notFound(err)
}

// Remove implements API.
func (m *Moby) Remove(ctx context.Context, id string) error {
	_, err := m.c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	return notFound(err)
}

// List implements API.
func (m *Moby) List(ctx context.Context, labels map[string]string) ([]Summary, error) {
	f := client.Filters{}
	for k, v := range labels {
		f = f.Add("label", k+"="+v)
	}
	r, err := m.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(r.Items))
	for _, c := range r.Items {
		s := Summary{ID: c.ID, State: string(c.State), Labels: c.Labels, Created: time.Unix(c.Created, 0)}
		if len(c.Names) > 0 {
			s.Name = c.Names[0]
		}
		out = append(out, s)
	}
	return out, nil
}

// Pids implements API with one sample of the container's statistics.
func (m *Moby) Pids(ctx context.Context, id string) (int64, int64, error) {
	r, err := m.c.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return 0, 0, notFound(err)
	}
	defer r.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return 0, 0, err
	}
	return int64(st.PidsStats.Current), int64(st.PidsStats.Limit), nil
}

// PullTally adds up the per-layer progress of image pulls into one figure
// per image, for a progress bar. It is safe for concurrent use.
type PullTally struct {
	mu  sync.Mutex
	cur map[string]map[string]int64 // image -> layer -> bytes so far
	tot map[string]map[string]int64 // image -> layer -> bytes in all
}

// Add takes one progress event and returns the image's bytes so far and in
// all (total 0 while unknown), and whether the pull has finished.
func (t *PullTally) Add(p PullProgress) (current, total int64, done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == nil {
		t.cur, t.tot = map[string]map[string]int64{}, map[string]map[string]int64{}
	}
	if t.cur[p.Image] == nil {
		t.cur[p.Image], t.tot[p.Image] = map[string]int64{}, map[string]int64{}
	}
	if p.Layer != "" && p.Total > 0 {
		t.cur[p.Image][p.Layer], t.tot[p.Image][p.Layer] = p.Current, p.Total
	}
	for layer, n := range t.tot[p.Image] {
		current, total = current+t.cur[p.Image][layer], total+n
	}
	// The daemon ends a pull with "Digest: …" and "Status: Downloaded …".
	done = strings.HasPrefix(p.Status, "Status:") || strings.HasPrefix(p.Status, "Digest:")
	if done {
		delete(t.cur, p.Image)
		delete(t.tot, p.Image)
	}
	return current, total, done
}
