package docker

import (
	"os"
	"path/filepath"
	"testing"
)

func openTemp(t *testing.T) (*os.File, error) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, err
}

func readAll(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
