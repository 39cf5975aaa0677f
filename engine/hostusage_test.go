package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
	"niuma/engine/executor/cgroup"
	"niuma/engine/executor/local"
	"niuma/storage"
)

// A meter turns readings into minutes: readings of one minute make one
// record, the CPU time of each minute is what the counter rose by since
// the last reading of the minute before, and an adopted attempt counts on
// from what was stored of it.
func TestHostMeterMinutes(t *testing.T) {
	m0 := time.Unix(1_790_000_040, 0)
	m := &hostMeter{run: "r", stage: "s", attempt: 2}
	read := func(at time.Duration, mem, peak int64, cpu float64) *storage.HostSample {
		return m.add(m0.Add(at), executor.Usage{MemoryBytes: mem, PeakBytes: peak, LimitBytes: 1000, CPUSeconds: cpu, CPULimitMilli: 500})
	}
	require.Nil(t, read(1*time.Second, 100, 100, 1))
	require.Nil(t, read(30*time.Second, 300, 350, 20))
	first := read(61*time.Second, 50, 350, 31) // the first reading of the next minute closes the first
	require.Equal(t, &storage.HostSample{RunID: "r", Stage: "s", Attempt: 2, Minute: m0, Samples: 2, MemMean: 200, MemMax: 300,
		MemPeak: 350, MemLimit: 1000, CPUSeconds: 20, CPUTotal: 20, CPULimitMilli: 500}, first)
	require.Nil(t, read(119*time.Second, 70, 400, 40))
	second := m.finish()
	require.Equal(t, &storage.HostSample{RunID: "r", Stage: "s", Attempt: 2, Minute: m0.Add(time.Minute), Samples: 2, MemMean: 60,
		MemMax: 70, MemPeak: 400, MemLimit: 1000, CPUSeconds: 20, CPUTotal: 40, CPULimitMilli: 500}, second)
	require.Nil(t, m.finish(), "nothing is in progress after a finish")

	// The reading as an attempt ended counts its CPU time and peak, not
	// its memory (its processes are gone), even as the only one.
	require.Nil(t, read(125*time.Second, 500, 500, 45))
	closed := m.end(m0.Add(181*time.Second), executor.Usage{MemoryBytes: 1, PeakBytes: 600, LimitBytes: 1000, CPUSeconds: 46, CPULimitMilli: 500})
	require.Equal(t, 1, closed.Samples)
	require.InDelta(t, 5, closed.CPUSeconds, 1e-9)
	last := m.finish()
	require.Equal(t, &storage.HostSample{RunID: "r", Stage: "s", Attempt: 2, Minute: m0.Add(3 * time.Minute), MemPeak: 600,
		MemLimit: 1000, CPUSeconds: 1, CPUTotal: 46, CPULimitMilli: 500}, last)

	// The next owner adopts the attempt: the last owner stored 40 s.
	adopted := &hostMeter{run: "r", stage: "s", attempt: 2, cpuBase: 40, cpuLast: 40}
	adopted.add(m0.Add(150*time.Second), executor.Usage{CPUSeconds: 43})
	require.InDelta(t, 3, adopted.finish().CPUSeconds, 1e-9)
}

// cgroupTree is a cgroup subtree of this test's with memory accounting,
// or a skip saying why there is none.
func cgroupTree(t *testing.T, name string) *cgroup.Tree {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root (CI runs as root)")
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl holds the memory and burns the CPU here; it is not installed")
	}
	tr, err := cgroup.Detect(fmt.Sprintf("niuma/test-%d-%s", os.Getpid(), name))
	if err != nil || !tr.Features().Memory {
		t.Skipf("no cgroup with memory accounting here: %v", err)
	}
	t.Cleanup(func() { _ = tr.RemoveAll() })
	return tr
}

// cpuWritten is the CPU time the stage's perl said it used (user and
// system, from times), in the file it wrote.
func cpuWritten(t *testing.T, path string) float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	require.NoError(t, err)
	return f
}

// A local stage that holds 64 MiB and burns CPU has its memory and CPU
// time stored minute by minute: after the run ended they are read back,
// by the owner and by a process that owns nothing (a window beside it,
// `niuma show`), with its limits, even though it ran for less than a
// minute.
func TestHostUsageStoredForAnEndedStage(t *testing.T) {
	tr := cgroupTree(t, "hostusage")
	h := newHarness(t)
	e := h.engine(func(o *Options) { o.Executors = []executor.Executor{&local.Executor{Cgroups: tr}} })
	h.drive(e)
	tm := parse(t, `
name: burner
stages:
  - name: prep
    command: [sh, -c, 'exit 0']
  - name: work
    needs: [prep]
    memory: 512MiB
    cpus: 1
    command: [perl, -e, '$x = "a" x (64*1024*1024); 1 while $i++ < 3e7; ($u, $s) = times; open(my $f, ">", "work/cpu"); print $f $u + $s; close $f']
`)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	own := cpuWritten(t, filepath.Join(info.Dir, "work", "cpu"))

	reader := h.engine() // another process's view: it drives nothing
	for name, eng := range map[string]*Engine{"owner": e, "reader": reader} {
		us, err := eng.HostUsage(context.Background(), info.ID)
		require.NoError(t, err, name)
		require.Len(t, us, 2, "%s: both stages ran in a cgroup of their own", name)
		require.Equal(t, "prep", us[0].Stage, "in the run's order")
		require.Positive(t, us[0].MemPeakBytes, "%s: a stage shorter than a reading has what its cgroup said as it ended", name)
		require.Positive(t, us[0].CPUSeconds)
		u := us[1]
		require.Equal(t, "work", u.Stage)
		require.Equal(t, []int{1}, u.Attempts)
		require.GreaterOrEqual(t, u.MemPeakBytes, int64(64<<20), "%s: the peak holds the 64 MiB", name)
		require.Equal(t, int64(512<<20), u.MemLimitBytes, "memory: is its limit")
		if tr.Features().CPU {
			require.Equal(t, int64(1000), u.CPULimitMilli, "cpus: is its limit")
		}
		// The cgroup counts the shim's shell and perl's start beside what
		// perl itself reports: a little more, never less, never twice.
		require.GreaterOrEqual(t, u.CPUSeconds, own*0.95, "%s: CPU time %.3f s, the stage's own %.3f s", name, u.CPUSeconds, own)
		require.LessOrEqual(t, u.CPUSeconds, own+0.15, "%s: CPU time %.3f s, the stage's own %.3f s", name, u.CPUSeconds, own)
		require.Positive(t, u.Samples)
		require.NotEmpty(t, u.Minutes)
		sum := 0.0
		for _, m := range u.Minutes {
			sum += m.CPUSeconds
		}
		require.InDelta(t, u.CPUSeconds, sum, 1e-9, "the minutes add up to the stage's CPU time")
	}
}

// An owner that stops cleanly stores the minute in progress of a stage
// that runs on; the next owner adopts the attempt and counts its CPU time
// on from what was stored, so the stage's CPU time is its own once, not
// the first part twice. (The stage idles a moment before it exits: here
// the first owner's executor, in this same process, is its parent and
// removes its cgroup at once, before the second takes a last reading.)
func TestHostUsageSurvivesAnOwnerChange(t *testing.T) {
	tr := cgroupTree(t, "hostusage-adopt")
	h := newHarness(t)
	withTree := func(o *Options) { o.Executors = []executor.Executor{&local.Executor{Cgroups: tr}} }
	first := h.engine(withTree)
	stop := h.drive(first)
	tm := parse(t, `
name: burner
stages:
  - name: work
    command: [perl, -MTime::HiRes=sleep, -e, '$x = "a" x (48*1024*1024); 1 while $i++ < 4e7; sleep 0.02 until -e "go" || !-d "work"; 1 while $j++ < 1e7; ($u, $s) = times; open(my $f, ">", "work/cpu"); print $f $u + $s; close $f; sleep 0.3']
`)
	info, err := first.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(info.Dir, "go"), nil, 0o644) })
	require.Eventually(t, func() bool {
		r, err := first.Run(context.Background(), info.ID)
		require.NoError(t, err)
		u := r.Stages[0].Usage
		return u != nil && u.CPUSeconds >= 0.3
	}, 60*time.Second, 20*time.Millisecond, "the stage's first burn never showed")
	stop()

	stored, err := h.store.HostSamples(context.Background(), info.ID)
	require.NoError(t, err)
	require.NotEmpty(t, stored, "the clean stop stored the minute in progress")
	var total float64
	var samples int
	for _, s := range stored {
		total = max(total, s.CPUTotal)
		samples += s.Samples
	}
	require.GreaterOrEqual(t, total, 0.3)
	require.Positive(t, samples)

	second := h.engine(withTree)
	h.drive(second)
	letGo(t, info.Dir)
	r := waitDone(t, second, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	own := cpuWritten(t, filepath.Join(info.Dir, "work", "cpu"))
	us, err := second.HostUsage(context.Background(), info.ID)
	require.NoError(t, err)
	require.Len(t, us, 1)
	require.GreaterOrEqual(t, us[0].CPUSeconds, own*0.95, "CPU time %.3f s, the stage's own %.3f s", us[0].CPUSeconds, own)
	require.LessOrEqual(t, us[0].CPUSeconds, own+0.15, "CPU time %.3f s, the stage's own %.3f s: counted twice?", us[0].CPUSeconds, own)
	require.GreaterOrEqual(t, us[0].MemPeakBytes, int64(48<<20))
	require.Greater(t, us[0].Samples, samples, "the second owner's readings were added")
}

func TestHostUsageSummary(t *testing.T) {
	u := HostUsage{Stage: "train", Attempts: []int{1}, MemPeakBytes: 1288490189, MemLimitBytes: 4 << 30, MemMeanBytes: 900 << 20,
		CPUSeconds: 192.4, CPULimitMilli: 2000, Samples: 180}
	require.Equal(t, "peak memory 1.2 GiB of 4 GiB (mean 900 MiB) · CPU time 3m12s (limit 2 CPUs)", u.Summary())
	u = HostUsage{Attempts: []int{1, 2}, MemPeakBytes: 3 << 19, CPUSeconds: 0.421, CPULimitMilli: 500}
	require.Equal(t, "peak memory 1.5 MiB · CPU time 0.42 s (limit 0.5 CPUs) · attempts 1, 2 together", u.Summary(),
		"no readings while it ran: no mean")
	require.Equal(t, "1.9 ms", CPUTimeText(0.0019))
	require.Equal(t, "512 B", BytesText(512))
	require.Equal(t, "3.4 KiB", BytesText(3500))
	require.Equal(t, "512 MiB", BytesText(512<<20))
	require.Equal(t, "128 MiB", BytesText(128<<20+1000))
}
