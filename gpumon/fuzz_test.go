package gpumon

import (
	"strings"
	"testing"
)

// FuzzParseSimSpec: whatever NIUMA_SIMULATE_GPUS holds, the parser returns
// GPUs or an error that names the spec, never panics, and every MIG layout
// it accepts fits its GPU.
func FuzzParseSimSpec(f *testing.F) {
	for _, s := range []string{"4xH100-80GB", "2xA100-80GB,1xRTX4090", "1xA100-80GB:mig=3g.40gb+2x2g.20gb",
		"A100-40GB:mig=7x1g.5gb", "1xH200:mig=", "0xT4", ":", "x:mig=+", "3xA100-80GB:mig=9x1g.10gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		gpus, err := ParseSimSpec(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "simulated GPUs") {
				t.Fatalf("error does not name the spec: %v", err)
			}
			return
		}
		if len(gpus) == 0 {
			t.Fatal("no GPUs and no error")
		}
		for _, g := range gpus {
			slices, mem := 0, int64(0)
			for _, p := range g.MIG {
				slices += p.Slices
				mem += profileMiB(g.Model, p)
			}
			if slices > 7 || mem > g.MemMiB {
				t.Fatalf("%q: layout does not fit %s: %d slices, %d MiB", spec, g.Key, slices, mem)
			}
		}
	})
}
