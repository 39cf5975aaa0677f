package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkMountWalk is Mount over a data directory of 100 folders of 100
// files each: the cost of looking through a directory for sockets, per
// file (ns/op / 10,000).
func BenchmarkMountWalk(b *testing.B) {
	dir := b.TempDir()
	for i := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("shard-%03d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%04d.png", j)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := Mount("data", dir); err != nil {
			b.Fatal(err)
		}
	}
}
