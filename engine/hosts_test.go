package engine

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestThisMachine(t *testing.T) {
	h := ThisMachine()
	require.Equal(t, int64(runtime.NumCPU())*1000, h.CPUMilli)
	dir := t.TempDir()
	for _, tt := range []struct {
		name, text string
		want       int64
	}{
		{"meminfo", "MemTotal:       16303096 kB\nMemFree:         1234 kB\n", 15920},
		{"no total", "MemFree: 1 kB\n", 0},
		{"another unit", "MemTotal: 16 MB\n", 0},
		{"garbage", "MemTotal: lots kB\n", 0},
	} {
		p := filepath.Join(dir, tt.name)
		require.NoError(t, os.WriteFile(p, []byte(tt.text), 0o644))
		require.Equal(t, tt.want, memTotalMiB(p), tt.name)
	}
	require.Zero(t, memTotalMiB(filepath.Join(dir, "absent")))
}
