package template

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"niuma/engine/sandbox"
	"niuma/metrics/pathglob"
	"niuma/metrics/textrule"
	"niuma/printable"
	"niuma/sentinel"
)

// The fields each part of a template may have; anything else is reported
// as an unknown field (a typo such as "need:" must not be silently ignored).
var (
	topFields       = []string{"name", "description", "version", "runtime", "objective", "params", "stages", "sentinel", "spot", "share", "tune"}
	runtimeFields   = []string{"kind", "image", "data", "shm_size", "memory", "cpus", "user", "network", "keep", "cap_add", "pids_limit", "fallback", "partition", "account", "qos"}
	objectiveFields = []string{"metric", "goal"}
	paramFields     = []string{"type", "default", "min", "max", "log", "choices", "help", "when"}
	stageFields     = []string{"name", "command", "needs", "gpus", "gpu_memory", "retries", "timeout", "env", "metrics", "tensorboard", "csv", "cpus", "memory", "estimate"}
	ruleFields      = []string{"preset", "pattern", "step", "stream"}
)

var (
	templateNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	stageNameRe    = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	paramNameRe    = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	envNameRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	yamlLineRe     = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

const (
	maxNameLen      = 64
	maxEcho         = 120     // runes of a value a problem repeats
	maxPidsLimit    = 1 << 22 // the kernel's own ceiling on process IDs
	maxGPUs         = 4096
	maxRetries      = 1000
	maxMergeDepth   = 8
	maxMergedFields = 10000
	maxExpandedSize = 1 << 20 // YAML nodes, counting each alias as a copy of its anchor
)

// Parse parses and validates a template. source names the template in
// error messages (a file name, or "bundled:NAME"). A rejected template
// yields a *ValidationError listing every problem found with its line.
func Parse(source string, data []byte) (*Template, error) {
	p := &parser{source: source}
	t := p.template(data)
	if err := p.err(); err != nil {
		return nil, err
	}
	t.Source = source
	t.YAML = bytes.Clone(data)
	t.indexStages()
	return t, nil
}

type parser struct {
	source      string
	valueLines  map[condKey][]int // lines of the values of each when: condition
	problems    []Problem
	merged      int  // fields visited through merge keys
	mergedLimit bool // the merge budget was exhausted and reported
}

func (p *parser) addf(line int, format string, args ...any) {
	for i, a := range args {
		// Whatever a problem repeats from the file is short enough to read.
		if s, ok := a.(string); ok && len(s) > maxEcho {
			args[i] = printable.Shorten(s, maxEcho)
		}
	}
	msg := fmt.Sprintf(format, args...)
	msg = strings.ReplaceAll(msg, "\n", " ") // one line per problem
	p.problems = append(p.problems, Problem{Line: line, Msg: msg})
}

// err returns the problems, ordered by line, as a *ValidationError.
func (p *parser) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	probs := slices.Clone(p.problems)
	slices.SortStableFunc(probs, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
	seen := map[Problem]bool{}
	out := probs[:0]
	for _, pr := range probs {
		if !seen[pr] {
			seen[pr] = true
			out = append(out, pr)
		}
	}
	return &ValidationError{Source: p.source, Problems: out}
}

// decode parses the YAML text into its root node, or reports why not.
func (p *parser) decode(data []byte) (root *yaml.Node) {
	defer func() {
		// The YAML library should never panic, but a template must not be
		// able to take the app down if it does.
		if r := recover(); r != nil {
			p.addf(0, "the YAML parser failed on this file (%v); check its syntax", r)
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.addf(0, "the file is empty; a template needs at least a name and stages")
		} else {
			p.yamlError(err, data)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		p.addf(extra.Line, "a second YAML document starts here; a template is a single document (remove the extra ---)")
	case !errors.Is(err, io.EOF):
		p.yamlError(err, data)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		p.addf(0, "the file is empty; a template needs at least a name and stages")
		return nil
	}
	if expandedSize(doc.Content[0], map[*yaml.Node]int{}) > maxExpandedSize {
		p.addf(0, "the template is too large once its aliases (*name) are expanded; write it out or use fewer aliases")
		return nil
	}
	return deref(doc.Content[0])
}

// yamlParserErrors start the messages of the YAML library's parser (as
// opposed to its scanner). The library reports their lines counting from 0
// (it adds 1 only for scanner errors), so they are shifted here.
var yamlParserErrors = []string{"did not find expected", "found undefined tag handle", "found duplicate %", "found incompatible YAML document"}

func (p *parser) yamlError(err error, data []byte) {
	msg := err.Error()
	line := 0
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		for _, prefix := range yamlParserErrors {
			if strings.HasPrefix(msg, prefix) {
				line++
				break
			}
		}
		// An error found at the end of the file points at the last line
		// with content rather than past it.
		if last := lastContentLine(data); line > last && last > 0 {
			line = last
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
		switch {
		case strings.HasPrefix(msg, "unknown anchor '"):
			// The library gives no line; the first use of the alias is it.
			name := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
			for i, l := range bytes.Split(data, []byte("\n")) {
				if bytes.Contains(l, []byte("*"+name)) {
					line = i + 1
					break
				}
			}
			p.addf(line, "unknown anchor *%s: define it first with &%s", name, name)
			return
		case strings.Contains(msg, "UTF") || strings.Contains(msg, "octet") || strings.Contains(msg, "control characters"):
			// Reader errors concern bytes, not lines.
		default:
			line = 1 // the library omits "line N" for the first line
		}
	}
	p.addf(line, "YAML syntax error: %s (check the indentation, colons and quotes here)", msg)
}

// lastContentLine returns the number of the last line that is not blank.
func lastContentLine(data []byte) int {
	lines := bytes.Split(data, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if len(bytes.TrimSpace(lines[i])) > 0 {
			return i + 1
		}
	}
	return 0
}

// expandedSize counts the nodes under n with every alias counted as a copy
// of its anchor, saturating above maxExpandedSize.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.AliasNode {
		return 1 + expandedSize(n.Alias, memo)
	}
	if s, ok := memo[n]; ok {
		return s
	}
	memo[n] = 0 // an anchor that contains itself adds nothing more
	size := 1
	for _, c := range n.Content {
		size += expandedSize(c, memo)
		if size > maxExpandedSize {
			size = maxExpandedSize + 1
			break
		}
	}
	memo[n] = size
	return size
}

func (p *parser) template(data []byte) *Template {
	root := p.decode(data)
	if root == nil {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.addf(root.Line, "a template is a YAML mapping with name, stages and optionally description, version, runtime, objective and params; found %s", kindName(root))
		return nil
	}
	t := &Template{}
	f := p.fields(root, "", topFields, "field")

	t.Name = p.str(f, "name", "")
	switch {
	case f.has("name") && !f.scalar("name"), !f.has("name") && f.typos["name"]:
	case !f.has("name"):
		p.addf(f.line("name"), "name is required, e.g. name: digits-mlp")
	case t.Name == "":
		p.addf(f.line("name"), "name is empty; give the template a name, e.g. name: digits-mlp")
	case len(t.Name) > maxNameLen:
		p.addf(f.line("name"), "%s", printable.TooLong("name", t.Name, maxNameLen))
	case !templateNameRe.MatchString(t.Name):
		p.addf(f.line("name"), "name %q must be letters, digits, '.', '-' and '_', starting with a letter or digit, at most %d characters", t.Name, maxNameLen)
	}
	t.Description = p.str(f, "description", "")
	t.Version = p.str(f, "version", "")
	t.Runtime = p.runtime(f)
	t.Objective = p.objective(f)
	p.runFlags(t, f)

	declared := map[string]bool{}
	if n := f.get("params"); n != nil {
		if n.Kind != yaml.MappingNode {
			p.addf(f.line("params"), "params must be a mapping from names to specs, e.g. params: {lr: {type: float, default: 0.01}}")
		} else {
			pf := p.fields(n, "", nil, "parameter")
			for _, name := range pf.order {
				declared[name] = true
				t.Params = append(t.Params, p.param(name, pf.keys[name], pf.vals[name]))
			}
		}
	}
	p.conditions(t.Params)
	p.stages(t, f, declared)
	t.Sentinel = p.sentinel(f, declared)
	t.Tune = p.tune(f, t.Params)
	return t
}

// sentinel reads the template's answers to anomalies, e.g.
// sentinel: {divergence: {do: retry, set: {lr: "*0.1"}}}.
func (p *parser) sentinel(f *fieldSet, declared map[string]bool) sentinel.Policy {
	n := f.get("sentinel")
	if n == nil {
		return nil
	}
	line := f.line("sentinel")
	// An action names only do, set and max_retries: a misspelt key
	// (sett:, retries:) would silently leave the template's answer out.
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			kind, act := n.Content[i], n.Content[i+1]
			if act.Kind != yaml.MappingNode {
				continue
			}
			for j := 0; j+1 < len(act.Content); j += 2 {
				switch key := act.Content[j]; key.Value {
				case "do", "set", "max_retries":
				default:
					p.addf(key.Line, "sentinel: %s: unknown field %q (an action has do, set and max_retries)", kind.Value, key.Value)
				}
			}
		}
	}
	var spec map[string]sentinel.Action
	if err := n.Decode(&spec); err != nil {
		p.addf(line, "sentinel must map anomaly kinds to actions, e.g. sentinel: {divergence: {do: retry, set: {lr: \"*0.1\"}}}: %v", err)
		return nil
	}
	pol, err := sentinel.ParsePolicy(spec)
	if err != nil {
		p.addf(line, "sentinel: %s", strings.TrimPrefix(err.Error(), "sentinel: "))
		return nil
	}
	for _, kind := range sortedKeys(spec) {
		for _, name := range sortedKeys(spec[kind].Set) {
			if !declared[name] {
				p.addf(line, "sentinel: %s sets %q, which is not a parameter of this template", kind, name)
			}
		}
	}
	return pol
}

func (p *parser) runtime(f *fieldSet) Runtime {
	rt := Runtime{Kind: "local"}
	n := f.get("runtime")
	if n == nil {
		return rt
	}
	if n.Kind != yaml.MappingNode {
		p.addf(f.line("runtime"), "runtime must be a mapping, e.g. runtime: {kind: docker, image: pytorch/pytorch}")
		return rt
	}
	const pre = "runtime: "
	rf := p.fields(n, pre, runtimeFields, "field")
	rt.Image = p.str(rf, "image", pre)
	switch kind := p.str(rf, "kind", pre); kind {
	case "":
		if strings.TrimSpace(rt.Image) != "" {
			rt.Kind = "docker" // an image is a container's
		}
	case "local":
		if rt.Image != "" {
			p.addf(rf.line("image"), "runtime: kind local runs stages on the host and takes no image; "+
				"write kind: docker to run them in containers of it (with fallback: local to allow the host when the image is missing)")
		}
	case "docker", "slurm":
		rt.Kind = kind
	default:
		p.addf(rf.line("kind"), "runtime: kind must be local, docker or slurm (got %q)", kind)
	}
	switch fb := p.str(rf, "fallback", pre); {
	case fb == "":
	case fb != "local":
		p.addf(rf.line("fallback"), "runtime: fallback may only be local (got %q): the host, when the image is missing or Docker is away", fb)
	case rt.Kind != "docker":
		p.addf(rf.line("fallback"), "runtime: fallback: local is for kind: docker (a template of kind local runs on the host already)")
	default:
		rt.Fallback = fb
	}
	if rt.Kind == "slurm" && rf.has("image") {
		p.addf(rf.line("image"), "runtime: image is not used with kind slurm: stages run in the nodes' own environment (containers on Slurm nodes are not supported); remove image, or use kind docker")
	}
	p.clusterFields(&rt, rf, pre)
	if rt.Kind == "docker" && strings.TrimSpace(rt.Image) == "" && !(rf.typos["image"] && !rf.has("image")) {
		line := rf.line("kind")
		if rf.has("image") {
			line = rf.line("image")
		}
		p.addf(line, "runtime: image is required when kind is docker, e.g. image: pytorch/pytorch:latest")
	}
	p.containerFields(&rt, rf, pre)
	return rt
}

// slurmNameRe is what Slurm accepts as a partition, account or QOS name
// (a partition may be a comma-separated list).
var slurmNameRe = regexp.MustCompile(`^[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*$`)

// clusterFields reads where a slurm stage's job goes.
func (p *parser) clusterFields(rt *Runtime, rf *fieldSet, pre string) {
	for _, f := range []struct {
		name string
		to   *string
		eg   string
	}{{"partition", &rt.Partition, "gpu"}, {"account", &rt.Account, "mylab"}, {"qos", &rt.QOS, "normal"}} {
		v := p.str(rf, f.name, pre)
		if v == "" {
			continue
		}
		if !slurmNameRe.MatchString(v) || len(v) > 200 {
			p.addf(rf.line(f.name), "%s%s %q is not a Slurm name: letters, digits, _ . + - (e.g. %s: %s)", pre, f.name, v, f.name, f.eg)
			continue
		}
		if rt.Kind != "slurm" {
			p.addf(rf.line(f.name), "%s%s is for kind slurm; this runtime's kind is %s (niuma run --executor slurm uses the site's settings)", pre, f.name, rt.Kind)
			continue
		}
		*f.to = v
	}
}

// containerFields reads the runtime fields that tune a docker stage's
// container.
func (p *parser) containerFields(rt *Runtime, rf *fieldSet, pre string) {
	size := func(name string) int64 {
		n := rf.get(name)
		if n == nil {
			return 0
		}
		mib, err := ParseGPUMemory(scalarValue(n))
		if n.Kind != yaml.ScalarNode {
			err = fmt.Errorf("must be a size such as 2GiB, not %s", kindName(n))
		}
		if err != nil {
			p.addf(rf.line(name), "%s%s %v", pre, name, err)
			return 0
		}
		return mib
	}
	rt.ShmSizeMiB = size("shm_size")
	rt.MemoryMiB = size("memory")
	if rt.MemoryMiB != 0 && rt.MemoryMiB < 6 {
		p.addf(rf.line("memory"), "%smemory must be at least 6MiB (Docker's minimum)", pre)
	}
	if s := p.str(rf, "cpus", pre); s != "" {
		c, err := parseFloat(s)
		if err != nil || c <= 0 || c > 4096 {
			p.addf(rf.line("cpus"), "%scpus must be a positive number of CPUs such as 2 or 0.5 (got %q)", pre, s)
		} else {
			rt.CPUs = c
		}
	}
	rt.Data = p.str(rf, "data", pre)
	if rt.Kind == "docker" {
		// As written; the engine checks the path again, after symlinks,
		// once the template's directory is known.
		if err := sandbox.MountPath(pre+"data", rt.Data); err != nil {
			p.addf(rf.line("data"), "%v", err)
		}
	}
	rt.User = p.str(rf, "user", pre)
	if rt.User != "" {
		if err := sandbox.UserSyntax(rt.User); err != nil {
			p.addf(rf.line("user"), "%s%v", pre, err)
		}
	}
	if n := rf.get("pids_limit"); n != nil {
		v, err := strconv.ParseInt(scalarValue(n), 10, 64)
		if n.Kind != yaml.ScalarNode || err != nil || v <= 0 || v > maxPidsLimit {
			p.addf(rf.line("pids_limit"), "%spids_limit must be a positive whole number of processes and threads, such as 1024 (got %q)", pre, scalarValue(n))
		} else {
			rt.PidsLimit = v
		}
	}
	switch nw := p.str(rf, "network", pre); nw {
	case "", "bridge", "none":
		rt.Network = nw
	default:
		p.addf(rf.line("network"), "%snetwork must be bridge or none (got %q); Niuma never shares the host's network", pre, nw)
	}
	switch k := p.str(rf, "keep", pre); k {
	case "", "false":
	case "true":
		rt.Keep = true
	default:
		p.addf(rf.line("keep"), "%skeep must be true or false (got %q)", pre, k)
	}
	if n := rf.get("cap_add"); n != nil {
		if n.Kind != yaml.SequenceNode {
			p.addf(rf.line("cap_add"), "%scap_add must be a list such as [SYS_PTRACE], not %s", pre, kindName(n))
			return
		}
		for _, c := range n.Content {
			c = deref(c)
			v := strings.ToUpper(strings.TrimPrefix(strings.ToUpper(scalarValue(c)), "CAP_"))
			if c.Kind != yaml.ScalarNode || !capRe.MatchString(v) {
				p.addf(c.Line, "%scap_add: %q is not a capability name such as SYS_PTRACE", pre, scalarValue(c))
				continue
			}
			if err := sandbox.Capability(v); err != nil {
				p.addf(c.Line, "%s%v", pre, err)
				continue
			}
			rt.CapAdd = append(rt.CapAdd, v)
		}
	}
}

// capRe is the shape of a Linux capability name without its CAP_ prefix.
var capRe = regexp.MustCompile(`^[A-Z][A-Z_]{1,31}$`)

func (p *parser) objective(f *fieldSet) Objective {
	var o Objective
	n := f.get("objective")
	if n == nil {
		return o
	}
	if n.Kind != yaml.MappingNode {
		p.addf(f.line("objective"), "objective must be a mapping, e.g. objective: {metric: val_acc, goal: max}")
		return o
	}
	const pre = "objective: "
	of := p.fields(n, pre, objectiveFields, "field")
	o.Metric = p.str(of, "metric", pre)
	o.Goal = p.str(of, "goal", pre)
	switch o.Goal {
	case "min", "max":
	case "":
		if o.Metric != "" && !of.typos["goal"] {
			p.addf(of.line("goal"), "objective: goal is required when metric is set: goal: min or goal: max")
		}
	default:
		p.addf(of.line("goal"), "objective: goal must be min or max (got %q)", o.Goal)
	}
	return o
}

func (p *parser) param(name string, key, raw *yaml.Node) Param {
	pre := fmt.Sprintf("parameter %q: ", name)
	prm := Param{Name: name, Line: key.Line}
	if len(name) > maxNameLen {
		p.addf(key.Line, "%s", printable.TooLong("parameter name", name, maxNameLen))
		pre = "a parameter: "
	} else if !paramNameRe.MatchString(name) {
		p.addf(key.Line, "parameter name %q must be lowercase letters, digits and _, starting with a letter, at most %d characters (it is used as ${params.NAME} and NIUMA_PARAM_NAME)", name, maxNameLen)
	}
	n := deref(raw)
	if n == nil || isNull(n) {
		p.addf(key.Line, "%sthe spec is empty; write e.g. %s: {type: float, default: 0.01}", pre, name)
		return prm
	}
	if n.Kind != yaml.MappingNode {
		p.addf(raw.Line, "%sthe spec must be a mapping such as {type: float, default: 0.01}, not %s", pre, kindName(n))
		return prm
	}
	f := p.fields(n, pre, paramFields, "field")
	prm.Help = p.str(f, "help", pre)

	typ := p.str(f, "type", pre)
	switch {
	case f.has("type") && !f.scalar("type"), !f.has("type") && f.typos["type"]:
	case !f.has("type"):
		p.addf(f.line("type"), "%stype is required: one of float, int, bool, choice, string", pre)
	case !slices.Contains(Kinds, Kind(typ)):
		p.addf(f.line("type"), "%stype must be one of float, int, bool, choice, string (got %q)", pre, typ)
	default:
		prm.Type = Kind(typ)
	}
	numeric := prm.Type == KindFloat || prm.Type == KindInt

	rangeOK := true
	for _, which := range []string{"min", "max"} {
		n := f.get(which)
		if n == nil {
			continue
		}
		line := f.line(which)
		if prm.Type != "" && !numeric {
			p.addf(line, "%s%s only applies to float and int parameters; remove it", pre, which)
			continue
		}
		if n.Kind != yaml.ScalarNode {
			p.addf(line, "%s%s must be a number, not %s", pre, which, kindName(n))
			rangeOK = false
			continue
		}
		v, err := parseFloat(n.Value)
		if err != nil {
			p.addf(line, "%s%s must be a number (got %q)", pre, which, n.Value)
			rangeOK = false
			continue
		}
		if prm.Type == KindInt {
			if _, ok := wholeInt64(v); !ok {
				p.addf(line, "%s%s %s must be a whole number (of at most 2^53) for an int parameter", pre, which, n.Value)
				rangeOK = false
				continue
			}
		}
		if which == "min" {
			prm.Min = &v
		} else {
			prm.Max = &v
		}
	}
	fmtNum := fmtFloat
	if prm.Type == KindInt {
		fmtNum = fmtBound
	}
	if prm.Min != nil && prm.Max != nil && *prm.Min > *prm.Max {
		p.addf(f.line("min"), "%smin %s is above max %s; swap them", pre, fmtNum(*prm.Min), fmtNum(*prm.Max))
		rangeOK = false
	}

	if n := f.get("log"); n != nil {
		line := f.line("log")
		b, err := parseBool(scalarValue(n))
		switch {
		case err != nil:
			p.addf(line, "%slog must be true or false (got %s)", pre, shownNode(n))
		case !b:
		case prm.Type != "" && !numeric:
			p.addf(line, "%slog only applies to float and int parameters; remove it", pre)
		case prm.Min == nil:
			if !f.has("min") {
				p.addf(line, "%slog: true needs a min above 0 (a log scale cannot reach 0); add e.g. min: 1e-05", pre)
			}
		case *prm.Min <= 0:
			p.addf(f.line("min"), "%slog: true needs a min above 0 (a log scale cannot reach 0), but min is %s", pre, fmtNum(*prm.Min))
		default:
			prm.Log = true
		}
	}

	p.choices(&prm, f, pre)
	p.paramDefault(&prm, f, pre, rangeOK, fmtNum)
	prm.When = p.when(f, pre)
	return prm
}

// when reads a parameter's conditions as written, e.g.
// when: {optimizer: sgd} or when: {optimizer: [sgd, rmsprop]}; conditions
// checks them against the other parameters once all are read.
func (p *parser) when(f *fieldSet, pre string) []Condition {
	n := f.get("when")
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.addf(f.line("when"), "%swhen must map other parameters to the values that make this one apply, e.g. when: {optimizer: sgd}", pre)
		return nil
	}
	wf := p.fields(n, pre+"when: ", nil, "parameter")
	if p.valueLines == nil {
		p.valueLines = map[condKey][]int{}
	}
	var out []Condition
	for _, name := range wf.order {
		c := Condition{Param: name, Line: wf.keys[name].Line}
		v := wf.get(name)
		var items []*yaml.Node
		switch {
		case v == nil:
		case v.Kind == yaml.ScalarNode:
			items = []*yaml.Node{v}
		case v.Kind == yaml.SequenceNode:
			items = v.Content
		}
		if len(items) == 0 {
			p.addf(wf.line(name), "%swhen: %s needs a value or a list of values, e.g. %s: [sgd]", pre, name, name)
			continue
		}
		ok := true
		for _, raw := range items {
			it := deref(raw)
			if it == nil || it.Kind != yaml.ScalarNode || isNull(it) {
				p.addf(raw.Line, "%swhen: %s must list single values, not %s", pre, name, kindName(it))
				ok = false
				continue
			}
			c.Values = append(c.Values, it.Value)
			p.valueLines[condKey{pre, name}] = append(p.valueLines[condKey{pre, name}], raw.Line)
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// condKey names one condition while parsing: the parameter's message
// prefix and the parameter it depends on.
type condKey struct{ pre, on string }

// conditions checks each parameter's when: against the schema: it names a
// parameter declared above (so that the wizard can show parameters in
// order and a chain of conditions cannot loop), of a kind compared
// exactly (choice, bool, int or string), with values that parameter can
// take. Values are stored as FormatValue writes them ("yes" becomes
// "true").
func (p *parser) conditions(params []Param) {
	index := map[string]int{}
	for i, prm := range params {
		if _, dup := index[prm.Name]; !dup {
			index[prm.Name] = i
		}
	}
	for i := range params {
		prm := &params[i]
		pre := fmt.Sprintf("parameter %q: when: ", prm.Name)
		lines := func(c Condition) []int {
			return p.valueLines[condKey{fmt.Sprintf("parameter %q: ", prm.Name), c.Param}]
		}
		kept := prm.When[:0]
		for _, c := range prm.When {
			j, ok := index[c.Param]
			switch {
			case c.Param == prm.Name:
				p.addf(c.Line, "%sa parameter cannot depend on itself; name another parameter", pre)
				continue
			case !ok:
				p.addf(c.Line, "%sunknown parameter %q (parameters are: %s)", pre, c.Param, listNames(paramNames(params)))
				continue
			case j > i:
				p.addf(c.Line, "%s%s is declared below %s; declare it above, since %s depends on it", pre, c.Param, prm.Name, prm.Name)
				continue
			}
			on := params[j]
			if on.Type == KindFloat {
				p.addf(c.Line, "%s%s is a float, which cannot be compared exactly; make it a choice, or depend on another parameter", pre, c.Param)
				continue
			}
			good := true
			var vals []string
			for k, s := range c.Values {
				x, err := parseValue(on, s)
				if err == nil {
					err = checkValue(on, x)
				}
				if err != nil {
					p.addf(lines(c)[k], "%s%s: %q is not a value %s can take (%s)", pre, c.Param, s, c.Param, describe(on))
					good = false
					continue
				}
				v := FormatValue(x)
				if slices.Contains(vals, v) {
					p.addf(lines(c)[k], "%s%s: %q is listed twice; remove one", pre, c.Param, s)
					good = false
					continue
				}
				vals = append(vals, v)
			}
			if good {
				c.Values = vals
				kept = append(kept, c)
			}
		}
		prm.When = kept
		if len(prm.When) == 0 {
			prm.When = nil
		}
	}
}

func paramNames(params []Param) []string {
	var out []string
	for _, prm := range params {
		out = append(out, prm.Name)
	}
	return out
}

func (p *parser) choices(prm *Param, f *fieldSet, pre string) {
	n := f.get("choices")
	line := f.line("choices")
	if n == nil {
		if prm.Type == KindChoice {
			p.addf(line, "%sa choice parameter needs choices, e.g. choices: [adam, sgd]", pre)
		}
		return
	}
	if prm.Type != "" && prm.Type != KindChoice {
		p.addf(line, "%schoices only apply to choice parameters; set type: choice or remove choices", pre)
		return
	}
	if n.Kind != yaml.SequenceNode {
		p.addf(line, "%schoices must be a list, e.g. choices: [adam, sgd]", pre)
		return
	}
	if len(n.Content) == 0 {
		p.addf(line, "%schoices is empty; list at least one, e.g. choices: [adam, sgd]", pre)
		return
	}
	for i, raw := range n.Content {
		c := deref(raw)
		switch {
		case c == nil || c.Kind != yaml.ScalarNode || isNull(c):
			p.addf(raw.Line, "%schoice %d must be a single value", pre, i+1)
		case c.Value == "":
			p.addf(raw.Line, "%schoice %d is empty; remove it", pre, i+1)
		case badText(c.Value) != "":
			p.addf(raw.Line, "%schoice %q %s", pre, c.Value, badText(c.Value))
		case slices.Contains(prm.Choices, c.Value):
			p.addf(raw.Line, "%schoice %q is listed twice; remove one", pre, c.Value)
		default:
			prm.Choices = append(prm.Choices, c.Value)
		}
	}
}

func (p *parser) paramDefault(prm *Param, f *fieldSet, pre string, rangeOK bool, fmtNum func(float64) string) {
	n := f.get("default")
	if n == nil {
		switch prm.Type {
		case KindFloat, KindInt:
			if f.typos["default"] {
				return
			}
			p.addf(f.line("default"), "%sdefault is required: the value a run uses when it does not set %s", pre, prm.Name)
		case KindBool:
			prm.Default = false
		case KindString:
			prm.Default = ""
		case KindChoice:
			if len(prm.Choices) > 0 {
				prm.Default = prm.Choices[0]
			}
		}
		return
	}
	line := f.line("default")
	if n.Kind != yaml.ScalarNode {
		p.addf(line, "%sdefault must be a single value, not %s", pre, kindName(n))
		return
	}
	s := n.Value
	switch prm.Type {
	case KindFloat:
		v, err := parseFloat(s)
		if err != nil {
			p.addf(line, "%sdefault %q is not a number", pre, s)
			return
		}
		prm.Default = v
		if !rangeOK {
			return
		}
		if prm.Min != nil && v < *prm.Min {
			p.addf(line, "%sdefault %s is below min %s", pre, fmtFloat(v), fmtNum(*prm.Min))
		}
		if prm.Max != nil && v > *prm.Max {
			p.addf(line, "%sdefault %s is above max %s", pre, fmtFloat(v), fmtNum(*prm.Max))
		}
	case KindInt:
		v, err := parseInt(s)
		if err != nil {
			p.addf(line, "%sdefault %q is not a whole number", pre, s)
			return
		}
		prm.Default = v
		if !rangeOK {
			return
		}
		if prm.Min != nil && intBelow(v, *prm.Min) {
			p.addf(line, "%sdefault %d is below min %s", pre, v, fmtNum(*prm.Min))
		}
		if prm.Max != nil && intAbove(v, *prm.Max) {
			p.addf(line, "%sdefault %d is above max %s", pre, v, fmtNum(*prm.Max))
		}
	case KindBool:
		v, err := parseBool(s)
		if err != nil {
			p.addf(line, "%sdefault %q is not true or false", pre, s)
			return
		}
		prm.Default = v
	case KindChoice:
		if len(prm.Choices) > 0 && !slices.Contains(prm.Choices, s) {
			p.addf(line, "%sdefault %q is not one of the choices (%s)", pre, s, strings.Join(prm.Choices, ", "))
			return
		}
		prm.Default = s
	case KindString:
		if why := badText(s); why != "" {
			p.addf(line, "%sdefault %q %s", pre, s, why)
			return
		}
		prm.Default = s
	}
}

// needRef is one entry of a stage's needs, with its line.
type needRef struct {
	name string
	line int
}

func (p *parser) stages(t *Template, f *fieldSet, params map[string]bool) {
	n := f.get("stages")
	switch {
	case n == nil && f.typos["stages"]:
		return
	case n == nil:
		p.addf(f.line("stages"), "stages is required: list at least one stage, e.g. stages: [{name: train, command: [python3, train.py]}]")
		return
	case n.Kind != yaml.SequenceNode:
		p.addf(f.line("stages"), "stages must be a list, each stage starting with - name: ...")
		return
	case len(n.Content) == 0:
		p.addf(f.line("stages"), "stages is empty; add at least one stage, e.g. - {name: train, command: [python3, train.py]}")
		return
	}
	refs := &refChecker{params: params, paramList: listNames(sortedKeys(params)), data: t.Runtime.Data != "", tmpl: t}
	var needs [][]needRef
	first := map[string]int{} // stage name -> line of its first definition
	for i, raw := range n.Content {
		st, nr := p.stage(i, raw, refs)
		if st.Name != "" {
			if line, dup := first[st.Name]; dup {
				p.addf(st.Line, "stage name %q is used twice (first at line %d); stage names must be unique", st.Name, line)
			} else {
				first[st.Name] = st.Line
			}
		}
		t.Stages = append(t.Stages, st)
		needs = append(needs, nr)
	}
	p.graph(t.Stages, needs)
}

func (p *parser) stage(i int, raw *yaml.Node, refs *refChecker) (Stage, []needRef) {
	st := Stage{Line: raw.Line}
	label := fmt.Sprintf("stage %d", i+1)
	n := deref(raw)
	if n == nil || n.Kind != yaml.MappingNode {
		p.addf(raw.Line, "%s must be a mapping such as {name: train, command: [python3, train.py]}, not %s", label, kindName(n))
		return st, nil
	}
	if name := explicitName(n); name != "" {
		label = fmt.Sprintf("stage %q", name)
	}
	pre := label + ": "
	f := p.fields(n, pre, stageFields, "field")

	st.Name = p.str(f, "name", pre)
	switch {
	case f.has("name") && !f.scalar("name"), !f.has("name") && f.typos["name"]:
	case !f.has("name"):
		p.addf(st.Line, "%sname is required, e.g. name: train", pre)
	case st.Name == "":
		p.addf(f.line("name"), "%sname is empty; name it, e.g. name: train", pre)
	case len(st.Name) > maxNameLen:
		p.addf(f.line("name"), "%s", printable.TooLong("stage name", st.Name, maxNameLen))
	case !stageNameRe.MatchString(st.Name):
		p.addf(f.line("name"), "stage name %q must be lowercase letters, digits, - and _, starting with a letter, at most %d characters (it becomes a directory name)", st.Name, maxNameLen)
	}

	p.command(&st, f, pre, refs)
	nr := p.needs(&st, f, pre)
	if name, ok := resourceRef(f.get("gpus")); ok {
		st.GPUsParam = name
		st.GPUs = p.gpusParam(refs.tmpl, name, f.line("gpus"), pre)
	} else {
		st.GPUs = p.count(f, "gpus", pre, maxGPUs)
	}
	st.Retries = p.count(f, "retries", pre, maxRetries)
	if name, ok := resourceRef(f.get("gpu_memory")); ok {
		st.GPUMemoryParam = name
		st.GPUMemoryMiB = p.gpuMemoryParam(refs.tmpl, name, f.line("gpu_memory"), pre)
	} else if n := f.get("gpu_memory"); n != nil {
		if mib, err := ParseGPUMemory(scalarValue(n)); err != nil || n.Kind != yaml.ScalarNode {
			if n.Kind != yaml.ScalarNode {
				err = fmt.Errorf("must be a size such as 2GiB, not %s", kindName(n))
			}
			p.addf(f.line("gpu_memory"), "%sgpu_memory %v", pre, err)
		} else {
			st.GPUMemoryMiB = mib
		}
	}
	if n := f.get("timeout"); n != nil {
		if d, err := parseTimeout(scalarValue(n)); err != nil || n.Kind != yaml.ScalarNode {
			if n.Kind != yaml.ScalarNode {
				err = fmt.Errorf("must be a duration such as 30m, not %s", kindName(n))
			}
			p.addf(f.line("timeout"), "%stimeout %v", pre, err)
		} else {
			st.Timeout = d
		}
	}
	p.stageResources(&st, f, pre)
	p.env(&st, f, pre, refs)
	p.metricRules(&st, f, pre)
	st.TensorBoard = p.globs(f, "tensorboard", pre)
	st.CSV = p.globs(f, "csv", pre)
	return st, nr
}

// metricRules reads a stage's `metrics:` section: a preset's name, a rule
// ({preset: ...} or {pattern: ..., step: ..., stream: ...}), or a list of
// either.
func (p *parser) metricRules(st *Stage, f *fieldSet, pre string) {
	n := f.get("metrics")
	if n == nil {
		return
	}
	items := []*yaml.Node{f.vals["metrics"]}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	for _, raw := range items {
		it := deref(raw)
		var r textrule.Rule
		switch {
		case it == nil || isNull(it):
			p.addf(raw.Line, "%smetrics: an entry is empty; name a preset (%s) or give a pattern", pre, strings.Join(textrule.Presets, ", "))
			continue
		case it.Kind == yaml.ScalarNode:
			r.Preset = it.Value
		case it.Kind == yaml.MappingNode:
			rf := p.fields(it, pre+"metrics: ", ruleFields, "field")
			r.Preset = p.str(rf, "preset", pre+"metrics: ")
			r.Pattern = p.str(rf, "pattern", pre+"metrics: ")
			r.Step = p.str(rf, "step", pre+"metrics: ")
			r.Stream = p.str(rf, "stream", pre+"metrics: ")
		default:
			p.addf(raw.Line, "%smetrics entries are a preset's name or a mapping such as {pattern: 'loss (?P<loss>[0-9.]+)'}, not %s", pre, kindName(it))
			continue
		}
		if err := r.Validate(); err != nil {
			p.addf(raw.Line, "%smetrics: %v", pre, err)
			continue
		}
		st.Metrics = append(st.Metrics, r)
	}
}

// globs reads a field holding one path pattern or a list of them.
func (p *parser) globs(f *fieldSet, name, pre string) []string {
	n := f.get(name)
	if n == nil {
		return nil
	}
	items := []*yaml.Node{f.vals[name]}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	var out []string
	for _, raw := range items {
		it := deref(raw)
		if it == nil || it.Kind != yaml.ScalarNode || isNull(it) {
			p.addf(raw.Line, "%s%s must be a path pattern relative to the run directory, such as \"outputs/**\", or a list of them", pre, name)
			continue
		}
		if _, err := pathglob.Parse(it.Value); err != nil {
			p.addf(raw.Line, "%s%s: %v", pre, name, err)
			continue
		}
		out = append(out, it.Value)
	}
	return out
}

func (p *parser) command(st *Stage, f *fieldSet, pre string, refs *refChecker) {
	n := f.get("command")
	line := f.line("command")
	switch {
	case n == nil && f.typos["command"]:
		return
	case n == nil:
		p.addf(line, "%scommand is required: the program and its arguments as a list, e.g. command: [python3, train.py]", pre)
		return
	case n.Kind == yaml.ScalarNode:
		p.addf(line, "%scommand must be a list of arguments such as [python3, train.py], not one string: it is not run through a shell", pre)
		return
	case n.Kind != yaml.SequenceNode:
		p.addf(line, "%scommand must be a list of arguments such as [python3, train.py], not %s", pre, kindName(n))
		return
	case len(n.Content) == 0:
		p.addf(line, "%scommand is empty; give the program and its arguments, e.g. [python3, train.py]", pre)
		return
	}
	for j, raw := range n.Content {
		a := deref(raw)
		if a == nil || a.Kind != yaml.ScalarNode || isNull(a) {
			p.addf(raw.Line, "%scommand argument %d must be a single value, not %s (quote it if it is text)", pre, j+1, kindName(a))
			continue
		}
		if j == 0 && a.Value == "" {
			p.addf(raw.Line, "%sthe program (the first command argument) is empty", pre)
		}
		if why := badText(a.Value); why != "" {
			p.addf(raw.Line, "%scommand argument %d %s", pre, j+1, why)
		}
		st.Command = append(st.Command, a.Value)
		refs.check(p, a.Value, raw.Line, fmt.Sprintf("%scommand argument %d", pre, j+1))
	}
}

func (p *parser) needs(st *Stage, f *fieldSet, pre string) []needRef {
	n := f.get("needs")
	if n == nil {
		return nil
	}
	var items []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{f.vals["needs"]}
	case yaml.SequenceNode:
		items = n.Content
	default:
		p.addf(f.line("needs"), "%sneeds must be a list of stage names, e.g. needs: [preprocess]", pre)
		return nil
	}
	var refs []needRef
	for _, raw := range items {
		d := deref(raw)
		if d == nil || d.Kind != yaml.ScalarNode || isNull(d) || d.Value == "" {
			p.addf(raw.Line, "%sneeds must list stage names, e.g. needs: [preprocess]", pre)
			continue
		}
		if slices.Contains(st.Needs, d.Value) {
			p.addf(raw.Line, "%sneeds %q twice; list it once", pre, d.Value)
			continue
		}
		st.Needs = append(st.Needs, d.Value)
		refs = append(refs, needRef{d.Value, raw.Line})
	}
	return refs
}

// count parses a non-negative whole-number field such as gpus or retries.
func (p *parser) count(f *fieldSet, name, pre string, max int64) int {
	n := f.get(name)
	if n == nil {
		return 0
	}
	line := f.line(name)
	if n.Kind != yaml.ScalarNode {
		p.addf(line, "%s%s must be a whole number, not %s", pre, name, kindName(n))
		return 0
	}
	i, err := parseInt(n.Value)
	switch {
	case err != nil:
		p.addf(line, "%s%s must be a whole number (got %q)", pre, name, n.Value)
	case i < 0:
		p.addf(line, "%s%s must be 0 or more (got %d)", pre, name, i)
	case i > max:
		p.addf(line, "%s%s must be at most %d (got %d)", pre, name, max, i)
	default:
		return int(i)
	}
	return 0
}

func (p *parser) env(st *Stage, f *fieldSet, pre string, refs *refChecker) {
	n := f.get("env")
	if n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.addf(f.line("env"), "%senv must be a mapping from variable names to values, e.g. env: {OMP_NUM_THREADS: \"2\"}", pre)
		return
	}
	ef := p.fields(n, pre+"env: ", nil, "variable")
	st.Env = make(map[string]string, len(ef.order))
	for _, name := range ef.order {
		keyLine := ef.keys[name].Line
		switch {
		case !envNameRe.MatchString(name):
			p.addf(keyLine, "%senv name %q must be letters, digits and _, not starting with a digit", pre, name)
		case strings.HasPrefix(name, "NIUMA_") || name == "CUDA_VISIBLE_DEVICES":
			p.addf(keyLine, "%senv %s is set by Niuma itself; use another name", pre, name)
		case name == "NVIDIA_VISIBLE_DEVICES":
			// Under an NVIDIA container runtime it would hand a container
			// GPUs the shepherd did not give it.
			p.addf(keyLine, "%senv %s would give a container GPUs the shepherd did not assign; ask for them with gpus: N", pre, name)
		}
		v := ef.get(name)
		switch {
		case v == nil:
			p.addf(ef.line(name), "%senv %s has no value; write %s: \"\" for an empty one", pre, name, name)
		case v.Kind != yaml.ScalarNode:
			p.addf(ef.line(name), "%senv %s must be a single value, not %s", pre, name, kindName(v))
		case badText(v.Value) != "":
			p.addf(ef.line(name), "%senv %s %s", pre, name, badText(v.Value))
		default:
			st.Env[name] = v.Value
			refs.check(p, v.Value, ef.line(name), fmt.Sprintf("%senv %s", pre, name))
		}
	}
}

// resourceRef reads a stage's gpus or gpu_memory written as a parameter,
// "${params.NAME}", so that each run may ask for its own.
func resourceRef(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	v := strings.TrimSpace(n.Value)
	name, ok := strings.CutPrefix(v, "${params.")
	if !ok || !strings.HasSuffix(name, "}") {
		return "", false
	}
	return strings.TrimSuffix(name, "}"), true
}

// gpusParam checks the parameter a stage's gpus names (a whole number,
// never negative) and returns its default.
func (p *parser) gpusParam(t *Template, name string, line int, pre string) int {
	prm, ok := t.Param(name)
	switch {
	case !ok:
		p.addf(line, "%sgpus refers to unknown parameter ${params.%s}; declare it under params, e.g. %s: {type: int, default: 0, min: 0}", pre, name, name)
	case prm.Type != KindInt:
		p.addf(line, "%sgpus refers to parameter %s, which is a %s: it must be an int", pre, name, prm.Type)
	case prm.Min == nil || *prm.Min < 0:
		p.addf(line, "%sgpus refers to parameter %s, which needs min: 0 (or more) so that no run asks for fewer than no GPUs", pre, name)
	default:
		if d, ok := asInt64(prm.Default); ok {
			return int(min(d, maxGPUs))
		}
	}
	return 0
}

// gpuMemoryParam checks the parameter a stage's gpu_memory names (a size
// such as 4GiB, or an int of MiB) and returns its default in MiB.
func (p *parser) gpuMemoryParam(t *Template, name string, line int, pre string) int64 {
	prm, ok := t.Param(name)
	if !ok {
		p.addf(line, "%sgpu_memory refers to unknown parameter ${params.%s}; declare it under params, e.g. %s: {type: string, default: 4GiB}", pre, name, name)
		return 0
	}
	if prm.Type != KindString && prm.Type != KindInt {
		p.addf(line, "%sgpu_memory refers to parameter %s, which is a %s: it must be a string (a size such as 4GiB) or an int (MiB)", pre, name, prm.Type)
		return 0
	}
	mib, err := memoryValue(prm.Default)
	if err != nil {
		p.addf(prm.Line, "parameter %s: default %s", name, err)
	}
	return mib
}

// refChecker checks the ${...} references of command arguments and env
// values against the declared parameters and EngineVars.
type refChecker struct {
	params    map[string]bool
	paramList string
	data      bool      // the runtime names a data directory
	tmpl      *Template // its parameters, parsed before the stages
}

func (r *refChecker) check(p *parser, s string, line int, where string) {
	names, err := References(s)
	if err != nil {
		p.addf(line, "%s: %v", where, err)
		return
	}
	for _, name := range names {
		if param, ok := strings.CutPrefix(name, "params."); ok {
			if !r.params[param] {
				known := "this template declares no params"
				if r.paramList != "" {
					known = "parameters are: " + r.paramList
				}
				p.addf(line, "%s refers to unknown parameter ${%s} (%s)", where, name, known)
			}
			continue
		}
		if name == "data" && !r.data {
			p.addf(line, "%s refers to ${data}, but the template names no data directory; add runtime: {data: PATH}", where)
			continue
		}
		if !slices.Contains(EngineVars, name) {
			p.addf(line, "%s refers to unknown variable ${%s}; use ${params.NAME} for a parameter, or one of ${%s} (write $$ for a literal $)", where, name, strings.Join(EngineVars, "}, ${"))
		}
	}
}
