package template

import (
	"fmt"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Tune is what a template says about searching its parameters (its tune:
// section), e.g.
//
//	tune: {search: [lr, hidden], pruner: median, warmup: 5}
type Tune struct {
	// Search names the parameters a study searches when the user names
	// none; empty means every parameter with a searchable type and, for
	// numbers, both bounds.
	Search []string
	// Pruner is how a study stops losing trials early: none, median or
	// asha; "" leaves it to the study (median).
	Pruner string
	// Warmup is the first step at which a trial may be stopped; 0 leaves
	// it to the pruner (a tenth of the longest curve).
	Warmup int64
}

var tuneFields = []string{"search", "pruner", "warmup"}

// tune parses the tune: section; params are the declared parameters.
func (p *parser) tune(f *fieldSet, params []Param) Tune {
	var tu Tune
	n := f.get("tune")
	if n == nil {
		return tu
	}
	if n.Kind != yaml.MappingNode {
		p.addf(f.line("tune"), "tune must be a mapping, e.g. tune: {search: [lr, hidden], pruner: median, warmup: 5}")
		return tu
	}
	const pre = "tune: "
	tf := p.fields(n, pre, tuneFields, "field")
	if s := tf.get("search"); s != nil {
		if s.Kind != yaml.SequenceNode {
			p.addf(tf.line("search"), "tune: search must be a list of parameter names, e.g. search: [lr, hidden]")
		} else {
			for _, raw := range s.Content {
				d := deref(raw)
				if d == nil || d.Kind != yaml.ScalarNode || d.Value == "" {
					p.addf(raw.Line, "tune: search must list parameter names, e.g. search: [lr, hidden]")
					continue
				}
				i := slices.IndexFunc(params, func(q Param) bool { return q.Name == d.Value })
				switch {
				case i < 0:
					p.addf(raw.Line, "tune: search names %q, which is not a parameter of this template", d.Value)
				case slices.Contains(tu.Search, d.Value):
					p.addf(raw.Line, "tune: search lists %q twice; list it once", d.Value)
				default:
					if why := unsearchable(params[i]); why != "" {
						p.addf(raw.Line, "tune: search: %s %s", d.Value, why)
						continue
					}
					tu.Search = append(tu.Search, d.Value)
				}
			}
		}
	}
	tu.Pruner = p.str(tf, "pruner", pre)
	switch tu.Pruner {
	case "", "none", "median", "asha":
	default:
		p.addf(tf.line("pruner"), "tune: pruner must be none, median or asha (got %q)", tu.Pruner)
	}
	if w := p.str(tf, "warmup", pre); w != "" {
		v, err := strconv.ParseInt(w, 10, 64)
		if err != nil || v < 0 {
			p.addf(tf.line("warmup"), "tune: warmup must be a whole number of steps, 0 or more (got %q)", w)
		} else {
			tu.Warmup = v
		}
	}
	return tu
}

// unsearchable says why a study cannot search p ("" when it can).
func unsearchable(p Param) string {
	switch p.Type {
	case KindString:
		return "is a string: only a sweep can list its values"
	case KindFloat, KindInt:
		if p.Min == nil || p.Max == nil {
			return fmt.Sprintf("needs both min and max to be searched (it is a %s)", p.Type)
		}
	}
	return ""
}

// Searchable returns the parameters a study searches when the user names
// none: the tune: section's list, else every parameter unsearchable does
// not refuse.
func (t *Template) Searchable() []string {
	if len(t.Tune.Search) > 0 {
		return slices.Clone(t.Tune.Search)
	}
	var out []string
	for _, p := range t.Params {
		if unsearchable(p) == "" {
			out = append(out, p.Name)
		}
	}
	return out
}
