package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Rule names one of the sandbox's rules.
type Rule string

// The rules.
const (
	RuleSystemPath Rule = "system-path" // no system path, nor one inside or above it, is mounted
	RuleSocket     Rule = "socket"      // no mounted directory holds a socket or a named pipe
	RuleCapability Rule = "capability"  // only the capabilities in Capabilities are added
	RuleUser       Rule = "user"        // a user is a number, uid or uid:gid
	RuleRoot       Rule = "root"        // root only for a root invoker or with RootSetting
	RulePids       Rule = "pids"        // a template may lower the process limit, never lift it
)

// Refusal is a container the rules do not allow.
type Refusal struct {
	Rule Rule
	Msg  string
}

func (r *Refusal) Error() string { return r.Msg }

func refuse(rule Rule, format string, args ...any) error {
	return &Refusal{Rule: rule, Msg: fmt.Sprintf(format, args...)}
}

// Settings a user may change (environment variables read by the app).
const (
	// RootSetting=1 lets containers run as root (uid or gid 0) when Niuma
	// does not run as root.
	RootSetting = "NIUMA_CONTAINER_ROOT"
	// PidsSetting is the most processes and threads a container may hold.
	PidsSetting = "NIUMA_CONTAINER_PIDS_LIMIT"
)

// DefaultPidsLimit is how many processes and threads a container may hold
// when PidsSetting is not set: room for DataLoader workers and their
// threads, not for a fork bomb.
const DefaultPidsLimit = 4096

// SystemPaths are the host paths no container is given, nor any path
// inside or above one ("/" holds them all). The Docker socket's own
// directory is added by the caller, who knows where the daemon listens.
var SystemPaths = []string{"/proc", "/sys", "/dev", "/etc", "/boot", "/run", "/var/run", "/var/lib/docker", "/var/lib/containerd"}

const systemRule = "rule: no container gets /, /proc, /sys, /dev, /etc, /boot, /run, /var/run, /var/lib/docker " +
	"or the Docker socket's directory, nor a directory inside or above one, because the Docker socket alone gives root on this machine"

const socketRule = "rule: no container gets a directory that holds a socket or a named pipe, because a service of this machine listening there " +
	"would answer the container; keep the data in a directory of its own"

// MountPath checks a path as written (in a template, before anything is
// on disk) against the system paths; more adds system paths. what names the
// path in the message, e.g. "runtime: data".
func MountPath(what, path string, more ...string) error {
	if !filepath.IsAbs(path) {
		return nil // relative to a directory not known yet: Mount decides
	}
	return systemPath(what, filepath.Clean(path), "", more)
}

// Mount checks a host path a container would be given: not a system path
// nor inside or above one, as written and after symlinks, and neither a
// socket nor a directory holding one on its own filesystem (mounts are
// not recursive, so what other filesystems are mounted below it stays out
// of the container). more adds system paths.
func Mount(what, path string, more ...string) error { return mount(what, path, true, more) }

// MountShallow is Mount without looking inside a directory: for a
// run's own directory, whose contents are the run's (a socket a stage
// left there is its own), and for a directory whose contents were
// checked a moment ago.
func MountShallow(what, path string, more ...string) error {
	return mount(what, path, false, more)
}

func mount(what, path string, contents bool, more []string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s %s is not an absolute path", what, path)
	}
	clean := filepath.Clean(path)
	if err := systemPath(what, clean, "", more); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return fmt.Errorf("%s %s cannot be mounted: %w", what, clean, err)
	}
	if real != clean {
		if err := systemPath(what, clean, real, more); err != nil {
			return err
		}
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return fmt.Errorf("%s %s cannot be mounted: %w", what, clean, err)
	}
	if special(fi.Mode()) {
		return refuse(RuleSocket, "%s %s is a %s (%s)", what, clean, kind(fi.Mode()), socketRule)
	}
	if !fi.IsDir() || !contents {
		return nil
	}
	if found := findSpecial(real, device(fi)); found != "" {
		return refuse(RuleSocket, "%s %s holds a socket or named pipe, %s (%s)", what, clean, found, socketRule)
	}
	return nil
}

// systemPath refuses p (or, when real is set, what p resolves to).
func systemPath(what, p, real string, more []string) error {
	q := p
	if real != "" {
		q = real
	}
	how := func(s string) string {
		switch {
		case real != "" && q == s:
			return "resolves to the system path " + s
		case real != "":
			return "resolves to " + real + ", inside the system path " + s
		case q == s:
			return "is a system path"
		}
		return "is inside the system path " + s
	}
	if q == "/" {
		if real != "" {
			return refuse(RuleSystemPath, "%s %s resolves to /, the root of this machine's files (%s)", what, p, systemRule)
		}
		return refuse(RuleSystemPath, "%s / is the root of this machine's files (%s)", what, systemRule)
	}
	for _, s := range systemPaths(more) {
		switch {
		case q == s || within(q, s):
			return refuse(RuleSystemPath, "%s %s %s (%s)", what, p, how(s), systemRule)
		case within(s, q):
			holds := "holds the system path " + s
			if real != "" {
				holds = "resolves to " + real + ", which holds the system path " + s
			}
			return refuse(RuleSystemPath, "%s %s %s (%s)", what, p, holds, systemRule)
		}
	}
	return nil
}

// systemPaths is SystemPaths and more, each also as it resolves here
// (/var/run is usually a link to /run).
func systemPaths(more []string) []string {
	var out []string
	for _, s := range append(slices.Clone(SystemPaths), more...) {
		if s == "" || !filepath.IsAbs(s) {
			continue
		}
		s = filepath.Clean(s)
		out = append(out, s)
		if r, err := filepath.EvalSymlinks(s); err == nil && r != s {
			out = append(out, r)
		}
	}
	return out
}

func within(child, parent string) bool {
	if parent == "/" {
		return child != "/"
	}
	return strings.HasPrefix(child, parent+"/")
}

func special(m fs.FileMode) bool { return m&(fs.ModeSocket|fs.ModeNamedPipe) != 0 }

func kind(m fs.FileMode) string {
	if m&fs.ModeSocket != 0 {
		return "socket"
	}
	return "named pipe"
}

func device(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}

// findSpecial returns the first socket or named pipe under root on root's
// filesystem, or "". Directories it may not read are skipped: the
// container, with no capability to override permissions, cannot read
// them either.
func findSpecial(root string, dev uint64) string {
	var found string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && p != root {
				return fs.SkipDir
			}
			return nil
		}
		if special(d.Type()) {
			found = p
			return fs.SkipAll
		}
		if d.IsDir() && p != root {
			if fi, err := d.Info(); err == nil && device(fi) != dev {
				return fs.SkipDir // another filesystem: not mounted into the container
			}
		}
		return nil
	})
	return found
}

// Capabilities are the Linux capabilities a template may add to a
// container (all are dropped otherwise), each with the use that earns it.
var Capabilities = map[string]string{
	"IPC_LOCK":   "pinned memory for RDMA and CUDA host buffers",
	"SYS_NICE":   "thread priorities and NUMA placement",
	"SYS_PTRACE": "profilers and debuggers such as py-spy and gdb",
}

// CapabilityName is name as the rules compare it: upper case, without
// the CAP_ prefix ("cap_sys_ptrace" -> "SYS_PTRACE").
func CapabilityName(name string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "CAP_")
}

// Capability refuses a capability that is not in Capabilities.
func Capability(name string) error {
	n := CapabilityName(name)
	if _, ok := Capabilities[n]; ok {
		return nil
	}
	allowed := make([]string, 0, len(Capabilities))
	for c := range Capabilities {
		allowed = append(allowed, c)
	}
	slices.Sort(allowed)
	uses := make([]string, len(allowed))
	for i, c := range allowed {
		uses[i] = c + " (" + Capabilities[c] + ")"
	}
	return refuse(RuleCapability, "cap_add: %s is not granted (rule: a template may add only %s; every other capability stays dropped)",
		n, strings.Join(uses, ", "))
}

// User is the user a container runs as, "uid:gid", given the template's
// user (spec: "" for the user running Niuma, a uid, uid:gid, or root), the
// user running Niuma, and whether RootSetting allows root. A uid without
// a gid gets the invoker's group (Docker would give it group 0, root's).
func User(spec string, uid, gid int, allowRoot bool) (string, error) {
	spec = strings.TrimSpace(spec)
	u, g := uid, gid
	switch {
	case spec == "":
	case spec == "root":
		u, g = 0, 0
	default:
		us, gs, hasGroup := strings.Cut(spec, ":")
		var err error
		if u, err = strconv.Atoi(us); err != nil || u < 0 {
			return "", userSyntax(spec)
		}
		if hasGroup {
			if g, err = strconv.Atoi(gs); err != nil || g < 0 {
				return "", userSyntax(spec)
			}
		}
	}
	if (u == 0 || g == 0) && uid != 0 && !allowRoot {
		return "", refuse(RuleRoot, "user: %d:%d is root's (rule: a container runs as the user running Niuma, %d:%d here, and as root "+
			"only when Niuma runs as root or %s=1 is set; drop user: from the template)", u, g, uid, gid, RootSetting)
	}
	return strconv.Itoa(u) + ":" + strconv.Itoa(g), nil
}

// UserSyntax refuses a template's user that is not root, a uid or uid:gid.
func UserSyntax(spec string) error {
	_, err := User(spec, 1, 1, true)
	return err
}

func userSyntax(spec string) error {
	if len(spec) > 40 {
		spec = spec[:40] + "…"
	}
	return refuse(RuleUser, "user: %q is not a uid or uid:gid (rule: a container's user is given by number, such as \"1000:1000\"; "+
		"a name means whatever the image says, and may be root)", spec)
}

// PidsLimit is the process limit of a container whose template asked for
// asked (0: none) on a machine whose limit is limit.
func PidsLimit(asked, limit int64) (int64, error) {
	if limit <= 0 {
		limit = DefaultPidsLimit
	}
	switch {
	case asked == 0:
		return limit, nil
	case asked < 0:
		return 0, refuse(RulePids, "pids_limit: %d is not a number of processes; give a positive number", asked)
	case asked > limit:
		return 0, refuse(RulePids, "pids_limit: %d is above this machine's limit of %d processes and threads per container "+
			"(rule: a template may lower the limit, not raise it; %s sets it)", asked, limit, PidsSetting)
	}
	return asked, nil
}

// Is reports whether err is a refusal by rule.
func Is(err error, rule Rule) bool {
	var r *Refusal
	return errors.As(err, &r) && r.Rule == rule
}
