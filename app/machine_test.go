package app

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/machine"
)

// The machine service as a user meets it from the command line: `niuma
// serve --system` on a socket, a run placed through it, `niuma machine`
// and `niuma doctor` saying the machine is shared, a cancel from another
// data directory going through the service, and, with the service gone,
// a run that waits for it rather than taking the GPUs alone.
func TestTheMachineServiceFromTheCommandLine(t *testing.T) {
	bin := buildNiuma(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "niuma.sock")
	cfg := filepath.Join(dir, "machine.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("half_life: 2d\n"), 0o644))
	me, err := user.Current()
	require.NoError(t, err)

	var serveOut bytes.Buffer
	serve := exec.Command(bin, "serve", "--system", "--socket", sock, "--config", cfg, "--db", filepath.Join(dir, "machine.db"))
	serve.Env = append(os.Environ(), "NIUMA_SIMULATE_GPUS=2xA100-80GB")
	serve.Stdout, serve.Stderr = &serveOut, &serveOut
	require.NoError(t, serve.Start())
	stopped := false
	stopService := func() {
		if !stopped {
			stopped = true
			_ = serve.Process.Signal(syscall.SIGKILL)
			_ = serve.Wait()
		}
	}
	t.Cleanup(stopService)
	require.Eventually(t, func() bool { return machine.Installed(sock) }, 30*time.Second, 20*time.Millisecond, serveOut.String())

	home, other := t.TempDir(), t.TempDir()
	env := func(h string) []string {
		return append(os.Environ(), "NIUMA_HOME="+h, "NIUMA_BACKGROUND_ENGINE=off", "NIUMA_MACHINE_SOCKET="+sock,
			"NIUMA_SIMULATE_GPUS=2xA100-80GB")
	}
	run := func(h string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env(h)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	gate := filepath.Join(dir, "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	tmpl := writeTemplate(t, `name: held
params:
  gate: {type: string, default: ""}
stages:
  - name: train
    gpus: 1
    command: [sh, -c, 'echo "$CUDA_VISIBLE_DEVICES" > train/devices; while [ ! -e "$NIUMA_PARAM_GATE" ]; do sleep 0.05; done']
`)
	out, err := run(home, "run", tmpl, "--set", "gate="+gate)
	require.NoError(t, err, out)
	engine := exec.Command(bin, "engine", "--until-idle")
	engine.Env = env(home)
	require.NoError(t, engine.Start())
	t.Cleanup(func() { _ = engine.Process.Kill(); _ = engine.Wait() })

	var st machine.Status
	require.Eventually(t, func() bool {
		out, err := run(home, "machine", "--json")
		if err != nil || json.Unmarshal([]byte(out), &st) != nil {
			return false
		}
		return len(st.Leases) == 1
	}, 30*time.Second, 100*time.Millisecond)
	l := st.Leases[0]
	require.Equal(t, me.Username, l.User, "the lease is the socket's user's")
	require.Equal(t, "held", l.RunName)
	require.Len(t, l.Indices, 1)

	text, err := run(home, "machine")
	require.NoError(t, err, text)
	require.Contains(t, text, "Shared machine: 2 simulated GPU(s), policy herd, fair-share half-life 2d; you are "+me.Username)
	require.Contains(t, text, l.Run)
	doc, _ := run(home, "doctor")
	require.Contains(t, doc, "machine:   shared through the machine service at "+sock)

	// A data directory that does not hold the run cancels it through the
	// service: the same user may.
	out, err = run(other, "cancel", l.Run)
	require.NoError(t, err, out)
	require.Contains(t, out, "cancelling "+me.Username+"'s run "+l.Run)
	require.Eventually(t, func() bool {
		out, err := run(home, "show", l.Run, "--json")
		return err == nil && strings.Contains(out, `"state": "cancelled"`)
	}, 30*time.Second, 100*time.Millisecond)
	out, err = run(other, "cancel", "nosuchrun")
	require.Error(t, err)
	require.Contains(t, out, "no run nosuchrun holds or waits for GPUs on this machine")

	// The service is gone (its socket stays): a new run waits for it.
	stopService()
	out, err = run(home, "run", tmpl, "--set", "gate="+gate, "--allow-duplicate")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		out, _ := run(home, "ls", "--json")
		return strings.Contains(out, "waits for the machine service")
	}, 30*time.Second, 100*time.Millisecond)
	doc, _ = run(home, "doctor")
	require.Contains(t, doc, "which does not answer: queued runs wait for it")
}
