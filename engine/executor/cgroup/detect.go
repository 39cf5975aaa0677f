package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Mounts is where this machine mounts its cgroup hierarchies.
type Mounts struct {
	Unified []string          // cgroup2 mounts
	V1      map[string]string // controller -> the mount of its v1 hierarchy
}

// ReadMounts reads /proc/self/mountinfo.
func ReadMounts() (Mounts, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Mounts{}, err
	}
	defer f.Close()
	return ParseMountinfo(f)
}

// ParseMountinfo reads the cgroup mounts of a mountinfo table
// (proc(5)): "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] -
// FSTYPE SOURCE SUPEROPTS". A v1 hierarchy's controllers are its super
// options; the first mount of each wins.
func ParseMountinfo(r io.Reader) (Mounts, error) {
	m := Mounts{V1: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i, w := range f {
			if w == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+2 {
			continue
		}
		point := unescape(f[4])
		switch f[sep+1] {
		case "cgroup2":
			m.Unified = append(m.Unified, point)
		case "cgroup":
			if len(f) < sep+4 {
				continue
			}
			for _, o := range strings.Split(f[sep+3], ",") {
				switch o {
				case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "clone_children", "xattr", "noprefix":
					continue
				}
				if strings.Contains(o, "=") {
					continue // name=systemd, release_agent=…
				}
				if _, ok := m.V1[o]; !ok {
					m.V1[o] = point
				}
			}
		}
	}
	return m, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}

// ErrNone says no cgroup could be had: the engine then finds an
// attempt's processes by the token in their environment.
var ErrNone = errors.New("no cgroup")

// Detect is Niuma's subtree base on this machine, in the best layout it
// offers: the unified tree where it has the memory controller; else the
// v1 hierarchies where memory is one of them; else a unified tree
// without controllers (membership, kill and freeze, no limits). As root
// the subtree is base at the top of each hierarchy; as a user, it lies
// in the cgroup this process was started in when that is delegated to
// the user (systemd-run --user --scope -p Delegate=yes niuma), which
// this process then leaves for a leaf of its own ("owner"), as v2
// requires of a group whose children have controllers. An error (it
// matches ErrNone) says why none could be had, and what to do.
func Detect(base string) (*Tree, error) {
	m, err := ReadMounts()
	if err != nil {
		return nil, fmt.Errorf("%w: read the mount table: %v", ErrNone, err)
	}
	return DetectIn(m, base)
}

// DetectIn is Detect over the mounts m.
func DetectIn(m Mounts, base string) (*Tree, error) {
	var full, bare string
	for _, u := range m.Unified {
		if words(readString(filepath.Join(u, "cgroup.controllers")))["memory"] {
			if full == "" {
				full = u
			}
		} else if bare == "" {
			bare = u
		}
	}
	var errs []string
	try := func(t *Tree, err error) (*Tree, bool) {
		if err != nil {
			errs = append(errs, err.Error())
			return nil, false
		}
		return t, true
	}
	if full != "" {
		if t, ok := try(newV2Here(full, base)); ok {
			return t, nil
		}
	}
	if _, ok := m.V1["memory"]; ok {
		if t, ok := try(NewV1(m.V1, base)); ok {
			return t, nil
		}
	}
	if bare != "" {
		if t, ok := try(newV2Here(bare, base)); ok {
			return t, nil
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no cgroup hierarchy is mounted", ErrNone)
	}
	return nil, fmt.Errorf("%w: %s", ErrNone, strings.Join(errs, "; "))
}

// newV2Here is the subtree at the top of the unified tree as root, or in
// this process's own delegated cgroup otherwise.
func newV2Here(mount, base string) (*Tree, error) {
	if os.Geteuid() == 0 {
		return NewV2(mount, base)
	}
	own, err := ownV2Cgroup()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mount, own)
	if !writable(filepath.Join(dir, "cgroup.subtree_control")) || !writable(filepath.Join(dir, "cgroup.procs")) {
		return nil, fmt.Errorf("cgroup %s is not delegated to this user: start niuma with systemd-run --user --scope -p Delegate=yes niuma, or run it as root", dir)
	}
	leaf := filepath.Join(dir, "owner")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create cgroup %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte("0"), 0); err != nil {
		return nil, fmt.Errorf("move niuma into cgroup %s: %w", leaf, err)
	}
	return NewV2(mount, filepath.Join(own, base))
}

// ownV2Cgroup is this process's cgroup in the unified tree ("0::PATH" in
// /proc/self/cgroup).
func ownV2Cgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			if p == "/" {
				return "", errors.New("this process is in the root cgroup, which a user cannot write")
			}
			return p, nil
		}
	}
	return "", errors.New("this process has no unified cgroup")
}

func writable(p string) bool {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}
