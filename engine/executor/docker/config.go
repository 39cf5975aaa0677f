package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"niuma/engine/executor"
)

// Paths inside every container.
const (
	RunMount  = "/niuma/run"
	CodeMount = "/niuma/code"
	DataMount = "/niuma/data"
)

// Labels on every container Niuma creates.
const (
	LabelRun     = "niuma.run"
	LabelStage   = "niuma.stage"
	LabelAttempt = "niuma.attempt"
	LabelToken   = "niuma.token" // the attempt's identity (executor.Job.Token): Recover and Sweep go by it
	LabelHome    = "niuma.home"  // the data directory: two installs never adopt each other's containers
	LabelKeep    = "niuma.keep"  // "true": the template asked to keep the container; Sweep leaves it
)

// DefaultShmSizeMiB is /dev/shm when the template does not say: PyTorch's
// DataLoader workers pass batches through shared memory and fail with
// "bus error" in Docker's 64 MB default.
const DefaultShmSizeMiB = 1024

// createOptions builds the container for one attempt. It is a pure
// function of the job and of what the sandbox's rules made of it (b: the
// user, by default the host user running Niuma so that files written in
// the run directory are theirs; the process limit; the capabilities), so
// the sandbox it asks for can be checked without a daemon.
func createOptions(home string, b box, job executor.Job) client.ContainerCreateOptions {
	c := job.Container
	env := make([]string, 0, len(job.Env)+2)
	for _, k := range sortedKeys(job.Env) {
		env = append(env, k+"="+job.Env[k])
	}
	if job.Token != "" {
		// As a local attempt's processes do: the machine service tells a
		// container still running from a lease its holder left by this.
		env = append(env, executor.TokenEnv+"="+job.Token)
	}
	if _, ok := job.Env["HOME"]; !ok {
		// A uid the image does not know gets HOME=/, which it cannot
		// write; caches (pip, torch, matplotlib) go to /tmp instead.
		env = append(env, "HOME=/tmp")
	}
	labels := map[string]string{
		LabelRun: job.RunID, LabelStage: job.Stage, LabelAttempt: strconv.Itoa(job.Attempt), LabelHome: home,
		LabelToken: token(job),
	}
	if c.Keep {
		labels[LabelKeep] = "true"
	}
	// Bind mounts are not recursive: a filesystem mounted below one of
	// these directories stays out of the container (Docker before 25
	// would also leave it writable under a read-only mount).
	bind := func(src, dst string, ro bool) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: ro, BindOptions: &mount.BindOptions{NonRecursive: true}}
	}
	mounts := []mount.Mount{bind(job.RunDir, RunMount, false)}
	if job.CodeDir != "" {
		mounts = append(mounts, bind(job.CodeDir, CodeMount, true))
	}
	if job.DataDir != "" {
		mounts = append(mounts, bind(job.DataDir, DataMount, true))
	}
	shm := c.ShmSizeMiB
	if shm <= 0 {
		shm = DefaultShmSizeMiB
	}
	network := c.Network
	if network == "" {
		network = "bridge"
	}
	init := true
	hc := &container.HostConfig{
		Mounts:      mounts,
		NetworkMode: container.NetworkMode(network),
		// Own PID and IPC namespaces: the zero values, spelled out.
		PidMode:     "",
		IpcMode:     "private",
		Privileged:  false,
		CapDrop:     []string{"ALL"},
		CapAdd:      b.caps,
		SecurityOpt: []string{"no-new-privileges"},
		ShmSize:     shm << 20,
		// An init as PID 1 passes Stop's SIGTERM on to the workload (PID
		// 1 ignores signals it has no handler for) and reaps orphans.
		Init: &init,
	}
	hc.Memory = c.MemoryMiB << 20
	if c.MemoryMiB > 0 {
		hc.MemorySwap = hc.Memory // no swap beyond the limit: OOM is reported, not hidden
	}
	hc.NanoCPUs = int64(c.CPUs * 1e9)
	pids := b.pids
	hc.PidsLimit = &pids
	if len(job.GPUs) > 0 {
		ids := make([]string, len(job.GPUs))
		for i, g := range job.GPUs {
			ids[i] = g.UUID
			if ids[i] == "" {
				ids[i] = strconv.Itoa(g.Index)
			}
		}
		// DeviceIDs only, never Count with them: the daemon rejects both.
		hc.DeviceRequests = []container.DeviceRequest{{DeviceIDs: ids, Capabilities: [][]string{{"gpu"}}}}
	}
	return client.ContainerCreateOptions{
		Name: containerName(job),
		Config: &container.Config{
			Image:      job.Image,
			Cmd:        job.Argv,
			Entrypoint: []string{}, // the stage's command is the whole command
			Env:        env,
			WorkingDir: RunMount,
			User:       b.user,
			Labels:     labels,
		},
		HostConfig: hc,
	}
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// token is the attempt's identity: the engine's Token, or, from an engine
// that gives none, run.stage.attempt (unique per data directory: run ids
// carry random bits).
func token(job executor.Job) string {
	if job.Token != "" {
		return job.Token
	}
	return fmt.Sprintf("%s.%s.%d", job.RunID, job.Stage, job.Attempt)
}

// tokenOf is the token a container's labels name. A container made before
// tokens were labelled is named by its run, stage and attempt, as token
// names an attempt that has no Token.
func tokenOf(labels map[string]string) string {
	if t := labels[LabelToken]; t != "" {
		return t
	}
	return labels[LabelRun] + "." + labels[LabelStage] + "." + labels[LabelAttempt]
}

// containerName is a function of the attempt's token alone (through
// token, of its run, stage and attempt when it has none), so that a Niuma
// that died before it learnt the container's id finds it by name, and a
// second Start of the same attempt meets the first one's container instead
// of making another. It stays readable in `docker ps`:
// niuma-<run>-<stage>-<attempt>-<12 hex digits of the token's SHA-256>,
// in the characters Docker allows in names.
func containerName(job executor.Job) string {
	sum := sha256.Sum256([]byte(token(job)))
	return fmt.Sprintf("niuma-%s-%s-%d-%s", nameUnsafe.ReplaceAllString(job.RunID, "_"),
		nameUnsafe.ReplaceAllString(job.Stage, "_"), job.Attempt, hex.EncodeToString(sum[:6]))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
