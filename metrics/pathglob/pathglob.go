// Package pathglob matches file paths with patterns whose "**" component
// spans folders, and names metric keys after the folders it spanned. It is
// pure (no I/O): the template package checks patterns with it, the metrics
// package walks folders with it.
package pathglob

import (
	"fmt"
	"path"
	"strings"
)

// Glob is a path pattern over '/'-separated paths relative to a folder:
// each component is matched as path.Match does, and a "**" component
// matches any number of components (none included). "outputs/**" is every
// file below outputs/; "runs/*/**" is every file below each folder in
// runs/.
//
// Glob also names metric keys: the folders of a file that "**" matched
// become a key prefix ("logs/**" and logs/train/events… give train/…),
// while the ones a literal or a '*' component matched (the root, a run's
// timestamped folder) do not.
type Glob struct {
	parts []string
}

// Parse checks a pattern. It must be relative and must not climb out
// of its folder.
func Parse(pattern string) (Glob, error) {
	p := strings.TrimSpace(pattern)
	if p == "" {
		return Glob{}, fmt.Errorf("empty path pattern")
	}
	if strings.HasPrefix(p, "/") {
		return Glob{}, fmt.Errorf("path pattern %q must be relative to the run directory", pattern)
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return Glob{}, fmt.Errorf("path pattern %q must stay inside the run directory (no ..)", pattern)
		}
		if c != "**" {
			if _, err := path.Match(c, ""); err != nil {
				return Glob{}, fmt.Errorf("path pattern %q: %q is not a valid pattern", pattern, c)
			}
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return Glob{}, fmt.Errorf("path pattern %q names no file", pattern)
	}
	return Glob{parts: parts}, nil
}

// Must is Parse for patterns known to be valid.
func Must(pattern string) Glob {
	g, err := Parse(pattern)
	if err != nil {
		panic(err)
	}
	return g
}

// Root is the literal folder the pattern starts with ("" for none): the
// only folder a walk needs to look in.
func (g Glob) Root() string {
	var lit []string
	for _, c := range g.parts[:len(g.parts)-1] {
		if c == "**" || strings.ContainsAny(c, "*?[\\") {
			break
		}
		lit = append(lit, c)
	}
	return strings.Join(lit, "/")
}

// Match reports whether rel (a file's '/'-separated path relative to the
// folder) matches, and the key prefix it gives ("" or "a/b/").
func (g Glob) Match(rel string) (prefix string, ok bool) {
	comps := strings.Split(rel, "/")
	var kept []string
	if !match(g.parts, comps, &kept) {
		return "", false
	}
	if len(kept) == 0 {
		return "", true
	}
	return strings.Join(kept, "/") + "/", true
}

// match matches comps against parts; kept collects the folders matched by
// "**" (the last component, the file, is never kept).
func match(parts, comps []string, kept *[]string) bool {
	if len(parts) == 0 {
		return len(comps) == 0
	}
	if parts[0] == "**" {
		// Take as few components as possible first, so that later literal
		// parts bind to the nearest folder.
		for n := 0; n <= len(comps); n++ {
			save := len(*kept)
			for _, c := range comps[:n] {
				*kept = append(*kept, c)
			}
			if match(parts[1:], comps[n:], kept) {
				if n > 0 && len(comps[n:]) == 0 {
					// The file itself was matched by "**": not a folder.
					*kept = (*kept)[:len(*kept)-1]
				}
				return true
			}
			*kept = (*kept)[:save]
		}
		return false
	}
	if len(comps) == 0 {
		return false
	}
	if ok, _ := path.Match(parts[0], comps[0]); !ok {
		return false
	}
	return match(parts[1:], comps[1:], kept)
}
