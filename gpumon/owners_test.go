package gpumon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var cid = strings.Repeat("3f2a9c0d", 8) // a container id is 64 hex digits

func TestParseCgroupContainer(t *testing.T) {
	tests := []struct {
		name, cgroup, want string
	}{
		{"cgroup v2, docker under systemd", "0::/system.slice/docker-" + cid + ".scope\n", cid},
		{"cgroup v2, docker cgroupfs driver", "0::/docker/" + cid + "\n", cid},
		{"cgroup v1, several controllers", "12:pids:/docker/" + cid + "\n11:memory:/docker/" + cid + "\n", cid},
		{"containerd under kubernetes", "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-" + cid + ".scope\n", cid},
		{"podman, with the nested cgroup it creates", "0::/machine.slice/libpod-" + cid + ".scope/container\n", cid},
		{"host process in a user session", "0::/user.slice/user-1000.slice/session-2.scope\n", ""},
		{"an id too short is no container", "0::/docker/abc123\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseCgroupContainer(tt.cgroup))
		})
	}
}

// fakeProc writes /proc/PID/stat and /proc/PID/cgroup for one process.
func fakeProc(t testing.TB, root string, pid, pgrp int, cgroup string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// The command name holds a space and a ')' on purpose.
	stat := strconv.Itoa(pid) + " (python train) x.py) S 1 " + strconv.Itoa(pgrp) + " " + strconv.Itoa(pgrp) + " 0 -1 4194560\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644))
}

type fakeLabeler struct {
	labels map[string]map[string]string
	calls  int
}

func (f *fakeLabeler) ContainerLabels(_ context.Context, id string) (map[string]string, error) {
	f.calls++
	l, ok := f.labels[id]
	if !ok {
		return nil, errors.New("no such container")
	}
	return l, nil
}

func TestOwnersResolveGroupsAndContainers(t *testing.T) {
	root := t.TempDir()
	other := "aa" + cid[2:]
	fakeProc(t, root, 100, 100, "0::/user.slice/session-1.scope\n")          // a local stage's leader
	fakeProc(t, root, 101, 100, "0::/user.slice/session-1.scope\n")          // its child, same group
	fakeProc(t, root, 200, 200, "0::/system.slice/docker-"+cid+".scope\n")   // a Niuma container
	fakeProc(t, root, 300, 300, "0::/system.slice/docker-"+other+".scope\n") // someone else's container
	fakeProc(t, root, 400, 400, "0::/user.slice/session-1.scope\n")          // a notebook nobody tracks
	lab := &fakeLabeler{labels: map[string]map[string]string{
		cid:   {LabelRun: "r2", LabelStage: "eval", LabelAttempt: "2"},
		other: {"com.example": "x"},
	}}
	fakeProc(t, root, 500, 500, "0::/user.slice/session-1.scope\n") // a local stage nobody told Owners of
	require.NoError(t, os.WriteFile(filepath.Join(root, "500", "environ"),
		[]byte("PATH=/usr/bin\x00NIUMA_RUN_ID=r3\x00NIUMA_STAGE=train\x00NIUMA_ATTEMPT=4\x00HOME=/root\x00"), 0o644))
	r := newOwners(root, lab)
	r.TrackGroup(100, Owner{RunID: "r1", Stage: "train", Attempt: 1})
	ctx := context.Background()

	tests := []struct {
		name string
		pid  int
		want *Owner
	}{
		{"group leader", 100, &Owner{RunID: "r1", Stage: "train", Attempt: 1}},
		{"child in the group", 101, &Owner{RunID: "r1", Stage: "train", Attempt: 1}},
		{"labelled container", 200, &Owner{RunID: "r2", Stage: "eval", Attempt: 2}},
		{"unlabelled container", 300, nil},
		{"untracked host process", 400, nil},
		{"a stage's process, by its environment", 500, &Owner{RunID: "r3", Stage: "train", Attempt: 4}},
		{"process already gone", 999, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok := r.Owner(ctx, tt.pid)
			if tt.want == nil {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, *tt.want, o)
		})
	}
	calls := lab.calls
	_, _ = r.Owner(ctx, 200)
	_, _ = r.Owner(ctx, 300)
	assert.Equal(t, calls, lab.calls, "container labels are cached, Niuma's or not")

	r.UntrackGroup(100)
	_, ok := r.Owner(ctx, 101)
	assert.False(t, ok, "an ended attempt's group is forgotten")
}

// BenchmarkOwnersResolve is the cost of mapping one GPU process to its run
// through /proc (two small file reads), for a tracked local stage and for
// a container whose labels are cached.
func BenchmarkOwnersResolve(b *testing.B) {
	root := b.TempDir()
	fakeProc(b, root, 100, 100, "0::/user.slice/session-1.scope\n")
	fakeProc(b, root, 200, 200, "0::/system.slice/docker-"+cid+".scope\n")
	r := newOwners(root, &fakeLabeler{labels: map[string]map[string]string{cid: {LabelRun: "r2"}}})
	r.TrackGroup(100, Owner{RunID: "r1"})
	ctx := context.Background()
	for _, pid := range []int{100, 200} {
		b.Run("pid "+strconv.Itoa(pid), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := r.Owner(ctx, pid); !ok {
					b.Fatal("no owner")
				}
			}
		})
	}
}

// A real process started with the stage contract's variables is named by
// its run through the real /proc, as `niuma gpus` names a stage's GPU
// processes.
func TestOwnersReadARealStagesEnvironment(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "NIUMA_RUN_ID=20261129-120000-abcdef", "NIUMA_STAGE=train", "NIUMA_ATTEMPT=2")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	o, ok := NewOwners(nil).Owner(context.Background(), cmd.Process.Pid)
	require.True(t, ok)
	assert.Equal(t, Owner{RunID: "20261129-120000-abcdef", Stage: "train", Attempt: 2}, o)
	_, ok = NewOwners(nil).Owner(context.Background(), os.Getpid())
	assert.False(t, ok, "a process outside any stage has no owner")
}
