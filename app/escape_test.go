package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor/docker"
)

// What a workload or template wrote is shown with its control characters
// as visible escapes: an OSC that would retitle the terminal, a CSI that
// would clear it.
func TestOutputEscapesWhatWorkloadsAndTemplatesWrote(t *testing.T) {
	tempHome(t)
	const osc, csi = "\x1b]0;PWNED\x07", "\x1b[2J"
	tmpl := writeTemplate(t, `name: hostile
description: "looks fine \u001b[8mhidden"
params:
  note: {type: string, default: plain}
stages:
  - name: a
    command: [sh, -c, 'printf "{\"step\": 1, \"\\u001b]0;PWNED\\u0007loss\": 0.5}\n"; printf "\033]0;PWNED\007 in the log\n"']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--set", "note=x"+csi+"y", "--wait")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	id := runID(t, out)

	code, out, _ = niuma(t, "show", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, `\x1b]0;PWNED\x07loss`, "the metric key, escaped")
	require.Contains(t, out, `note=x\x1b[2Jy`, "the parameter, escaped")
	require.NotContains(t, out, "\x1b", "no raw escape reaches the terminal")
	require.NotContains(t, out, "\x07")

	code, out, _ = niuma(t, "logs", id, "a")
	require.Equal(t, 0, code)
	require.Contains(t, out, `\x1b]0;PWNED\x07 in the log`+"\n", "a log is escaped, its lines kept")
	require.NotContains(t, out, "\x1b")
	code, out, _ = niuma(t, "logs", id, "a", "--raw")
	require.Equal(t, 0, code)
	require.Contains(t, out, osc+" in the log\n", "--raw prints what the stage wrote")

	for _, args := range [][]string{{"ls"}, {"templates"}} {
		code, out, _ = niuma(t, args...)
		require.Equal(t, 0, code)
		require.NotContains(t, out, "\x1b", "%v", args)
	}
}

// A name pasted a megabyte long is measured in the message, not repeated.
func TestLongNamesAreCutInMessages(t *testing.T) {
	tempHome(t)
	huge := strings.Repeat("x", 1<<20)
	tmpl := writeTemplate(t, "name: t\nparams:\n  p: {type: int, default: 1}\nstages: [{name: a, command: [\"true\"]}]\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"show", huge}, "niuma: run is 1,048,576 bytes long; at most 128"},
		{[]string{"logs", huge}, "niuma: run is 1,048,576 bytes long; at most 128"},
		{[]string{"cancel", huge}, "niuma: run is 1,048,576 bytes long; at most 128"},
		{[]string{"report", huge}, "niuma: run is 1,048,576 bytes long; at most 128"},
		{[]string{"run", huge}, "niuma: template is 1,048,576 bytes long; at most 4,096"},
		{[]string{"run", tmpl, "--set", huge + "=1"}, "niuma: --set: parameter name is 1,048,576 bytes long; at most 128"},
		{[]string{"run", tmpl, "--set", "p=" + huge}, "niuma: --set"},
		{[]string{huge}, "niuma: unknown command"},
	} {
		code, _, errOut := niuma(t, tt.args...)
		require.NotEqual(t, 0, code)
		require.Contains(t, errOut, tt.want)
		require.Less(t, len(errOut), 8192, "%s…", errOut[:min(len(errOut), 200)])
	}
}

func TestContainerSettings(t *testing.T) {
	for _, tt := range []struct {
		root, pids string
		allow      bool
		limit      int64
		err        string
	}{
		{"", "", false, 4096, ""},
		{"1", "8192", true, 8192, ""},
		{"yes", "", false, 0, "NIUMA_CONTAINER_ROOT=yes: set it to 1"},
		{"", "-5", false, 0, "NIUMA_CONTAINER_PIDS_LIMIT=-5: give a positive number"},
		{"", "lots", false, 0, "NIUMA_CONTAINER_PIDS_LIMIT=lots"},
	} {
		t.Setenv("NIUMA_CONTAINER_ROOT", tt.root)
		t.Setenv("NIUMA_CONTAINER_PIDS_LIMIT", tt.pids)
		dx := docker.New(nil, t.TempDir())
		err := containerSettings(dx)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.allow, dx.AllowRoot)
		require.Equal(t, tt.limit, dx.PidsLimit)
	}
}
