package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Job is one trace entry as the simulator replays it.
type Job struct {
	ID       string
	Submit   float64 // seconds since the trace (or window) start
	Duration float64 // seconds of work, running alone on its GPUs
	GPUs     int
	// MemMilli is the per-GPU memory need in thousandths of a GPU's memory;
	// the replay turns it into MiB for the configured GPUs.
	MemMilli    int
	Priority    int // 0 spot (preemptible), 1 normal, 2 urgent
	Preemptible bool
	Shareable   bool
	// CPUMilli and MemMiB are the host CPUs (thousandths) and memory the
	// job asks for, where the trace records them (PAI); 0 = unknown.
	CPUMilli, MemMiB int64
	// Cluster is the trace's virtual cluster (Philly); User and Class the
	// submitter and job class where a trace records them ("" otherwise).
	Cluster, User, Class string
	// Team is whose share the job counts against when a replay shares the
	// machine among teams (SetTeams); Row its data row in the trace file.
	Team string
	Row  int
	// Noise is a standard normal draw fixed per job by the seed: a noisy
	// estimate regime makes the user's estimate Duration × e^(σ·Noise).
	Noise float64
}

// paiMilli is the per-GPU share (thousandths) of single-GPU pods in
// pai2023_pods.csv with its pod count: the memory mix Derive draws from.
var paiMilli = []struct{ milli, n int }{
	{1000, 3911}, {810, 1078}, {470, 750}, {320, 328}, {650, 253}, {230, 140}, {460, 128},
	{590, 75}, {160, 74}, {550, 72}, {220, 62}, {370, 47}, {110, 24}, {480, 19}, {50, 7}, {330, 7},
}

// Derive fills in what the traces do not record, from a generator seeded
// with seed (PCG, stream 4), one draw sequence per job in order:
//   - memory: multi-GPU jobs need whole GPUs; single-GPU jobs draw their
//     share from PAI 2023's single-GPU mix (48% ask for the whole GPU);
//   - priority: 30% spot (0, preemptible), 50% normal (1), 20% urgent (2);
//   - shareable: every job that asks for less than a whole GPU;
//   - noise: the N(0,1) draw behind a noisy estimate (see Estimates).
func Derive(jobs []Job, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 4))
	total := 0
	for _, m := range paiMilli {
		total += m.n
	}
	for i := range jobs {
		j := &jobs[i]
		u := rng.IntN(total)
		milli := 1000
		for _, m := range paiMilli {
			if u < m.n {
				milli = m.milli
				break
			}
			u -= m.n
		}
		if j.GPUs > 1 {
			milli = 1000
		}
		j.MemMilli = milli
		switch p := rng.Float64(); {
		case p < 0.3:
			j.Priority = 0
		case p < 0.8:
			j.Priority = 1
		default:
			j.Priority = 2
		}
		j.Preemptible = j.Priority == 0
		j.Shareable = milli < 1000
		j.Noise = rng.NormFloat64()
	}
}

// LoadPhilly reads philly.csv (timestamp, duration, num_gpus, gpu_time,
// cluster — the virtual cluster, when the file has it), keeps jobs with 1..maxGPUs GPUs and a positive duration, sorts
// them by submit time and derives the rest with Derive(seed).
func LoadPhilly(r io.Reader, maxGPUs int, seed uint64) ([]Job, error) {
	rows, err := readCSV(r, []string{"timestamp", "duration", "num_gpus"}, "cluster")
	if err != nil {
		return nil, fmt.Errorf("read Philly trace: %w", err)
	}
	var jobs []Job
	var t0 time.Time
	for n, row := range rows {
		ts, err := time.Parse(time.DateTime, row[0])
		if err != nil {
			return nil, fmt.Errorf("read Philly trace: row %d: timestamp %q: %w", n+2, row[0], err)
		}
		dur, err1 := strconv.ParseFloat(row[1], 64)
		g, err2 := strconv.Atoi(row[2])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("read Philly trace: row %d: %w", n+2, err)
		}
		if dur <= 0 || g < 1 || g > maxGPUs {
			continue
		}
		if t0.IsZero() || ts.Before(t0) {
			t0 = ts
		}
		jobs = append(jobs, Job{Submit: float64(ts.Unix()), Duration: dur, GPUs: g, Cluster: row[3], Row: n})
	}
	return finish(jobs, float64(t0.Unix()), seed), nil
}

// LoadPAI reads pai2023_pods.csv, keeps pods that ask for 1..maxGPUs GPUs
// and orders them by creation time. Memory is the pod's own gpu_milli
// share; priority comes from QoS (Guaranteed and LS 2, Burstable 1, BE 0 =
// spot); durations are deletion − creation (censored for pods still
// running at the end: use PAI for packing, not for completion times).
func LoadPAI(r io.Reader, maxGPUs int) ([]Job, error) {
	rows, err := readCSV(r, []string{"num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time"}, "cpu_milli", "memory_mib")
	if err != nil {
		return nil, fmt.Errorf("read PAI trace: %w", err)
	}
	var jobs []Job
	for n, row := range rows {
		g, e1 := strconv.Atoi(row[0])
		milli, e2 := strconv.Atoi(row[1])
		c, e3 := strconv.ParseFloat(row[3], 64)
		d, e4 := strconv.ParseFloat(row[4], 64)
		if err := errors.Join(e1, e2, e3, e4); err != nil {
			return nil, fmt.Errorf("read PAI trace: row %d: %w", n+2, err)
		}
		if g > maxGPUs || g >= 1 && milli <= 0 {
			continue
		}
		cpu, _ := strconv.ParseInt(row[5], 10, 64)
		mem, _ := strconv.ParseInt(row[6], 10, 64)
		if g < 1 && cpu <= 0 && mem <= 0 {
			continue // asks for nothing
		}
		j := Job{Submit: c, Duration: max(d-c, 1), GPUs: max(g, 0), MemMilli: min(max(milli, 0), 1000), Shareable: milli < 1000,
			CPUMilli: max(cpu, 0), MemMiB: max(mem, 0), Class: row[2], Row: n}
		switch row[2] {
		case "Guaranteed", "LS":
			j.Priority = 2
		case "Burstable":
			j.Priority = 1
		default:
			j.Preemptible = true
		}
		jobs = append(jobs, j)
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmpF(a.Submit, b.Submit) })
	for i := range jobs {
		jobs[i].ID = fmt.Sprintf("pod%05d", i)
	}
	return jobs, nil
}

func finish(jobs []Job, t0 float64, seed uint64) []Job {
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmpF(a.Submit, b.Submit) })
	for i := range jobs {
		jobs[i].Submit -= t0
		jobs[i].ID = fmt.Sprintf("job%05d", i)
	}
	Derive(jobs, seed)
	return jobs
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readCSV returns the named columns of every row, in the order asked: the
// required ones, then the optional ones ("" where the file lacks them).
func readCSV(r io.Reader, required []string, optional ...string) ([][]string, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	cols := append(slices.Clone(required), optional...)
	idx := make([]int, len(cols))
	for k, c := range cols {
		idx[k] = slices.Index(head, c)
		if idx[k] < 0 && k < len(required) {
			return nil, fmt.Errorf("no column %q in the header (%v): is this the right --format?", c, head)
		}
	}
	var out [][]string
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for k, i := range idx {
			if i >= 0 && i < len(rec) {
				row[k] = rec[i]
			}
		}
		out = append(out, row)
	}
}

// Window keeps the jobs submitted in [startDay, startDay+days) days of the
// trace, with submit times counted from the window's start.
func Window(jobs []Job, startDay, days float64) []Job {
	lo, hi := startDay*86400, (startDay+days)*86400
	var out []Job
	for _, j := range jobs {
		if j.Submit >= lo && j.Submit < hi {
			j.Submit -= lo
			out = append(out, j)
		}
	}
	return out
}

// Rescale stretches or squeezes the gaps between arrivals so that the
// offered load ρ = Σ(gpus × duration) / (gpus of the machine × span) is
// load. Durations are untouched.
func Rescale(jobs []Job, load float64, machineGPUs int) []Job {
	out := slices.Clone(jobs)
	if len(out) < 2 || load <= 0 {
		return out
	}
	var work float64
	for _, j := range out {
		work += float64(j.GPUs) * j.Duration
	}
	t0, span := out[0].Submit, out[len(out)-1].Submit-out[0].Submit
	if span <= 0 {
		return out
	}
	f := work / (float64(machineGPUs) * load) / span
	for i := range out {
		out[i].Submit = (out[i].Submit - t0) * f
	}
	return out
}
