package gpumon

import (
	"fmt"
	"strconv"
	"strings"
)

// MIGDevice is one MIG slice of a GPU in MIG mode: a device of its own, with
// its own memory and processes. A GPU with MIG on is placeable only as its
// slices.
type MIGDevice struct {
	Index       int       `json:"index"` // within its GPU
	UUID        string    `json:"uuid"`  // "MIG-…": what CUDA_VISIBLE_DEVICES and Docker take
	Profile     string    `json:"profile"`
	MemTotalMiB int64     `json:"mem_total_mib"`
	MemUsedMiB  int64     `json:"mem_used_mib"`
	MemFreeMiB  int64     `json:"mem_free_mib"`
	Processes   []Process `json:"processes"`
	// Errors lists the calls that failed for this slice, naming each.
	Errors []string `json:"errors,omitempty"`
}

// Device is one unit a stage can be placed on: a whole GPU, or a MIG slice
// of a GPU in MIG mode.
type Device struct {
	UUID   string
	Index  int    // the physical GPU's index
	Label  string // how people name it: "GPU 0", "GPU 0 MIG 1 (3g.40gb)"
	Name   string // the model
	Parent string // the physical GPU's UUID, for a MIG slice
	// Group names the NVLink group of a whole GPU ("" when none is known).
	Group                               string
	MemTotalMiB, MemUsedMiB, MemFreeMiB int64
	UtilPercent, TempC                  *float64 // of the physical GPU; nil when not reported
	Healthy                             bool     // the physical GPU's health
	Processes                           []Process
}

// Devices lists the snapshot's placeable units: every GPU not in MIG mode
// as itself, and every GPU in MIG mode as its slices only — never whole. A
// GPU in MIG mode without slices offers nothing.
func (s Snapshot) Devices() []Device {
	var out []Device
	for _, g := range s.GPUs {
		if g.MIGEnabled == nil || !*g.MIGEnabled {
			out = append(out, Device{UUID: g.UUID, Index: g.Index, Label: fmt.Sprintf("GPU %d", g.Index), Name: g.Name,
				Group: g.Group, MemTotalMiB: g.MemTotalMiB, MemUsedMiB: g.MemUsedMiB, MemFreeMiB: g.MemFreeMiB,
				UtilPercent: g.UtilPercent, TempC: g.TempC, Healthy: g.Healthy, Processes: g.Processes})
			continue
		}
		for _, m := range g.MIG {
			out = append(out, Device{UUID: m.UUID, Index: g.Index, Label: fmt.Sprintf("GPU %d MIG %d (%s)", g.Index, m.Index, m.Profile),
				Name: g.Name, Parent: g.UUID, MemTotalMiB: m.MemTotalMiB, MemUsedMiB: m.MemUsedMiB, MemFreeMiB: m.MemFreeMiB,
				TempC: g.TempC, Healthy: g.Healthy && g.UUID != "" && m.UUID != "", Processes: m.Processes})
		}
	}
	return out
}

// MIGProfile is a MIG slice shape a model offers: compute slices of seven
// and memory.
type MIGProfile struct {
	Name   string // "3g.40gb"
	Slices int    // compute slices, of 7
	GB     int    // nominal memory
}

// migProfiles are the MIG profiles of the models that have MIG, by model
// key, with the model's nominal memory in GB.
var migProfiles = map[string]struct {
	gb       int
	profiles []MIGProfile
}{
	"A100-80GB": {80, []MIGProfile{{"1g.10gb", 1, 10}, {"1g.20gb", 1, 20}, {"2g.20gb", 2, 20}, {"3g.40gb", 3, 40}, {"4g.40gb", 4, 40}, {"7g.80gb", 7, 80}}},
	"A100-40GB": {40, []MIGProfile{{"1g.5gb", 1, 5}, {"1g.10gb", 1, 10}, {"2g.10gb", 2, 10}, {"3g.20gb", 3, 20}, {"4g.20gb", 4, 20}, {"7g.40gb", 7, 40}}},
	"H100-80GB": {80, []MIGProfile{{"1g.10gb", 1, 10}, {"1g.20gb", 1, 20}, {"2g.20gb", 2, 20}, {"3g.40gb", 3, 40}, {"4g.40gb", 4, 40}, {"7g.80gb", 7, 80}}},
	"H200":      {141, []MIGProfile{{"1g.18gb", 1, 18}, {"1g.35gb", 1, 35}, {"2g.35gb", 2, 35}, {"3g.71gb", 3, 71}, {"4g.71gb", 4, 71}, {"7g.141gb", 7, 141}}},
}

// parseMIG reads a model's MIG layout, "3g.40gb+2x2g.20gb": profiles joined
// by "+", each optionally preceded by a count. The slices must fit the GPU:
// at most 7 compute slices and the model's memory.
func parseMIG(m Model, layout string) ([]MIGProfile, error) {
	known, ok := migProfiles[m.Key]
	if !ok {
		return nil, fmt.Errorf("model %s has no MIG: MIG is on %s", m.Key, migModels())
	}
	var out []MIGProfile
	slices, gb := 0, 0
	for _, item := range strings.Split(layout, "+") {
		item = strings.TrimSpace(strings.ToLower(item))
		count, name := 1, item
		if i := strings.Index(item, "x"); i > 0 {
			if n, err := strconv.Atoi(item[:i]); err == nil {
				count, name = n, item[i+1:]
			}
		}
		var p *MIGProfile
		for k := range known.profiles {
			if known.profiles[k].Name == name {
				p = &known.profiles[k]
			}
		}
		if p == nil {
			names := make([]string, len(known.profiles))
			for k, q := range known.profiles {
				names[k] = q.Name
			}
			return nil, fmt.Errorf("MIG profile %q: %s offers %s", name, m.Key, strings.Join(names, ", "))
		}
		if count < 1 || count > 7 {
			return nil, fmt.Errorf("MIG profile %q: count %d must be 1 to 7", name, count)
		}
		for range count {
			out = append(out, *p)
			slices += p.Slices
			gb += p.GB
		}
	}
	if slices > 7 || gb > known.gb {
		return nil, fmt.Errorf("MIG layout %q does not fit one %s: %d of 7 compute slices and %d of %d GB", layout, m.Key, slices, gb, known.gb)
	}
	return out, nil
}

func migModels() string {
	var keys []string
	for _, m := range Models {
		if _, ok := migProfiles[m.Key]; ok {
			keys = append(keys, m.Key)
		}
	}
	return strings.Join(keys, ", ")
}

// profileMiB is a profile's memory on model m: its share of the model's
// memory, so that a full layout adds up to the GPU.
func profileMiB(m Model, p MIGProfile) int64 {
	return m.MemMiB * int64(p.GB) / int64(migProfiles[m.Key].gb)
}
