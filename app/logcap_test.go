package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// NIUMA_LOG_CAP cuts a stage's log; the metrics in the kept part are
// recorded, those after the cut are not, and the log says what was dropped.
func TestLogCapSetting(t *testing.T) {
	tempHome(t)
	t.Setenv("NIUMA_LOG_CAP", "4K")
	tmpl := writeTemplate(t, `name: chatty
stages:
  - name: a
    command: [sh, -c, 'echo "{\"step\": 1, \"kept\": 0.5}"; head -c 100000 /dev/zero | tr "\\0" x; echo; echo "{\"step\": 2, \"lost\": 1}"']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	id := runID(t, out)

	code, out, _ = niuma(t, "logs", id, "a")
	require.Equal(t, 0, code)
	require.Contains(t, out, "[niuma] stdout was cut at 4 KiB (the log cap of each stream of an attempt): ")
	require.Contains(t, out, " more bytes were dropped; set NIUMA_LOG_CAP to keep more, or print less")
	require.False(t, strings.Contains(out, `"lost"`))

	code, out, _ = niuma(t, "show", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "kept")
	require.NotContains(t, out, "lost")

	t.Setenv("NIUMA_LOG_CAP", "lots")
	code, _, errOut = niuma(t, "ls")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "NIUMA_LOG_CAP=")
}
