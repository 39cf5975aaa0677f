package app

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"niuma/engine"
	"niuma/engine/template"
	"niuma/shepherd"
)

// ShepherdSettings choose how the engine places stages on this machine:
//
//	shepherd:
//	  policy: herd     # herd (default), bestfit, las or fifo
//	  cpus: 6          # CPUs local and docker stages may hold in all (default: this machine's)
//	  memory: 48GiB    # host memory they may hold in all (default: this machine's)
type ShepherdSettings struct {
	Policy   string
	CPUMilli int64
	MemMiB   int64
}

var shepherdSettingFields = []string{"policy", "cpus", "memory"}

// parseShepherdSettings reads the shepherd: section; bad names the line.
func parseShepherdSettings(v *yaml.Node, bad func(*yaml.Node, string, ...any) error) (ShepherdSettings, error) {
	var s ShepherdSettings
	if v.Kind != yaml.MappingNode {
		return s, bad(v, "shepherd must be a mapping, e.g. shepherd: {policy: herd}")
	}
	for j := 0; j+1 < len(v.Content); j += 2 {
		f, val := v.Content[j], v.Content[j+1]
		if val.Kind != yaml.ScalarNode {
			return s, bad(val, "shepherd: %s must be a plain value, not a list or mapping", f.Value)
		}
		x := strings.TrimSpace(val.Value)
		switch f.Value {
		case "policy":
			if _, err := shepherd.ByName(x); err != nil || x == "" {
				return s, bad(val, "shepherd: policy %q: use one of %s", x, strings.Join(shepherd.Policies, ", "))
			}
			s.Policy = x
		case "cpus":
			m, err := template.ParseCPUs(x)
			if err != nil || m == 0 {
				return s, bad(val, "shepherd: cpus must be a positive number of CPUs such as 6 (got %q)", x)
			}
			s.CPUMilli = m
		case "memory":
			m, err := template.ParseGPUMemory(x)
			if err != nil || m == 0 {
				return s, bad(val, "shepherd: memory must be a size such as 48GiB (got %q)", x)
			}
			s.MemMiB = m
		default:
			return s, bad(f, "unknown shepherd setting %q (shepherd settings are: %s)", f.Value, strings.Join(shepherdSettingFields, ", "))
		}
	}
	return s, nil
}

// placement is the policy and the host the engine places by: the settings
// where given, else herd and this machine's CPUs and memory.
func (s ShepherdSettings) placement() (shepherd.Policy, shepherd.Host, error) {
	p, err := shepherd.ByName(s.Policy)
	if err != nil {
		return p, shepherd.Host{}, fmt.Errorf("settings.yaml: shepherd: %w", err)
	}
	h := engine.ThisMachine()
	if s.CPUMilli > 0 {
		h.CPUMilli = s.CPUMilli
	}
	if s.MemMiB > 0 {
		h.MemMiB = s.MemMiB
	}
	return p, h, nil
}
