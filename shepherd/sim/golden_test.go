package sim

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"niuma/shepherd"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/pass-golden.txt from this code's decisions")

// goldenStates are the states TestPassDecisionsUnchanged decides over: every
// 40th pass of a replay of the committed Philly day at load 1.0 under herd
// (its queue, running runs and free memory as the replay had them), the
// benchmark's 1,000 queued runs on 64 GPUs, and that state again on four
// hosts with CPUs and memory, MIG slices with labels, unhealthy and hot
// GPUs and CPU-only stages.
func goldenStates(t *testing.T) map[string]shepherd.State {
	f, err := os.Open("testdata/philly-2017-10-20.csv")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := LoadPhilly(f, 8, 1)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	jobs = Rescale(jobs, 1.0, 8)
	cfg := DefaultConfig()
	cfg.Policy, _ = shepherd.ByName("herd")
	out := map[string]shepherd.State{}
	n := 0
	_, _ = replay(jobs, cfg, hooks{pass: func(st shepherd.State) {
		n++
		if n%40 != 0 {
			return
		}
		cp := shepherd.State{Now: st.Now, Inventory: shepherd.Inventory{GPUs: slices.Clone(st.Inventory.GPUs)},
			Queue: slices.Clone(st.Queue)}
		for _, r := range st.Running {
			r.GPUs = slices.Clone(r.GPUs)
			cp.Running = append(cp.Running, r)
		}
		out[fmt.Sprintf("philly-day/pass%05d", n)] = cp
	}})
	out["queue-1000x64"] = QueueState(1000, 64)

	st := QueueState(1000, 64)
	for h := range 4 {
		st.Inventory.Hosts = append(st.Inventory.Hosts, shepherd.Host{Name: fmt.Sprintf("h%d", h), CPUMilli: int64(8+8*h) * 1000, MemMiB: int64(64+64*h) << 10})
	}
	for i := range st.Inventory.GPUs {
		g := &st.Inventory.GPUs[i]
		g.Host = fmt.Sprintf("h%d", i/16)
		switch i % 13 {
		case 3:
			g.Healthy = false
		case 7:
			g.TempC = 85 + float64(i%10)
		}
	}
	// GPU 63 split into two labelled slices.
	last := st.Inventory.GPUs[63]
	for k := range 2 {
		st.Inventory.GPUs = append(st.Inventory.GPUs, shepherd.GPU{Index: 64 + k, UUID: fmt.Sprintf("MIG-%d", k), TotalMiB: 40 << 10,
			FreeMiB: int64(10+20*k) << 10, Healthy: true, Group: last.Group, Host: last.Host, Parent: last.UUID,
			Label: fmt.Sprintf("GPU 63 MIG %d (3g.40gb)", k+1)})
	}
	for i := range st.Running {
		r := &st.Running[i]
		var g int
		fmt.Sscanf(r.GPUs[0], "G%d", &g)
		r.Host = fmt.Sprintf("h%d", g/16)
		r.CPUMilli, r.MemMiB = int64(1+i%4)*1000, int64(4+i%8)<<10
	}
	for i := range st.Queue {
		q := &st.Queue[i]
		q.CPUMilli, q.MemMiB = int64(1+i%6)*500, int64(2+i%32)<<10
		if i%17 == 0 {
			q.GPUs, q.MemPerGPUMiB = 0, 0
		}
	}
	out["queue-1000x64-hosts-mig"] = st
	return out
}

// writeDecisions writes every field of ds that a caller could read.
func writeDecisions(w io.Writer, ds []shepherd.Decision) {
	for _, d := range ds {
		var gpus []string
		for _, g := range d.GPUs {
			gpus = append(gpus, fmt.Sprintf("%d/%s/%d", g.Index, g.UUID, g.FreeMiB))
		}
		r := d.Reason
		fmt.Fprintf(w, "%s gpus=%s host=%q preempt=%q wait=%q\n", d.ID, strings.Join(gpus, ","), d.Host, d.Preempt, d.Wait)
		fmt.Fprintf(w, "  code=%s text=%q need=%d/%d/%d/%d largest=%d/%d/%q fit=%d refusals=%+v cpu=%d/%d mem=%d/%d reserved=%v from=%s preempting=%q ahead=%d detail=%q\n",
			r.Code, r.Text, r.NeedGPUs, r.NeedMiB, r.NeedCPUMilli, r.NeedMemMiB, r.LargestFreeMiB, r.LargestFreeGPU, r.LargestFreeOn,
			r.Fit, r.Refusals, r.CPUMilliFree, r.CPUMilliTotal, r.MemMiBFree, r.MemMiBTotal, r.Reserved, r.ReservedFrom.UTC().Format(time.RFC3339),
			r.Preempting, r.Ahead, r.Detail)
	}
}

// TestPassDecisionsUnchanged checks that a full pass (wait reasons in
// words) of every policy decides, and words every reason, exactly as the
// code that recorded testdata/pass-golden.txt did (a SHA-256 of every
// decision's fields per state and policy). A change to the shepherd that
// means to change decisions or reasons rewrites it with -update-golden;
// one that only makes a pass faster must not.
func TestPassDecisionsUnchanged(t *testing.T) {
	states := goldenStates(t)
	names := make([]string, 0, len(states))
	for k := range states {
		names = append(names, k)
	}
	slices.Sort(names)
	got := map[string]string{}
	var lines []string
	dump := os.Getenv("NIUMA_GOLDEN_DUMP") // a folder to write each case's decisions to, for diffing
	for _, name := range names {
		for _, pol := range shepherd.Policies {
			p, _ := shepherd.ByName(pol)
			st := states[name]
			st.Terse = false
			h := sha256.New()
			ds := shepherd.Schedule(p, st)
			writeDecisions(h, ds)
			key := name + "/" + pol
			got[key] = hex.EncodeToString(h.Sum(nil))
			lines = append(lines, key+" "+got[key])
			if dump != "" {
				f, err := os.Create(dump + "/" + strings.ReplaceAll(key, "/", "_") + ".txt")
				if err != nil {
					t.Fatal(err)
				}
				writeDecisions(f, ds)
				f.Close()
			}
		}
	}
	const path = "testdata/pass-golden.txt"
	if *updateGolden {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			want[k] = v
		}
	}
	if len(want) != len(got) {
		t.Errorf("%d cases recorded, %d now", len(want), len(got))
	}
	for _, l := range lines {
		k, _, _ := strings.Cut(l, " ")
		if want[k] != got[k] {
			t.Errorf("%s: decisions or reasons differ from the recorded ones", k)
		}
	}
}
