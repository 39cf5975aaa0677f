package template

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// fieldSet is a YAML mapping flattened into named fields.
type fieldSet struct {
	owner *yaml.Node
	keys  map[string]*yaml.Node // key nodes, for lines
	vals  map[string]*yaml.Node // value nodes as written (maybe aliases)
	order []string
	typos map[string]bool // known names suggested for unknown keys ("need" -> "needs")
}

// scalar reports whether the field is present as a single value.
func (f *fieldSet) scalar(name string) bool {
	n := f.get(name)
	return n != nil && n.Kind == yaml.ScalarNode
}

// get returns the field's value with aliases resolved, or nil when it is
// absent or null.
func (f *fieldSet) get(name string) *yaml.Node {
	n := deref(f.vals[name])
	if n == nil || isNull(n) {
		return nil
	}
	return n
}

func (f *fieldSet) has(name string) bool { return f.get(name) != nil }

// line is the field's value line, its key line if the value is null, or the
// line of the mapping when the field is absent.
func (f *fieldSet) line(name string) int {
	if v := f.vals[name]; v != nil && !isNull(v) {
		return v.Line
	}
	if k := f.keys[name]; k != nil {
		return k.Line
	}
	return f.owner.Line
}

// fields flattens mapping m, following aliases and merge keys (<<), and
// reports keys that are not in known (unless known is nil) and repeated
// keys. what names the keys in messages ("field", "parameter").
func (p *parser) fields(m *yaml.Node, pre string, known []string, what string) *fieldSet {
	f := &fieldSet{owner: m, keys: map[string]*yaml.Node{}, vals: map[string]*yaml.Node{}}
	p.collect(f, m, pre, known, what, nil, 0)
	return f
}

// collect adds m's fields to f. shadow holds names set explicitly by an
// enclosing mapping, which override merged ones.
func (p *parser) collect(f *fieldSet, m *yaml.Node, pre string, known []string, what string, shadow map[string]bool, depth int) {
	explicit := map[string]bool{}
	for k := range shadow {
		explicit[k] = true
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := deref(m.Content[i]); k != nil && k.Kind == yaml.ScalarNode && !isMergeKey(k) {
			explicit[k.Value] = true
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		rawKey, val := m.Content[i], m.Content[i+1]
		k := deref(rawKey)
		if k == nil || k.Kind != yaml.ScalarNode {
			p.addf(rawKey.Line, "%skeys must be plain names, not %s", pre, kindName(k))
			continue
		}
		if isMergeKey(k) {
			p.merge(f, val, pre, known, what, explicit, depth+1)
			continue
		}
		name := k.Value
		if depth > 0 && shadow[name] {
			continue // overridden by an explicit key
		}
		if first, dup := f.keys[name]; dup {
			if depth == 0 {
				p.addf(rawKey.Line, "%sduplicate %s %q (first at line %d); remove one", pre, what, name, first.Line)
			}
			continue
		}
		if known != nil && !slices.Contains(known, name) {
			if s := p.unknownField(rawKey.Line, pre, name, known); s != "" {
				if f.typos == nil {
					f.typos = map[string]bool{}
				}
				f.typos[s] = true
			}
			continue
		}
		f.keys[name] = rawKey
		f.vals[name] = val
		f.order = append(f.order, name)
	}
}

// merge adds the fields of a merge key's value: a mapping or a list of them.
func (p *parser) merge(f *fieldSet, val *yaml.Node, pre string, known []string, what string, shadow map[string]bool, depth int) {
	if depth > maxMergeDepth {
		p.addf(val.Line, "%smerge keys (<<) are nested too deeply", pre)
		return
	}
	v := deref(val)
	var maps []*yaml.Node
	switch {
	case v != nil && v.Kind == yaml.MappingNode:
		maps = []*yaml.Node{v}
	case v != nil && v.Kind == yaml.SequenceNode:
		for _, it := range v.Content {
			if d := deref(it); d != nil && d.Kind == yaml.MappingNode {
				maps = append(maps, d)
			} else {
				p.addf(it.Line, "%s<< must refer to mappings, e.g. <<: [*defaults]", pre)
			}
		}
	default:
		p.addf(val.Line, "%s<< must refer to a mapping, e.g. <<: *defaults", pre)
	}
	for _, m := range maps {
		p.merged += len(m.Content)/2 + 1
		if p.merged > maxMergedFields {
			if !p.mergedLimit {
				p.mergedLimit = true
				p.addf(val.Line, "%stoo many fields merged through << ; write them out", pre)
			}
			return
		}
		p.collect(f, m, pre, known, what, shadow, depth)
	}
}

// unknownField reports an unknown key and returns the field it is likely a
// typo of, if any.
func (p *parser) unknownField(line int, pre, name string, known []string) string {
	if s := suggest(name, known); s != "" {
		p.addf(line, "%sunknown field %q; did you mean %q?", pre, name, s)
		return s
	}
	p.addf(line, "%sunknown field %q (fields are: %s)", pre, name, strings.Join(known, ", "))
	return ""
}

// str returns a scalar field's text ("" when absent), reporting lists and
// mappings.
func (p *parser) str(f *fieldSet, name, pre string) string {
	n := f.get(name)
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		p.addf(f.line(name), "%s%s must be a single value, not %s", pre, name, kindName(n))
		return ""
	}
	return n.Value
}

// explicitName returns the value of m's own "name" key, if it is text.
func explicitName(m *yaml.Node) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := deref(m.Content[i]), deref(m.Content[i+1])
		if k != nil && k.Kind == yaml.ScalarNode && k.Value == "name" && v != nil && v.Kind == yaml.ScalarNode && !isNull(v) {
			return v.Value
		}
	}
	return ""
}

// deref follows aliases to the anchored node.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 16 {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func isMergeKey(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && n.ShortTag() == "!!merge"
}

// scalarValue is a scalar's text, or "" for anything else.
func scalarValue(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// shownNode renders a node for a message.
func shownNode(n *yaml.Node) string {
	if n != nil && n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return kindName(n)
}

func kindName(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return "a single value"
	}
	return "an alias"
}

// listNames joins names for a message, eliding all but the first 20.
func listNames(names []string) string {
	if len(names) > 20 {
		return strings.Join(names[:20], ", ") + fmt.Sprintf(", … (%d more)", len(names)-20)
	}
	return strings.Join(names, ", ")
}

// suggest returns the candidate closest to name when it is a likely typo.
func suggest(name string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), c)
		limit := 1
		if len(c) >= 5 {
			limit = 2
		}
		if d <= limit && d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and adjacent transpositions.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
