package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// root is the repository's top, seen from this package's folder.
const root = ".."

// pages is README.md and every Markdown file under docs/, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// unfenced is a Markdown page with its fenced code blocks blanked out.
func unfenced(md string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		} else if !fenced {
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// prose is a page without its code, fenced or inline, where a "](" is
// text, not a link.
func prose(md string) string { return inlineCode.ReplaceAllString(unfenced(md), "``") }

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	// link is a Markdown link or image: [text](target) or ![alt](target),
	// with an optional "title".
	link    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// links are the relative targets of a page's links: no scheme, no mail.
func links(md string) []string {
	var out []string
	for _, m := range link.FindAllStringSubmatch(prose(md), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		out = append(out, target)
	}
	return out
}

// anchors are the ids GitHub gives a page's headings: lower case, the
// punctuation dropped, spaces as hyphens, a repeated one numbered.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(unfenced(md), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(inlineCode.ReplaceAllStringFunc(m[1], func(s string) string { return strings.Trim(s, "`") })) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out[id+"-"+strconv.Itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

// Every relative link in the README and the docs leads somewhere: the
// file exists, and a #heading it names is a heading of that page.
func TestRelativeLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		b, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		for _, target := range links(string(b)) {
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(root, page)
			if file != "" {
				path = filepath.Join(root, filepath.Dir(page), filepath.FromSlash(file))
				_, err := os.Stat(path)
				if !assertf(t, err == nil, "%s: link %q: no such file %s", page, target, path) {
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			to, err := os.ReadFile(path)
			require.NoError(t, err)
			assertf(t, anchors(string(to))[anchor], "%s: link %q: %s has no heading #%s", page, target, path, anchor)
		}
	}
}

func assertf(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// The checker itself: a dead file, a dead anchor and a link inside code
// are told apart from live ones.
func TestLinkCheckerReadsMarkdown(t *testing.T) {
	md := "# Set up\n\nSee [a](guide/cli.md#niuma-run), ![b](shot.png \"x\"), [c](https://x.io/y), `[d](in-code.md)`.\n\n" +
		"```\n[e](in-fence.md)\n```\n\n## Sharing the machine: the shepherd\n\n## `niuma tune`\n\n## Set up\n"
	require.Equal(t, []string{"guide/cli.md#niuma-run", "shot.png"}, links(md))
	a := anchors(md)
	for _, want := range []string{"set-up", "sharing-the-machine-the-shepherd", "niuma-tune", "set-up-1"} {
		require.True(t, a[want], want)
	}
	require.False(t, a["set-up-2"])
}

// README limits: a page a newcomer reads in a few minutes.
const (
	readmeMaxWords     = 2000
	readmeSetUpByLine  = 40 // both set-up commands on the first screen
	guideFolder        = "docs/guide"
	readmeScreenshotIn = "docs/screenshots/"
)

// The README stays short, with both set-up commands within its first 40
// lines, a screenshot, and a link to every page of the guide.
func TestReadmeIsAFirstPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	readme := string(b)
	words := len(strings.Fields(readme)) // what wc -w counts
	require.LessOrEqual(t, words, readmeMaxWords, "README.md has %d words; move detail into docs/guide/", words)

	lines := strings.Split(readme, "\n")
	first := strings.Join(lines[:min(len(lines), readmeSetUpByLine)], "\n")
	for _, cmd := range []string{"make run", "make test"} {
		require.Regexp(t, `(?m)^`+cmd+`\b`, first, "%q within the README's first %d lines", cmd, readmeSetUpByLine)
	}
	require.Contains(t, readme, "]("+readmeScreenshotIn, "the README shows a screenshot")

	linked := links(readme)
	guide, err := os.ReadDir(filepath.Join(root, guideFolder))
	require.NoError(t, err)
	require.NotEmpty(t, guide)
	for _, e := range guide {
		if !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		want := guideFolder + "/" + e.Name()
		require.True(t, slices.ContainsFunc(linked, func(l string) bool { return strings.SplitN(l, "#", 2)[0] == want }),
			"the README links %s", want)
	}
}
