package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"niuma/engine"
	"niuma/engine/executor"
	"niuma/engine/executor/docker"
	"niuma/engine/executor/docker/dockertest"
	"niuma/engine/executor/local"
	"niuma/engine/template"
	"niuma/gpumon"
	"niuma/storage"
)

// These tests use the machine's Docker daemon; they skip when none answers.

// importImage imports a one-file image whose content differs by marker, so
// each marker makes an image with an ID of its own.
func importImage(t *testing.T, c *client.Client, ref, marker string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "marker", Mode: 0o644, Size: int64(len(marker))}))
	_, _ = tw.Write([]byte(marker))
	require.NoError(t, tw.Close())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
}

func TestFingerprintFollowsTheImageBehindTheTag(t *testing.T) {
	c := dockertest.Need(t)
	ctx := context.Background()
	ref := fmt.Sprintf("niuma-test/digest-%d:1", time.Now().UnixNano())
	importImage(t, c, ref, "first "+ref)
	t.Cleanup(func() {
		_, _ = c.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
	})

	home := t.TempDir()
	db, err := storage.Open(filepath.Join(home, "niuma.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	api, err := docker.NewMoby()
	require.NoError(t, err)
	t.Cleanup(func() { api.Close() })
	dx := docker.New(api, home)
	e, err := engine.New(engine.Options{Home: home, Store: db, Executors: []executor.Executor{local.New(), dx}})
	require.NoError(t, err)
	tm, err := template.Parse("t.yaml", []byte("name: d\nruntime: {kind: docker, image: "+ref+"}\nstages:\n  - {name: a, command: [/workload, exit, \"0\"]}\n"))
	require.NoError(t, err)
	spec := engine.RunSpec{Template: tm, Executor: "docker"}

	first, err := e.Provenance(ctx, spec)
	require.NoError(t, err)
	id, err := dx.ImageDigest(ctx, ref)
	require.NoError(t, err)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, id)
	t.Cleanup(func() { // left dangling once the tag moves
		_, _ = c.ImageRemove(context.Background(), id, client.ImageRemoveOptions{Force: true})
	})
	require.Equal(t, id, first.Inputs.Runtime.ImageDigest, "the fingerprint names the image's ID")
	again, err := e.Provenance(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, first.Fingerprint, again.Fingerprint, "the same spec on the same image")

	importImage(t, c, ref, "second "+ref) // the tag now names another image
	moved, err := e.Provenance(ctx, spec)
	require.NoError(t, err)
	require.NotEqual(t, id, moved.Inputs.Runtime.ImageDigest)
	require.NotEqual(t, first.Fingerprint, moved.Fingerprint, "the tag points to a different image")

	_, err = dx.ImageDigest(ctx, "niuma-test/does-not-exist:never")
	require.ErrorIs(t, err, docker.ErrNotFound)
}

func TestContainerLabelsNameTheAttempt(t *testing.T) {
	dockertest.Need(t)
	ctx := context.Background()
	api, err := docker.NewMoby()
	require.NoError(t, err)
	t.Cleanup(func() { api.Close() })
	home := t.TempDir()
	dx := docker.New(api, home)
	var _ gpumon.ContainerLabeler = dx
	dir := filepath.Join(home, "runs", "r7")
	h, err := dx.Start(ctx, executor.Job{
		RunID: "r7", Stage: "train", Attempt: 2, Argv: []string{dockertest.Workload, "sleep"},
		RunDir: dir, StageDir: filepath.Join(dir, "train"), Image: dockertest.Image,
		StdoutPath: filepath.Join(dir, "train", "out"), StderrPath: filepath.Join(dir, "train", "err"),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = h.Stop(context.Background(), time.Second)
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = h.Wait(wctx)
	})
	list, err := api.List(ctx, map[string]string{docker.LabelHome: home})
	require.NoError(t, err)
	require.Len(t, list, 1)

	labels, err := dx.ContainerLabels(ctx, list[0].ID)
	require.NoError(t, err)
	require.Equal(t, "r7", labels[gpumon.LabelRun])
	require.Equal(t, "train", labels[gpumon.LabelStage])
	require.Equal(t, "2", labels[gpumon.LabelAttempt])
	require.Equal(t, home, labels[docker.LabelHome])

	_, err = dx.ContainerLabels(ctx, "0000000000000000000000000000000000000000000000000000000000000000")
	require.ErrorIs(t, err, docker.ErrNotFound, "a container that no longer exists is an error")
}
