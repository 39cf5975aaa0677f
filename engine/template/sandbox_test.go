package template

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A template's runtime section cannot ask for what the container's
// sandbox refuses: each problem names the line and the rule.
func TestParseRefusesWhatTheSandboxForbids(t *testing.T) {
	doc := func(runtime string) string {
		return "name: t\nruntime: " + runtime + "\nstages: [{name: a, command: [x]}]\n"
	}
	for _, tt := range []struct{ name, runtime, want string }{
		{"the Docker socket's directory as data", "{kind: docker, image: i, data: /var/run}",
			"runtime: data /var/run is a system path (rule: no container gets /"},
		{"the root as data", "{kind: docker, image: i, data: /}", "runtime: data / is the root of this machine's files"},
		{"/proc as data", "{kind: docker, image: i, data: /proc/self}", "inside the system path /proc"},
		{"a capability off the allow-list", "{kind: docker, image: i, cap_add: [SYS_MODULE]}",
			"runtime: cap_add: SYS_MODULE is not granted (rule: a template may add only IPC_LOCK"},
		{"raw I/O", "{kind: docker, image: i, cap_add: [SYS_RAWIO]}", "cap_add: SYS_RAWIO is not granted"},
		{"reading any file", "{kind: docker, image: i, cap_add: [DAC_READ_SEARCH]}", "cap_add: DAC_READ_SEARCH is not granted"},
		{"the network", "{kind: docker, image: i, cap_add: [cap_net_admin]}", "cap_add: NET_ADMIN is not granted"},
		{"raw sockets", "{kind: docker, image: i, cap_add: [NET_RAW]}", "cap_add: NET_RAW is not granted"},
		{"SYS_ADMIN", "{kind: docker, image: i, cap_add: [SYS_ADMIN]}", "cap_add: SYS_ADMIN is not granted"},
		{"ALL", "{kind: docker, image: i, cap_add: [ALL]}", "cap_add: ALL is not granted"},
		{"a user by name", "{kind: docker, image: i, user: nobody}", `runtime: user: "nobody" is not a uid or uid:gid`},
		{"no pids limit", "{kind: docker, image: i, pids_limit: -1}", "runtime: pids_limit must be a positive whole number"},
		{"a pids limit of zero", "{kind: docker, image: i, pids_limit: 0}", "runtime: pids_limit must be a positive whole number"},
		{"a fallback to docker", "{kind: docker, image: i, fallback: docker}", `runtime: fallback may only be local (got "docker")`},
		{"a fallback on the host already", "{kind: local, fallback: local}", "runtime: fallback: local is for kind: docker"},
		{"an image for the host", "{kind: local, image: i}", "runtime: kind local runs stages on the host and takes no image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(doc(tt.runtime)))
			require.Error(t, err)
			require.Contains(t, err.Error(), "t.yaml:2: ")
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseRuntimeChoices(t *testing.T) {
	for _, tt := range []struct {
		name, runtime string
		want          Runtime
	}{
		{"an image alone means docker", "{image: i}", Runtime{Kind: "docker", Image: "i"}},
		{"a fallback to the host, visible in the template", "{kind: docker, image: i, fallback: local}", Runtime{Kind: "docker", Image: "i", Fallback: "local"}},
		{"a tighter pids limit", "{kind: docker, image: i, pids_limit: 256}", Runtime{Kind: "docker", Image: "i", PidsLimit: 256}},
		{"allowed capabilities", "{kind: docker, image: i, cap_add: [sys_ptrace, CAP_SYS_NICE, IPC_LOCK]}",
			Runtime{Kind: "docker", Image: "i", CapAdd: []string{"SYS_PTRACE", "SYS_NICE", "IPC_LOCK"}}},
		{"root is decided when the run is submitted", "{kind: docker, image: i, user: \"0:0\"}", Runtime{Kind: "docker", Image: "i", User: "0:0"}},
		{"a data path elsewhere", "{kind: docker, image: i, data: /srv/digits}", Runtime{Kind: "docker", Image: "i", Data: "/srv/digits"}},
		{"a host run may read what it likes", "{kind: local, data: /etc/ssl}", Runtime{Kind: "local", Data: "/etc/ssl"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Parse("t.yaml", []byte("name: t\nruntime: "+tt.runtime+"\nstages: [{name: a, command: [x]}]\n"))
			require.NoError(t, err)
			require.Equal(t, tt.want, tp.Runtime)
		})
	}
}

// A name pasted a megabyte long is measured, not repeated.
func TestParseLongNamesAreNotEchoed(t *testing.T) {
	huge := strings.Repeat("a", 1<<20)
	for _, tt := range []struct{ name, doc, want string }{
		{"template", "name: " + huge + "\nstages: [{name: a, command: [x]}]\n", "t.yaml:1: name is 1,048,576 bytes long; at most 64"},
		{"stage", "name: t\nstages: [{name: " + huge + ", command: [x]}]\n", "stage name is 1,048,576 bytes long; at most 64"},
		// YAML allows keys of at most 1024 characters.
		{"parameter", "name: t\nparams:\n  " + huge[:1000] + ": {type: bool}\nstages: [{name: a, command: [x]}]\n", "parameter name is 1,000 bytes long; at most 64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.doc))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
			require.Less(t, len(err.Error()), 4096, "the name is not repeated whole")
		})
	}
	_, err := Parse("t.yaml", []byte("name: t\nparams:\n  p: {type: choice, default: "+huge+", choices: [a]}\nstages: [{name: a, command: [x]}]\n"))
	require.Error(t, err)
	require.Less(t, len(err.Error()), 4096, "no value is repeated whole")
}
