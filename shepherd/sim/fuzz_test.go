package sim

import (
	"strings"
	"testing"
)

// FuzzLoaders: a trace file of any content is read or refused with an
// error; what is read is sane (sorted, positive durations, GPUs in range).
func FuzzLoaders(f *testing.F) {
	f.Add("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,2,5902,6214e9\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\nopenb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n")
	f.Add("sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\n")
	f.Add("timestamp,duration,num_gpus\n\"x\n")
	f.Fuzz(func(t *testing.T, text string) {
		if jobs, err := LoadPhilly(strings.NewReader(text), 8, 1); err == nil {
			for i, j := range jobs {
				if j.Duration <= 0 || j.GPUs < 1 || j.GPUs > 8 || i > 0 && j.Submit < jobs[i-1].Submit {
					t.Fatalf("bad job %+v", j)
				}
			}
		}
		if pods, err := LoadPAI(strings.NewReader(text), 8); err == nil {
			for _, p := range pods {
				if p.GPUs < 0 || p.GPUs > 8 || p.MemMilli < 0 || p.MemMilli > 1000 || p.Duration < 1 {
					t.Fatalf("bad pod %+v", p)
				}
			}
		}
		if c, err := LoadPAINodes(strings.NewReader(text), 80<<10); err == nil {
			for _, g := range c.GPUs {
				if g.TotalMiB != 80<<10 || g.Host == "" {
					t.Fatalf("bad GPU %+v", g)
				}
			}
		}
	})
}

// FuzzParseEstimates: any --estimates value parses or is refused in words.
func FuzzParseEstimates(f *testing.F) {
	for _, s := range []string{"none", "predicted", "noisy:0.5", "noisy", "noisy:NaN", "noisy:-1", "exact"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEstimates(s)
		if err != nil {
			if !strings.Contains(err.Error(), "estimates") {
				t.Fatalf("error does not say what: %v", err)
			}
			return
		}
		again, err := ParseEstimates(e.String())
		if err != nil || again != e {
			t.Fatalf("%q → %v does not read back: %v %v", s, e, again, err)
		}
	})
}
