package docker

import (
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
)

func baseJob() executor.Job {
	return executor.Job{
		RunID: "20260101-000000-abcdef", Stage: "train", Attempt: 2,
		Argv: []string{"python3", "/niuma/code/train.py"}, Env: map[string]string{"B": "2", "A": "1"},
		RunDir: "/home/u/niuma/runs/r", StageDir: "/home/u/niuma/runs/r/train", CodeDir: "/home/u/tmpl", Image: "img:1",
	}
}

func TestCreateOptionsHardenByDefault(t *testing.T) {
	o := createOptions("/data", box{user: "1000:1000", pids: 4096}, baseJob())
	hc, cfg := o.HostConfig, o.Config
	require.False(t, hc.Privileged)
	require.Equal(t, []string{"ALL"}, hc.CapDrop)
	require.Empty(t, hc.CapAdd)
	require.Equal(t, []string{"no-new-privileges"}, hc.SecurityOpt)
	require.False(t, hc.PidMode.IsHost())
	require.False(t, hc.IpcMode.IsHost())
	require.Equal(t, container.NetworkMode("bridge"), hc.NetworkMode)
	require.Equal(t, int64(DefaultShmSizeMiB)<<20, hc.ShmSize, "more shared memory than Docker's 64 MB for DataLoader workers")
	require.Zero(t, hc.Memory)
	require.Zero(t, hc.NanoCPUs)
	require.Empty(t, hc.DeviceRequests, "no GPU requested for a CPU stage")
	flat := &mount.BindOptions{NonRecursive: true}
	require.Equal(t, []mount.Mount{
		{Type: mount.TypeBind, Source: "/home/u/niuma/runs/r", Target: RunMount, BindOptions: flat},
		{Type: mount.TypeBind, Source: "/home/u/tmpl", Target: CodeMount, ReadOnly: true, BindOptions: flat},
	}, hc.Mounts, "not recursive: what is mounted below these directories stays out")
	require.NotNil(t, hc.PidsLimit)
	require.Equal(t, int64(4096), *hc.PidsLimit, "a fork bomb stops at the limit")
	require.Equal(t, RunMount, cfg.WorkingDir)
	require.Equal(t, "1000:1000", cfg.User)
	require.Equal(t, []string{"python3", "/niuma/code/train.py"}, []string(cfg.Cmd))
	require.NotNil(t, cfg.Entrypoint, "an empty entrypoint, not the image's: the stage's command is the whole command")
	require.Empty(t, cfg.Entrypoint)
	require.Equal(t, []string{"A=1", "B=2", "HOME=/tmp"}, cfg.Env)
	withToken := baseJob()
	withToken.Token = "t0k3n"
	require.Equal(t, []string{"A=1", "B=2", executor.TokenEnv + "=t0k3n", "HOME=/tmp"},
		createOptions("/data", box{user: "1000:1000", pids: 4096}, withToken).Config.Env,
		"the container's processes carry the attempt's token, as a local attempt's do")
	require.Equal(t, map[string]string{LabelRun: "20260101-000000-abcdef", LabelStage: "train", LabelAttempt: "2", LabelHome: "/data",
		LabelToken: "20260101-000000-abcdef.train.2"}, cfg.Labels, "an attempt without a token is named by run, stage and attempt")
	require.Regexp(t, `^niuma-20260101-000000-abcdef-train-2-[0-9a-f]{12}$`, o.Name)
}

// The container's name is a function of the attempt's token: the same
// token always gives the same name (a second Start meets the first's
// container), another token another, and any token gives a name Docker
// accepts.
func TestContainerNameFollowsTheToken(t *testing.T) {
	job := baseJob()
	job.Token = "tok-1"
	a := createOptions("/data", box{}, job)
	require.Equal(t, a.Name, createOptions("/data", box{}, job).Name)
	require.Equal(t, "tok-1", a.Config.Labels[LabelToken])
	job.Token = "tok-2"
	require.NotEqual(t, a.Name, createOptions("/data", box{}, job).Name)
	job.Stage, job.Token = "ev al/é", "a token with spaces/and:colons"
	require.Regexp(t, `^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`, createOptions("/data", box{}, job).Name, "a name Docker accepts")
}

func TestCreateOptionsFromTheTemplate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		edit  func(*executor.Job)
		check func(t *testing.T, hc *container.HostConfig, cfg *container.Config)
	}{
		{"GPUs by UUID with capability gpu, never Count", func(j *executor.Job) {
			j.GPUs = []executor.GPU{{Index: 0, UUID: "GPU-aaa"}, {Index: 3, UUID: "GPU-bbb"}}
		}, func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
			require.Equal(t, []container.DeviceRequest{{DeviceIDs: []string{"GPU-aaa", "GPU-bbb"}, Capabilities: [][]string{{"gpu"}}}}, hc.DeviceRequests)
		}},
		{"a GPU without UUID goes by index", func(j *executor.Job) {
			j.GPUs = []executor.GPU{{Index: 1}}
		}, func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
			require.Equal(t, []string{"1"}, hc.DeviceRequests[0].DeviceIDs)
			require.Zero(t, hc.DeviceRequests[0].Count)
		}},
		{"memory limit without extra swap", func(j *executor.Job) { j.Container.MemoryMiB = 16 },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
				require.Equal(t, int64(16<<20), hc.Memory)
				require.Equal(t, int64(16<<20), hc.MemorySwap)
			}},
		{"cpus as a quota", func(j *executor.Job) { j.Container.CPUs = 1.5 },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
				require.Equal(t, int64(1.5e9), hc.NanoCPUs)
			}},
		{"shm_size", func(j *executor.Job) { j.Container.ShmSizeMiB = 4096 },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
				require.Equal(t, int64(4096)<<20, hc.ShmSize)
			}},
		{"network none", func(j *executor.Job) { j.Container.Network = "none" },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
				require.Equal(t, container.NetworkMode("none"), hc.NetworkMode)
			}},
		{"user from the template", func(j *executor.Job) { j.Container.User = "1001:1001" },
			func(t *testing.T, _ *container.HostConfig, cfg *container.Config) {
				require.Equal(t, "1001:1001", cfg.User)
			}},
		{"capabilities the template keeps", func(j *executor.Job) { j.Container.CapAdd = []string{"cap_sys_ptrace"} },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
				require.Equal(t, []string{"ALL"}, hc.CapDrop)
				require.Equal(t, []string{"SYS_PTRACE"}, hc.CapAdd)
			}},
		{"a lower process limit", func(j *executor.Job) { j.Container.PidsLimit = 64 },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
				require.Equal(t, int64(64), *hc.PidsLimit)
			}},
		{"keep is a label Sweep honours", func(j *executor.Job) { j.Container.Keep = true },
			func(t *testing.T, _ *container.HostConfig, cfg *container.Config) {
				require.Equal(t, "true", cfg.Labels[LabelKeep])
			}},
		{"no code dir, no code mount", func(j *executor.Job) { j.CodeDir = "" },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) { require.Len(t, hc.Mounts, 1) }},
		{"a data dir is mounted read-only", func(j *executor.Job) { j.DataDir = "/srv/digits" },
			func(t *testing.T, hc *container.HostConfig, _ *container.Config) {
				require.Contains(t, hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: "/srv/digits", Target: DataMount, ReadOnly: true,
					BindOptions: &mount.BindOptions{NonRecursive: true}})
			}},
		{"the template's HOME wins", func(j *executor.Job) { j.Env = map[string]string{"HOME": "/niuma/run"} },
			func(t *testing.T, _ *container.HostConfig, cfg *container.Config) {
				require.Equal(t, []string{"HOME=/niuma/run"}, cfg.Env)
			}},
		{"stage names become safe container names", func(j *executor.Job) { j.Stage = "a b/c" },
			func(t *testing.T, _ *container.HostConfig, cfg *container.Config) {
				require.Equal(t, "a b/c", cfg.Labels[LabelStage])
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := baseJob()
			tt.edit(&j)
			// The sandbox's answer on what is not a path (these paths are
			// not on this machine).
			x := &Executor{UID: 1000, GID: 1000, PidsLimit: 4096}
			noPaths := j
			noPaths.RunDir, noPaths.CodeDir, noPaths.DataDir = "", "", ""
			b, err := x.check(noPaths)
			require.NoError(t, err)
			o := createOptions("/data", b, j)
			tt.check(t, o.HostConfig, o.Config)
			require.Regexp(t, `^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`, o.Name)
		})
	}
}

func TestSkipWriterDropsWhatTheFileHas(t *testing.T) {
	for _, tt := range []struct {
		name   string
		skip   int64
		writes []string
		want   string
	}{
		{"nothing to skip", 0, []string{"ab", "cd"}, "abcd"},
		{"skip whole writes", 4, []string{"ab", "cd", "ef"}, "ef"},
		{"skip into a write", 3, []string{"ab", "cdef"}, "def"},
		{"skip more than there is", 10, []string{"ab"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := openTemp(t)
			require.NoError(t, err)
			w := &skipWriter{w: f, skip: tt.skip}
			for _, s := range tt.writes {
				n, err := w.Write([]byte(s))
				require.NoError(t, err)
				require.Equal(t, len(s), n)
			}
			require.Equal(t, tt.want, readAll(t, f.Name()))
		})
	}
}

func TestStopIsNotOOM(t *testing.T) {
	ex := exitFromState(State{ExitCode: 137}, 16, true)
	require.False(t, ex.OOMKilled, "the SIGKILL after Stop's grace is ours")
	ex = exitFromState(State{ExitCode: 137}, 0, false)
	require.False(t, ex.OOMKilled, "no limit, no OOM guess")
}

func TestExitFromState(t *testing.T) {
	for _, tt := range []struct {
		name    string
		st      State
		success bool
		reason  string
	}{
		{"zero", State{ExitCode: 0}, true, ""},
		{"non-zero", State{ExitCode: 3}, false, ""},
		{"OOM is its own reason", State{ExitCode: 137, OOMKilled: true}, false, "out of memory (the container's limit is 16 MiB"},
		{"SIGTERM", State{ExitCode: 143}, false, "exited with code 143 (terminated)"},
		{"daemon error", State{ExitCode: 0, Error: "mount failed"}, false, "the container failed: mount failed"},
		{"a SIGKILL nobody sent under a limit is OOM", State{ExitCode: 137}, false, "out of memory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ex := exitFromState(tt.st, 16, false)
			require.Equal(t, tt.success, ex.Success())
			require.Contains(t, ex.Describe(), tt.reason)
			require.Equal(t, tt.st.OOMKilled || tt.st.ExitCode == 137, ex.OOMKilled)
		})
	}
}
