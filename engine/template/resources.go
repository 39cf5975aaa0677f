package template

import (
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxCPUs bounds a stage's cpus: far above any workstation, far from
// overflow in thousandths.
const maxCPUs = 4096

// ParseCPUs reads a number of CPUs such as "2" or "0.5" and returns it in
// thousandths of a CPU (what the shepherd counts in). "" is 0 (the
// default).
func ParseCPUs(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	c, err := parseFloat(s)
	if err != nil || c <= 0 || c > maxCPUs {
		return 0, fmt.Errorf("must be a positive number of CPUs such as 2 or 0.5, at most %d (got %q)", maxCPUs, s)
	}
	return int64(math.Ceil(c * 1000)), nil
}

// ParseEstimate reads how long a stage is expected to run ("40m", "2h",
// "1h30m"). "" is 0 (no estimate: the predictor's, else unknown).
func ParseEstimate(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	d, err := parseTimeout(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be longer than 0; write e.g. 40m or 2h, or leave estimate out", s)
	}
	return d, nil
}

// stageResources reads what a stage asks of the host besides GPUs (cpus,
// memory) and how long it is expected to run (estimate).
func (p *parser) stageResources(st *Stage, f *fieldSet, pre string) {
	scalar := func(name, example string) (string, bool) {
		n := f.get(name)
		if n == nil {
			return "", false
		}
		if n.Kind != yaml.ScalarNode {
			p.addf(f.line(name), "%s%s must be %s, not %s", pre, name, example, kindName(n))
			return "", false
		}
		return n.Value, true
	}
	if s, ok := scalar("cpus", "a number of CPUs such as 2"); ok {
		if m, err := ParseCPUs(s); err != nil {
			p.addf(f.line("cpus"), "%scpus %v", pre, err)
		} else {
			st.CPUMilli = m
		}
	}
	if s, ok := scalar("memory", "a size such as 8GiB"); ok {
		if m, err := ParseGPUMemory(s); err != nil {
			p.addf(f.line("memory"), "%smemory %v", pre, err)
		} else {
			st.MemMiB = m
		}
	}
	if s, ok := scalar("estimate", "a duration such as 40m"); ok {
		if d, err := ParseEstimate(s); err != nil {
			p.addf(f.line("estimate"), "%sestimate %v", pre, err)
		} else {
			st.Estimate = d
		}
	}
}

// runFlags reads the template's spot and share: what its runs allow the
// shepherd by default (a launch may set them too).
func (p *parser) runFlags(t *Template, f *fieldSet) {
	for name, to := range map[string]*bool{"spot": &t.Spot, "share": &t.Share} {
		switch v := p.str(f, name, ""); v {
		case "", "false":
		case "true":
			*to = true
		default:
			p.addf(f.line(name), "%s must be true or false (got %q)", name, v)
		}
	}
}
