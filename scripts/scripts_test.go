package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// aptSource runs apt-source.sh over a fake root holding files.
func aptSource(t *testing.T, files map[string]string) (string, int) {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, "etc", "apt", name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	out, err := exec.Command("sh", "apt-source.sh", root).Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return strings.TrimSpace(string(out)), code
}

func TestAptSourceFindsTheMachinesArchive(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"a one-line sources.list", map[string]string{"sources.list": `# comment
deb http://security.debian.org/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example.org/debian/ trixie main contrib
deb http://mirror.example.org/debian trixie-updates main
`}, "http://mirror.example.org/debian trixie"},
		{"deb822 with several suites", map[string]string{"sources.list.d/debian.sources": `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
`}, "http://deb.debian.org/debian bookworm"},
		{"third-party and disabled entries are passed over", map[string]string{
			"sources.list.d/a-nodesource.sources": "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n",
			"sources.list.d/b-off.sources":        "Types: deb\nURIs: http://off.example.org/debian\nSuites: sid\nComponents: main\nEnabled: no\n",
			"sources.list.d/c-src.sources":        "Types: deb-src\nURIs: http://src.example.org/debian\nSuites: sid\nComponents: main\n",
			"sources.list.d/d-debian.sources":     "Types: deb deb-src\nURIs: http://ftp.de.debian.org/debian\nSuites: bookworm\nComponents: main\n",
		}, "http://ftp.de.debian.org/debian bookworm"},
		{"sources.list comes before sources.list.d", map[string]string{
			"sources.list":                 "deb http://first.example.org/debian bookworm main\n",
			"sources.list.d/other.sources": "Types: deb\nURIs: http://second.example.org/debian\nSuites: trixie\n",
		}, "http://first.example.org/debian bookworm"},
		{"Ubuntu", map[string]string{"sources.list.d/ubuntu.sources": "Types: deb\nURIs: http://archive.ubuntu.com/ubuntu/\nSuites: noble noble-updates noble-backports\nComponents: main restricted universe\n"},
			"http://archive.ubuntu.com/ubuntu noble"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, code := aptSource(t, tt.files)
			require.Equal(t, 0, code)
			require.Equal(t, tt.want, got)
		})
	}
	got, code := aptSource(t, map[string]string{"sources.list": "deb cdrom:[Debian 12]/ bookworm main\n"})
	require.Equal(t, 1, code, "no usable archive: the Makefile falls back to deb.debian.org")
	require.Empty(t, got)
	_, code = aptSource(t, nil)
	require.Equal(t, 1, code)
}

// On a machine without an NVIDIA driver (this one; PATH without
// nvidia-smi) the GPU check says so and exits 0, before building anything.
func TestGPUCheckWithoutADriver(t *testing.T) {
	if _, err := os.Stat("/proc/driver/nvidia/version"); err == nil {
		t.Skip("this machine has an NVIDIA driver: run scripts/gpu-check.sh itself")
	}
	bin := t.TempDir()
	for _, tool := range []string{"bash", "dirname", "mkdir", "printf"} { // what the script needs before it gives up
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	cmd := exec.Command("bash", "gpu-check.sh")
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "gpu-check: no NVIDIA driver on this machine (no nvidia-smi, no /proc/driver/nvidia): nothing to check\n", string(out))
}

// A driver whose nvidia-smi fails is a failure, not a machine without GPUs.
func TestGPUCheckWithABrokenDriver(t *testing.T) {
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "nvidia-smi"),
		[]byte("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"), 0o755))
	cmd := exec.Command("bash", "gpu-check.sh")
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "gpu-check: nvidia-smi fails: NVIDIA-SMI has failed")
}
