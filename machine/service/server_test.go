package service

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/machine"
)

// serve starts a Server for w's arbiter on a socket in a test folder.
func serve(t *testing.T, w *world) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "niuma.sock")
	l, err := Listen(sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{Arbiter: w.a}).Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return sock
}

func TestTheSocketKnowsTheUserByTheirCredentials(t *testing.T) {
	w := newWorld(t, "")
	sock := serve(t, w)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o666), fi.Mode().Perm(), "every user may connect")
	me, err := user.Current()
	require.NoError(t, err)

	c := machine.NewClient(sock)
	defer c.Close()
	ctx := context.Background()
	ans, err := c.Place(ctx, machine.Ask{Home: "/h/me", Queue: []machine.Entry{ask1("t1", "r1", 1)}})
	require.NoError(t, err)
	require.True(t, ans.Decisions[0].Placed())
	assert.Equal(t, me.Username, ans.User, "the user is the socket's peer, not what the message says")

	st, err := c.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Leases, 1)
	assert.Equal(t, me.Username, st.Leases[0].User)
	assert.Equal(t, "r1", st.Leases[0].Run)

	// A refusal comes back as *Refused; the connection carries on.
	var refused *machine.Refused
	_, err = c.Cancel(ctx, "nosuchrun")
	require.ErrorAs(t, err, &refused)
	require.NoError(t, c.Release(ctx, "t1"))
	st, err = c.Status(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Leases)
}

func TestAGarbledMessageIsAnsweredAndTheConnectionClosed(t *testing.T) {
	w := newWorld(t, "")
	sock := serve(t, w)
	conn, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("{\"op\": \"status\"}\n{\"op\": \"fly\"}\nnot json\n"))
	require.NoError(t, err)
	rd := bufio.NewReader(conn)
	var st, unknown machine.Response
	require.NoError(t, machine.ReadMessage(rd, &st))
	require.NotNil(t, st.Status)
	require.NoError(t, machine.ReadMessage(rd, &unknown))
	assert.Contains(t, unknown.Error, `unknown op "fly"`)
	_, err = rd.ReadString('\n')
	assert.Error(t, err, "a message that is not JSON ends the connection")
}

func TestASecondServiceIsRefused(t *testing.T) {
	w := newWorld(t, "")
	sock := serve(t, w)
	_, err := Listen(sock)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already listens")

	db := filepath.Join(t.TempDir(), "m.db")
	release, err := Lock(db)
	require.NoError(t, err)
	defer release()
	_, err = Lock(db)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "another machine service uses")
}

func TestAStaleSocketIsReplaced(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "niuma.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	l.Close() // a service that died: its socket file stays
	l2, err := Listen(sock)
	require.NoError(t, err)
	l2.Close()
}

func TestProcFSFindsATokenInAnEnvironment(t *testing.T) {
	root := t.TempDir()
	for pid, env := range map[int]string{
		11: "PATH=/bin\x00NIUMA_ATTEMPT_TOKEN=abc\x00",
		12: "NIUMA_ATTEMPT_TOKEN=abcd\x00",
		13: "",
		77: "",
	} {
		dir := filepath.Join(root, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "environ"), []byte(env), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tx\nUid:\t1001\t1001\t1001\t1001\n"), 0o644))
	}
	cg := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(cg, "niuma", "cgtok"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cg, "niuma", "cgtok", "cgroup.procs"), []byte("77\n"), 0o644))
	p := ProcFS{Root: root, Cgroups: []string{cg}}
	got := p.Alive([]string{"abc", "ab", "gone", "cgtok"})
	assert.Equal(t, map[string]Carriers{"abc": {1001: true}, "cgtok": {1001: true}}, got)
	uid, ok := p.UID(11)
	assert.True(t, ok)
	assert.Equal(t, 1001, uid)
}

func FuzzParseConfig(f *testing.F) {
	f.Add(twoTeams)
	f.Add("teams: [{name: a, group: g, gpus: 2.5, borrow_limit: 1, lend_limit: 0}]\nhalf_life: 7d")
	f.Add("admins: [x]\ngrace: 1h")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig([]byte(s))
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if c.Policy == "" || c.HalfLife <= 0 || c.Grace <= 0 {
			t.Fatalf("defaults not set: %+v", c)
		}
		for _, tm := range c.teams() {
			if tm.Nominal < 0 {
				t.Fatalf("a negative share passed: %+v", tm)
			}
		}
	})
}

// yamlKey is a settings line: a key, or a list item's first key.
var yamlKey = regexp.MustCompile(`^\s*(- )?[a-z_]+:`)

func TestTheInstalledSettingsParse(t *testing.T) {
	c, err := LoadConfig("../../assets/system/machine.yaml")
	require.NoError(t, err)
	assert.Empty(t, c.Teams, "installed without teams: one queue for every user")
	assert.Equal(t, DefaultPolicy, c.Policy)
	// Its commented example, uncommented, is valid too.
	b, err := os.ReadFile("../../assets/system/machine.yaml")
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "# "); ok && yamlKey.MatchString(rest) {
			lines = append(lines, rest)
		}
	}
	c, err = ParseConfig([]byte(strings.Join(lines, "\n")))
	require.NoError(t, err, strings.Join(lines, "\n"))
	require.Len(t, c.Teams, 2)
	assert.Equal(t, "vision", c.Teams[0].Group)
	assert.Equal(t, []string{"cy", "dee"}, c.Teams[1].Users)
}
