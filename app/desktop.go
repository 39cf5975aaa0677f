package app

import (
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// sessionBus says whether the desktop's session bus (D-Bus, through which
// Fyne sends desktop notifications on Linux and the BSDs) answers, and
// when not, why. Elsewhere the platform's own service is used: true.
func sessionBus() (ok bool, why string) {
	if runtime.GOOS != "linux" && !strings.HasSuffix(runtime.GOOS, "bsd") {
		return true, ""
	}
	addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	var network, target string
	switch {
	case addr == "":
		dir := os.Getenv("XDG_RUNTIME_DIR")
		if dir == "" {
			return false, "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are not set"
		}
		network, target = "unix", filepath.Join(dir, "bus")
	default:
		network, target = busTarget(addr)
		if target == "" {
			return false, "the D-Bus address " + addr + " is not one Niuma can check"
		}
	}
	c, err := net.DialTimeout(network, target, 500*time.Millisecond)
	if err != nil {
		return false, "the D-Bus session bus does not answer (" + err.Error() + ")"
	}
	c.Close()
	return true, ""
}

// busTarget reads the first address of a D-Bus address list that can be
// dialled: unix:path=, unix:abstract= or tcp:host=,port=.
func busTarget(addr string) (network, target string) {
	for _, a := range strings.Split(addr, ";") {
		kind, rest, _ := strings.Cut(a, ":")
		kv := map[string]string{}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		switch {
		case kind == "unix" && kv["path"] != "":
			return "unix", kv["path"]
		case kind == "unix" && kv["abstract"] != "":
			return "unix", "@" + kv["abstract"]
		case kind == "tcp" && kv["host"] != "" && kv["port"] != "":
			return "tcp", net.JoinHostPort(kv["host"], kv["port"])
		}
	}
	return "", ""
}

// processInfo names a process' user and command from /proc, for the
// board's process table ("", "" when it cannot be read: it ended, or
// belongs to another user under hidepid).
func processInfo(pid int) (userName, command string) {
	return procInfo("/proc", pid)
}

func procInfo(proc string, pid int) (userName, command string) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		command = strings.TrimSpace(strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	if command == "" {
		if b, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
			command = "[" + strings.TrimSpace(string(b)) + "]"
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
				userName = f[1]
				if u, err := user.LookupId(f[1]); err == nil {
					userName = u.Username
				}
				break
			}
		}
	}
	return userName, command
}
