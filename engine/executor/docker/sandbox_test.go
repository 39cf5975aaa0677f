package docker

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/docker/dockertest"
	"niuma/engine/sandbox"
)

// These tests run against the machine's Docker daemon: what the sandbox
// refuses never becomes a container, and what it grants is what the
// container gets.

// refused starts job and requires the refusal by rule, with the message,
// and no container left.
func (f *fixture) refused(t *testing.T, job executor.Job, rule sandbox.Rule, msg string) {
	t.Helper()
	atSubmit := job
	atSubmit.RunDir = "" // not made yet
	require.True(t, sandbox.Is(f.x.Check(atSubmit), rule), "Check, as at submit: %v", f.x.Check(atSubmit))
	h, err := f.x.Start(context.Background(), job)
	if err == nil {
		f.wait(h)
	}
	require.Error(t, err, "the daemon was never asked")
	require.True(t, sandbox.Is(err, rule), "%v", err)
	require.NotErrorIs(t, err, executor.ErrUnavailable, "a refusal fails the stage; waiting would not help")
	require.Contains(t, err.Error(), msg)
	require.Empty(t, f.containers())
}

func TestSystemPathsAreNeverMounted(t *testing.T) {
	f := newFixture(t)
	sockDir := t.TempDir() // where this executor's daemon would listen
	f.x.SocketDir = sockDir
	link := filepath.Join(t.TempDir(), "datasets")
	require.NoError(t, os.Symlink("/var/run", link))
	for _, tt := range []struct{ path, msg string }{
		{"/", "the data directory / is the root of this machine's files"},
		{"/proc", "the data directory /proc is a system path"},
		{"/sys", "the data directory /sys is a system path"},
		{"/dev", "the data directory /dev is a system path"},
		{"/etc", "the data directory /etc is a system path"},
		{"/boot", "the data directory /boot is a system path"},
		{"/run", "the data directory /run is a system path"},
		{"/var/run", "the data directory /var/run is a system path"},
		{"/var/lib/docker", "the data directory /var/lib/docker is a system path"},
		{"/var", "the data directory /var holds the system path /var/run"},
		{sockDir, "the data directory " + sockDir + " is a system path"},
		{link, "the data directory " + link + " resolves to the system path /run"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			job := f.job("a", dockertest.Workload, "exit", "0")
			job.DataDir = tt.path
			f.refused(t, job, sandbox.RuleSystemPath, tt.msg)
			require.Contains(t, f.x.Check(executor.Job{DataDir: tt.path}).Error(), "rule: no container gets /, /proc, /sys, /dev, /etc, /boot, /run, /var/run, /var/lib/docker or the Docker socket's directory")
		})
	}
	t.Run("the template's directory too", func(t *testing.T) {
		job := f.job("a", dockertest.Workload, "exit", "0")
		job.CodeDir = "/etc"
		f.refused(t, job, sandbox.RuleSystemPath, "the template's directory /etc is a system path")
	})
}

func TestADirectoryHoldingASocketIsNeverMounted(t *testing.T) {
	f := newFixture(t)
	data := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(filepath.Join(data, "run"), 0o755))
	sock := filepath.Join(data, "run", "service.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	job := f.job("a", dockertest.Workload, "exit", "0")
	job.DataDir = data
	f.refused(t, job, sandbox.RuleSocket, "the data directory "+data+" holds a socket or named pipe, "+sock)
	require.NoError(t, l.Close()) // which removes the socket
	require.NoFileExists(t, sock)
	require.True(t, f.run(job).Success(), "without the socket it mounts")
}

func TestCapabilitiesOffTheAllowListAreRefused(t *testing.T) {
	f := newFixture(t)
	for _, c := range []string{"SYS_MODULE", "SYS_RAWIO", "DAC_READ_SEARCH", "NET_ADMIN", "NET_RAW", "SYS_ADMIN", "ALL", "cap_sys_admin"} {
		t.Run(c, func(t *testing.T) {
			job := f.job("a", dockertest.Workload, "exit", "0")
			job.Container.CapAdd = []string{"SYS_PTRACE", c}
			f.refused(t, job, sandbox.RuleCapability, "cap_add: "+sandbox.CapabilityName(c)+" is not granted (rule: a template may add only IPC_LOCK")
		})
	}
}

// status reads /proc/self/status inside a container of job.
func (f *fixture) status(job executor.Job) map[string]string {
	f.t.Helper()
	job.Argv = []string{dockertest.Workload, "cat", "/proc/self/status"}
	ex := f.run(job)
	require.True(f.t, ex.Success(), "%s: %s", ex.Describe(), readFile(job.StderrPath))
	out := map[string]string{}
	for _, l := range strings.Split(readFile(job.StdoutPath), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

func TestAllowedCapabilitiesAreAllTheContainerHas(t *testing.T) {
	f := newFixture(t)
	job := f.job("a")
	require.Equal(t, "0000000000000000", f.status(job)["CapBnd"], "every capability dropped by default")
	job = f.job("b")
	job.Container.CapAdd = []string{"sys_ptrace"}
	require.Equal(t, "0000000000080000", f.status(job)["CapBnd"], "SYS_PTRACE (bit 19) and nothing else")
	require.Equal(t, "1", f.status(f.job("c"))["NoNewPrivs"])
}

func TestTheContainerRunsAsTheInvokingUser(t *testing.T) {
	f := newFixture(t)
	f.x.UID, f.x.GID = 1000, 1000 // as if a user, not root, ran Niuma
	for _, user := range []string{"0:0", "root", "0", "1000:0"} {
		t.Run("refused "+user, func(t *testing.T) {
			job := f.job("a", dockertest.Workload, "exit", "0")
			job.Container.User = user
			f.refused(t, job, sandbox.RuleRoot, "is root's (rule: a container runs as the user running Niuma, 1000:1000 here, "+
				"and as root only when Niuma runs as root or NIUMA_CONTAINER_ROOT=1 is set")
		})
	}
	t.Run("refused by name", func(t *testing.T) {
		job := f.job("a", dockertest.Workload, "exit", "0")
		job.Container.User = "nobody"
		f.refused(t, job, sandbox.RuleUser, `user: "nobody" is not a uid or uid:gid`)
	})
	st := f.status(f.job("default"))
	require.Equal(t, "1000 1000 1000 1000", st["Uid"], "the invoking user by default")
	require.Equal(t, "1000 1000 1000 1000", st["Gid"])

	f.x.AllowRoot = true // NIUMA_CONTAINER_ROOT=1
	job := f.job("allowed")
	job.Container.User = "0:0"
	require.Equal(t, "0 0 0 0", f.status(job)["Uid"], "root when the setting allows it")

	f.x.AllowRoot = false
	f.x.UID, f.x.GID = 0, 0 // Niuma itself runs as root
	job = f.job("as-root")
	job.Container.User = "root"
	require.Equal(t, "0 0 0 0", f.status(job)["Uid"], "root when Niuma is root")
}

func TestAPidsLimitAboveTheMachinesIsRefused(t *testing.T) {
	f := newFixture(t)
	f.x.PidsLimit = 512
	job := f.job("a", dockertest.Workload, "exit", "0")
	job.Container.PidsLimit = 100000
	f.refused(t, job, sandbox.RulePids, "pids_limit: 100000 is above this machine's limit of 512 processes and threads per container")
}

// A fork bomb stops at the process limit, and the stage fails saying so.
func TestAForkBombStopsAtThePidsLimit(t *testing.T) {
	f := newFixture(t)
	f.x.PidsPoll, f.x.PidsStuck = 100*time.Millisecond, time.Second
	job := f.job("bomb", dockertest.Workload, "forkbomb")
	job.Container.PidsLimit = 64
	h, err := f.x.Start(context.Background(), job)
	require.NoError(t, err)
	ex := f.wait(h)
	require.False(t, ex.Success())
	require.Contains(t, ex.Describe(), "stopped: it stayed at its limit of 64 processes and threads for 1s, unable to start more (a fork bomb")
	stderr := readFile(job.StderrPath)
	require.Contains(t, stderr, "resource temporarily unavailable", "the kernel refused the fork")
	t.Logf("%s; %s", strings.TrimSpace(stderr), ex.Describe())
	m := regexp.MustCompile(`fork after (\d+) children`).FindStringSubmatch(stderr)
	require.NotNil(t, m, stderr)
	require.Less(t, len(m[1]), 3, "fewer than 100 children: it stopped at 64 tasks (%s)", m[1])
	require.Empty(t, f.containers(), "the container and every child are gone")
}
