package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"

	"niuma/engine/executor"
	"niuma/engine/sandbox"
)

// Executor runs attempts as containers.
type Executor struct {
	api  API
	home string
	// UID and GID are the user running Niuma: containers run as them
	// unless the template names another user (see sandbox.User). New
	// sets this process's.
	UID, GID int
	// AllowRoot lets templates run containers as root when UID is not
	// root (the user's sandbox.RootSetting).
	AllowRoot bool
	// PidsLimit is the most processes and threads a container may hold;
	// templates may only lower it. Default sandbox.DefaultPidsLimit.
	PidsLimit int64
	// SocketDir is the directory of the Docker socket this executor talks
	// to, which no container may be given. New reads it from DOCKER_HOST.
	SocketDir string
	// OnPull, when set, sees the progress of every image pull.
	OnPull func(PullProgress)
	// RetryInterval is how often a handle whose daemon went away tries
	// again. Default 1s.
	RetryInterval time.Duration
	// PullRetry is how long after a failed pull an image is pulled again
	// for a stage that waits for it. Default 1 min.
	PullRetry time.Duration
	// PidsPoll is how often a running container's process count is read;
	// PidsStuck how long a container may stay at its process limit (a fork
	// bomb, or a workload that can start no thread) before it is stopped.
	// Defaults 1s and 10s.
	PidsPoll, PidsStuck time.Duration
	// LogCap is how many bytes of each of an attempt's streams its log
	// keeps (0: logcap.DefaultCap).
	LogCap int64

	mu     sync.Mutex
	pulls  map[string]*pull     // the latest pull of each image
	walked map[string]time.Time // code and data directories found to hold no socket, and when
	pingAt time.Time
	pingOK error
}

type pull struct {
	done chan struct{} // closed when the pull has ended
	at   time.Time     // when it ended
	err  error
}

// New returns an executor over api for the Niuma data directory home.
func New(api API, home string) *Executor {
	return &Executor{api: api, home: home, UID: os.Getuid(), GID: os.Getgid(), PidsLimit: sandbox.DefaultPidsLimit,
		SocketDir: socketDir(os.Getenv("DOCKER_HOST")), RetryInterval: time.Second, PullRetry: time.Minute,
		PidsPoll: time.Second, PidsStuck: 10 * time.Second, pulls: map[string]*pull{}}
}

// Name implements executor.Executor.
func (x *Executor) Name() string { return "docker" }

// pingTTL is how long a ping's answer is reused: the engine asks before
// every stage it starts.
const pingTTL = 500 * time.Millisecond

// Available implements executor.Availability.
func (x *Executor) Available(ctx context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if time.Since(x.pingAt) < pingTTL {
		return x.pingOK
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := x.api.Ping(pctx)
	if err != nil {
		err = unreachable(err)
	}
	x.pingAt, x.pingOK = time.Now(), err
	return err
}

func unreachable(err error) error {
	return fmt.Errorf("%w: Docker daemon not reachable: %v (start Docker, or check DOCKER_HOST)", executor.ErrUnavailable, err)
}

// MapPaths implements executor.PathMapper.
func (x *Executor) MapPaths(runDir, codeDir, dataDir string) (run, code, data string) {
	run = RunMount
	if codeDir != "" {
		code = CodeMount
	}
	if dataDir != "" {
		data = DataMount
	}
	return run, code, data
}

// CheckImage implements executor.ImageChecker: nil when the daemon
// answers and the image is here. It pulls nothing.
func (x *Executor) CheckImage(ctx context.Context, image string) error {
	if err := x.Available(ctx); err != nil {
		return err
	}
	ok, err := x.api.ImageExists(ctx, image)
	switch {
	case err != nil:
		return &executor.Waiting{Reason: fmt.Sprintf("look up image %s: %v", image, err)}
	case !ok:
		return &executor.Waiting{Reason: fmt.Sprintf("image %s is not on this machine: %s", image, imageHint(image))}
	}
	return nil
}

// imageHint says how to get an image, or do without it.
func imageHint(image string) string {
	return fmt.Sprintf("build or load it here (for the bundled demo: `make demo-image`) or `docker pull %s`", image)
}

// every says a period in words: "minute", else "30s".
func every(d time.Duration) string {
	if d == time.Minute {
		return "minute"
	}
	return d.String()
}

// PrepareImage implements executor.ImagePreparer: nil when the image is
// here; otherwise it starts a pull (one per image at a time, again after
// PullRetry when one failed) and says what the stage waits for.
func (x *Executor) PrepareImage(ctx context.Context, image string) error {
	if err := x.Available(ctx); err != nil {
		return err
	}
	ok, err := x.api.ImageExists(ctx, image)
	if err != nil {
		return &executor.Waiting{Reason: fmt.Sprintf("look up image %s: %v", image, err)}
	}
	if ok {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if p := x.pulls[image]; p != nil {
		select {
		case <-p.done:
			if p.err != nil && time.Since(p.at) < x.PullRetry {
				return &executor.Waiting{Reason: fmt.Sprintf("image %s is not on this machine and could not be pulled (%v): %s; "+
					"or run on the host with --executor local (Niuma tries the pull again every %s)", image, p.err, imageHint(image), every(x.PullRetry))}
			}
		default:
			return &executor.Waiting{Reason: fmt.Sprintf("pulling image %s, which is not on this machine yet", image)}
		}
	}
	p := &pull{done: make(chan struct{})}
	x.pulls[image] = p
	go func() {
		err := x.api.Pull(context.Background(), image, x.OnPull)
		x.mu.Lock()
		p.err, p.at = err, time.Now()
		x.mu.Unlock()
		close(p.done)
	}()
	return &executor.Waiting{Reason: fmt.Sprintf("pulling image %s, which is not on this machine yet", image)}
}

// ImageDigest implements engine.ImageDigester: the ID of the local image
// the reference names, so a run's fingerprint changes when the image behind
// a tag is rebuilt or retagged.
func (x *Executor) ImageDigest(ctx context.Context, image string) (string, error) {
	id, err := x.api.ImageID(ctx, image)
	if err != nil {
		if isConnErr(err) {
			return "", unreachable(err)
		}
		return "", fmt.Errorf("look up image %s: %w", image, err)
	}
	return id, nil
}

// ContainerLabels implements gpumon.ContainerLabeler: the labels of the
// container with the full id, so a process on a GPU can be traced to the
// run, stage and attempt that started it.
func (x *Executor) ContainerLabels(ctx context.Context, id string) (map[string]string, error) {
	st, err := x.api.Inspect(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", id, err)
	}
	if st.Labels == nil {
		return map[string]string{}, nil
	}
	return st.Labels, nil
}

// ref is what the engine persists to find the container again.
type ref struct {
	ID string `json:"container"`
}

// Start implements executor.Executor.
func (x *Executor) Start(ctx context.Context, job executor.Job) (executor.Handle, error) {
	if len(job.Argv) == 0 || job.Argv[0] == "" {
		return nil, errors.New("the stage has an empty command")
	}
	if job.Image == "" {
		return nil, errors.New("the template names no image: add runtime: {image: ...} or run with --executor local")
	}
	if err := x.Available(ctx); err != nil {
		return nil, err
	}
	// The sandbox's rules, the last line: whatever the engine checked at
	// submit, the paths may have changed since. The stage's directory is
	// made first (the run directory's path having passed as written), so
	// that the run directory can be resolved.
	if err := sandbox.MountPath("the run directory", job.RunDir, x.SocketDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(job.StageDir, 0o755); err != nil {
		return nil, fmt.Errorf("create stage dir: %w", err)
	}
	b, err := x.check(job)
	if err != nil {
		return nil, err
	}
	if err := x.PrepareImage(ctx, job.Image); err != nil {
		return nil, err
	}
	opts := createOptions(x.home, b, job)
	tok := token(job)
	id, err := x.api.Create(ctx, opts)
	if err != nil && isConflict(err) {
		// The attempt's name is taken: an earlier Start of this attempt
		// made the container, and its Niuma died before it recorded it
		// (or before it started it). That container is the attempt: it is
		// adopted, never removed and never doubled.
		st, ierr := x.api.Inspect(ctx, opts.Name)
		switch {
		case ierr != nil:
			return nil, x.explain(fmt.Errorf("create container: %w; and the container of that name cannot be read: %v", err, ierr), job)
		case !x.ours(st.Labels, tok):
			return nil, fmt.Errorf("create container: a container named %s exists that is not this attempt's "+
				"(its labels say run %q, stage %q, token %q, data directory %q): remove it with `docker rm %s`",
				opts.Name, st.Labels[LabelRun], st.Labels[LabelStage], st.Labels[LabelToken], st.Labels[LabelHome], opts.Name)
		case st.Status != "created":
			if err := writeMark(attemptMarks(job).Created, createdMark{Token: tok, Container: st.ID, Name: opts.Name}); err != nil {
				return nil, err
			}
			return x.adopt(job, st.ID)
		}
		id, err = st.ID, nil // created and never started: start it now
	}
	if err != nil {
		return nil, x.explain(fmt.Errorf("create container: %w", err), job)
	}
	// Launched, from here on: a later owner that finds the container gone
	// knows it existed. An attempt that cannot be recorded does not start.
	if err := writeMark(attemptMarks(job).Created, createdMark{Token: tok, Container: id, Name: opts.Name}); err != nil {
		_ = x.api.Remove(context.Background(), id)
		return nil, err
	}
	h := newHandle(x, id, job)
	fail := func(err error) (executor.Handle, error) {
		h.release()
		unlaunch(x, job, id)
		return nil, err
	}
	out, errf, err := h.logFiles()
	if err != nil {
		return fail(err)
	}
	// Output and wait are both registered before the start, so neither a
	// first line nor an exit, however fast, is missed.
	so, se := &skipWriter{w: x.capLog(out, "stdout", 0)}, &skipWriter{w: x.capLog(errf, "stderr", 0)}
	copied, err := x.api.Attach(h.ctx, id, so, se)
	if err != nil {
		out.Close()
		errf.Close()
		return fail(x.explain(fmt.Errorf("attach to container: %w", err), job))
	}
	first := x.api.Wait(h.ctx, id, container.WaitConditionNextExit)
	if err := x.api.Start(ctx, id); err != nil {
		// Removing the container ends the attached stream.
		h.release()
		unlaunch(x, job, id)
		ended := make(chan struct{})
		go func() { copied(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
		}
		out.Close()
		errf.Close()
		return nil, x.explain(fmt.Errorf("start container: %w", err), job)
	}
	go h.follow(out, errf, so, se, copied)
	go h.monitor(first)
	go h.watchPids()
	return h, nil
}

// unlaunch undoes a launch that failed before the container ran: the
// created mark goes first, so that what is left reads as never launched.
func unlaunch(x *Executor, job executor.Job, id string) {
	_ = os.Remove(attemptMarks(job).Created)
	_ = x.api.Remove(context.Background(), id)
}

// ours says whether a container's labels name this data directory and the
// attempt's token.
func (x *Executor) ours(labels map[string]string, tok string) bool {
	return labels[LabelHome] == x.home && tokenOf(labels) == tok
}

// Recover implements executor.Executor. The container is looked up by the
// id in ref, or, when ref is "", by the attempt's name and then by its
// token label. A container that runs is followed; one that has ended is
// read for its exit code (and removed); one that was created and never
// started is ErrNotLaunched (Start starts it). When the container is
// gone, the marks next to the logs decide: the exit mark's status, else
// ErrGone when the container existed (the created mark, or a ref), else
// ErrNotLaunched. With the daemon away, a ref's container is followed
// until the daemon is back; without a ref the answer is an error matching
// executor.ErrUnavailable: ask again later.
func (x *Executor) Recover(ctx context.Context, job executor.Job, refJSON string) (executor.Handle, error) {
	tok := token(job)
	m := attemptMarks(job)
	var r ref
	if refJSON != "" {
		_ = json.Unmarshal([]byte(refJSON), &r)
	}
	key := r.ID
	if key == "" {
		key = containerName(job)
	}
	st, err := x.api.Inspect(ctx, key)
	if errors.Is(err, ErrNotFound) && r.ID == "" {
		st, err = x.byToken(ctx, tok)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		if e := readExit(m.Exit, tok); e != nil {
			return x.ended(job, e.Container, e.Exit), nil
		}
		if refJSON != "" || readCreated(m.Created, tok) != nil {
			return nil, executor.ErrGone
		}
		return nil, executor.ErrNotLaunched
	case err != nil && r.ID == "":
		if isConnErr(err) {
			return nil, unreachable(err)
		}
		return nil, fmt.Errorf("look for the attempt's container %s: %w", key, err)
	case err != nil:
		// With the daemon away the handle keeps trying: the attempt is not
		// lost just because Docker restarts.
		return x.adopt(job, r.ID)
	case st.Labels[LabelHome] != x.home:
		return nil, executor.ErrGone // not ours: never adopt another install's container
	case st.Status == "created":
		return nil, executor.ErrNotLaunched
	}
	return x.adopt(job, st.ID)
}

// byToken finds this install's container labelled with tok.
func (x *Executor) byToken(ctx context.Context, tok string) (State, error) {
	list, err := x.api.List(ctx, map[string]string{LabelHome: x.home, LabelToken: tok})
	if err != nil {
		return State{}, err
	}
	if len(list) == 0 {
		return State{}, ErrNotFound
	}
	return x.api.Inspect(ctx, list[0].ID)
}

// adopt follows a container an earlier owner (or an earlier Start) made:
// its output from where the log files end, and its end.
func (x *Executor) adopt(job executor.Job, id string) (executor.Handle, error) {
	h := newHandle(x, id, job)
	h.adopted = true
	out, errf, err := h.logFiles()
	if err != nil {
		h.release()
		return nil, err
	}
	outSize, errSize := fileSize(job.StdoutPath), fileSize(job.StderrPath)
	so := &skipWriter{w: x.capLog(out, "stdout", outSize), skip: outSize}
	se := &skipWriter{w: x.capLog(errf, "stderr", errSize), skip: errSize}
	go h.follow(out, errf, so, se, nil)
	go h.monitor(nil)
	go h.watchPids()
	return h, nil
}

// ended is a handle on an attempt whose container is gone and whose end
// the exit mark recorded.
func (x *Executor) ended(job executor.Job, id string, ex executor.Exit) executor.Handle {
	h := newHandle(x, id, job)
	h.adopted = true
	h.exit = ex
	close(h.logsDone)
	close(h.done)
	h.release()
	return h
}

// createdGrace is how long Sweep leaves a container that was created and
// never started: a Start of this process may be about to start it.
const createdGrace = 10 * time.Minute

// Sweep implements executor.Sweeper. owned names every attempt the
// archive knows, by token (a Ref, as an older engine passes, names one by
// its container). A container labelled with this data directory is
// removed only when its token names no attempt in owned and it has
// exited (or was created and never started, createdGrace ago): the
// container of a recorded attempt is the attempt's, for the engine to
// recover, and one that runs may be an attempt whose record is still
// being written. Containers whose template asked to keep them stay.
func (x *Executor) Sweep(ctx context.Context, owned []string) ([]string, error) {
	if err := x.Available(ctx); err != nil {
		return nil, err
	}
	tokens, ids := map[string]bool{}, map[string]bool{}
	for _, o := range owned {
		var r ref
		if strings.HasPrefix(o, "{") && json.Unmarshal([]byte(o), &r) == nil && r.ID != "" {
			ids[r.ID] = true
			continue
		}
		tokens[o] = true
	}
	list, err := x.api.List(ctx, map[string]string{LabelHome: x.home})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var removed []string
	for _, c := range list {
		switch {
		case ids[c.ID] || tokens[tokenOf(c.Labels)] || c.Labels[LabelKeep] == "true":
			continue
		case c.State == "exited" || c.State == "dead":
		case c.State == "created" && !c.Created.IsZero() && time.Since(c.Created) > createdGrace:
		default:
			continue // running, paused, restarting, being removed: not ours to end
		}
		if err := x.api.Remove(ctx, c.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return removed, fmt.Errorf("remove container %s: %w", c.Name, err)
		}
		removed = append(removed, fmt.Sprintf("%s (run %s, stage %s, attempt %s, %s)",
			strings.TrimPrefix(c.Name, "/"), c.Labels[LabelRun], c.Labels[LabelStage], c.Labels[LabelAttempt], c.State))
	}
	return removed, nil
}

// explain turns the daemon's words for known setup problems into advice.
func (x *Executor) explain(err error, job executor.Job) error {
	msg := err.Error()
	switch {
	case len(job.GPUs) > 0 && (strings.Contains(msg, "could not select device driver") || strings.Contains(msg, "nvidia")):
		return fmt.Errorf("%w; the stage needs GPUs but Docker has no NVIDIA runtime: install nvidia-container-toolkit and restart Docker "+
			"(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/), or run the stage with 0 GPUs", err)
	case isConnErr(err):
		return unreachable(err)
	}
	return err
}

func isConflict(err error) bool {
	return strings.Contains(err.Error(), "Conflict") || strings.Contains(err.Error(), "already in use")
}

// isConnErr says whether err is the daemon not answering rather than the
// daemon refusing.
func isConnErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot connect to the Docker daemon") || strings.Contains(s, "connection refused") ||
		strings.Contains(s, "no such file or directory") && strings.Contains(s, ".sock") || strings.Contains(s, "EOF")
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}
