package provenance

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchData makes a data dir of n files of size bytes each.
func benchData(b *testing.B, n, size int) string {
	b.Helper()
	dir := b.TempDir()
	buf := make([]byte, size)
	for i := range n {
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%04d.bin", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkDataManifest hashes 64 files of 1 MiB: "cold" reads every byte
// (the first submit), "cached" finds every hash by path, size and mtime
// (every later submit of the same dataset).
func BenchmarkDataManifest(b *testing.B) {
	dir := benchData(b, 64, 1<<20)
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(64 << 20)
		for b.Loop() {
			if _, err := DataManifest(b.Context(), dir, LoadCache("")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "cache.json")
		c := LoadCache(path)
		if _, err := DataManifest(b.Context(), dir, c); err != nil {
			b.Fatal(err)
		}
		if err := c.Save(); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(64 << 20)
		for b.Loop() {
			// A fresh load each time: what a new `niuma run` process does.
			if _, err := DataManifest(b.Context(), dir, LoadCache(path)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFingerprint encodes and hashes the inputs of a typical run.
func BenchmarkFingerprint(b *testing.B) {
	in := sampleInputs()
	for i := range 1000 {
		in.Data = append(in.Data, DataFile{Path: fmt.Sprintf("img/%05d.png", i), Size: 4096, SHA256: "ab"})
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Fingerprint(in)
	}
}
