package ui

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPullIndicator(t *testing.T) {
	newTestApp(t)
	p := newPullIndicator()
	require.False(t, p.box.Visible(), "hidden while nothing is pulled")

	p.Update("niuma/digits-mlp:1", 0, 0, false)
	require.True(t, p.box.Visible())
	require.Equal(t, "Pulling niuma/digits-mlp:1…", p.label.Text)
	require.True(t, p.wait.Visible(), "size unknown: an indefinite bar")

	p.Update("niuma/digits-mlp:1", 50<<20, 200<<20, false)
	require.Equal(t, "Pulling niuma/digits-mlp:1 (50 of 200 MB)", p.label.Text)
	require.InDelta(t, 0.25, p.bar.Value, 1e-9)
	require.False(t, p.wait.Visible())

	p.Update("niuma/digits-mlp:1", 200<<20, 200<<20, true)
	require.False(t, p.box.Visible(), "hidden again when the pull is done")
}
