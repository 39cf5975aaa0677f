package provenance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func TestIgnoreRules(t *testing.T) {
	g := ignorer{rules: append(parseIgnore([]byte(`
# comment
*.pyc
/build
logs/
!keep.log
*.log
!important.log
docs/**/*.tmp
\#literal
`), ""), parseIgnore([]byte("local.txt\n/only-here\n"), "sub")...)}
	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"a.pyc", false, true},
		{"deep/x/a.pyc", false, true},
		{"a.py", false, false},
		{"build", true, true},
		{"sub/build", true, false}, // anchored to the root
		{"logs", true, true},
		{"logs", false, false}, // a file named logs: the rule is for dirs
		{"x/logs", true, true},
		{"keep.log", false, true}, // a later rule ignores it again
		{"important.log", false, false},
		{"docs/a.tmp", false, true},
		{"docs/x/y/a.tmp", false, true},
		{"src/a.tmp", false, false},
		{"#literal", false, true},
		{"sub/local.txt", false, true},
		{"local.txt", false, false}, // sub's rules stay in sub
		{"sub/only-here", false, true},
		{"sub/deeper/only-here", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			assert.Equal(t, tt.want, g.ignored(tt.path, tt.isDir))
		})
	}
}

func TestFilesHash(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), "print(1)\n")
	writeFile(t, filepath.Join(dir, "lib", "util.py"), "x = 1\n")
	writeFile(t, filepath.Join(dir, ".gitignore"), "__pycache__/\n*.ckpt\n")
	writeFile(t, filepath.Join(dir, "data", "big.bin"), "data")
	exclude := []string{filepath.Join(dir, "data")}
	hash := func() string {
		h, err := CodeHash(t.Context(), dir, exclude, nil)
		require.NoError(t, err)
		return h
	}
	base := hash()
	assert.True(t, strings.HasPrefix(base, "files:"), base)

	tests := []struct {
		name    string
		change  func()
		changes bool
	}{
		{"ignored dir", func() { writeFile(t, filepath.Join(dir, "__pycache__", "t.pyc"), "x") }, false},
		{"ignored file", func() { writeFile(t, filepath.Join(dir, "model.ckpt"), "x") }, false},
		{"python byte code", func() { writeFile(t, filepath.Join(dir, "lib", "__pycache__", "util.cpython-311.pyc"), "x") }, false},
		{"excluded data", func() { writeFile(t, filepath.Join(dir, "data", "more.bin"), "x") }, false},
		{"git dir", func() { writeFile(t, filepath.Join(dir, ".git", "HEAD"), "x") }, false},
		{"edited file", func() { writeFile(t, filepath.Join(dir, "lib", "util.py"), "x = 2\n") }, true},
		{"new file", func() { writeFile(t, filepath.Join(dir, "eval.py"), "") }, true},
		{"executable bit", func() { require.NoError(t, os.Chmod(filepath.Join(dir, "train.py"), 0o755)) }, true},
		{"renamed file", func() {
			require.NoError(t, os.Rename(filepath.Join(dir, "eval.py"), filepath.Join(dir, "test.py")))
		}, true},
	}
	prev := base
	for _, tt := range tests {
		tt.change()
		got := hash()
		if tt.changes {
			assert.NotEqual(t, prev, got, tt.name)
		} else {
			assert.Equal(t, prev, got, tt.name)
		}
		prev = got
	}
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.TrimSpace(string(out))
}

func TestGitHash(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	code := filepath.Join(repo, "exp")
	writeFile(t, filepath.Join(code, "train.py"), "print(1)\n")
	writeFile(t, filepath.Join(repo, "other.txt"), "not in the code dir\n")
	writeFile(t, filepath.Join(repo, ".gitignore"), "*.ckpt\n")
	gitRun(t, repo, "init", "-q")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "first")
	hash := func() string {
		h, err := CodeHash(t.Context(), code, nil, nil)
		require.NoError(t, err)
		return h
	}
	clean := hash()
	assert.Equal(t, "git:"+gitRun(t, repo, "rev-parse", "HEAD:exp"), clean)

	writeFile(t, filepath.Join(repo, "other.txt"), "changed outside the code dir\n")
	assert.Equal(t, clean, hash(), "a change outside the code dir")
	writeFile(t, filepath.Join(code, "model.ckpt"), "ignored")
	assert.Equal(t, clean, hash(), "an ignored file")
	writeFile(t, filepath.Join(code, "__pycache__", "m.cpython-311.pyc"), "x")
	assert.Equal(t, clean, hash(), "python byte code, not in .gitignore")

	writeFile(t, filepath.Join(code, "train.py"), "print(2)\n")
	dirty := hash()
	assert.True(t, strings.HasPrefix(dirty, clean+"+dirty:"), dirty)
	writeFile(t, filepath.Join(code, "train.py"), "print(3)\n")
	assert.NotEqual(t, dirty, hash(), "a different uncommitted change")
	writeFile(t, filepath.Join(code, "train.py"), "print(1)\n")
	assert.Equal(t, clean, hash(), "the change undone")

	writeFile(t, filepath.Join(code, "new.py"), "x")
	untracked := hash()
	assert.True(t, strings.HasPrefix(untracked, clean+"+dirty:"), untracked)
	writeFile(t, filepath.Join(code, "new.py"), "y")
	assert.NotEqual(t, untracked, hash(), "an untracked file's content")
	require.NoError(t, os.Remove(filepath.Join(code, "new.py")))

	// A directory not in HEAD is hashed by its files.
	fresh := filepath.Join(repo, "fresh")
	writeFile(t, filepath.Join(fresh, "a.py"), "")
	h, err := CodeHash(t.Context(), fresh, nil, nil)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(h, "files:"), h)
}

func TestDataManifestUsesTheCache(t *testing.T) {
	data := t.TempDir()
	cachePath := filepath.Join(t.TempDir(), "hashes.json")
	writeFile(t, filepath.Join(data, "train.csv"), "1,2,3\n")
	writeFile(t, filepath.Join(data, "sub", "test.csv"), "4,5\n")

	c := LoadCache(cachePath)
	m, err := DataManifest(t.Context(), data, c)
	require.NoError(t, err)
	require.Len(t, m, 2)
	// sha256sum of "4,5\n"
	assert.Equal(t, DataFile{Path: "sub/test.csv", Size: 4, SHA256: "214986c68c5f2e3ffd6637e2ae7e05790bf9fd1ad9b5ab3cb2181494b837f77a"}, m[0])
	assert.Equal(t, "train.csv", m[1].Path)
	assert.Equal(t, int64(6), m[1].Size)
	require.NoError(t, c.Save())

	// Rewrite train.csv with other bytes of the same size and put its
	// modification time back: a later program run, with the cache file,
	// does not read it again (this is what spares a 50 GB dataset).
	p := filepath.Join(data, "train.csv")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	writeFile(t, p, "9,9,9\n")
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	m2, err := DataManifest(t.Context(), data, LoadCache(cachePath))
	require.NoError(t, err)
	assert.Equal(t, m, m2, "hash taken from the cache")

	// Without the cache the content is read.
	m3, err := DataManifest(t.Context(), data, nil)
	require.NoError(t, err)
	assert.NotEqual(t, m[1].SHA256, m3[1].SHA256)

	// A new modification time invalidates the entry.
	later := fi.ModTime().Add(time.Second)
	require.NoError(t, os.Chtimes(p, later, later))
	m4, err := DataManifest(t.Context(), data, LoadCache(cachePath))
	require.NoError(t, err)
	assert.Equal(t, m3[1].SHA256, m4[1].SHA256)
}

func TestCacheSaveDropsStaleEntries(t *testing.T) {
	dir := t.TempDir()
	cachePath := filepath.Join(dir, "cache", "hashes.json")
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, "a")
	writeFile(t, b, "b")
	c := LoadCache(cachePath)
	_, err := c.FileHash(a, nil)
	require.NoError(t, err)
	_, err = c.FileHash(b, nil)
	require.NoError(t, err)
	require.NoError(t, c.Save())

	// Next program run: only a is used; b was deleted meanwhile.
	require.NoError(t, os.Remove(b))
	c = LoadCache(cachePath)
	assert.Len(t, c.m, 2)
	require.NoError(t, c.Save())
	c = LoadCache(cachePath)
	require.Len(t, c.m, 1, "the unused entry of a deleted file is dropped; a's is kept")
	for k := range c.m {
		assert.True(t, strings.HasPrefix(k, a+"\x00"))
	}
}

func TestDataManifestErrors(t *testing.T) {
	m, err := DataManifest(t.Context(), "", nil)
	require.NoError(t, err)
	assert.Nil(t, m)
	_, err = DataManifest(t.Context(), filepath.Join(t.TempDir(), "absent"), nil)
	assert.ErrorContains(t, err, "hash data dir")
}

func TestInterpreter(t *testing.T) {
	sh := Interpreter("sh", nil)
	assert.Regexp(t, `^sh=/.+ sha256:[0-9a-f]{64}$`, sh)
	assert.Equal(t, "no-such-binary-here=missing", Interpreter("no-such-binary-here", nil))
	assert.Equal(t, "", Interpreter("${code}/run.sh", nil))
}
