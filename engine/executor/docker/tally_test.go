package docker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPullTallyAddsLayersPerImage(t *testing.T) {
	var tally PullTally
	steps := []struct {
		p          PullProgress
		cur, total int64
		done       bool
	}{
		{PullProgress{Image: "a", Status: "Pulling from library/a"}, 0, 0, false},
		{PullProgress{Image: "a", Layer: "l1", Status: "Downloading", Current: 10, Total: 100}, 10, 100, false},
		{PullProgress{Image: "a", Layer: "l2", Status: "Downloading", Current: 5, Total: 50}, 15, 150, false},
		{PullProgress{Image: "b", Layer: "l1", Status: "Downloading", Current: 1, Total: 2}, 1, 2, false}, // another image, its own figure
		{PullProgress{Image: "a", Layer: "l1", Status: "Downloading", Current: 100, Total: 100}, 105, 150, false},
		{PullProgress{Image: "a", Status: "Digest: sha256:…"}, 105, 150, true},
		{PullProgress{Image: "a", Status: "Pulling again"}, 0, 0, false}, // finished pulls are forgotten
	}
	for i, s := range steps {
		cur, total, done := tally.Add(s.p)
		require.Equal(t, []any{s.cur, s.total, s.done}, []any{cur, total, done}, "step %d", i)
	}
}
