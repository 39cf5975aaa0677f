package docker

import (
	"path/filepath"
	"strings"
	"time"

	"niuma/engine/executor"
	"niuma/engine/sandbox"
)

// box is what the sandbox's rules make of a job's container: who it runs
// as, how many processes and threads it may hold, and the capabilities
// it keeps.
type box struct {
	user string
	pids int64
	caps []string
}

// Check implements executor.Checker with package sandbox's rules: the
// run, code and data directories are no system paths (nor inside or above
// one, nor the directory of the Docker socket this executor talks to, as
// written and after symlinks), the code and data directories hold no
// socket, the capabilities are on the allow-list, the user is root only
// where allowed, and the process limit is at most the machine's.
func (x *Executor) Check(job executor.Job) error {
	_, err := x.check(job)
	return err
}

func (x *Executor) check(job executor.Job) (box, error) {
	more := []string{x.SocketDir}
	if job.RunDir != "" {
		if err := sandbox.MountShallow("the run directory", job.RunDir, more...); err != nil {
			return box{}, err
		}
	}
	if err := x.checkMount("the template's directory", job.CodeDir, more); err != nil {
		return box{}, err
	}
	if err := x.checkMount("the data directory", job.DataDir, more); err != nil {
		return box{}, err
	}
	var b box
	for _, c := range job.Container.CapAdd {
		if err := sandbox.Capability(c); err != nil {
			return box{}, err
		}
		b.caps = append(b.caps, sandbox.CapabilityName(c))
	}
	var err error
	if b.user, err = sandbox.User(job.Container.User, x.UID, x.GID, x.AllowRoot); err != nil {
		return box{}, err
	}
	if b.pids, err = sandbox.PidsLimit(job.Container.PidsLimit, x.PidsLimit); err != nil {
		return box{}, err
	}
	return b, nil
}

// walkedFor is how long a directory found to hold no socket is not looked
// through again: a sweep's runs, and each stage of a run, mount the same
// data, which may hold millions of files. The path itself is checked every
// time; the container cannot create a socket in it (it is read-only there).
const walkedFor = 10 * time.Minute

// checkMount applies sandbox.Mount to a code or data directory ("" for
// none), looking through its contents at most every walkedFor.
func (x *Executor) checkMount(what, dir string, more []string) error {
	if dir == "" {
		return nil
	}
	x.mu.Lock()
	at, seen := x.walked[dir]
	x.mu.Unlock()
	if seen && time.Since(at) < walkedFor {
		return sandbox.MountShallow(what, dir, more...)
	}
	if err := sandbox.Mount(what, dir, more...); err != nil {
		return err
	}
	x.mu.Lock()
	if x.walked == nil {
		x.walked = map[string]time.Time{}
	}
	x.walked[dir] = time.Now()
	x.mu.Unlock()
	return nil
}

// socketDir is the directory of the socket dockerHost (DOCKER_HOST) names:
// the default socket's for "", none for a daemon on another machine.
func socketDir(dockerHost string) string {
	switch {
	case dockerHost == "":
		return "/var/run"
	case strings.HasPrefix(dockerHost, "unix://"):
		return filepath.Dir(strings.TrimPrefix(dockerHost, "unix://"))
	}
	return ""
}
