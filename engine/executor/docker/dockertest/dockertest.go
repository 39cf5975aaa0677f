// Package dockertest builds the image the docker tests run, without any
// registry: a static Go program (workload) compiled by the test, imported
// as a one-file image with `docker import`'s API.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// Image is the test image's name. Its tag follows the workload's source,
// so that checkouts with different workloads, sharing one daemon, each
// keep their own image instead of re-importing over each other's.
var Image = "niuma-test/workload:" + sourceTag()

// sourceTag is the first 12 hex digits of the SHA-256 of workload/main.go.
func sourceTag() string {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "workload", "main.go"))
	if err != nil {
		return "1"
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))[:12]
}

// sumLabel holds the SHA-256 of the workload binary in the image.
const sumLabel = "niuma.test.workload.sha256"

// Workload is the program's path inside the image.
const Workload = "/workload"

var (
	once    sync.Once
	onceErr string
)

// Need skips the test when no Docker daemon answers, and otherwise makes
// sure the test image exists (built once per test binary).
func Need(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(client.FromEnv)
	if err != nil {
		t.Skipf("docker tests skipped: no Docker client (%v)", err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Skipf("docker tests skipped: no Docker daemon answers (%v); start Docker to run them", err)
	}
	once.Do(func() {
		if err := Build(c); err != nil {
			onceErr = err.Error()
		}
	})
	if onceErr != "" {
		t.Fatal(onceErr)
	}
	return c
}

// Build compiles the workload and imports it as Image.
func Build(c *client.Client) error {
	if msg := build(c); msg != "" {
		return errors.New(msg)
	}
	return nil
}

func build(c *client.Client) string {
	dir, err := os.MkdirTemp("", "niuma-workload")
	if err != nil {
		return err.Error()
	}
	defer os.RemoveAll(dir)
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "workload")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "workload")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "build the test workload: " + err.Error() + "\n" + string(out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err.Error()
	}
	// The same program is imported once: each import makes a new image
	// and leaves the old one dangling.
	sum := fmt.Sprintf("%x", sha256.Sum256(b))
	if r, err := c.ImageInspect(context.Background(), Image); err == nil && r.Config != nil && r.Config.Labels[sumLabel] == sum {
		return ""
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
	_ = tw.WriteHeader(&tar.Header{Name: "workload", Mode: 0o755, Size: int64(len(b))})
	_, _ = tw.Write(b)
	_ = tw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, Image,
		client.ImageImportOptions{Changes: []string{"LABEL " + sumLabel + "=" + sum}})
	if err != nil {
		return "import the test image: " + err.Error()
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	return ""
}
