package pathglob

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, rel, prefix string
		ok                   bool
	}{
		{"tb/**", "tb/events.out.tfevents.1", "", true},
		{"tb/**", "tb/val/events.out.tfevents.1", "val/", true},
		{"runs/*/**", "runs/Dec01_12-00-00_host/events.out.tfevents.1", "", true},
		{"runs/*/**", "runs/Dec01_12-00-00_host/loss_train/events.out.tfevents.1", "loss_train/", true},
		{"runs/*/**", "runs/events.out.tfevents.1", "", true},
		{"lightning_logs/*/**", "lightning_logs/version_0/events.out.tfevents.1", "", true},
		{"logs/**", "logs/train/events.out.tfevents.1", "train/", true},
		{"logs/**", "logs/validation/events.out.tfevents.1", "validation/", true},
		{"logs/fit/*/**", "logs/fit/20240101-120000/train/events.1", "train/", true},
		{"outputs/**", "outputs/a/b/events.1", "a/b/", true},
		{"lightning_logs/**/metrics.csv", "lightning_logs/version_3/metrics.csv", "version_3/", true},
		{"lightning_logs/*/metrics.csv", "lightning_logs/version_3/metrics.csv", "", true},
		{"tb/**", "other/events.1", "", false},
		{"logs/*.csv", "logs/a/b.csv", "", false},
	}
	for _, tt := range tests {
		g, err := Parse(tt.pattern)
		require.NoError(t, err)
		prefix, ok := g.Match(tt.rel)
		assert.Equal(t, tt.ok, ok, "%s %s", tt.pattern, tt.rel)
		assert.Equal(t, tt.prefix, prefix, "%s %s", tt.pattern, tt.rel)
	}
	assert.Equal(t, "logs/fit", Must("logs/fit/*/**").Root())
	assert.Equal(t, "", Must("**/metrics.csv").Root())
	for _, bad := range []string{"", "/abs/**", "../up/**", "a/[/b"} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
}
