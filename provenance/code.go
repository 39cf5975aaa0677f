package provenance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// CodeHash identifies the contents of a code directory.
//
// In a git checkout (git installed, dir inside a work tree and tracked at
// HEAD) it is "git:TREE" where TREE is the hash of HEAD's tree for dir, and
// "git:TREE+dirty:SHA256" when dir has uncommitted changes: SHA256 hashes
// `git diff HEAD -- .` (binary) and the path and content of every untracked,
// not ignored file. Otherwise it is "files:SHA256" over the path, kind
// (file, executable, link) and content of every file under dir, minus .git
// and what the .gitignore files under dir ignore.
//
// Either way, Python's byte code (__pycache__, *.pyc) and notebook
// checkpoints never count: running a stage writes them into the code dir,
// and they must not make the next run's code look different.
//
// Paths in exclude (absolute, e.g. a data dir inside the code dir that
// DataManifest hashes already) are left out of untracked files and of the
// files walk. File contents go through cache (which may be nil).
func CodeHash(ctx context.Context, dir string, exclude []string, cache *Cache) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("hash code dir %s: %w", dir, err)
	}
	if h, ok, err := gitHash(ctx, abs, exclude, cache); ok || err != nil {
		return h, err
	}
	return filesHash(ctx, abs, exclude, cache)
}

// git runs git in dir. Optional locks are off: hashing must not take the
// index lock from a user's commit in progress.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// gitHash is CodeHash for a git checkout; ok is false when dir is not one
// (or git is missing, or dir is not in HEAD): the caller hashes files.
func gitHash(ctx context.Context, dir string, exclude []string, cache *Cache) (h string, ok bool, err error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", false, nil
	}
	if _, err := git(ctx, dir, "rev-parse", "--is-inside-work-tree"); err != nil {
		return "", false, nil
	}
	tree, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD:./")
	if err != nil {
		return "", false, nil // no commit yet, or dir is not tracked
	}
	diff, err := git(ctx, dir, "diff", "--binary", "--no-ext-diff", "--no-textconv", "--no-color", "HEAD", "--", ".")
	if err != nil {
		return "", true, fmt.Errorf("hash code dir %s: %w", dir, err)
	}
	untracked, err := git(ctx, dir, "ls-files", "-z", "--others", "--exclude-standard", "--", ".")
	if err != nil {
		return "", true, fmt.Errorf("hash code dir %s: %w", dir, err)
	}
	h = "git:" + strings.TrimSpace(string(tree))
	var e encoder
	e.str("diff")
	e.str(string(diff))
	e.str("untracked")
	n := 0
	for rel := range strings.SplitSeq(string(untracked), "\x00") {
		if rel == "" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if excluded(p, exclude) || builtinIgnored(rel) {
			continue
		}
		kind, sum, err := entryHash(p, cache)
		if err != nil {
			return "", true, err
		}
		e.str(rel)
		e.str(kind)
		e.str(sum)
		n++
	}
	if len(diff) == 0 && n == 0 {
		return h, true, nil
	}
	s := sha256.Sum256(e.b)
	return h + "+dirty:" + hex.EncodeToString(s[:]), true, nil
}

func excluded(p string, exclude []string) bool {
	for _, x := range exclude {
		if x != "" && (p == x || strings.HasPrefix(p, x+string(filepath.Separator))) {
			return true
		}
	}
	return false
}

// builtinIgnored reports whether a slash path is something running code
// leaves behind: byte code or notebook checkpoints.
func builtinIgnored(rel string) bool {
	if strings.HasSuffix(rel, ".pyc") {
		return true
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == "__pycache__" || seg == ".ipynb_checkpoints" {
			return true
		}
	}
	return false
}

// entryHash hashes one file: its kind ("f", "x" executable, "l" symlink)
// and its content (a link's target).
func entryHash(p string, cache *Cache) (kind, sum string, err error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return "", "", fmt.Errorf("hash %s: %w", p, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		if err != nil {
			return "", "", fmt.Errorf("hash %s: %w", p, err)
		}
		return "l", t, nil
	}
	kind = "f"
	if fi.Mode()&0o111 != 0 {
		kind = "x"
	}
	sum, err = cache.FileHash(p, fi)
	return kind, sum, err
}

// filesHash is CodeHash for a plain directory.
func filesHash(ctx context.Context, root string, exclude []string, cache *Cache) (string, error) {
	var e encoder
	var ign ignorer
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return ign.load(p, "")
			}
			if d.Name() == ".git" || excluded(p, exclude) || builtinIgnored(rel) || ign.ignored(rel, true) {
				return filepath.SkipDir
			}
			return ign.load(p, rel)
		}
		if excluded(p, exclude) || builtinIgnored(rel) || ign.ignored(rel, false) {
			return nil
		}
		if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil // sockets, devices, pipes: not code
		}
		kind, sum, err := entryHash(p, cache)
		if err != nil {
			return err
		}
		e.str(rel)
		e.str(kind)
		e.str(sum)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash code dir %s: %w", root, err)
	}
	s := sha256.Sum256(e.b)
	return "files:" + hex.EncodeToString(s[:]), nil
}

// ignorer implements the .gitignore rules that matter for hashing code:
// blank lines and # comments, ! negation, a trailing / for directories
// only, a pattern with a / other than a trailing one anchored to its
// .gitignore's directory, otherwise matched against the name at any depth,
// and * ? [...] and ** globs. The last matching rule wins; a file under an
// ignored directory stays ignored (the directory is not walked), as in git.
type ignorer struct{ rules []ignoreRule }

type ignoreRule struct {
	base     string // the .gitignore's directory, relative to the root ("" for the root)
	pattern  string
	neg      bool
	dirOnly  bool
	anchored bool
}

// load reads dir's .gitignore, if any; rel is dir relative to the root.
func (g *ignorer) load(dir, rel string) error {
	b, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	g.rules = append(g.rules, parseIgnore(b, rel)...)
	return nil
}

func parseIgnore(b []byte, base string) []ignoreRule {
	var rules []ignoreRule
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{base: base}
		if strings.HasPrefix(line, "!") {
			r.neg, line = true, line[1:]
		} else if strings.HasPrefix(line, `\`) {
			line = line[1:] // \# and \! escape a leading character
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if strings.Contains(line, "/") {
			r.anchored, line = true, strings.TrimPrefix(line, "/")
		}
		if line == "" {
			continue
		}
		r.pattern = line
		rules = append(rules, r)
	}
	return rules
}

// ignored reports whether rel (slash-separated, relative to the root) is
// ignored.
func (g *ignorer) ignored(rel string, isDir bool) bool {
	ign := false
	for _, r := range g.rules {
		if r.dirOnly && !isDir {
			continue
		}
		sub := rel
		if r.base != "" {
			if !strings.HasPrefix(rel, r.base+"/") {
				continue
			}
			sub = rel[len(r.base)+1:]
		}
		var m bool
		if r.anchored {
			m = globMatch(strings.Split(r.pattern, "/"), strings.Split(sub, "/"))
		} else {
			m, _ = path.Match(r.pattern, path.Base(sub))
		}
		if m {
			ign = !r.neg
		}
	}
	return ign
}

// globMatch matches path segments against pattern segments, where "**"
// stands for any number of segments (zero included).
func globMatch(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if globMatch(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// DataManifest lists every file under dir (following symlinks to files):
// its path relative to dir, its size and the SHA-256 of its content, in
// path order. Hashes come from cache when a file's size and modification
// time have not changed, so a big dataset is read once. A dir "" has no
// manifest.
func DataManifest(ctx context.Context, dir string, cache *Cache) ([]DataFile, error) {
	if dir == "" {
		return nil, nil
	}
	var out []DataFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Stat(p) // follows a symlink
		if err != nil || !fi.Mode().IsRegular() {
			return nil // a dangling link or a special file is no data
		}
		sum, err := cache.FileHash(p, fi)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, DataFile{Path: filepath.ToSlash(rel), Size: fi.Size(), SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hash data dir %s (check that it exists and is readable): %w", dir, err)
	}
	return out, nil
}

// Interpreter identifies the executable a local stage's command starts:
// "NAME=RESOLVED sha256:HASH" with the path after PATH lookup and symlinks,
// "NAME=missing" when it is not found (the stage will fail to start, but
// the run can still be fingerprinted), and "" for a command that starts
// with a ${...} reference (a script in the code dir: CodeHash covers it).
func Interpreter(argv0 string, cache *Cache) string {
	if argv0 == "" || strings.Contains(argv0, "${") {
		return ""
	}
	p, err := exec.LookPath(argv0)
	if err != nil {
		return argv0 + "=missing"
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	sum, err := cache.FileHash(p, nil)
	if err != nil {
		return argv0 + "=" + p
	}
	return argv0 + "=" + p + " sha256:" + sum
}
