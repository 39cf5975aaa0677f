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
	code, _, errOut = niuma(t, "run", tmpl)
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "NIUMA_LOG_CAP=")
}

// A stage with more distinct keys than the limit: the first 10,000 are
// recorded, and `niuma show` carries the one note that says so.
func TestKeyLimitIsShown(t *testing.T) {
	tempHome(t)
	tmpl := writeTemplate(t, `name: keys
stages:
  - name: train
    command: [sh, -c, 'i=0; l="{\"step\": 1"; while [ $i -lt 10005 ]; do l="$l, \"k$i\": 1"; i=$((i+1)); done; echo "$l}"; echo "{\"step\": 2, \"k0\": 2, \"new\": 1}"']
`)
	code, out, errOut := niuma(t, "run", tmpl, "--wait")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	id := runID(t, out)
	code, out, _ = niuma(t, "show", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "stage train reported more than 10,000 distinct metric keys, the limit per stage: "+
		"its first 10,000 keys are kept and go on being recorded; 5 more keys in the same line, and every new key after them, are ignored")
	require.Equal(t, 1, strings.Count(out, "distinct metric keys"), "one note")
	code, out, _ = niuma(t, "show", id, "--json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"k9999"`)
	require.NotContains(t, out, `"k10000"`)
	require.NotContains(t, out, `"new"`)
}
