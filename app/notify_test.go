package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `nan: {do: notify}`: the run goes on, and the user is told at once: a
// line from `niuma run --wait`, and the desktop's notify-send (a stand-in
// here that writes down what it was asked to show).
func TestNotifyTellsTheUser(t *testing.T) {
	tempHome(t)
	bin := t.TempDir()
	asked := filepath.Join(bin, "asked")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "notify-send"),
		[]byte("#!/bin/sh\nprintf '%s\\n' \"$@\" >> '"+asked+"'\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent")
	tmpl := writeTemplate(t, `name: tell-me
sentinel:
  nan: {do: notify}
stages:
  - name: train
    command: [sh, -c, 'echo "{\"step\": 1, \"loss\": NaN}"; sleep 1; echo "{\"step\": 2, \"loss\": 0.5}"']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, "notify does not stop the run: %s%s", out, errOut)
	require.Contains(t, errOut, "niuma: notify: nan in run ")
	b, err := os.ReadFile(asked)
	require.NoError(t, err, "notify-send was called")
	require.True(t, strings.Contains(string(b), "--app-name=Niuma") && strings.Contains(string(b), "loss became NaN at step 1"), string(b))
	id := runID(t, out)
	code, shown, _ := niuma(t, "show", id)
	require.Equal(t, 0, code)
	require.Contains(t, shown, "notified: nan in run "+id)
}
