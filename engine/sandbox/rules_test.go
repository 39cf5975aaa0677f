package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMountRefusesSystemPaths(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "innocent")
	require.NoError(t, os.Symlink("/var/run", link))
	deep := filepath.Join(dir, "etc-link")
	require.NoError(t, os.Symlink("/etc/ssl", deep))
	root := filepath.Join(dir, "root-link")
	require.NoError(t, os.Symlink("/", root))
	sockDir := filepath.Join(dir, "docker-here")
	require.NoError(t, os.Mkdir(sockDir, 0o755))
	for _, tt := range []struct {
		name, path string
		want       string
	}{
		{"the root", "/", "data / is the root of this machine's files"},
		{"/var/run, where the Docker socket is", "/var/run", "data /var/run is a system path"},
		{"/run", "/run", "data /run is a system path"},
		{"inside /proc", "/proc/1", "data /proc/1 is inside the system path /proc"},
		{"/etc", "/etc", "data /etc is a system path"},
		{"inside /sys", "/sys/fs/cgroup", "is inside the system path /sys"},
		{"/dev", "/dev", "is a system path"},
		{"/boot", "/boot", "is a system path"},
		{"Docker's own data", "/var/lib/docker/volumes", "is inside the system path /var/lib/docker"},
		{"a directory above one", "/var", "data /var holds the system path /var/run"},
		{"a path that only looks clean", "/home/../etc", "data /etc is a system path"},
		{"a symlink to /var/run", link, "resolves to the system path /run"},
		{"a symlink into /etc", deep, "inside the system path /etc"},
		{"a symlink to /", root, "resolves to /, the root of this machine's files"},
		{"the Docker socket's directory, wherever it is", sockDir, "is a system path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Mount("data", tt.path, sockDir)
			require.Error(t, err)
			require.True(t, Is(err, RuleSystemPath), "%v", err)
			require.Contains(t, err.Error(), tt.want)
			require.Contains(t, err.Error(), "rule: no container gets /, /proc, /sys, /dev, /etc, /boot, /run, /var/run, /var/lib/docker or the Docker socket's directory")
		})
	}
}

func TestMountPathChecksTheText(t *testing.T) {
	require.True(t, Is(MountPath("runtime: data", "/var/run"), RuleSystemPath))
	require.True(t, Is(MountPath("runtime: data", "/"), RuleSystemPath))
	require.NoError(t, MountPath("runtime: data", "../datasets/digits"), "relative: decided once the template's directory is known")
	require.NoError(t, MountPath("runtime: data", "/srv/datasets"))
}

func TestMountRefusesSocketsAndPipes(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	require.NoError(t, os.MkdirAll(filepath.Join(data, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(data, "a", "x.csv"), []byte("1,2\n"), 0o644))
	require.NoError(t, Mount("data", data), "a directory of plain files is fine")

	sock := filepath.Join(data, "a", "b", "agent.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	err = Mount("data", data)
	require.True(t, Is(err, RuleSocket), "%v", err)
	require.Contains(t, err.Error(), "holds a socket or named pipe, "+sock)
	require.Contains(t, err.Error(), "rule: no container gets a directory that holds a socket or a named pipe")
	err = Mount("data", sock)
	require.True(t, Is(err, RuleSocket), "%v", err)
	require.Contains(t, err.Error(), "is a socket")
	l.Close()
	os.Remove(sock)

	fifo := filepath.Join(data, "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	err = Mount("data", data)
	require.True(t, Is(err, RuleSocket), "%v", err)
	require.Contains(t, err.Error(), fifo)
}

func TestMountOfWhatIsNotThere(t *testing.T) {
	err := Mount("data", filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "cannot be mounted")
	require.Error(t, Mount("data", "relative/path"))
}

func TestCapability(t *testing.T) {
	for _, c := range []string{"SYS_PTRACE", "sys_nice", "CAP_IPC_LOCK", " cap_sys_ptrace "} {
		require.NoError(t, Capability(c), c)
	}
	for _, c := range []string{"SYS_ADMIN", "ALL", "SYS_MODULE", "SYS_RAWIO", "DAC_READ_SEARCH", "NET_ADMIN", "NET_RAW", "cap_sys_admin", "BOGUS"} {
		err := Capability(c)
		require.True(t, Is(err, RuleCapability), c)
		require.Contains(t, err.Error(), "cap_add: "+CapabilityName(c)+" is not granted")
		require.Contains(t, err.Error(), "rule: a template may add only IPC_LOCK (pinned memory for RDMA and CUDA host buffers), SYS_NICE")
	}
}

func TestUser(t *testing.T) {
	for _, tt := range []struct {
		name      string
		spec      string
		uid, gid  int
		allowRoot bool
		want      string
		rule      Rule
	}{
		{"default: the invoker", "", 1000, 1000, false, "1000:1000", ""},
		{"a uid and gid", "1000:1000", 1000, 1000, false, "1000:1000", ""},
		{"a uid alone gets the invoker's group, not root's", "1001", 1000, 100, false, "1001:100", ""},
		{"root by number", "0:0", 1000, 1000, false, "", RuleRoot},
		{"root's uid alone", "0", 1000, 1000, false, "", RuleRoot},
		{"root by name", "root", 1000, 1000, false, "", RuleRoot},
		{"root's group", "1000:0", 1000, 1000, false, "", RuleRoot},
		{"root when Niuma is root", "0:0", 0, 0, false, "0:0", ""},
		{"the default when Niuma is root", "", 0, 0, false, "0:0", ""},
		{"root when the setting allows it", "root", 1000, 1000, true, "0:0", ""},
		{"a name", "nobody", 1000, 1000, false, "", RuleUser},
		{"a name with a group", "1000:staff", 1000, 1000, false, "", RuleUser},
		{"negative", "-1", 1000, 1000, false, "", RuleUser},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := User(tt.spec, tt.uid, tt.gid, tt.allowRoot)
			if tt.rule != "" {
				require.True(t, Is(err, tt.rule), "%v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	_, err := User("0:0", 1000, 1000, false)
	require.EqualError(t, err, "user: 0:0 is root's (rule: a container runs as the user running Niuma, 1000:1000 here, and as root only when Niuma runs as root or NIUMA_CONTAINER_ROOT=1 is set; drop user: from the template)")
}

func TestPidsLimit(t *testing.T) {
	n, err := PidsLimit(0, 0)
	require.NoError(t, err)
	require.Equal(t, int64(DefaultPidsLimit), n)
	n, err = PidsLimit(64, 4096)
	require.NoError(t, err)
	require.Equal(t, int64(64), n, "a template may lower it")
	_, err = PidsLimit(100000, 4096)
	require.True(t, Is(err, RulePids))
	require.Contains(t, err.Error(), "pids_limit: 100000 is above this machine's limit of 4096 processes and threads per container")
	_, err = PidsLimit(-1, 4096)
	require.True(t, Is(err, RulePids), "never unlimited")
}

func TestMountShallowChecksOnlyThePath(t *testing.T) {
	run := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(run, "left-by-a-stage.sock"))
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, MountShallow("the run directory", run), "what a run's stages leave in its directory is the run's own")
	require.True(t, Is(MountShallow("the run directory", "/run/niuma"), RuleSystemPath))
}
