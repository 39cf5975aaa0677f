// Command gpucheck compares, on a machine with an NVIDIA driver, what
// `niuma gpus --json` reports with nvidia-smi, field by field, and times
// one sample of eight fields through NVML against one nvidia-smi call.
// scripts/gpu-check.sh builds and runs it; it prints a table and a line per
// mismatch, and exits 1 when a field disagrees beyond its tolerance.
//
//	go run ./scripts/gpucheck -niuma bin/niuma [-runs 20]
package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// smiFields are the nvidia-smi columns compared, in query order.
var smiFields = []string{"index", "uuid", "name", "pci.bus_id", "memory.total", "memory.used",
	"utilization.gpu", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "clocks.mem", "fan.speed"}

// gpu is the part of `niuma gpus --json` compared (gpumon.GPU's JSON).
type gpu struct {
	Index       int      `json:"index"`
	UUID        string   `json:"uuid"`
	Name        string   `json:"name"`
	PCIBusID    string   `json:"pci_bus_id"`
	MemTotalMiB int64    `json:"mem_total_mib"`
	MemUsedMiB  int64    `json:"mem_used_mib"`
	Util        *float64 `json:"util_percent"`
	TempC       *float64 `json:"temp_c"`
	PowerW      *float64 `json:"power_w"`
	PowerLimitW *float64 `json:"power_limit_w"`
	SMClock     *int64   `json:"sm_clock_mhz"`
	MemClock    *int64   `json:"mem_clock_mhz"`
	Fan         *float64 `json:"fan_percent"`
}

func main() {
	niuma := flag.String("niuma", "bin/niuma", "the niuma binary to check")
	runs := flag.Int("runs", 20, "timed samples of each kind (the median is reported)")
	flag.Parse()
	snap, err := exec.Command(*niuma, "gpus", "--json").Output()
	if err != nil {
		fail("niuma gpus --json: %v", err)
	}
	var got struct {
		Source string `json:"source"`
		Reason string `json:"reason"`
		GPUs   []gpu  `json:"gpus"`
	}
	if err := json.Unmarshal(snap, &got); err != nil {
		fail("niuma gpus --json is not JSON: %v", err)
	}
	if got.Source != "nvml" {
		fail("niuma sees no real GPU (source %q: %s) although nvidia-smi does", got.Source, got.Reason)
	}
	out, err := exec.Command("nvidia-smi", "--query-gpu="+strings.Join(smiFields, ","), "--format=csv,noheader,nounits").Output()
	if err != nil {
		fail("nvidia-smi --query-gpu: %v", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		fail("nvidia-smi's CSV: %v", err)
	}
	if len(rows) != len(got.GPUs) {
		fail("nvidia-smi lists %d GPUs, niuma %d", len(rows), len(got.GPUs))
	}
	bad := 0
	fmt.Printf("%-4s %-16s %-42s %-42s %s\n", "GPU", "field", "niuma", "nvidia-smi", "")
	for i, row := range rows {
		g := got.GPUs[i]
		smi := map[string]string{}
		for j, f := range smiFields {
			smi[f] = strings.TrimSpace(row[j])
		}
		for _, c := range compare(g, smi) {
			mark := "ok"
			if !c.ok {
				mark, bad = "MISMATCH", bad+1
			}
			fmt.Printf("%-4d %-16s %-42s %-42s %s\n", g.Index, c.field, c.niuma, c.smi, mark)
		}
	}
	timeSamples(*runs)
	if bad > 0 {
		fmt.Printf("gpucheck: %d field(s) disagree beyond their tolerance\n", bad)
		os.Exit(1)
	}
	fmt.Printf("gpucheck: %d GPU(s), every field agrees with nvidia-smi\n", len(rows))
}

type check struct {
	field, niuma, smi string
	ok                bool
}

// compare lines up one GPU's fields. Identity and totals must be equal;
// live values (read a moment apart) within a tolerance. A field one side
// does not report ("[N/A]", or absent in niuma's JSON) must be absent on
// both.
func compare(g gpu, smi map[string]string) []check {
	var out []check
	eq := func(field, a, b string) {
		out = append(out, check{field, a, b, a == b})
	}
	eq("index", strconv.Itoa(g.Index), smi["index"])
	eq("uuid", g.UUID, smi["uuid"])
	eq("name", g.Name, smi["name"])
	eq("pci.bus_id", normPCI(g.PCIBusID), normPCI(smi["pci.bus_id"]))
	eq("memory.total", strconv.FormatInt(g.MemTotalMiB, 10), smi["memory.total"])
	near := func(field string, v *float64, s string, abs, rel float64) {
		f, err := strconv.ParseFloat(s, 64)
		absent := err != nil // [N/A], [Not Supported]
		switch {
		case v == nil || absent:
			out = append(out, check{field, show(v), s, v == nil && absent})
		default:
			out = append(out, check{field, show(v), s, math.Abs(*v-f) <= max(abs, rel*math.Abs(f))})
		}
	}
	i2f := func(p *int64) *float64 {
		if p == nil {
			return nil
		}
		f := float64(*p)
		return &f
	}
	used := float64(g.MemUsedMiB)
	near("memory.used", &used, smi["memory.used"], 256, 0.05)
	near("utilization.gpu", g.Util, smi["utilization.gpu"], 20, 0)
	near("temperature.gpu", g.TempC, smi["temperature.gpu"], 3, 0)
	near("power.draw", g.PowerW, smi["power.draw"], 25, 0.15)
	near("power.limit", g.PowerLimitW, smi["power.limit"], 1, 0)
	near("clocks.sm", i2f(g.SMClock), smi["clocks.sm"], 100, 0.1)
	near("clocks.mem", i2f(g.MemClock), smi["clocks.mem"], 100, 0.1)
	near("fan.speed", g.Fan, smi["fan.speed"], 5, 0)
	return out
}

func show(v *float64) string {
	if v == nil {
		return "(not reported)"
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

// normPCI writes a PCI bus id as NVML does, with a 8-digit domain in upper
// case: nvidia-smi and NVML agree on that, older drivers print 4 digits.
func normPCI(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) < 8 {
		s = strings.Repeat("0", 8-len(dom)) + dom + ":" + rest
	}
	return s
}

// timeSamples times one sample of eight fields of GPU 0 through an open
// NVML session (what Niuma's sampler pays each second) against one
// nvidia-smi call for the same eight fields (what a tool that shells out
// pays: a process that loads and initialises NVML from scratch).
func timeSamples(runs int) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		fail("nvmlInit: %v", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	dev, ret := nvml.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		fail("nvmlDeviceGetHandleByIndex(0): %v", nvml.ErrorString(ret))
	}
	sample := func() {
		_, _ = dev.GetMemoryInfo()
		_, _ = dev.GetUtilizationRates()
		_, _ = dev.GetTemperature(nvml.TEMPERATURE_GPU)
		_, _ = dev.GetPowerUsage()
		_, _ = dev.GetClockInfo(nvml.CLOCK_SM)
		_, _ = dev.GetClockInfo(nvml.CLOCK_MEM)
		_, _ = dev.GetFanSpeed()
		_, _ = dev.GetPerformanceState()
	}
	sample() // warm
	var viaNVML, viaSMI []time.Duration
	for range runs {
		t := time.Now()
		sample()
		viaNVML = append(viaNVML, time.Since(t))
		t = time.Now()
		cmd := exec.Command("nvidia-smi", "-i", "0", "--format=csv,noheader,nounits",
			"--query-gpu=memory.used,utilization.gpu,temperature.gpu,power.draw,clocks.sm,clocks.mem,fan.speed,pstate")
		if err := cmd.Run(); err != nil {
			fail("nvidia-smi: %v", err)
		}
		viaSMI = append(viaSMI, time.Since(t))
	}
	n, s := median(viaNVML), median(viaSMI)
	fmt.Printf("one 8-field sample of GPU 0, median of %d: NVML (open session) %s, nvidia-smi %s (%.0f× slower)\n",
		runs, n, s, float64(s)/float64(max(n, 1)))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gpucheck: "+format+"\n", args...)
	os.Exit(1)
}
