package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor/docker"
)

func TestPullProgressDrawsOneLine(t *testing.T) {
	var buf bytes.Buffer
	show := pullProgress(&buf)
	show(docker.PullProgress{Image: "img:1", Status: "Pulling from library/img"})
	show(docker.PullProgress{Image: "img:1", Layer: "a", Status: "Downloading", Current: 25 << 20, Total: 100 << 20})
	show(docker.PullProgress{Image: "img:1", Status: "Status: Downloaded newer image for img:1"})
	out := buf.String()
	require.Contains(t, out, "pulling img:1: Pulling from library/img")
	require.Contains(t, out, "pulling img:1: done")
	require.True(t, strings.HasSuffix(out, "\n"), "the line ends once the pull is done")
	require.Equal(t, 1, strings.Count(out, "\n"), "redrawn in place with \\r, not line by line")
}
